//! What a policy answers: per task, the knobs to change. A knob left out keeps its
//! value; the host clamps values out of range and reports what it changed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::snapshot::ServingKnobs;

/// The decision `decide` returns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Decision {
    /// Changes per task; tasks left out keep everything.
    #[serde(default)]
    pub tasks: Vec<TaskDecision>,
}

/// The knobs of one task to change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskDecision {
    /// The task.
    pub task: String,
    /// The variant to serve it (loaded and warmed first if it is not ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Largest batch to form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch_size: Option<u32>,
    /// Longest a request waits for a batch to fill, in µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue_delay_us: Option<u64>,
    /// Instances of the variant named (or, without one, of the variant serving): each
    /// a session with its own threads, holding its share of the budget. Added ones
    /// load and warm before they take batches; removed ones finish their batch first.
    /// For a variant not loaded, the instances it loads with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    /// Variants to load and warm without serving yet, so that a later switch to one
    /// costs no load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load: Vec<String>,
    /// Variants to unload, freeing their memory; they drain first. The one serving,
    /// and the one a switch goes to, cannot be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unload: Vec<String>,
    /// Instances of variants that do not serve, by name: one loaded to stand by is
    /// brought to them (warmed, holding memory but no cores until it serves), one not
    /// loaded loads with them. A later switch to it finds them warm.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub standby: BTreeMap<String, u32>,
}

impl TaskDecision {
    /// A decision for `task` that changes nothing yet.
    pub fn keep(task: impl Into<String>) -> Self {
        TaskDecision { task: task.into(), ..TaskDecision::default() }
    }

    /// A decision that switches `task` to `variant`, changing nothing else.
    pub fn switch(task: impl Into<String>, variant: impl Into<String>) -> Self {
        TaskDecision { variant: Some(variant.into()), ..TaskDecision::keep(task) }
    }

    /// A decision that sets `task`'s serving instances, changing nothing else.
    pub fn scale(task: impl Into<String>, instances: u32) -> Self {
        TaskDecision { instances: Some(instances), ..TaskDecision::keep(task) }
    }

    /// What `task` must change to be served with `want` rather than `have`.
    pub fn towards(task: impl Into<String>, want: &ServingKnobs, have: &ServingKnobs) -> Self {
        fn changed<T: PartialEq + Clone>(want: &T, have: &T) -> Option<T> {
            (want != have).then(|| want.clone())
        }
        TaskDecision {
            task: task.into(),
            variant: changed(&want.variant, &have.variant),
            max_batch_size: changed(&want.max_batch_size, &have.max_batch_size),
            max_queue_delay_us: changed(&want.max_queue_delay_us, &have.max_queue_delay_us),
            instances: changed(&want.instances, &have.instances),
            ..TaskDecision::default()
        }
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.variant.is_none()
            && self.max_batch_size.is_none()
            && self.max_queue_delay_us.is_none()
            && self.instances.is_none()
            && self.load.is_empty()
            && self.unload.is_empty()
            && self.standby.is_empty()
    }
}

/// The fields of a task's decision this version of the ABI knows; a host ignores
/// others, and says so (see [`UnknownFields`]).
pub const TASK_DECISION_FIELDS: [&str; 8] =
    ["task", "variant", "max_batch_size", "max_queue_delay_us", "instances", "load", "unload", "standby"];

/// The fields of a decision as a policy wrote it that this version of the ABI does
/// not know: a policy built for a newer ABI, or a misspelt knob, which would otherwise
/// be dropped without a word.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnknownFields {
    /// The first [`UnknownFields::NAMED`] of them, each with the task it was written for.
    pub named: Vec<String>,
    /// How many there are in all.
    pub count: usize,
}

impl UnknownFields {
    /// How many are named: a hostile decision may hold any number.
    pub const NAMED: usize = 16;

