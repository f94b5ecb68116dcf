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

use modelless_policy_abi::{Decision, Snapshot, TaskDecision, TaskSnapshot, VariantState};
use serde::{Deserialize, Serialize};

use crate::batching::BatchingKnobs;
use crate::error::Error;

/// What the core knows of a task as a tick begins ([`TaskView::of`] its snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskView {
    /// Its name.
    pub name: String,
    /// The variant serving it.
    pub active: String,
    /// Whether a switch or a load is under way (a variant other than the active one
    /// loading or warming): another waits.
    pub switching: bool,
    /// Its variants.
    pub variants: Vec<VariantView>,
}

/// What the core knows of one variant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
}

impl Asked {
    /// How a report says it: `switch to`, `load of`, `unload of`.
    pub fn phrase(self) -> &'static str {
        match self {
            Asked::Switch => "switch to",
            Asked::Load => "load of",
            Asked::Unload => "unload of",
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
            Action::Configure { .. } | Action::Switch { .. } | Action::Load { .. } | Action::Unload { .. } => None,
        }
    }
}

impl TaskView {
    /// What `task`'s snapshot says of it. A variant other than the active one that is
    /// loading or warming is a switch under way; a variant with no ceiling in the
    /// snapshot (one recorded before snapshots carried it) is not clamped.
    pub fn of(task: &TaskSnapshot) -> TaskView {
        let active = &task.active.variant;
        let switching = task
            .variants
            .iter()
            .any(|v| &v.name != active && matches!(v.state, VariantState::Loading | VariantState::Warming));
        let variants = task
            .variants
            .iter()
            .map(|v| VariantView {
                name: v.name.clone(),
                ceiling: v.batch_ceiling.map_or(usize::MAX, |c| c as usize),
                refused: v.refused.clone(),
                state: v.state,
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
/// one; a switch is asked after them.
pub fn tick(snapshot: &Snapshot, decision: &Decision) -> Plan {
    let tasks: Vec<TaskView> = snapshot.tasks.iter().map(TaskView::of).collect();
    tick_views(decision, &tasks)
}

/// [`tick`] on tasks as the core sees them.
fn tick_views(decision: &Decision, tasks: &[TaskView]) -> Plan {
    let mut plan = Plan::default();
    for wanted in &decision.tasks {
        match tasks.iter().find(|t| t.name == wanted.task) {
            Some(task) => plan_task(task, wanted, &mut plan),
            None => plan.reports.push(format!("unknown task `{}` ignored", short(&wanted.task))),
        }
    }
    plan
}

/// Adds to `plan` what `wanted` asks of `task`.
fn plan_task(task: &TaskView, wanted: &TaskDecision, plan: &mut Plan) {
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
    if wanted.instances.is_some() {
        plan.reports.push(format!("task `{name}`: changing instances is not supported; ignored"));
    }
    let switch_to = match named {
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
        Some((variant, Ok(_))) => Some(variant),
    };
    plan_unloads(task, wanted, switch_to, plan);
    if let Some(variant) = switch_to {
        plan.actions.push(Action::Switch { task: name.clone(), variant: variant.to_string() });
    }
    plan_loads(task, wanted, switch_to, plan);
}

/// Adds the unloads `wanted` asks: never of the variant serving, the one switched
/// to, one loading, or one also asked to load.
fn plan_unloads(task: &TaskView, wanted: &TaskDecision, switch_to: Option<&str>, plan: &mut Plan) {
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
        match needed {
            Some(reason) => plan.actions.push(refuse(name, Asked::Unload, variant, reason.to_string())),
            None if matches!(found.state, VariantState::Unloaded | VariantState::Failed) => {}
            None => plan.actions.push(Action::Unload { task: name.clone(), variant: variant.clone() }),
        }
    }
}

/// Adds the loads `wanted` asks of variants not loaded (a switch loads its own); one
/// at a time, as switches go.
fn plan_loads(task: &TaskView, wanted: &TaskDecision, switch_to: Option<&str>, plan: &mut Plan) {
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
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "b", "max_batch_size": 1 }])), &tasks());
        assert_eq!(plan.actions, [configure("b", Some(1), None), switch("b")]);
        assert!(plan.reports.is_empty(), "{:?}", plan.reports);
    }

    #[test]
    fn knobs_without_a_variant_go_to_the_active_one_and_nothing_switches() {
        let plan = tick_views(&decision(json!([{ "task": "t", "max_queue_delay_us": 250 }])), &tasks());
        assert_eq!(plan.actions, [configure("a", None, Some(250))]);
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "a", "max_batch_size": 2 }])), &tasks());
        assert_eq!(plan.actions, [configure("a", Some(2), None)], "the active variant named: no switch");
        let plan = tick_views(&decision(json!([{ "task": "t" }])), &tasks());
        assert_eq!(plan, Plan::default(), "nothing asked, nothing done");
    }

    #[test]
    fn knobs_are_clamped_to_the_variants_ceiling_and_the_longest_delay_and_reported() {
        let mut tasks = tasks();
        tasks[0].variants[1].ceiling = 4;
        let asked = json!([{ "task": "t", "variant": "b", "max_batch_size": 99, "max_queue_delay_us": u64::MAX }]);
        let plan = tick_views(&decision(asked), &tasks);
        assert_eq!(plan.actions, [configure("b", Some(4), Some(MAX_QUEUE_DELAY_US)), switch("b")]);
        assert_eq!(
            plan.reports,
            [
                "task `t`: max_batch_size 99 clamped to 4".to_string(),
                format!("task `t`: max_queue_delay_us {} clamped to {MAX_QUEUE_DELAY_US}", u64::MAX),
            ]
        );
        let plan = tick_views(&decision(json!([{ "task": "t", "max_batch_size": 0 }])), &tasks);
        assert_eq!(plan.actions, [configure("a", Some(1), None)]);
        assert_eq!(plan.reports, ["task `t`: max_batch_size 0 clamped to 1"]);
    }

    #[test]
    fn a_switch_that_cannot_be_made_is_reported_and_its_knobs_go_to_the_active_variant() {
        let asked = json!([
            { "task": "t", "variant": "c", "max_batch_size": 2 },
            { "task": "t", "variant": "zz" },
            { "task": "nope", "variant": "a" },
            { "task": "t", "instances": 2 },
        ]);
        let plan = tick_views(&decision(asked), &tasks());
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
        assert_eq!(
            plan.reports,
            ["unknown task `nope` ignored", "task `t`: changing instances is not supported; ignored"]
        );
    }

    #[test]
    fn while_a_switch_is_under_way_another_waits_and_its_knobs_are_set_for_when_it_comes() {
        let mut tasks = tasks();
        tasks[0].switching = true;
        let plan = tick_views(&decision(json!([{ "task": "t", "variant": "b", "max_batch_size": 1 }])), &tasks);
        assert_eq!(plan.actions, [configure("b", Some(1), None)]);
        assert_eq!(plan.reports, ["task `t`: a switch is under way; `b` waits for a later tick"]);
    }

    #[test]
    fn loads_and_unloads_are_asked_of_variants_that_need_them_and_never_of_one_needed() {
        let asked = json!([{ "task": "t", "load": ["b", "d", "c", "zz"], "unload": ["d", "b", "a", "zz"] }]);
        let plan = tick_views(&decision(asked), &tasks());
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
        let plan = tick_views(&decision(json!([{ "task": "t", "unload": ["d", "b"] }])), &tasks());
        assert_eq!(plan.actions, [action(Asked::Unload, "d")], "b is not loaded: nothing to unload");
        let reported: Vec<String> = tick_views(&decision(json!([{ "task": "t", "unload": ["a"] }])), &tasks())
            .actions
            .iter()
            .filter_map(Action::report)
            .collect();
        assert_eq!(reported, ["task `t`: unload of `a` refused: it serves the task"]);
    }

    #[test]
    fn a_switch_keeps_its_variant_and_loads_wait_for_it() {
        let asked = json!([{ "task": "t", "variant": "b", "unload": ["b", "d"], "load": ["b"] }]);
        let plan = tick_views(&decision(asked), &tasks());
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
        let plan = tick_views(&decision(json!([{ "task": "t", "unload": ["b"] }])), &tasks);
        assert_eq!(plan.actions, [refuse("t", Asked::Unload, "b", "it is loading".into())]);
        tasks[0].variants[1].state = VariantState::Ready;
        tasks[0].variants[3].state = VariantState::Unloaded;
        let plan = tick_views(&decision(json!([{ "task": "t", "load": ["d"] }])), &tasks);
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
        let plan = tick_views(&decision(json!([{ "task": long }, { "task": "t", "variant": long }])), &tasks());
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
