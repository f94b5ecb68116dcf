//! A policy module in service: its failures counted by kind, a failed instance
//! replaced by a fresh one, and after repeated failures the native fallback deciding
//! instead. Whatever the module does, a tick ends with a decision (empty when the
//! module's was discarded: the last good knobs stay).

use std::collections::BTreeMap;

use modelless_policy_abi::{Decision, ServingKnobs, Snapshot, TaskDecision};

use super::host::{PolicyInstance, PolicyModule};
use crate::error::{Cause, PolicyError};

/// Consecutive failures after which the native fallback takes over.
pub const DEFAULT_MAX_FAILURES: u32 = 3;

/// The native fallback: serve every task with the variant and knobs it was configured
/// with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeepConfigured {
    configured: BTreeMap<String, ServingKnobs>,
}

impl KeepConfigured {
    /// A fallback that keeps these knobs per task.
    pub fn new(configured: impl IntoIterator<Item = (String, ServingKnobs)>) -> Self {
        KeepConfigured { configured: configured.into_iter().collect() }
    }

    /// The decision that brings every task back to its configured knobs.
    pub fn decide(&self, snapshot: &Snapshot) -> Decision {
        let tasks = snapshot
            .tasks
            .iter()
            .filter_map(|task| {
                let want = self.configured.get(&task.name)?;
                Some(TaskDecision::towards(&task.name, want, &task.active)).filter(|d| !d.is_empty())
            })
            .collect();
        Decision { tasks }
    }
}

/// Who made a tick's decision.
#[derive(Clone, Debug, PartialEq)]
pub enum DecidedBy {
    /// The module.
    Module,
    /// Nobody: the module failed this tick, and its decision was discarded.
    Discarded(PolicyError),
    /// The native fallback, the module having failed too often.
    Fallback,
}

impl DecidedBy {
    /// How a recording names it: `module`, `fallback` or `discarded`.
    pub fn label(&self) -> &'static str {
        match self {
            DecidedBy::Module => "module",
            DecidedBy::Fallback => "fallback",
            DecidedBy::Discarded(_) => "discarded",
        }
    }
}

/// A tick's decision and who made it.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    /// The decision (empty when discarded).
    pub decision: Decision,
    /// Who made it.
    pub by: DecidedBy,
}

/// What a replacement did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reloaded {
    /// Whether the old instance's state went to the new one.
    pub carried_state: bool,
}

/// A module as it was: what a rollback puts back.
#[derive(Clone)]
pub struct RollbackPoint {
    /// The module.
    pub module: PolicyModule,
    /// Its parameters.
    pub parameters: Option<serde_json::Value>,
    /// Its state, when it carries state.
    pub state: Option<serde_json::Value>,
}

impl std::fmt::Debug for RollbackPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RollbackPoint").field("module", &self.module.digest()).finish_non_exhaustive()
    }
}

/// A module with its instance, its failure counts and the fallback.
pub struct GuardedPolicy {
    module: PolicyModule,
    parameters: Option<serde_json::Value>,
    instance: Option<PolicyInstance>,
    /// The state the instance saved after its last good decision, for the fresh
    /// instance that follows a failure (a trapped component cannot be entered again).
    saved_state: Option<serde_json::Value>,
    fallback: KeepConfigured,
    max_failures: u32,
    consecutive_failures: u32,
    failures: BTreeMap<&'static str, u64>,
    /// What the module warned of since [`GuardedPolicy::take_warnings`] was last called.
    warnings: Vec<String>,
}

/// `modelless.log` levels at or below this are warnings (0 error, 1 warn).
const WARNING_LEVEL: i32 = 1;
/// Warnings kept between two calls of [`GuardedPolicy::take_warnings`]: a module that
/// warns every tick cannot grow them without bound.
const MAX_WARNINGS: usize = 32;

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for GuardedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedPolicy").finish_non_exhaustive()
    }
}