    /// Those of a decision's JSON (none where it is not a decision's shape), read once
    /// it decoded as a [`Decision`]: values are skipped, not decoded, so it costs no
    /// more than that decoding did.
    pub fn of(decision: &[u8]) -> UnknownFields {
        let mut deserializer = serde_json::Deserializer::from_slice(decision);
        let mut found = UnknownFields::default();
        match serde::de::DeserializeSeed::deserialize(TopKeys(&mut found), &mut deserializer) {
            Ok(()) => found,
            Err(_) => UnknownFields::default(),
        }
    }

    fn found(&mut self, field: impl FnOnce() -> String) {
        if self.named.len() < Self::NAMED {
            self.named.push(field());
        }
        self.count += 1;
    }
}

/// Visits a decision's keys, and those of each of its tasks, recording the unknown.
struct TopKeys<'a>(&'a mut UnknownFields);

impl<'de> serde::de::DeserializeSeed<'de> for TopKeys<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TopKeys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a decision")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "tasks" {
                // Read only once the decision decoded: its tasks' keys take less room
                // than the tasks did.
                for task in map.next_value::<Vec<TaskKeys>>()? {
                    for key in &task.unknown {
                        self.0.found(|| format!("`{key}` of task `{}`", task.name));
                    }
                    self.0.count += task.count - task.unknown.len();
                }
            } else {
                self.0.found(|| format!("`{key}` of the decision"));
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// A task decision's name, the first keys of it the ABI does not know, and how many
/// those are in all (values skipped).
struct TaskKeys {
    name: String,
    unknown: Vec<String>,
    count: usize,
}

impl<'de> Deserialize<'de> for TaskKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = TaskKeys;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a task decision")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<TaskKeys, A::Error> {
                let mut keys = TaskKeys { name: String::new(), unknown: Vec::new(), count: 0 };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "task" {
                        keys.name = map.next_value()?;
                        continue;
                    }
                    map.next_value::<serde::de::IgnoredAny>()?;
                    if !TASK_DECISION_FIELDS.contains(&key.as_str()) {
                        keys.count += 1;
                        if keys.unknown.len() < UnknownFields::NAMED {
                            keys.unknown.push(key);
                        }
                    }
                }
                Ok(keys)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// What a policy's `decide` may write: a decision, or why it could not make one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum PolicyOutput {
    /// The policy could not decide; the host keeps the last good knobs.
    Error {
        /// Why.
        error: String,
    },
    /// A decision.
    Decision(Decision),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_known_fields_are_those_a_task_decision_writes() {
        let full = TaskDecision {
            task: "t".into(),
            variant: Some("v".into()),
            max_batch_size: Some(8),
            max_queue_delay_us: Some(100),
            instances: Some(2),
            load: vec!["w".into()],
            unload: vec!["x".into()],
            standby: BTreeMap::from([("w".into(), 1)]),
        };
        let written = serde_json::to_value(&full).unwrap();
        let mut keys: Vec<&str> = written.as_object().unwrap().keys().map(String::as_str).collect();
        let mut known = TASK_DECISION_FIELDS.to_vec();
        keys.sort_unstable();
        known.sort_unstable();
        assert_eq!(keys, known);
        let decision = serde_json::to_vec(&json!({ "tasks": [written] })).unwrap();
        assert_eq!(UnknownFields::of(&decision), UnknownFields::default());
    }

    #[test]
    fn fields_the_abi_does_not_know_are_named_with_their_task() {
        let decision = br#"{
            "budget": {},
            "tasks": [{ "task": "a", "variant": "v", "max_batch": 4 }, { "priority": [1, 2], "task": "b" }]
        }"#;
        let found = UnknownFields::of(decision);
        assert_eq!(found.named, ["`budget` of the decision", "`max_batch` of task `a`", "`priority` of task `b`"]);
        assert_eq!(found.count, 3);
        // Named up to a bound, counted in full.
        let many: Vec<String> = (0..40).map(|i| format!(r#""k{i}": 0"#)).collect();
        let hostile = format!(r#"{{ "tasks": [{{ "task": "a", {} }}] }}"#, many.join(", "));
        let found = UnknownFields::of(hostile.as_bytes());
        assert_eq!((found.named.len(), found.count), (UnknownFields::NAMED, 40));
    }
}
