//! The controller: one tick of steering, the same wherever it runs. It stamps the
//! snapshot with the tick's number and time, has the guarded policy decide on it (and
//! a shadow, when one runs), makes actions of the decision through the control core,
//! and records the tick. The runtime's control loop and the lab's simulator each build
//! the snapshot and carry out the actions their own way; what is decided, refused and
//! recorded is this one code's.

use std::time::{Duration, Instant};

use modelless_policy_abi::{Decision, Snapshot};

use super::core::{self, Plan};
use super::guard::{DecidedBy, GuardedPolicy, Reloaded, RollbackPoint};
use super::host::PolicyModule;
use super::record::Recorder;
use crate::error::PolicyError;

/// A guarded policy, its shadow and the recording of its ticks.
pub struct Controller {
    policy: GuardedPolicy,
    shadow: Option<Box<GuardedPolicy>>,
    recorder: Option<Recorder>,
    ticks: u64,
    /// The last tick's snapshot: a replacement module is dry-run on it.
    last_snapshot: Option<Snapshot>,
}

/// What one tick came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Ticked {
    /// The decision (empty when the module's was discarded).
    pub decision: Decision,
    /// Who made it.
    pub by: DecidedBy,
    /// What the shadow decided, when one runs; never applied.
    pub shadow: Option<Decision>,
    /// The actions to carry out, and what was not done as asked (clamped knobs,
    /// ignored names, a recording that stopped).
    pub plan: Plan,
    /// What the policy warned of (through `modelless.log`) this tick.
    pub warnings: Vec<String>,
    /// How long the policy took to decide.
    pub decided_in: Duration,
}

// Its parts (modules, instances, files) print nothing useful.
impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").field("ticks", &self.ticks).finish_non_exhaustive()
    }
}

impl Controller {
    /// Steers with `policy`, from tick 0.
    pub fn new(policy: GuardedPolicy) -> Self {
        Controller { policy, shadow: None, recorder: None, ticks: 0, last_snapshot: None }
    }

    /// Records every tick (snapshot, decisions, actions) with `recorder`.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Runs `shadow` beside the policy from the next tick; `None` stops it.
    pub fn set_shadow(&mut self, shadow: Option<GuardedPolicy>) {
        self.shadow = shadow.map(Box::new);
    }

    /// The policy deciding.
    pub fn policy(&self) -> &GuardedPolicy {
        &self.policy
    }

    /// The shadow, when one runs.
    pub fn shadow(&self) -> Option<&GuardedPolicy> {
        self.shadow.as_deref()
    }

    /// The last tick's snapshot, stamped with its number and time.
    pub fn last_snapshot(&self) -> Option<&Snapshot> {
        self.last_snapshot.as_ref()
    }

    /// Ticks so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Replaces the policy's module (see [`GuardedPolicy::replace`]), dry-run on the
    /// last tick's snapshot; `parameters` `None` keeps the current ones.
    pub fn replace(
        &mut self,
        module: PolicyModule,
        parameters: Option<serde_json::Value>,
    ) -> Result<Reloaded, PolicyError> {
        let parameters = parameters.or_else(|| self.policy.parameters().cloned());
        self.policy.replace(module, parameters, self.last_snapshot.as_ref())
    }

    /// The point a rollback to the policy deciding now returns to.
    pub fn rollback_point(&mut self) -> RollbackPoint {
        self.policy.rollback_point()
    }

    /// Puts back the policy of `point` (see [`GuardedPolicy::restore`]).
    pub fn restore(&mut self, point: RollbackPoint) -> Result<(), PolicyError> {
        self.policy.restore(point, self.last_snapshot.as_ref())
    }

