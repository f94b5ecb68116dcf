//! The control core: what a policy's decision asks of the tasks, checked against the
//! snapshot the policy decided on and turned into actions, refusals among them, with
//! a report of whatever else could not be done as it was asked. Pure (no threads,
//! clocks nor I/O): the controller ([`super::Controller`]) that both the runtime's
//! control loop and the lab's simulator run calls [`tick`] on the snapshot each built,
//! and each carries the actions out its own way, so that a decision is applied, and
//! refused, alike in both.
//!
//! The snapshot says all the core needs of each task: the variant serving, whether a
//! switch or a load is under way (a variant loading or warming), each variant's state
//! and batch ceiling and, for one that cannot serve the task, why. A decision is
//! applied whole at the tick it is made; time reaches a policy through its snapshot.

use modelless_policy_abi::{Decision, InstanceShare, Snapshot, TaskDecision, TaskSnapshot, VariantState};
use serde::{Deserialize, Serialize};

use super::budget::gpu_index;
use super::ledger::{Idle, Ledger, Need};
use crate::batching::BatchingKnobs;
use crate::error::Error;
use crate::model::MAX_INSTANCES;

/// What the core knows of a task as a tick begins ([`TaskView::of`] its snapshot).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskView {
    /// Its name.
    pub name: String,
    /// The variant serving it.
    pub active: String,
    /// Whether a switch, a load or a change of instances is under way (a variant
    /// other than the active one loading or warming, or instances starting): another
    /// waits.
    pub switching: bool,
    /// Its variants.
    pub variants: Vec<VariantView>,
}

/// What the core knows of one variant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VariantView {
    /// Its name.
    pub name: String,
    /// The largest batch it may form (its configured batch size, capped to what fits
    /// its memory): a batch size a policy asks for is clamped to it.
    pub ceiling: usize,
    /// Why it cannot serve the task, when it is known not to (its model does not fit
    /// the task's signature): a switch to it is refused with this reason.
    pub refused: Option<String>,
    /// Where it stands: a load asked of a variant loaded or loading does nothing, as
    /// does an unload asked of one that is not.
    pub state: VariantState,
    /// Its instances serving and starting.
    pub instances: u32,
    /// The instances it serves or loads with.
    pub instances_set: u32,
    /// What one instance holds of the budget.
    pub share: Option<InstanceShare>,
    /// The GPU it runs on, if any.
    pub gpu: Option<u32>,
}

/// What a refused action was asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Asked {
    /// Serve the task with the variant.
    #[default]
    Switch,
    /// Load the variant without serving.
    Load,
    /// Unload the variant.
    Unload,
    /// Change its instances.
    Scale,
}

impl Asked {
    /// How a report says it: `switch to`, `load of`, `unload of`.
    pub fn phrase(self) -> &'static str {
        match self {
            Asked::Switch => "switch to",
            Asked::Load => "load of",
            Asked::Unload => "unload of",
            Asked::Scale => "instances of",
        }
    }
}

/// What to do to a task, in the order given. Recorded ticks carry them (as JSON
/// objects tagged by `action`: `configure`, `unload`, `switch`, `load`, `refuse`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Sets a variant's knobs, already within bounds. It may be a variant that is not
    /// serving yet: a switch's knobs are set on the variant switched to, before it
    /// takes over, so that it serves its first batch with them.
    Configure {
        /// The task.
        task: String,
        /// The variant whose knobs these are.
        variant: String,
        /// The knobs to set; those left `None` keep their value.
        knobs: BatchingKnobs,
    },
    /// Makes a variant serve the task, loading it first where it is not loaded.
    Switch {
        /// The task.
        task: String,
        /// The variant to take over.
        variant: String,
    },
    /// Loads and warms a variant without making it serve, so that a later switch to
    /// it costs no load.
    Load {
        /// The task.
        task: String,
        /// The variant.
        variant: String,
    },
    /// Sets a variant's instances: a variant serving or loaded adds them (loaded and
    /// warmed first) or retires them (after their batch); one not loaded loads with
    /// them.
    Scale {
        /// The task.
        task: String,
        /// The variant.
        variant: String,
        /// Its instances, within bounds.
        instances: u32,
    },
    /// Unloads a variant that does not serve; it drains first.
    Unload {
        /// The task.
        task: String,
        /// The variant.
        variant: String,
    },
    /// Refuses a switch, load or unload the decision asked: the variant is unknown,
    /// cannot serve the task, or is needed. Nothing changes; the reason is reported.
    Refuse {
        /// The task.
        task: String,
        /// What was asked of the variant.
        #[serde(default)]
        asked: Asked,
        /// The variant asked for, as the policy wrote it (cut to 64 characters).
        variant: String,
        /// Why.
        reason: String,
    },
}

impl Action {
    /// The task it acts on.
    pub fn task(&self) -> &str {
        match self {
            Action::Configure { task, .. }
            | Action::Switch { task, .. }
            | Action::Load { task, .. }
            | Action::Scale { task, .. }
            | Action::Unload { task, .. }
            | Action::Refuse { task, .. } => task,
        }
    }

    /// What a status page reports of it: a refusal and its reason.
    pub fn report(&self) -> Option<String> {
        match self {
            Action::Refuse { task, asked, variant, reason } => {
                Some(format!("task `{task}`: {} `{variant}` refused: {}", asked.phrase(), cut(reason, 400)))
            }
            Action::Configure { .. }
            | Action::Switch { .. }
            | Action::Load { .. }
            | Action::Scale { .. }
            | Action::Unload { .. } => None,
        }
    }
}

