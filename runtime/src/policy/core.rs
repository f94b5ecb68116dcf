//! The control core: what a policy's decision asks of the tasks, checked against what
//! they are now and turned into actions, with a report of whatever could not be done
//! as it was asked. Pure (no threads, clocks nor I/O): the runtime's control loop
//! ([`super::ControlLoop`]) and the lab's simulator both call [`tick`] and carry its
//! actions out each in their own way, so that a decision is applied alike in both.
//!
//! Nothing here depends on the time: a decision is applied whole at the tick it is
//! made, and time reaches a policy through its snapshot.

use modelless_policy_abi::{Decision, TaskDecision};

use crate::batching::BatchingKnobs;
use crate::error::Error;

/// What the core knows of a task as a tick begins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskView {
    /// Its name.
    pub name: String,
    /// The variant serving it.
    pub active: String,
    /// Whether a switch is under way (a variant loading to take over): another waits.
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
}

/// What to do to a task, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl Action {
    /// The task it acts on.
    pub fn task(&self) -> &str {
        match self {
            Action::Configure { task, .. } | Action::Switch { task, .. } => task,
        }
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

/// The actions that carry out `decision` on `tasks` as they are now. A decision is a
/// peer's input like any other: whatever it holds is either applied within bounds or
/// reported, never fatal.
///
/// A task's knobs go to the variant the decision names, when that variant can serve
/// the task (the knobs belong to the variant that is to serve), else to the active
/// one; a switch is asked after them.
pub fn tick(decision: &Decision, tasks: &[TaskView]) -> Plan {
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
    match named {
        None => {}
        Some((variant, _)) if variant == task.active => {}
        Some((variant, Err(why))) => {
            plan.reports.push(format!("task `{name}`: switch to `{}` refused: {}", short(variant), cut(&why, 400)));
        }
        Some((variant, Ok(_))) if task.switching => {
            plan.reports
                .push(format!("task `{name}`: a switch is under way; `{}` waits for a later tick", short(variant)));
        }
        Some((variant, Ok(_))) => {
            plan.actions.push(Action::Switch { task: name.clone(), variant: variant.to_string() });
        }
    }
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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::batching::MAX_QUEUE_DELAY_US;

    /// Task `t`: `a` serving, `b` and `c` (which does not fit), batches of up to 8.
    fn tasks() -> Vec<TaskView> {
        let variant = |name: &str, refused: Option<&str>| VariantView {
            name: name.into(),
            ceiling: 8,
            refused: refused.map(str::to_string),
        };
        let variants = vec![variant("a", None), variant("b", None), variant("c", Some("input `x`: sizes differ"))];
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
        let plan = tick(&decision(json!([{ "task": "t", "variant": "b", "max_batch_size": 1 }])), &tasks());
        assert_eq!(plan.actions, [configure("b", Some(1), None), switch("b")]);
        assert!(plan.reports.is_empty(), "{:?}", plan.reports);
    }

    #[test]
    fn knobs_without_a_variant_go_to_the_active_one_and_nothing_switches() {
        let plan = tick(&decision(json!([{ "task": "t", "max_queue_delay_us": 250 }])), &tasks());
        assert_eq!(plan.actions, [configure("a", None, Some(250))]);
        let plan = tick(&decision(json!([{ "task": "t", "variant": "a", "max_batch_size": 2 }])), &tasks());
        assert_eq!(plan.actions, [configure("a", Some(2), None)], "the active variant named: no switch");
        let plan = tick(&decision(json!([{ "task": "t" }])), &tasks());
        assert_eq!(plan, Plan::default(), "nothing asked, nothing done");
    }

    #[test]
    fn knobs_are_clamped_to_the_variants_ceiling_and_the_longest_delay_and_reported() {
        let mut tasks = tasks();
        tasks[0].variants[1].ceiling = 4;
        let asked = json!([{ "task": "t", "variant": "b", "max_batch_size": 99, "max_queue_delay_us": u64::MAX }]);
        let plan = tick(&decision(asked), &tasks);
        assert_eq!(plan.actions, [configure("b", Some(4), Some(MAX_QUEUE_DELAY_US)), switch("b")]);
        assert_eq!(
            plan.reports,
            [
                "task `t`: max_batch_size 99 clamped to 4".to_string(),
                format!("task `t`: max_queue_delay_us {} clamped to {MAX_QUEUE_DELAY_US}", u64::MAX),
            ]
        );
        let plan = tick(&decision(json!([{ "task": "t", "max_batch_size": 0 }])), &tasks);
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
        let plan = tick(&decision(asked), &tasks());
        assert_eq!(plan.actions, [configure("a", Some(2), None)]);
        assert_eq!(
            plan.reports,
            [
                "task `t`: switch to `c` refused: input `x`: sizes differ",
                "task `t`: switch to `zz` refused: task `t` has no variant `zz`",
                "unknown task `nope` ignored",
                "task `t`: changing instances is not supported; ignored",
            ]
        );
    }

    #[test]
    fn while_a_switch_is_under_way_another_waits_and_its_knobs_are_set_for_when_it_comes() {
        let mut tasks = tasks();
        tasks[0].switching = true;
        let plan = tick(&decision(json!([{ "task": "t", "variant": "b", "max_batch_size": 1 }])), &tasks);
        assert_eq!(plan.actions, [configure("b", Some(1), None)]);
        assert_eq!(plan.reports, ["task `t`: a switch is under way; `b` waits for a later tick"]);
    }

    #[test]
    fn names_a_policy_wrote_are_cut_in_reports() {
        let long = "x".repeat(100_000);
        let plan = tick(&decision(json!([{ "task": long }, { "task": "t", "variant": long }])), &tasks());
        assert!(plan.actions.is_empty());
        assert_eq!(plan.reports.len(), 2);
        assert!(plan.reports.iter().all(|r| r.len() < 512), "{:?}", plan.reports.iter().map(String::len));
    }
}