    /// One tick at `now` (time since steering began) on `snapshot`: stamped, decided
    /// on, planned and recorded.
    pub fn tick(&mut self, now: Duration, mut snapshot: Snapshot) -> Ticked {
        snapshot.tick = self.ticks;
        snapshot.now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        self.ticks += 1;
        let mut reports = Vec::new();
        let started = Instant::now();
        // Encoded once, for the policy, the shadow and the recording alike.
        let (decided, json) = match serde_json::to_vec(&snapshot) {
            Ok(json) => (self.policy.decide_encoded(&snapshot, &json), Some(json)),
            Err(e) => {
                reports.push(format!("snapshot not encoded: {e}"));
                (self.policy.decide(&snapshot), None)
            }
        };
        let decided_in = started.elapsed();
        let shadow =
            self.shadow.as_mut().zip(json.as_ref()).map(|(s, json)| s.decide_encoded(&snapshot, json).decision);
        let mut plan = core::tick(&snapshot, &decided.decision);
        plan.reports.splice(0..0, reports);
        if let (Some(recorder), Some(json)) = (&mut self.recorder, &json)
            && let Err(e) = recorder.write(json, &decided.decision, decided.by.label(), shadow.as_ref(), &plan.actions)
        {
            plan.reports.push(format!("recording stopped: {e}"));
            self.recorder = None;
        }
        self.last_snapshot = Some(snapshot);
        Ticked {
            decision: decided.decision,
            by: decided.by,
            shadow,
            plan,
            warnings: self.policy.take_warnings(),
            decided_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::VariantState;

    use super::*;
    use crate::policy::core::tests::task_snapshot;
    use crate::policy::core::{Action, Asked};
    use crate::policy::guard::KeepConfigured;
    use crate::policy::host::{HostConfig, PolicyEngine};
    use crate::policy::record::RecordedTick;
    use crate::policy::test_modules::answering;

    /// Task `t`: `a` serving, `b` ready, `c` unloaded and refused.
    fn snapshot() -> Snapshot {
        let task = task_snapshot(&[
            ("a", VariantState::Ready, Some(8), None),
            ("b", VariantState::Ready, Some(8), None),
            ("c", VariantState::Unloaded, Some(8), Some("input `x`: sizes differ")),
        ]);
        Snapshot { tasks: vec![task], ..Snapshot::default() }
    }

    fn controller(decision: &str) -> Controller {
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let module = engine.compile("test", answering(decision).as_bytes()).unwrap();
        Controller::new(GuardedPolicy::new(module, None, KeepConfigured::default()))
    }

    #[test]
    fn a_tick_is_stamped_decided_planned_and_recorded_with_its_actions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ticks.jsonl");
        let decision = r#"{"tasks":[{"task":"t","variant":"c","unload":["b"],"max_batch_size":99}]}"#;
        let mut controller = controller(decision).with_recorder(Recorder::open(&path).unwrap());
        let first = controller.tick(Duration::from_millis(1500), snapshot());
        let stamped = controller.last_snapshot().unwrap();
        assert_eq!((stamped.tick, stamped.now_ms), (0, 1500));
        controller.tick(Duration::from_millis(2500), snapshot());
        let stamped = controller.last_snapshot().unwrap().clone();
        assert_eq!((stamped.tick, stamped.now_ms, controller.ticks()), (1, 2500, 2));
        assert_eq!(first.by, DecidedBy::Module);
        let refused = Action::Refuse {
            task: "t".into(),
            asked: Asked::Switch,
            variant: "c".into(),
            reason: "input `x`: sizes differ".into(),
        };
        let unload = Action::Unload { task: "t".into(), variant: "b".into() };
        assert!(
            matches!(&first.plan.actions[..], [Action::Configure { variant, .. }, r, u]
            if variant == "a" && *u == unload && *r == refused),
            "{:?}",
            first.plan.actions
        );
        assert_eq!(first.plan.reports, ["task `t`: max_batch_size 99 clamped to 8"]);
        let recorded: Vec<RecordedTick> =
            std::fs::read_to_string(&path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(recorded.len(), 2);
        assert_eq!(recorded[1].snapshot, stamped);
        assert_eq!(recorded[0].actions, first.plan.actions);
        assert_eq!(recorded[0].by, "module");
    }

    #[test]
    fn a_shadow_decides_on_the_same_snapshot_and_nothing_of_it_is_acted_on() {
        let mut controller = controller(r#"{"tasks":[]}"#);
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let shadow = engine.compile("shadow", answering(r#"{"tasks":[{"task":"t","variant":"b"}]}"#).as_bytes());
        controller.set_shadow(Some(GuardedPolicy::new(shadow.unwrap(), None, KeepConfigured::default())));
        let ticked = controller.tick(Duration::ZERO, snapshot());
        assert_eq!(ticked.shadow.unwrap().tasks[0].variant.as_deref(), Some("b"));
        assert!(ticked.plan.actions.is_empty(), "{:?}", ticked.plan.actions);
    }

    #[test]
    fn a_replacement_is_dry_run_on_the_last_snapshot_and_a_failing_one_is_refused() {
        let mut controller = controller(r#"{"tasks":[]}"#);
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        controller.tick(Duration::ZERO, snapshot());
        let broken = engine.compile("broken", answering("not json").as_bytes()).unwrap();
        assert!(controller.replace(broken, None).is_err());
        assert_eq!(controller.policy().module().name(), "test");
        let good = engine.compile("good", answering(r#"{"tasks":[]}"#).as_bytes()).unwrap();
        controller.replace(good, None).unwrap();
        assert_eq!(controller.policy().module().name(), "good");
    }
}