impl TaskView {
    /// What `task`'s snapshot says of it. A variant other than the active one that is
    /// loading or warming is a switch under way; a variant with no ceiling in the
    /// snapshot (one recorded before snapshots carried it) is not clamped.
    pub fn of(task: &TaskSnapshot) -> TaskView {
        let active = &task.active.variant;
        let switching = task.variants.iter().any(|v| {
            (&v.name != active && matches!(v.state, VariantState::Loading | VariantState::Warming))
                || v.instances_starting > 0
        });
        let variants = task
            .variants
            .iter()
            .map(|v| VariantView {
                name: v.name.clone(),
                ceiling: v.batch_ceiling.map_or(usize::MAX, |c| c as usize),
                refused: v.refused.clone(),
                state: v.state,
                instances: v.instances + v.instances_starting,
                instances_set: v.instances_set.max(1),
                share: v.share,
                gpu: gpu_index(&v.device),
            })
            .collect();
        TaskView { name: task.name.clone(), active: active.clone(), switching, variants }
    }
}

/// What one tick makes of a decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What was not applied as it was asked: clamped knobs, unknown names, refused or
    /// deferred switches, fields not supported.
    pub reports: Vec<String>,
}

/// The actions that carry out `decision`, made on `snapshot`, on the tasks as the
/// snapshot shows them. A decision is a peer's input like any other: whatever it holds
/// is applied within bounds, refused or reported, never fatal.
///
/// A task's knobs go to the variant the decision names, when that variant can serve
/// the task (the knobs belong to the variant that is to serve), else to the active
/// one; a switch is asked after them. Where the snapshot carries a budget, what the
/// decision allocates is held to it: a change of instances or a switch that would
/// hold more cores than are free is refused with the reason, and a load that does not
/// fit the memory free unloads variants that serve nothing, least recently served
/// first, or is refused. Tasks whose decisions free cores are planned first, so that
/// a policy can move cores from one task to another in one decision.
pub fn tick(snapshot: &Snapshot, decision: &Decision) -> Plan {
    let tasks: Vec<TaskView> = snapshot.tasks.iter().map(TaskView::of).collect();
    tick_views(decision, &tasks, Ledger::of(snapshot))
}

/// [`tick`] on tasks as the core sees them, held to `ledger` where there is one.
fn tick_views(decision: &Decision, tasks: &[TaskView], mut ledger: Option<Ledger>) -> Plan {
    let mut plan = Plan::default();
    let mut order: Vec<(usize, Option<&TaskView>, f64)> = decision
        .tasks
        .iter()
        .enumerate()
        .map(|(i, wanted)| {
            let task = tasks.iter().find(|t| t.name == wanted.task);
            (i, task, task.map_or(0.0, |t| cores_asked(t, wanted)))
        })
        .collect();
    order.sort_by(|a, b| a.2.total_cmp(&b.2));
    for (i, task, _) in order {
        let wanted = &decision.tasks[i];
        match task {
            Some(task) => plan_task(task, wanted, &mut plan, ledger.as_mut()),
            None => plan.reports.push(format!("unknown task `{}` ignored", short(&wanted.task))),
        }
    }
    plan
}

/// Adds to `plan` what `wanted` asks of `task`.
fn plan_task(task: &TaskView, wanted: &TaskDecision, plan: &mut Plan, mut ledger: Option<&mut Ledger>) {
    let name = &task.name;
    let named = wanted.variant.as_deref().map(|variant| (variant, servable(task, variant)));
    let target = match named {
        Some((_, Ok(variant))) => Some(variant),
        _ => task.variants.iter().find(|v| v.name == task.active),
    };
    let asked = BatchingKnobs {
        max_batch_size: wanted.max_batch_size.map(|rows| rows as usize),
        max_queue_delay_us: wanted.max_queue_delay_us,
    };
    if let Some(target) = target.filter(|_| !asked.is_empty()) {
        let knobs = asked.clamped(target.ceiling);
        let clamped = [
            ("max_batch_size", wanted.max_batch_size.map(u64::from), knobs.max_batch_size.map(|rows| rows as u64)),
            ("max_queue_delay_us", wanted.max_queue_delay_us, knobs.max_queue_delay_us),
        ];
        for (knob, asked, got) in clamped {
            if let (Some(asked), Some(got)) = (asked, got)
                && asked != got
            {
                plan.reports.push(format!("task `{name}`: {knob} {asked} clamped to {got}"));
            }
        }
        plan.actions.push(Action::Configure { task: name.clone(), variant: target.name.clone(), knobs });
    }
    let mut scale = target.zip(wanted.instances).map(|(target, asked)| {
        let instances = asked.clamp(1, MAX_INSTANCES as u32);
        if instances != asked {
            plan.reports.push(format!("task `{name}`: instances {asked} clamped to {instances}"));
        }
        (target, instances)
    });
    let mut switch_to = match named {
        None => None,
        Some((variant, _)) if variant == task.active => None,
        Some((variant, Err(reason))) => {
            plan.actions.push(refuse(name, Asked::Switch, variant, reason));
            None
        }
        Some((variant, Ok(_))) if task.switching => {
            plan.reports
                .push(format!("task `{name}`: a switch is under way; `{}` waits for a later tick", short(variant)));
            None
        }
        Some((_, Ok(variant))) => Some(variant),
    };
    if scale.is_some() && task.switching && switch_to.is_none() {
        plan.reports.push(format!("task `{name}`: a change is under way; instances wait for a later tick"));
        scale = None;
    }
    let mut unloads = Vec::new();
    if let Some(ledger) = ledger.as_deref_mut() {
        hold_to_budget(task, &mut scale, &mut switch_to, ledger, plan, &mut unloads);
    }
    if let Some((variant, instances)) = scale
        && (instances != variant.instances_set || (variant.instances > 0 && instances != variant.instances))
    {
        plan.actions.push(Action::Scale { task: name.clone(), variant: variant.name.clone(), instances });
    }
    plan.actions.extend(unloads);
    plan_standby(
        task,
        wanted,
        scale.map(|(v, _)| v.name.as_str()),
        switch_to.map(|v| v.name.as_str()),
        plan,
        ledger.as_deref_mut(),
    );
    plan_unloads(task, wanted, switch_to.map(|v| v.name.as_str()), plan, ledger.as_deref_mut());
    if let Some(variant) = switch_to {
        plan.actions.push(Action::Switch { task: name.clone(), variant: variant.name.clone() });
    }
    plan_loads(task, wanted, switch_to.map(|v| v.name.as_str()), plan, ledger);
}

