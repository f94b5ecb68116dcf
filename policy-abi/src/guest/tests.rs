use super::*;
use crate::decision::{PolicyOutput, TaskDecision};

/// Switches every task to the variant its parameters name, and counts ticks; fails a
/// tick with no task.
struct Fixed {
    variant: String,
    ticks: u64,
}

#[derive(Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct FixedParameters {
    /// The variant every task serves with.
    variant: String,
}

impl Policy for Fixed {
    type Parameters = FixedParameters;
    type State = u64;

    fn new(parameters: FixedParameters) -> Result<Self, Error> {
        if parameters.variant.is_empty() {
            return Err("the variant is empty".into());
        }
        Ok(Fixed { variant: parameters.variant, ticks: 0 })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        if snapshot.tasks.is_empty() {
            return Err("no task to decide for".into());
        }
        self.ticks += 1;
        Ok(Decision { tasks: snapshot.tasks.iter().map(|t| TaskDecision::switch(&t.name, &self.variant)).collect() })
    }

    fn state(&mut self) -> Option<&mut u64> {
        Some(&mut self.ticks)
    }
}

/// Takes nothing, keeps nothing.
struct Idle;

impl Policy for Idle {
    type Parameters = NoParameters;
    type State = NoState;

    fn new(_: NoParameters) -> Result<Self, Error> {
        Ok(Idle)
    }

    fn decide(&mut self, _: &Snapshot) -> Result<Decision, Error> {
        Ok(Decision::default())
    }
}

fn snapshot(tasks: usize) -> Vec<u8> {
    let task = crate::snapshot::TaskSnapshot { name: "classify".into(), ..Default::default() };
    let snapshot = Snapshot { tasks: vec![task; tasks], ..Snapshot::default() };
    serde_json::to_vec(&snapshot).unwrap()
}

fn output(json: &[u8]) -> PolicyOutput {
    serde_json::from_slice(json).unwrap()
}

fn error(json: &[u8]) -> String {
    match output(json) {
        PolicyOutput::Error { error } => error,
        other => panic!("{other:?}"),
    }
}

fn fixed(variant: &str) -> Hosted<Fixed> {
    let mut hosted = Hosted::default();
    assert_eq!(hosted.init_json(format!(r#"{{"variant": "{variant}"}}"#).as_bytes()), b"{}");
    hosted
}

#[test]
fn json_in_json_out() {
    let PolicyOutput::Decision(decision) = output(&fixed("small").decide_json(&snapshot(1))) else { panic!() };
    assert_eq!(decision.tasks[0].variant.as_deref(), Some("small"));
    assert_eq!(decision.tasks[0].max_batch_size, None);
}

#[test]
fn every_failure_is_answered_with_an_error_naming_it() {
    let mut hosted = fixed("small");
    assert!(error(&hosted.decide_json(b"not json")).starts_with("invalid snapshot"));
    assert_eq!(error(&hosted.decide_json(&snapshot(0))), "no task to decide for");
    assert!(error(&hosted.load_state_json(br#""many""#)).starts_with("invalid saved state"));
    let mut fresh = Hosted::<Fixed>::default();
    let missing = error(&fresh.init_json(b"{}"));
    assert!(missing.starts_with("invalid parameters") && missing.contains("variant"), "{missing}");
    let unknown = error(&fresh.init_json(br#"{"variant": "a", "speed": 1}"#));
    assert!(unknown.contains("unknown field `speed`"), "{unknown}");
    assert_eq!(error(&fresh.init_json(br#"{"variant": ""}"#)), "the variant is empty");
    // Never made from parameters: made from their defaults, which it refuses.
    assert_eq!(error(&fresh.decide_json(&snapshot(1))), "the variant is empty");
}

#[test]
fn state_survives_a_save_and_a_load() {
    let mut old = fixed("small");
    old.decide_json(&snapshot(1));
    old.decide_json(&snapshot(1));
    let mut new = fixed("large");
    assert_eq!(new.load_state_json(&old.save_state_json()), b"{}");
    assert_eq!(new.policy().unwrap().ticks, 2);
    assert_eq!(Hosted::<Fixed>::default().save_state_json(), b"null", "nothing made, nothing to save");
}

#[test]
fn a_policy_without_parameters_or_state_takes_an_empty_table_and_any_saved_state() {
    let mut idle = Hosted::<Idle>::default();
    assert_eq!(idle.init_json(b"{}"), b"{}");
    assert!(matches!(output(&idle.init_json(br#"{"x": 1}"#)), PolicyOutput::Error { .. }));
    assert_eq!(idle.save_state_json(), b"null");
    assert_eq!(idle.load_state_json(br#"{"ticks": [1, 2]}"#), b"{}", "what another policy saved");
    assert!(matches!(output(&Hosted::<Idle>::default().decide_json(&snapshot(1))), PolicyOutput::Decision(_)));
}

#[test]
fn parameters_written_as_json_configure_it_as_the_config_would() {
    assert_eq!(configured::<Fixed>(serde_json::json!({"variant": "small"})).unwrap().variant, "small");
    let wrong = configured::<Fixed>(serde_json::json!({"variant": 1})).err().unwrap();
    assert!(wrong.message().starts_with("invalid parameters: invalid type: integer"), "{wrong:?}");
}

#[test]
fn the_parameters_schema_documents_their_fields() {
    let schema: serde_json::Value = serde_json::from_slice(&Hosted::<Fixed>::parameters_schema_json()).unwrap();
    assert_eq!(schema["properties"]["variant"]["type"], "string");
    assert_eq!(schema["properties"]["variant"]["description"], "The variant every task serves with.");
    assert_eq!(schema["required"], serde_json::json!(["variant"]));
}
