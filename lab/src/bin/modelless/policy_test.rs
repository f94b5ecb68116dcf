//! `modelless policy test P.wasm EXPECT.toml…`: a policy's expectations on snapshots,
//! run against the built module in the runtime's sandbox and limits.
//!
//! An expectations file (TOML) names its snapshots (bare snapshots or a control
//! loop's recorded ticks, JSON Lines, relative to the file), the parameters the module
//! is made with, and per tick (its index in the file) what the decision must hold for
//! each task it names:
//!
//! ```toml
//! snapshots = "../fixtures/load-changes.jsonl"
//! parameters = { step_up_after_ms = 3000 }
//!
//! [[tick]]
//! at = 3
//! tasks.classify = { variant = "mobilenetv2-0.5", instances = 2 }
//! tasks.detect = { keep = true }          # left out, or changing nothing
//!
//! [[tick]]
//! at = 4
//! tasks.classify = { unset = ["variant"] } # decides no switch
//!
//! [[tick]]
//! at = 9
//! error = "no profile"                     # decide fails, with this in its message
//! ```
//!
//! The module decides on every snapshot in order, as the control loop would call it,
//! so that its state carries from tick to tick.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use modelless::policy_abi::{Decision, TASK_DECISION_FIELDS, TaskDecision};
use modelless_runtime::policy::{PolicyEngine, read_ticks};
use serde::Deserialize;

/// An expectations file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectations {
    /// The snapshots, relative to the file.
    snapshots: PathBuf,
    /// What the module is made with: its `[policy.parameters]`.
    parameters: Option<toml::Table>,
    /// What each tick's decision holds.
    #[serde(default)]
    tick: Vec<TickExpectation>,
}

/// What one tick's decision must hold.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TickExpectation {
    /// The snapshot's index in the file, from 0.
    at: usize,
    /// Per task: the fields its decision sets, `keep = true`, or `unset = [fields]`.
    #[serde(default)]
    tasks: BTreeMap<String, toml::Table>,
    /// Words `decide`'s error must contain: the tick must fail.
    error: Option<String>,
}

/// One expectation that did not hold.
#[derive(Debug, PartialEq)]
pub struct Miss {
    /// The tick.
    pub at: usize,
    /// What was expected, and what the module did.
    pub what: String,
}

/// Runs every expectations file against `module`; prints each tick checked and each
/// miss, and fails when any expectation did not hold.
pub fn run(engine: &Arc<PolicyEngine>, module: &Path, files: &[PathBuf]) -> anyhow::Result<()> {
    let compiled = engine.compile_file(module)?;
    let mut missed = 0;
    for file in files {
        let expectations: Expectations =
            toml::from_str(&std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?)
                .with_context(|| format!("{} is not an expectations file", file.display()))?;
        let snapshots = file.parent().unwrap_or(Path::new(".")).join(&expectations.snapshots);
        let ticks = read_ticks(&snapshots).with_context(|| format!("cannot read {}", snapshots.display()))?;
        let parameters = expectations.parameters.as_ref().map(serde_json::to_value).transpose()?;
        let mut instance = compiled.instantiate(parameters.as_ref()).map_err(|e| {
            anyhow::Error::new(e).context(format!("{}: the module refused its parameters", file.display()))
        })?;
        let decided: Vec<Result<Decision, String>> =
            ticks.iter().map(|(snapshot, _)| instance.decide(snapshot).map_err(|e| e.to_string())).collect();
        let misses = check(&expectations.tick, &decided)?;
        println!("{}: {} ticks, {} expectations", file.display(), decided.len(), expectations.tick.len());
        for miss in &misses {
            println!("  tick {}: {}", miss.at, miss.what);
        }
        missed += misses.len();
    }
    anyhow::ensure!(missed == 0, "{missed} expectations did not hold");
    println!("ok");
    Ok(())
}

/// The expectations of `ticks` that `decided` (the module's answer at each tick) does
/// not meet; an error for an expectation that cannot be checked (a tick past the
/// snapshots, a field no decision has).
fn check(ticks: &[TickExpectation], decided: &[Result<Decision, String>]) -> anyhow::Result<Vec<Miss>> {
    let mut misses = Vec::new();
    for expected in ticks {
        let at = expected.at;
        let Some(answer) = decided.get(at) else {
            anyhow::bail!("tick {at}: there are only {} snapshots", decided.len());
        };
        let mut miss = |what: String| misses.push(Miss { at, what });
        let decision = match (answer, &expected.error) {
            (Err(error), Some(words)) if error.contains(words.as_str()) => continue,
            (Err(error), _) => {
                miss(format!("decide failed: {error}"));
                continue;
            }
            (Ok(decision), Some(words)) => {
                miss(format!(
                    "expected decide to fail with `{words}`, it decided {}",
                    serde_json::to_string(decision)?
                ));
                continue;
            }
            (Ok(decision), None) => decision,
        };
        for (task, fields) in &expected.tasks {
            let found = decision.tasks.iter().find(|t| &t.task == task).filter(|t| !t.is_empty());
            for what in task_misses(task, fields, found)? {
                miss(what);
            }
        }
    }
    Ok(misses)
}