/// The cores `task` would hold more (fewer, negative) if `wanted` were carried out as
/// asked: what orders the tasks of a decision.
fn cores_asked(task: &TaskView, wanted: &TaskDecision) -> f64 {
    let Some(active) = task.variants.iter().find(|v| v.name == task.active) else { return 0.0 };
    let serving = wanted.variant.as_deref().and_then(|name| task.variants.iter().find(|v| v.name == name));
    let after = serving.unwrap_or(active);
    let instances =
        wanted.instances.unwrap_or(if after.name == active.name { active.instances } else { after.instances_set });
    cores(after, instances) - cores(active, active.instances)
}

/// The cores `variant` holds serving with `instances`.
fn cores(variant: &VariantView, instances: u32) -> f64 {
    variant.share.as_ref().map_or(0.0, |share| share.serving_cores(instances))
}

/// The memory `instances` more instances of `variant` need.
fn need(variant: &VariantView, instances: u32) -> Need {
    let (host_bytes, gpu_bytes) = variant.share.as_ref().map_or((0, 0), |share| share.memory_of(instances));
    Need { host_bytes, gpu_bytes, gpu: variant.gpu }
}

/// Holds a switch and a change of instances to what the budget has free: refuses
/// what does not fit, with the reason, and adds to `unloads` the idle variants a load
/// unloads for room. A switch asked with instances that do not fit is made with the
/// instances the variant loads with, where those fit.
fn hold_to_budget<'a>(
    task: &'a TaskView,
    scale: &mut Option<(&'a VariantView, u32)>,
    switch_to: &mut Option<&'a VariantView>,
    ledger: &mut Ledger,
    plan: &mut Plan,
    unloads: &mut Vec<Action>,
) {
    let name = &task.name;
    let Some(active) = task.variants.iter().find(|v| v.name == task.active) else { return };
    let held = cores(active, active.instances);
    let unload = |unloaded: Vec<Idle>| {
        unloaded.into_iter().map(|idle| Action::Unload { task: idle.task, variant: idle.variant })
    };
    if let Some(to) = *switch_to {
        // It takes over the cores the variant replaced holds, and loads what it lacks.
        let take = |ledger: &mut Ledger, instances: u32| {
            let more = if to.instances > 0 { instances.saturating_sub(to.instances) } else { instances };
            take_for(ledger, name, to, cores(to, instances) - held, more)
        };
        let asked = scale.filter(|(v, _)| v.name == to.name).map(|(_, n)| n);
        let taken = match asked.map(|n| take(ledger, n)) {
            Some(Err(reason)) => {
                plan.actions.push(refuse(name, Asked::Scale, &to.name, reason));
                *scale = None;
                take(ledger, to.instances_set)
            }
            Some(taken) => taken,
            None => take(ledger, to.instances_set),
        };
        match taken {
            Ok(unloaded) => unloads.extend(unload(unloaded)),
            Err(reason) => {
                plan.actions.push(refuse(name, Asked::Switch, &to.name, reason));
                *switch_to = None;
                *scale = scale.filter(|(v, _)| v.name != to.name);
            }
        }
        return;
    }
    let Some((variant, instances)) = *scale else { return };
    // Only the serving variant's instances hold cores; a loaded one's hold memory.
    let cores_more = if variant.name == task.active { cores(variant, instances) - held } else { 0.0 };
    let more = if variant.instances > 0 { instances.saturating_sub(variant.instances) } else { 0 };
    match take_for(ledger, name, variant, cores_more, more) {
        Ok(unloaded) => unloads.extend(unload(unloaded)),
        Err(reason) => {
            plan.actions.push(refuse(name, Asked::Scale, &variant.name, reason));
            *scale = None;
        }
    }
}

/// Takes from `ledger` `cores_more` cores (fewer where negative) and the memory of
/// `more` instances of `variant` of `task`: the idle variants to unload for room, or
/// why it does not fit (then nothing is taken).
fn take_for(
    ledger: &mut Ledger,
    task: &str,
    variant: &VariantView,
    cores_more: f64,
    more: u32,
) -> Result<Vec<Idle>, String> {
    ledger.take_cores(cores_more)?;
    ledger.take_memory(need(variant, more), (task, &variant.name)).inspect_err(|_| {
        ledger.take_cores(-cores_more).ok();
    })
}