impl GuardedPolicy {
    /// `module`, instantiated with `parameters` on its first tick.
    pub fn new(module: PolicyModule, parameters: Option<serde_json::Value>, fallback: KeepConfigured) -> Self {
        GuardedPolicy {
            module,
            parameters,
            instance: None,
            saved_state: None,
            fallback,
            max_failures: DEFAULT_MAX_FAILURES,
            consecutive_failures: 0,
            failures: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }

    /// What the module logged at warning level or above (through `modelless.log`)
    /// since the last call: the control loop shows it in the policy's status and logs.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Keeps the warnings among `instance`'s logs.
    fn keep_warnings(warnings: &mut Vec<String>, instance: &mut PolicyInstance) {
        let logged = instance.take_logs().into_iter().filter(|l| l.level <= WARNING_LEVEL).map(|l| l.message);
        warnings.extend(logged);
        let excess = warnings.len().saturating_sub(MAX_WARNINGS);
        warnings.drain(..excess);
    }

    /// Sets how many consecutive failures hand over to the fallback.
    pub fn with_max_failures(mut self, failures: u32) -> Self {
        self.max_failures = failures.max(1);
        self
    }

    /// The parameters its instances get.
    pub fn parameters(&self) -> Option<&serde_json::Value> {
        self.parameters.as_ref()
    }

    /// The module.
    pub fn module(&self) -> &PolicyModule {
        &self.module
    }

    /// Failures so far, by [kind](PolicyError::kind).
    pub fn failures(&self) -> &BTreeMap<&'static str, u64> {
        &self.failures
    }

    /// Whether the fallback decides now.
    pub fn on_fallback(&self) -> bool {
        self.consecutive_failures >= self.max_failures
    }

    /// This tick's decision.
    pub fn decide(&mut self, snapshot: &Snapshot) -> Decided {
        match serde_json::to_vec(snapshot) {
            Ok(json) => self.decide_encoded(snapshot, &json),
            Err(e) => self.failed(PolicyError::Encode { what: "the snapshot", source: Cause::new(e) }),
        }
    }

    /// This tick's decision, the snapshot already encoded as `json` (once a tick, for
    /// the policy, a shadow and the recording alike).
    pub fn decide_encoded(&mut self, snapshot: &Snapshot, json: &[u8]) -> Decided {
        if self.on_fallback() {
            return Decided { decision: self.fallback.decide(snapshot), by: DecidedBy::Fallback };
        }
        match self.module_decides(json) {
            Ok(decision) => {
                self.consecutive_failures = 0;
                Decided { decision, by: DecidedBy::Module }
            }
            Err(error) => self.failed(error),
        }
    }

    /// Counts a failure and discards the tick's decision.
    fn failed(&mut self, error: PolicyError) -> Decided {
        *self.failures.entry(error.kind()).or_default() += 1;
        self.consecutive_failures += 1;
        // A failed instance may be in any state: the next tick gets a fresh one.
        self.instance = None;
        tracing::warn!(
            policy = self.module.name(),
            policy_digest = self.module.digest(),
            kind = error.kind(),
            %error,
            "policy failed"
        );
        Decided { decision: Decision::default(), by: DecidedBy::Discarded(error) }
    }

    /// Replaces the module, as a hot reload does: the new one is instantiated and
    /// dry-run on `last_snapshot` first, and takes the old instance's state when both
    /// carry state and the new one accepts it (a module of another policy may not: it
    /// then starts fresh). On any other failure the old module stays and the error is
    /// returned.
    pub fn replace(
        &mut self,
        module: PolicyModule,
        parameters: Option<serde_json::Value>,
        last_snapshot: Option<&Snapshot>,
    ) -> Result<Reloaded, PolicyError> {
        let state = match (&mut self.instance, module.carries_state()) {
            (Some(old), true) if self.module.carries_state() => old.save_state().ok().flatten(),
            (None, true) => self.saved_state.clone(),
            _ => None,
        };
        let mut instance = module.instantiate(parameters.as_ref())?;
        let carried_state = match &state {
            Some(state) => match instance.load_state(state) {
                Ok(taken) => taken,
                Err(e) => {
                    tracing::info!(policy = module.name(), error = %e, "the new policy refused the old one's state");
                    instance = module.instantiate(parameters.as_ref())?;
                    false
                }
            },
            None => false,
        };
        if let Some(snapshot) = last_snapshot {
            instance.decide(snapshot)?;
            Self::keep_warnings(&mut self.warnings, &mut instance);
        }
        self.module = module;
        self.parameters = parameters;
        self.instance = Some(instance);
        self.saved_state = None;
        self.consecutive_failures = 0;
        Ok(Reloaded { carried_state })
    }

    /// What [`GuardedPolicy::restore`] needs to put this module back as it is now:
    /// the module, its parameters and its state.
    pub fn rollback_point(&mut self) -> RollbackPoint {
        let state = match (&mut self.instance, self.module.carries_state()) {
            (Some(instance), true) => instance.save_state().ok().flatten(),
            (None, true) => self.saved_state.clone(),
            _ => None,
        };
        RollbackPoint { module: self.module.clone(), parameters: self.parameters.clone(), state }
    }

