//! Carrying out on the tasks the actions the control core ([`super::core::tick`]) made
//! of a policy's decision: knobs at once; switches, loads and unloads on a thread of
//! their own, one at a time per task, so that loading a variant (or waiting for one
//! to load before unloading another) never holds up the next tick.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use super::control_status::ControlStatus;
use super::core::{Action, Asked, Plan, short};
use crate::registry::Task;

/// Applies decisions, counting switches and their failures in `status`.
pub(super) struct Applier {
    status: Arc<Mutex<ControlStatus>>,
    /// Tasks with a switch, load or unload under way.
    switching: Arc<Mutex<HashSet<String>>>,
}

impl Applier {
    pub(super) fn new(status: Arc<Mutex<ControlStatus>>) -> Self {
        Applier { status, switching: Arc::default() }
    }

    /// Carries out what the core made of a decision; returns what could not be
    /// applied as it was asked.
    pub(super) fn apply(&self, tasks: &[Arc<Task>], plan: Plan) -> Vec<String> {
        let mut reports = plan.reports;
        let switched: Vec<(String, String)> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Switch { task, variant } => Some((task.clone(), variant.clone())),
                _ => None,
            })
            .collect();
        // Keyed by task: tasks may name their variants alike.
        let switches_to =
            |task: &str, variant: &str| switched.iter().any(|(t, v)| t.as_str() == task && v.as_str() == variant);
        for action in plan.actions {
            let Some(task) = tasks.iter().find(|t| t.name() == action.task()) else { continue };
            match action {
                Action::Configure { variant, knobs, .. } => {
                    if let Err(e) = task.configure_variant(&variant, knobs) {
                        reports.push(format!("task `{}`: knobs not applied: {e}", task.name()));
                    }
                }
                Action::Switch { variant, .. } => reports.extend(self.in_background(task, Asked::Switch, variant)),
                Action::Load { variant, .. } => reports.extend(self.in_background(task, Asked::Load, variant)),
                Action::Unload { variant, .. } => reports.extend(self.in_background(task, Asked::Unload, variant)),
                Action::Scale { variant, instances, .. } => match task.want_instances(&variant, instances as usize) {
                    // A variant switched to in the same plan comes up with them.
                    Ok(true) if !switches_to(task.name(), &variant) => {
                        reports.extend(self.in_background(task, Asked::Scale, variant))
                    }
                    Ok(_) => {}
                    Err(e) => reports.push(format!("task `{}`: instances not set: {e}", task.name())),
                },
                refused @ Action::Refuse { .. } => reports.extend(refused.report()),
            }
        }
        reports
    }

    /// Starts a switch, load or unload on a thread of its own; one waits while
    /// another of the task's is under way.
    fn in_background(&self, task: &Arc<Task>, asked: Asked, variant: String) -> Option<String> {
        let name = task.name().to_string();
        if !self.switching.lock().unwrap_or_else(PoisonError::into_inner).insert(name.clone()) {
            // The snapshot showed none under way, but one started since and has not
            // shown yet; the policy asks again at a later tick.
            let waits = format!("task `{name}`: {} `{}` waits for the one under way", asked.phrase(), short(&variant));
            return (asked != Asked::Switch).then_some(waits);
        }
        if asked == Asked::Switch {
            self.status.lock().unwrap_or_else(PoisonError::into_inner).switches += 1;
        }
        let (task, switching, status) = (task.clone(), self.switching.clone(), self.status.clone());
        let cannot_start = format!("task `{name}`: cannot start the {} `{}`", asked.phrase(), short(&variant));
        let spawned = std::thread::Builder::new().name(format!("modelless-switch-{name}")).spawn(move || {
            let done = match asked {
                Asked::Switch => task.switch_to(&variant).map(drop),
                Asked::Load => task.load_variant(&variant),
                Asked::Unload => task.unload_variant(&variant),
                Asked::Scale => task.scale_instances(&variant),
            };
            if let Err(e) = done {
                let report = format!("task `{}`: {} `{}` failed: {e}", task.name(), asked.phrase(), short(&variant));
                tracing::warn!(%report);
                status.lock().unwrap_or_else(PoisonError::into_inner).reports.push(report);
            }
            switching.lock().unwrap_or_else(PoisonError::into_inner).remove(task.name());
        });
        spawned.err().map(|e| {
            self.switching.lock().unwrap_or_else(PoisonError::into_inner).remove(&name);
            format!("{cannot_start}: {e}")
        })
    }

    /// Whether a switch started by this applier is still under way.
    #[cfg(test)]
    pub(super) fn switching(&self) -> bool {
        !self.switching.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    use proptest::collection::vec;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use modelless_policy_abi::{Decision, VariantState};

    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::batching::MAX_QUEUE_DELAY_US;
    use crate::fuzzing::{PeakAllocator, fuzz, hostile};
    use crate::policy::host::{decision_from_output, status};
    use crate::registry::{MakeBackend, TaskConfig, VariantConfig};
    use crate::request::{Inputs, Slo};
    use crate::tensor::Tensor;
    use crate::warmup::WarmupConfig;

    /// `decision` applied to `task` as the control loop applies it: on the snapshot
    /// the policy would have seen.
    fn apply(applier: &Applier, task: &Arc<Task>, decision: &Decision) -> Vec<String> {
        let tasks = std::slice::from_ref(task);
        let snapshot = crate::policy::reading::snapshot(tasks, None, None);
        applier.apply(tasks, crate::policy::core::tick(&snapshot, decision))
    }

    /// Task `classify`: v0 (active) and v1, both fake, batches of up to 8.
    fn task() -> Arc<Task> {
        let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
        let variant =
            |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
        let config = TaskConfig::new("classify").with_variant(variant("v0", 60.0)).with_variant(variant("v1", 70.0));
        Arc::new(Task::start(config, make).unwrap())
    }

    #[test]
    fn a_switch_to_a_variant_that_does_not_fit_the_task_is_refused_and_reported() {
        // v1 answers rows of 5 where the task (v0's signature) has 4.
        let make: MakeBackend = Arc::new(|variant, _| {
            let width = if variant.name == "v1" { 5 } else { 4 };
            FakeBackend::factory(FakeConfig { width, ..FakeConfig::default() }, BatchLog::default())
        });
        let variant =
            |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
        let config = TaskConfig::new("classify").with_variant(variant("v0", 60.0)).with_variant(variant("v1", 70.0));
        let task = Arc::new(Task::start(config, make).unwrap());
        let status: Arc<Mutex<ControlStatus>> = Arc::default();
        let applier = Applier::new(status.clone());
        let decision: Decision =
            serde_json::from_value(json!({ "tasks": [{ "task": "classify", "variant": "v1" }] })).unwrap();
        // The first switch loads v1, which fails to bind: the switch fails, reported.
        assert!(apply(&applier, &task, &decision).is_empty());
        settled(&applier);
        let failed = status.lock().unwrap().reports.clone();
        assert!(failed.iter().any(|r| r.contains("does not fit task `classify`")), "{failed:?}");
        // From then on it is refused at once, no switch started.
        let refused = apply(&applier, &task, &decision);
        assert!(refused.len() == 1 && refused[0].contains("switch to `v1` refused"), "{refused:?}");
        assert!(refused[0].contains("input `input`"), "{refused:?}");
        assert_eq!(status.lock().unwrap().switches, 1);
        assert_eq!(task.serving().0.variant, "v0");
    }

    #[test]
    fn a_switch_of_one_task_leaves_the_instances_of_another_tasks_variant_of_that_name_to_be_set() {
        let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
        let variant =
            |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
        let start = |name: &str, active: &str| {
            let config = TaskConfig::new(name)
                .with_variant(variant("big", 70.0))
                .with_variant(variant("small", 60.0))
                .with_active(active);
            Arc::new(Task::start(config, make.clone()).unwrap())
        };
        // Task a switches to its `small`, in the decision that sets two instances of
        // task b's `small`, which serves b.
        let tasks = [start("a", "big"), start("b", "small")];
        let decision: Decision = serde_json::from_value(json!({ "tasks": [
            { "task": "a", "variant": "small" },
            { "task": "b", "instances": 2 },
        ] }))
        .unwrap();
        let applier = Applier::new(Arc::default());
        let snapshot = crate::policy::reading::snapshot(&tasks, None, None);
        let reports = applier.apply(&tasks, crate::policy::core::tick(&snapshot, &decision));
        assert!(reports.is_empty(), "{reports:?}");
        settled(&applier);
        let instances =
            |task: &Task| task.variant_snapshots().into_iter().find(|v| v.name == "small").unwrap().instances;
        assert_eq!(tasks[0].serving().0.variant, "small");
        assert_eq!(instances(&tasks[1]), 2, "b's instances were set though a switched to a variant of that name");
    }

    /// Waits (10 s at most) for the applier's switch, load or unload to end.
    fn settled(applier: &Applier) {
        let until = Instant::now() + Duration::from_secs(10);
        while applier.switching() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_load_warms_a_variant_without_serving_it_and_an_unload_frees_it() {
        let task = task();
        let state = |variant: &str| task.variant_snapshots().into_iter().find(|v| v.name == variant).unwrap().state;
        assert_eq!(state("v1"), VariantState::Unloaded);
        let applier = Applier::new(Arc::default());
        let ask = |decision| serde_json::from_value::<Decision>(json!({ "tasks": [decision] })).unwrap();
        assert!(apply(&applier, &task, &ask(json!({ "task": "classify", "load": ["v1"] }))).is_empty());
        settled(&applier);
        assert_eq!((state("v1"), task.serving().0.variant), (VariantState::Ready, "v0".to_string()));
        let refused = apply(&applier, &task, &ask(json!({ "task": "classify", "unload": ["v0", "v1"] })));
        assert_eq!(refused, ["task `classify`: unload of `v0` refused: it serves the task"]);
        settled(&applier);
        assert!(matches!(state("v1"), VariantState::Unloaded | VariantState::Draining), "{:?}", state("v1"));
        assert_eq!(task.serving().0.variant, "v0");
    }

    /// One task's decision as a hostile policy might write it: knobs of every size and
    /// of the wrong kinds, names long, unknown or of no task.
    fn task_decision() -> impl Strategy<Value = Value> {
        let name = prop_oneof![4 => Just("classify".to_string()), 1 => "\\PC{0,12}", 1 => Just("x".repeat(100_000))];
        let variant = prop_oneof![Just(json!("v0")), Just(json!("v1")), Just(json!("v9")), hostile::scalar()];
        let number = prop_oneof![
            3 => (0u64..20).prop_map(Value::from),
            1 => any::<u64>().prop_map(Value::from),
            1 => Just(json!(MAX_QUEUE_DELAY_US + 1)),
            1 => hostile::scalar(),
        ];
        let knob = |value| proptest::option::weighted(0.6, value);
        let variant = proptest::option::weighted(0.6, variant);
        (name, variant, knob(number.clone()), knob(number.clone()), knob(number))
            .prop_map(|(task, variant, batch, delay, instances)| {
                let mut decision = json!({ "task": task });
                let knobs = [("variant", variant), ("max_batch_size", batch), ("max_queue_delay_us", delay)];
                for (knob, value) in knobs.into_iter().chain([("instances", instances)]) {
                    if let Some(value) = value {
                        decision[knob] = value;
                    }
                }
                decision
            })
            .prop_flat_map(|decision| {
                let names = proptest::option::weighted(
                    0.3,
                    vec(prop_oneof![Just(json!("v0")), Just(json!("v1")), hostile::scalar()], 0..3),
                );
                (Just(decision), names.clone(), names).prop_map(|(mut decision, load, unload)| {
                    for (field, names) in [("load", load), ("unload", unload)] {
                        if let Some(names) = names {
                            decision[field] = Value::from(names);
                        }
                    }
                    decision
                })
            })
    }

    /// What `decide` (or `init`, `load_state`) wrote: a decision, an error, any JSON,
    /// mangled, or raw bytes.
    fn policy_output() -> impl Strategy<Value = Vec<u8>> {
        let decision = vec(task_decision(), 0..4).prop_map(|tasks| json!({ "tasks": tasks }).to_string());
        let error = "\\PC{0,20}".prop_map(|e| json!({ "error": e }).to_string());
        let any_json = hostile::json().prop_map(|v| v.to_string());
        let text = prop_oneof![6 => decision, 1 => error, 1 => any_json];
        prop_oneof![8 => text.prop_flat_map(hostile::mangled), 1 => vec(any::<u8>(), 0..256)]
    }

    #[test]
    fn fuzz_policy_outputs_decoded_and_applied() {
        let task = task();
        let applier = Applier::new(Arc::default());
        let (applied, refused) = (Cell::new(0), Cell::new(0));
        fuzz("policy-output", policy_output(), |out| {
            PeakAllocator::reset();
            let decision = decision_from_output(&out).map(|(decision, _)| decision);
            let _ = status(&out);
            let largest = PeakAllocator::largest();
            prop_assert!(largest <= 16 * out.len() + (64 << 10), "{} bytes decoded allocated {largest}", out.len());
            let Ok(decision) = decision else {
                refused.set(refused.get() + 1);
                return Ok(());
            };
            applied.set(applied.get() + 1);
            for report in apply(&applier, &task, &decision) {
                prop_assert!(report.len() < 512, "a report of {} bytes", report.len());
            }
            let (knobs, _) = task.serving();
            prop_assert!((1..=8).contains(&knobs.max_batch_size), "batch {}", knobs.max_batch_size);
            prop_assert!(knobs.max_queue_delay_us <= MAX_QUEUE_DELAY_US, "delay {}", knobs.max_queue_delay_us);
            // Whatever was applied, the task still answers. A full batch leaves at
            // once, whatever queue delay the policy set.
            let rows = knobs.max_batch_size as usize;
            let inputs = Inputs::from(Tensor::new([rows, 4], vec![1.0f32; rows * 4]).unwrap());
            let answered = task.submit(inputs, &Slo::default()).and_then(|t| t.wait());
            prop_assert!(answered.is_ok(), "{answered:?}");
            Ok(())
        });
        let until = Instant::now() + Duration::from_secs(10);
        while applier.switching() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(applied.get() > 0 && refused.get() > 0, "{} applied, {} refused", applied.get(), refused.get());
    }
}