/// Adds the instances `wanted` sets for variants that stand by (the one serving, where
/// the decision switches away from it, among them): never the one that serves after
/// the decision (its instances are `instances`), nor one `scaled` already; those of a
/// loaded one held to the memory free.
fn plan_standby(
    task: &TaskView,
    wanted: &TaskDecision,
    scaled: Option<&str>,
    switch_to: Option<&str>,
    plan: &mut Plan,
    mut ledger: Option<&mut Ledger>,
) {
    let name = &task.name;
    for (variant, &asked) in &wanted.standby {
        let found = match servable(task, variant) {
            Ok(found) => found,
            Err(reason) => {
                plan.actions.push(refuse(name, Asked::Scale, variant, reason));
                continue;
            }
        };
        let serves_after =
            if switch_to.is_some() { switch_to == Some(variant.as_str()) } else { *variant == task.active };
        if serves_after || scaled == Some(variant.as_str()) {
            plan.reports.push(format!(
                "task `{name}`: standby instances of `{}` ignored: it serves, or the decision sets its instances",
                short(variant)
            ));
            continue;
        }
        let instances = asked.clamp(1, MAX_INSTANCES as u32);
        if instances == found.instances_set && (found.instances == 0 || found.instances == instances) {
            continue;
        }
        if task.switching && found.instances > 0 {
            plan.reports
                .push(format!("task `{name}`: a change is under way; `{}` waits for a later tick", short(variant)));
            continue;
        }
        if let Some(ledger) = ledger.as_deref_mut() {
            let more = if found.instances > 0 { instances.saturating_sub(found.instances) } else { 0 };
            match take_for(ledger, name, found, 0.0, more) {
                Ok(unloaded) => plan
                    .actions
                    .extend(unloaded.into_iter().map(|idle| Action::Unload { task: idle.task, variant: idle.variant })),
                Err(reason) => {
                    plan.actions.push(refuse(name, Asked::Scale, variant, reason));
                    continue;
                }
            }
        }
        plan.actions.push(Action::Scale { task: name.clone(), variant: variant.clone(), instances });
    }
}

/// Adds the unloads `wanted` asks: never of the variant serving, the one switched
/// to, one loading, or one also asked to load.
fn plan_unloads(
    task: &TaskView,
    wanted: &TaskDecision,
    switch_to: Option<&str>,
    plan: &mut Plan,
    mut ledger: Option<&mut Ledger>,
) {
    let name = &task.name;
    for variant in &wanted.unload {
        let Some(found) = task.variants.iter().find(|v| &v.name == variant) else {
            let unknown = Error::UnknownVariant { task: name.clone(), variant: variant.clone() };
            plan.actions.push(refuse(name, Asked::Unload, variant, unknown.to_string()));
            continue;
        };
        let needed = if *variant == task.active {
            Some("it serves the task")
        } else if switch_to == Some(variant.as_str()) {
            Some("the same decision switches to it")
        } else if wanted.load.contains(variant) {
            Some("the same decision loads it")
        } else if matches!(found.state, VariantState::Loading | VariantState::Warming) {
            Some("it is loading")
        } else {
            None
        };
        let already = plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::Unload { task: t, variant: v } if t == name && v == variant));
        match needed {
            Some(reason) => plan.actions.push(refuse(name, Asked::Unload, variant, reason.to_string())),
            None if matches!(found.state, VariantState::Unloaded | VariantState::Failed) || already => {}
            None => {
                if let Some(ledger) = ledger.as_deref_mut() {
                    ledger.unloaded(name, variant);
                }
                plan.actions.push(Action::Unload { task: name.clone(), variant: variant.clone() });
            }
        }
    }
}

/// Adds the loads `wanted` asks of variants not loaded (a switch loads its own); one
/// at a time, as switches go; each held to the memory free.
fn plan_loads(
    task: &TaskView,
    wanted: &TaskDecision,
    switch_to: Option<&str>,
    plan: &mut Plan,
    mut ledger: Option<&mut Ledger>,
) {
    let name = &task.name;
    let mut busy = task.switching || switch_to.is_some();
    for variant in &wanted.load {
        let found = match servable(task, variant) {
            Ok(found) => found,
            Err(reason) => {
                plan.actions.push(refuse(name, Asked::Load, variant, reason));
                continue;
            }
        };
        let loaded = !matches!(found.state, VariantState::Unloaded | VariantState::Failed | VariantState::Draining);
        if loaded || *variant == task.active || switch_to == Some(variant.as_str()) {
            continue;
        }
        if busy {
            plan.reports
                .push(format!("task `{name}`: a load is under way; `{}` waits for a later tick", short(variant)));
            continue;
        }
        if let Some(ledger) = ledger.as_deref_mut() {
            match ledger.take_memory(need(found, found.instances_set), (name, variant)) {
                Ok(unloaded) => plan
                    .actions
                    .extend(unloaded.into_iter().map(|idle| Action::Unload { task: idle.task, variant: idle.variant })),
                Err(reason) => {
                    plan.actions.push(refuse(name, Asked::Load, variant, reason));
                    continue;
                }
            }
        }
        busy = true;
        plan.actions.push(Action::Load { task: name.clone(), variant: variant.clone() });
    }
}