    /// Puts back the module of `point` with its parameters and the state it had,
    /// dry-run on `last_snapshot`; on failure the module deciding stays.
    pub fn restore(&mut self, point: RollbackPoint, last_snapshot: Option<&Snapshot>) -> Result<(), PolicyError> {
        let mut instance = point.module.instantiate(point.parameters.as_ref())?;
        if let Some(state) = &point.state
            && !instance.load_state(state)?
        {
            tracing::info!(policy = point.module.name(), "the module put back did not take its own state");
        }
        if let Some(snapshot) = last_snapshot {
            instance.decide(snapshot)?;
            Self::keep_warnings(&mut self.warnings, &mut instance);
        }
        self.module = point.module;
        self.parameters = point.parameters;
        self.instance = Some(instance);
        self.saved_state = None;
        self.consecutive_failures = 0;
        Ok(())
    }

    fn module_decides(&mut self, json: &[u8]) -> Result<Decision, PolicyError> {
        let mut instance = match self.instance.take() {
            Some(instance) => instance,
            None => self.fresh_instance()?,
        };
        let decided = instance.decide_json(json);
        Self::keep_warnings(&mut self.warnings, &mut instance);
        if decided.is_ok() && self.module.carries_state() {
            match instance.save_state() {
                Ok(state) => self.saved_state = state,
                Err(error) => {
                    // The decision stands; the instance, in whatever state it is, goes.
                    *self.failures.entry(error.kind()).or_default() += 1;
                    tracing::warn!(policy = self.module.name(), kind = error.kind(), %error, "saving its state failed");
                    return decided;
                }
            }
        }
        // A failed instance may be in any state: `failed` sees that none is kept.
        self.instance = Some(instance);
        decided
    }

    /// An instance to replace one that failed, given the state the last one saved.
    fn fresh_instance(&mut self) -> Result<PolicyInstance, PolicyError> {
        let mut instance = self.module.instantiate(self.parameters.as_ref())?;
        if let Some(state) = &self.saved_state
            && let Err(error) = instance.load_state(state)
        {
            tracing::warn!(policy = self.module.name(), %error, "a fresh instance refused the saved state");
            instance = self.module.instantiate(self.parameters.as_ref())?;
        }
        Ok(instance)
    }
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::TaskSnapshot;

    use super::*;
    use crate::policy::host::{HostConfig, PolicyEngine};
    use crate::policy::test_modules::{EMPTY_DECISION, policy};

    fn snapshot(variant: &str) -> Snapshot {
        let active = ServingKnobs { variant: variant.into(), max_batch_size: 8, ..ServingKnobs::default() };
        Snapshot {
            tasks: vec![TaskSnapshot { name: "classify".into(), active, ..Default::default() }],
            ..Default::default()
        }
    }

    fn guarded(wat: &str) -> GuardedPolicy {
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let module = engine.compile("test", wat.as_bytes()).unwrap();
        let configured = ServingKnobs { variant: "small".into(), max_batch_size: 8, ..ServingKnobs::default() };
        GuardedPolicy::new(module, None, KeepConfigured::new([("classify".to_string(), configured)]))
    }

    fn compile(wat: &str) -> PolicyModule {
        PolicyEngine::new(HostConfig::default()).unwrap().compile("test", wat.as_bytes()).unwrap()
    }

    #[test]
    fn a_replacement_is_dry_run_first_and_takes_the_state_of_the_one_it_replaces() {
        // Saves the 7 bytes `{"n":1}`.
        let saves = policy(
            EMPTY_DECISION,
            r#"(data (i32.const 1400) "{\"n\":1}")
               (func (export "save_state") (result i64) (i64.or (i64.shl (i64.const 1400) (i64.const 32)) (i64.const 7)))
               (func (export "load_state") (param i32 i32) (result i64) (i64.const 0))"#,
        );
        // Decides only once it was given 7 bytes of state; `{}` at 1500 answers load_state.
        let needs_state = policy(
            &format!("(if (i32.ne (global.get $loaded) (i32.const 7)) (then (unreachable))) {EMPTY_DECISION}"),
            r#"(global $loaded (mut i32) (i32.const 0))
               (data (i32.const 1500) "{}")
               (func (export "save_state") (result i64) (i64.const 0))
               (func (export "load_state") (param i32 i32) (result i64)
                   (global.set $loaded (local.get 1))
                   (i64.or (i64.shl (i64.const 1500) (i64.const 32)) (i64.const 2)))"#,
        );
        let mut guarded = guarded(&saves);
        assert_eq!(guarded.decide(&snapshot("small")).by, DecidedBy::Module);
        // Without the state the dry run traps: the old module stays.
        assert!(matches!(
            guarded.replace(
                compile(&needs_state.replace("(func (export \"save_state\") (result i64) (i64.const 0))", "")),
                None,
                Some(&snapshot("small"))
            ),
            Err(PolicyError::Trap(_))
        ));
        let reloaded = guarded.replace(compile(&needs_state), None, None).unwrap();
        assert_eq!(reloaded, Reloaded { carried_state: true });
        assert_eq!(guarded.decide(&snapshot("small")).by, DecidedBy::Module);
    }

