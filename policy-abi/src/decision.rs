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