/// A refusal of what was asked of `variant` (its name cut to 64 characters).
fn refuse(task: &str, asked: Asked, variant: &str, reason: String) -> Action {
    Action::Refuse { task: task.to_string(), asked, variant: short(variant).to_string(), reason }
}

/// The variant of `task` called `variant`, or why it cannot serve the task.
fn servable<'a>(task: &'a TaskView, variant: &str) -> Result<&'a VariantView, String> {
    let Some(found) = task.variants.iter().find(|v| v.name == variant) else {
        return Err(Error::UnknownVariant { task: task.name.clone(), variant: variant.to_string() }.to_string());
    };
    match &found.refused {
        Some(why) => Err(why.clone()),
        None => Ok(found),
    }
}

/// A name a policy wrote, cut for a report: the policy may write megabytes of it.
pub(super) fn short(name: &str) -> &str {
    cut(name, 64)
}

/// `text` cut to `max_chars` characters.
fn cut(text: &str, max_chars: usize) -> &str {
    text.char_indices().nth(max_chars).map_or(text, |(at, _)| &text[..at])
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use modelless_policy_abi::{ServingKnobs, VariantSnapshot};

    use super::*;
    use crate::batching::MAX_QUEUE_DELAY_US;

    /// Task `t`: `a` serving, `b` and `c` (which does not fit) unloaded, `d` loaded,
    /// batches of up to 8.
    fn tasks() -> Vec<TaskView> {
        let variant = |name: &str, state, refused: Option<&str>| VariantView {
            name: name.into(),
            ceiling: 8,
            refused: refused.map(str::to_string),
            state,
            instances: u32::from(state == VariantState::Ready),
            instances_set: 1,
            ..VariantView::default()
        };
        let variants = vec![
            variant("a", VariantState::Ready, None),
            variant("b", VariantState::Unloaded, None),
            variant("c", VariantState::Unloaded, Some("input `x`: sizes differ")),
            variant("d", VariantState::Ready, None),
        ];
        vec![TaskView { name: "t".into(), active: "a".into(), switching: false, variants }]
    }

    fn decision(tasks: serde_json::Value) -> Decision {
        serde_json::from_value(json!({ "tasks": tasks })).unwrap()
    }

    fn configure(variant: &str, max_batch_size: Option<usize>, max_queue_delay_us: Option<u64>) -> Action {
        let knobs = BatchingKnobs { max_batch_size, max_queue_delay_us };
        Action::Configure { task: "t".into(), variant: variant.into(), knobs }
    }

    fn switch(variant: &str) -> Action {
        Action::Switch { task: "t".into(), variant: variant.into() }
    }

    #[test]
    fn a_switch_with_knobs_sets_them_on_the_variant_switched_to_before_it_takes_over() {
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "b", "max_batch_size": 1 }])), &tasks(), None);
        assert_eq!(plan.actions, [configure("b", Some(1), None), switch("b")]);
        assert!(plan.reports.is_empty(), "{:?}", plan.reports);
    }

    #[test]
    fn knobs_without_a_variant_go_to_the_active_one_and_nothing_switches() {
        let plan = tick_views(&decision(json!([{ "task": "t", "max_queue_delay_us": 250 }])), &tasks(), None);
        assert_eq!(plan.actions, [configure("a", None, Some(250))]);
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "a", "max_batch_size": 2 }])), &tasks(), None);
        assert_eq!(plan.actions, [configure("a", Some(2), None)], "the active variant named: no switch");
        let plan = tick_views(&decision(json!([{ "task": "t" }])), &tasks(), None);
        assert_eq!(plan, Plan::default(), "nothing asked, nothing done");
    }

    #[test]
    fn knobs_are_clamped_to_the_variants_ceiling_and_the_longest_delay_and_reported() {
        let mut tasks = tasks();
        tasks[0].variants[1].ceiling = 4;
        let asked = json!([{ "task": "t", "variant": "b", "max_batch_size": 99, "max_queue_delay_us": u64::MAX }]);
        let plan = tick_views(&decision(asked), &tasks, None);
        assert_eq!(plan.actions, [configure("b", Some(4), Some(MAX_QUEUE_DELAY_US)), switch("b")]);
        assert_eq!(
            plan.reports,
            [
                "task `t`: max_batch_size 99 clamped to 4".to_string(),
                format!("task `t`: max_queue_delay_us {} clamped to {MAX_QUEUE_DELAY_US}", u64::MAX),
            ]
        );
        let plan = tick_views(&decision(json!([{ "task": "t", "max_batch_size": 0 }])), &tasks, None);
        assert_eq!(plan.actions, [configure("a", Some(1), None)]);
        assert_eq!(plan.reports, ["task `t`: max_batch_size 0 clamped to 1"]);
    }

    #[test]
    fn a_switch_that_cannot_be_made_is_reported_and_its_knobs_go_to_the_active_variant() {
        let asked = json!([
            { "task": "t", "variant": "c", "max_batch_size": 2 },
            { "task": "t", "variant": "zz" },
            { "task": "nope", "variant": "a" },
        ]);
        let plan = tick_views(&decision(asked), &tasks(), None);
        let refuse = |variant: &str, reason: &str| refuse("t", Asked::Switch, variant, reason.into());
        assert_eq!(
            plan.actions,
            [
                configure("a", Some(2), None),
                refuse("c", "input `x`: sizes differ"),
                refuse("zz", "task `t` has no variant `zz`")
            ]
        );
        let reported: Vec<String> = plan.actions.iter().filter_map(Action::report).collect();
        assert_eq!(
            reported,
            [
                "task `t`: switch to `c` refused: input `x`: sizes differ",
                "task `t`: switch to `zz` refused: task `t` has no variant `zz`",
            ]
        );
        assert_eq!(plan.reports, ["unknown task `nope` ignored"]);
    }

    fn scale(task: &str, variant: &str, instances: u32) -> Action {
        Action::Scale { task: task.into(), variant: variant.into(), instances }
    }

    #[test]
    fn instances_asked_are_set_on_the_variant_named_or_serving_within_bounds() {
        let plan = tick_views(&decision(json!([{ "task": "t", "instances": 3 }])), &tasks(), None);
        assert_eq!(plan.actions, [scale("t", "a", 3)]);
        let plan = tick_views(&decision(json!([{ "task": "t", "instances": 1 }])), &tasks(), None);
        assert_eq!(plan, Plan::default(), "it runs one already");
        let plan = tick_views(&decision(json!([{ "task": "t", "instances": 0 }])), &tasks(), None);
        assert_eq!((plan.actions, plan.reports), (vec![], vec!["task `t`: instances 0 clamped to 1".to_string()]));
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "b", "instances": 2 }])), &tasks(), None);
        assert_eq!(plan.actions, [scale("t", "b", 2), switch("b")], "b loads with 2");
        let mut busy = tasks();
        busy[0].switching = true;
        let plan = tick_views(&decision(json!([{ "task": "t", "instances": 2 }])), &busy, None);
        assert_eq!(plan.actions, []);
        assert_eq!(plan.reports, ["task `t`: a change is under way; instances wait for a later tick"]);
    }

    const MIB: u64 = 1 << 20;

    /// A variant of one core and 100 MiB an instance, `instances` of them serving or
    /// loaded, idle for `idle_ms`.
    fn held(name: &str, state: VariantState, instances: u32, idle_ms: u64) -> VariantSnapshot {
        VariantSnapshot {
            name: name.into(),
            state,
            instances,
            instances_set: instances.max(1),
            share: Some(InstanceShare { cores: 1.0, memory_bytes: 100 * MIB, gpu_memory_bytes: 0 }),
            idle_ms: Some(idle_ms),
            device: "cpu".into(),
            ..VariantSnapshot::default()
        }
    }

    /// `tasks` (name, variant serving, variants) on a budget of `cores` and `memory_mib`.
    fn budgeted(
        tasks: Vec<(&str, &str, Vec<VariantSnapshot>)>,
        cores: f64,
        memory_mib: u64,
        unload_idle: bool,
    ) -> Snapshot {
        let tasks: Vec<TaskSnapshot> = tasks
            .into_iter()
            .map(|(name, active, variants)| TaskSnapshot {
                name: name.into(),
                active: ServingKnobs { variant: active.into(), ..ServingKnobs::default() },
                variants,
                ..TaskSnapshot::default()
            })
            .collect();
        let totals = super::super::budget::ResourceTotals {
            cores,
            memory_bytes: memory_mib * MIB,
            unload_idle,
            ..Default::default()
        };
        let budget = super::super::budget::budget(&totals, &tasks);
        let system = modelless_policy_abi::SystemSnapshot { budget: Some(budget), ..Default::default() };
        Snapshot { tasks, system, ..Snapshot::default() }
    }

    #[test]
    fn a_standby_variant_is_brought_to_its_instances_without_serving_and_one_serving_is_not() {
        let plan = tick_views(
            &decision(json!([{ "task": "t", "standby": { "d": 3, "b": 2, "a": 2, "c": 2 } }])),
            &tasks(),
            None,
        );
        assert_eq!(
            plan.actions,
            [scale("t", "b", 2), refuse("t", Asked::Scale, "c", "input `x`: sizes differ".into()), scale("t", "d", 3),],
            "b loads with 2; d, loaded, is brought to 3"
        );
        assert_eq!(
            plan.reports,
            ["task `t`: standby instances of `a` ignored: it serves, or the decision sets its instances"]
        );
        // Memory: d's two more instances of 100 MiB do not fit 150 free.
        let variants = vec![held("a", VariantState::Ready, 1, 0), held("d", VariantState::Ready, 1, 9_000)];
        let snapshot = budgeted(vec![("t", "a", variants)], 4.0, 350, false);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "standby": { "d": 3 } }])));
        assert!(matches!(&plan.actions[..], [Action::Refuse { asked: Asked::Scale, .. }]), "{plan:?}");
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "standby": { "d": 2 } }])));
        assert_eq!(plan.actions, [scale("t", "d", 2)]);
        // The variant serving stands by once the decision switches away from it.
        let plan =
            tick_views(&decision(json!([{ "task": "t", "variant": "d", "standby": { "a": 3 } }])), &tasks(), None);
        assert_eq!(plan.actions, [scale("t", "a", 3), switch("d")]);
    }

    #[test]
    fn instances_beyond_the_budget_are_refused_with_the_reason() {
        let snapshot = budgeted(vec![("t", "a", vec![held("a", VariantState::Ready, 1, 0)])], 2.0, 1000, true);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "instances": 2 }])));
        assert_eq!(plan.actions, [scale("t", "a", 2)]);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "instances": 3 }])));
        let reported: Vec<String> = plan.actions.iter().filter_map(Action::report).collect();
        assert_eq!(
            reported,
            ["task `t`: instances of `a` refused: it needs 2 more of the budget's 2 cores, and 1 are free"]
        );
        // Memory too: 5 instances of 100 MiB in 400.
        let snapshot = budgeted(vec![("t", "a", vec![held("a", VariantState::Ready, 1, 0)])], 8.0, 400, true);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "instances": 5 }])));
        let reported: Vec<String> = plan.actions.iter().filter_map(Action::report).collect();
        assert_eq!(reported.len(), 1);
        assert!(
            reported[0].contains("400 MiB of host memory, and 300 MiB of the 400 MiB budget are free"),
            "{reported:?}"
        );
    }

    #[test]
    fn one_decision_moves_cores_from_a_task_that_frees_them_to_one_that_needs_them() {
        let two = || {
            vec![
                ("t", "a", vec![held("a", VariantState::Ready, 1, 0)]),
                ("u", "c", vec![held("c", VariantState::Ready, 2, 0)]),
            ]
        };
        let snapshot = budgeted(two(), 3.0, 1000, true);
        let plan =
            tick(&snapshot, &decision(json!([{ "task": "t", "instances": 2 }, { "task": "u", "instances": 1 }])));
        assert_eq!(plan.actions, [scale("u", "c", 1), scale("t", "a", 2)], "u's core first");
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "instances": 2 }])));
        assert!(matches!(&plan.actions[..], [Action::Refuse { asked: Asked::Scale, .. }]), "{plan:?}");
    }

    #[test]
    fn a_switch_takes_over_the_cores_of_the_variant_it_replaces_and_loads_what_fits() {
        let variants = |b_instances| {
            vec![
                held("a", VariantState::Ready, 1, 0),
                VariantSnapshot { instances_set: b_instances, ..held("b", VariantState::Unloaded, 0, 5_000) },
            ]
        };
        let snapshot = budgeted(vec![("t", "a", variants(1))], 1.0, 1000, true);
        assert_eq!(tick(&snapshot, &decision(json!([{ "task": "t", "variant": "b" }]))).actions, [switch("b")]);
        let snapshot = budgeted(vec![("t", "a", variants(2))], 1.0, 1000, true);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "variant": "b" }])));
        assert!(
            matches!(&plan.actions[..], [Action::Refuse { asked: Asked::Switch, .. }]),
            "2 instances of b: {plan:?}"
        );
        // Asked with more instances than fit, it switches with those it loads with.
        let snapshot = budgeted(vec![("t", "a", variants(1))], 1.0, 1000, true);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "variant": "b", "instances": 2 }])));
        assert!(
            matches!(&plan.actions[..], [Action::Refuse { asked: Asked::Scale, .. }, Action::Switch { .. }]),
            "{plan:?}"
        );
    }

    #[test]
    fn a_load_short_of_memory_unloads_the_least_recently_served_idle_variant_where_allowed() {
        // 400 MiB: a serves, b (idle 10 s) and d (idle 50 s) stand by; c needs 100.
        let variants = vec![
            held("a", VariantState::Ready, 1, 0),
            held("b", VariantState::Ready, 1, 10_000),
            held("c", VariantState::Unloaded, 0, 90_000),
            held("d", VariantState::Ready, 1, 50_000),
        ];
        let snapshot = budgeted(vec![("t", "a", variants.clone())], 4.0, 300, true);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "variant": "c" }])));
        let unload = Action::Unload { task: "t".into(), variant: "d".into() };
        assert_eq!(plan.actions, [unload, switch("c")]);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "load": ["c"] }])));
        assert!(
            matches!(&plan.actions[..], [Action::Unload { variant, .. }, Action::Load { .. }] if variant == "d"),
            "{plan:?}"
        );
        // Never one that serves: with only a loaded, nothing can make room.
        let alone = vec![held("a", VariantState::Ready, 3, 0), held("c", VariantState::Unloaded, 0, 90_000)];
        let snapshot = budgeted(vec![("t", "a", alone)], 4.0, 300, true);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "load": ["c"] }])));
        assert!(matches!(&plan.actions[..], [Action::Refuse { asked: Asked::Load, .. }]), "{plan:?}");
        let snapshot = budgeted(vec![("t", "a", variants)], 4.0, 300, false);
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "variant": "c" }])));
        let reported: Vec<String> = plan.actions.iter().filter_map(Action::report).collect();
        assert!(
            reported[0].contains("switch to `c` refused") && reported[0].contains("no idle variant"),
            "{reported:?}"
        );
    }

    #[test]
    fn while_a_switch_is_under_way_another_waits_and_its_knobs_are_set_for_when_it_comes() {
        let mut tasks = tasks();
        tasks[0].switching = true;
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "b", "max_batch_size": 1 }])), &tasks, None);
        assert_eq!(plan.actions, [configure("b", Some(1), None)]);
        assert_eq!(plan.reports, ["task `t`: a switch is under way; `b` waits for a later tick"]);
    }

    #[test]
    fn loads_and_unloads_are_asked_of_variants_that_need_them_and_never_of_one_needed() {
        let asked = json!([{ "task": "t", "load": ["b", "d", "c", "zz"], "unload": ["d", "b", "a", "zz"] }]);
        let plan = tick_views(&decision(asked), &tasks(), None);
        let action = |asked, variant: &str| match asked {
            Asked::Load => Action::Load { task: "t".into(), variant: variant.into() },
            _ => Action::Unload { task: "t".into(), variant: variant.into() },
        };
        assert_eq!(
            plan.actions,
            [
                refuse("t", Asked::Unload, "d", "the same decision loads it".into()),
                refuse("t", Asked::Unload, "b", "the same decision loads it".into()),
                refuse("t", Asked::Unload, "a", "it serves the task".into()),
                refuse("t", Asked::Unload, "zz", "task `t` has no variant `zz`".into()),
                action(Asked::Load, "b"),
                refuse("t", Asked::Load, "c", "input `x`: sizes differ".into()),
                refuse("t", Asked::Load, "zz", "task `t` has no variant `zz`".into()),
            ],
            "d is loaded already; b loads"
        );
        let plan = tick_views(&decision(json!([{ "task": "t", "unload": ["d", "b"] }])), &tasks(), None);
        assert_eq!(plan.actions, [action(Asked::Unload, "d")], "b is not loaded: nothing to unload");
        let reported: Vec<String> = tick_views(&decision(json!([{ "task": "t", "unload": ["a"] }])), &tasks(), None)
            .actions
            .iter()
            .filter_map(Action::report)
            .collect();
        assert_eq!(reported, ["task `t`: unload of `a` refused: it serves the task"]);
    }

    #[test]
    fn a_switch_keeps_its_variant_and_loads_wait_for_it() {
        let asked = json!([{ "task": "t", "variant": "b", "unload": ["b", "d"], "load": ["b"] }]);
        let plan = tick_views(&decision(asked), &tasks(), None);
        assert_eq!(
            plan.actions,
            [
                refuse("t", Asked::Unload, "b", "the same decision switches to it".into()),
                Action::Unload { task: "t".into(), variant: "d".into() },
                switch("b"),
            ],
            "the switch loads b; unloads come before it, to free memory first"
        );
        let mut tasks = tasks();
        tasks[0].variants[1].state = VariantState::Loading;
        tasks[0].switching = true;
        let plan = tick_views(&decision(json!([{ "task": "t", "unload": ["b"] }])), &tasks, None);
        assert_eq!(plan.actions, [refuse("t", Asked::Unload, "b", "it is loading".into())]);
        tasks[0].variants[1].state = VariantState::Ready;
        tasks[0].variants[3].state = VariantState::Unloaded;
        let plan = tick_views(&decision(json!([{ "task": "t", "load": ["d"] }])), &tasks, None);
        assert_eq!(plan.actions, []);
        assert_eq!(plan.reports, ["task `t`: a load is under way; `d` waits for a later tick"]);
    }

    #[test]
    fn a_recorded_refusal_reads_back_and_one_recorded_before_loads_is_a_switch() {
        let refusal = refuse("t", Asked::Load, "c", "no".into());
        let json = serde_json::to_value(&refusal).unwrap();
        assert_eq!(json["asked"], "load");
        assert_eq!(serde_json::from_value::<Action>(json).unwrap(), refusal);
        let old = json!({ "action": "refuse", "task": "t", "variant": "c", "reason": "no" });
        assert_eq!(serde_json::from_value::<Action>(old).unwrap(), refuse("t", Asked::Switch, "c", "no".into()));
    }

    #[test]
    fn names_a_policy_wrote_are_cut_in_reports() {
        let long = "x".repeat(100_000);
        let plan = tick_views(&decision(json!([{ "task": long }, { "task": "t", "variant": long }])), &tasks(), None);
        let reported: Vec<String> =
            plan.reports.iter().cloned().chain(plan.actions.iter().filter_map(Action::report)).collect();
        assert_eq!(reported.len(), 2);
        assert!(reported.iter().all(|r| r.len() < 512), "{:?}", reported.iter().map(String::len));
    }

    /// Task `t`, `a` serving, with `variants` (name, state, batch ceiling, why it is
    /// refused).
    pub(in crate::policy) fn task_snapshot(
        variants: &[(&str, VariantState, Option<u32>, Option<&str>)],
    ) -> TaskSnapshot {
        let variants = variants
            .iter()
            .map(|&(name, state, ceiling, refused)| VariantSnapshot {
                name: name.into(),
                state,
                batch_ceiling: ceiling,
                refused: refused.map(str::to_string),
                ..VariantSnapshot::default()
            })
            .collect();
        TaskSnapshot {
            name: "t".into(),
            active: ServingKnobs { variant: "a".into(), ..ServingKnobs::default() },
            variants,
            ..TaskSnapshot::default()
        }
    }

    #[test]
    fn a_snapshot_tells_the_core_the_active_variant_a_switch_under_way_ceilings_and_refusals() {
        let task = task_snapshot(&[
            ("a", VariantState::Ready, Some(8), None),
            ("b", VariantState::Warming, Some(4), None),
            ("c", VariantState::Unloaded, None, Some("input `x`: sizes differ")),
        ]);
        let view = TaskView::of(&task);
        assert_eq!((view.active.as_str(), view.switching), ("a", true), "b warming to take over");
        let ceilings: Vec<usize> = view.variants.iter().map(|v| v.ceiling).collect();
        assert_eq!(ceilings, [8, 4, usize::MAX]);
        assert_eq!(view.variants[2].refused.as_deref(), Some("input `x`: sizes differ"));
        let snapshot = Snapshot { tasks: vec![task], ..Snapshot::default() };
        let plan = tick(&snapshot, &decision(json!([{ "task": "t", "variant": "c" }])));
        assert!(matches!(&plan.actions[..], [Action::Refuse { variant, .. }] if variant == "c"), "{plan:?}");
    }
}