    #[test]
    fn a_replacement_that_refuses_the_old_state_starts_fresh() {
        let state = r#"(data (i32.const 1400) "{\"n\":1}")
               (func (export "save_state") (result i64) (i64.or (i64.shl (i64.const 1400) (i64.const 32)) (i64.const 7)))"#;
        let saves = policy(
            EMPTY_DECISION,
            &format!("{state} (func (export \"load_state\") (param i32 i32) (result i64) (i64.const 0))"),
        );
        // Answers `{"error":"nope"}` (16 bytes at 1500) to any state.
        let refuses = policy(
            EMPTY_DECISION,
            &format!(
                r#"{state}
                   (data (i32.const 1500) "{{\"error\":\"nope\"}}")
                   (func (export "load_state") (param i32 i32) (result i64)
                       (i64.or (i64.shl (i64.const 1500) (i64.const 32)) (i64.const 16)))"#
            ),
        );
        let mut guarded = guarded(&saves);
        guarded.decide(&snapshot("small"));
        let reloaded = guarded.replace(compile(&refuses), None, Some(&snapshot("small"))).unwrap();
        assert_eq!(reloaded, Reloaded { carried_state: false });
        assert_eq!(guarded.decide(&snapshot("small")).by, DecidedBy::Module);
    }

    #[test]
    fn a_broken_replacement_leaves_the_old_module_deciding() {
        let mut guarded = guarded(&policy(EMPTY_DECISION, ""));
        guarded.decide(&snapshot("small"));
        let broken = compile(&policy("(unreachable)", ""));
        assert!(guarded.replace(broken, None, Some(&snapshot("small"))).is_err());
        assert_eq!(guarded.decide(&snapshot("small")).by, DecidedBy::Module);
        assert!(guarded.failures().is_empty(), "a refused reload is not a failure of the serving module");
    }

    #[test]
    fn failures_are_counted_and_discarded_until_the_fallback_takes_over() {
        let mut policy = guarded(&policy("(unreachable)", ""));
        for tick in 1..=3 {
            let decided = policy.decide(&snapshot("large"));
            assert!(matches!(decided.by, DecidedBy::Discarded(PolicyError::Trap(_))), "tick {tick}: {decided:?}");
            assert_eq!(decided.decision, Decision::default(), "the last good knobs stay");
        }
        assert_eq!(policy.failures().get("trap"), Some(&3));
        assert!(policy.on_fallback());
        let decided = policy.decide(&snapshot("large"));
        assert_eq!(decided.by, DecidedBy::Fallback);
        assert_eq!(decided.decision.tasks[0].variant.as_deref(), Some("small"), "back to the configured variant");
        assert_eq!(decided.decision.tasks[0].max_batch_size, None, "unchanged knobs are left out");
    }

    #[test]
    fn a_good_module_decides_and_an_occasional_failure_does_not_hand_over() {
        // Traps on each instance's second call: a global counts calls (a fresh instance starts at 0).
        let wat = policy(
            &format!(
                "(global.set $calls (i32.add (global.get $calls) (i32.const 1)))
                 (if (i32.eq (global.get $calls) (i32.const 2)) (then (unreachable)))
                 {EMPTY_DECISION}"
            ),
            "(global $calls (mut i32) (i32.const 0))",
        );
        let mut policy = guarded(&wat);
        let by: Vec<DecidedBy> = (0..6).map(|_| policy.decide(&snapshot("large")).by).collect();
        assert_eq!(by[0], DecidedBy::Module);
        assert!(matches!(by[1], DecidedBy::Discarded(_)));
        assert_eq!(by[2], DecidedBy::Module, "a fresh instance serves the next tick");
        assert!(!policy.on_fallback());
        assert_eq!(policy.failures().get("trap"), Some(&3), "ticks 2, 4 and 6");
    }
}