/// What `found` (the decision of `task`, `None` where it is left out or changes
/// nothing) misses of `fields`.
fn task_misses(task: &str, fields: &toml::Table, found: Option<&TaskDecision>) -> anyhow::Result<Vec<String>> {
    let decided = serde_json::to_value(found.cloned().unwrap_or_else(|| TaskDecision::keep(task)))?;
    let mut misses = Vec::new();
    for (field, value) in fields {
        match field.as_str() {
            "keep" => {
                if value.as_bool() == Some(true) && found.is_some() {
                    misses.push(format!("task `{task}`: expected no change, it decided {decided}"));
                }
            }
            "unset" => {
                for unset in value.as_array().into_iter().flatten().filter_map(|f| f.as_str()) {
                    known(task, unset)?;
                    if let Some(set) = decided.get(unset) {
                        misses.push(format!("task `{task}`, field `{unset}`: expected unset, decided {set}"));
                    }
                }
            }
            field => {
                known(task, field)?;
                let want = serde_json::to_value(value)?;
                match decided.get(field) {
                    Some(got) if *got == want => {}
                    Some(got) => misses.push(format!("task `{task}`, field `{field}`: expected {want}, decided {got}")),
                    None => misses.push(format!("task `{task}`, field `{field}`: expected {want}, decided none")),
                }
            }
        }
    }
    Ok(misses)
}

fn known(task: &str, field: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        TASK_DECISION_FIELDS.contains(&field) && field != "task",
        "task `{task}`: `{field}` is not a decision field ({})",
        TASK_DECISION_FIELDS.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expectations(text: &str) -> Vec<TickExpectation> {
        let file: Expectations = toml::from_str(&format!("snapshots = \"s.jsonl\"\n{text}")).unwrap();
        file.tick
    }

    fn decided(tasks: Vec<TaskDecision>) -> Result<Decision, String> {
        Ok(Decision { tasks })
    }

    #[test]
    fn a_wrong_expectation_names_its_tick_task_and_field() {
        let ticks = expectations(
            "[[tick]]\nat = 1\ntasks.classify = { variant = \"large\", instances = 2 }\n\
             tasks.detect = { keep = true }\n",
        );
        let answers = vec![
            decided(vec![]),
            decided(vec![
                TaskDecision { instances: Some(2), ..TaskDecision::switch("classify", "small") },
                TaskDecision::keep("detect"),
            ]),
        ];
        let misses = check(&ticks, &answers).unwrap();
        assert_eq!(
            misses,
            vec![Miss {
                at: 1,
                what: "task `classify`, field `variant`: expected \"large\", decided \"small\"".into()
            }]
        );
    }

    #[test]
    fn keep_unset_and_errors_are_checked() {
        let ticks = expectations(
            "[[tick]]\nat = 0\ntasks.classify = { keep = true }\n[[tick]]\nat = 1\n\
             tasks.classify = { unset = [\"variant\"] }\n[[tick]]\nat = 2\nerror = \"no profile\"\n",
        );
        let right = vec![
            decided(vec![TaskDecision::keep("classify")]),
            decided(vec![TaskDecision::scale("classify", 3)]),
            Err("no profile for `small`".into()),
        ];
        assert_eq!(check(&ticks, &right).unwrap(), vec![]);
        let wrong = vec![
            decided(vec![TaskDecision::scale("classify", 3)]),
            decided(vec![TaskDecision::switch("classify", "small")]),
            decided(vec![]),
        ];
        let misses: Vec<String> = check(&ticks, &wrong).unwrap().into_iter().map(|m| m.what).collect();
        assert_eq!(misses.len(), 3, "{misses:?}");
        assert!(misses[0].starts_with("task `classify`: expected no change"), "{misses:?}");
        assert_eq!(misses[1], "task `classify`, field `variant`: expected unset, decided \"small\"");
        assert!(misses[2].starts_with("expected decide to fail with `no profile`"), "{misses:?}");
    }

    #[test]
    fn an_expectation_that_cannot_be_checked_is_an_error() {
        let past = expectations("[[tick]]\nat = 5\n");
        assert!(check(&past, &[decided(vec![])]).unwrap_err().to_string().contains("only 1 snapshots"));
        let unknown = expectations("[[tick]]\nat = 0\ntasks.classify = { varient = \"a\" }\n");
        let error = check(&unknown, &[decided(vec![])]).unwrap_err().to_string();
        assert!(error.contains("`varient` is not a decision field"), "{error}");
    }
}
