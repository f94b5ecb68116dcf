//! How a model is started and how it admits requests.

use std::sync::Arc;

use modelless_policy_abi::LatencyFit;
use serde::{Deserialize, Serialize};

use crate::answered::AnswerHook;
use crate::preprocess::ImagePreprocess;
use crate::warmup::WarmupConfig;

/// How a model admits a request that carries a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Admission {
    /// By its profiled batch cost: refused at once when it would be answered late.
    Predictive {
        /// Measured batch time over the profile's prediction, lately.
        correction: f64,
        /// What predictions are stretched by, as answers overran them lately (1: not).
        margin: f64,
    },
    /// Without a profile: queued while there is room, and answered
    /// `DeadlineExceeded` if its deadline passes before it runs.
    QueueRoom,
}

/// What a model is doing before it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPhase {
    /// Its sessions are being created.
    Loading,
    /// Its sessions run warm-up batches.
    Warming,
}

/// Called as a model moves through its load phases.
pub type PhaseCallback = Arc<dyn Fn(LoadPhase) + Send + Sync>;

/// How to start a model, beyond its backend, instances and batching.
#[derive(Clone)]
pub struct StartOptions {
    /// Task the model serves as a variant, named in its answers.
    pub task: Option<Arc<str>>,
    /// Version named in its answers.
    pub version: u64,
    /// Warm-up before the model takes requests.
    pub warmup: WarmupConfig,
    /// Told of each load phase.
    pub on_phase: Option<PhaseCallback>,
    /// Told how each request ends.
    pub on_answer: Option<AnswerHook>,
    /// The most rows a request may hold, when more than the batching's
    /// `max_batch_size` (which the device's memory lowered): larger requests are
    /// refused, those between the two split into batches that fit.
    pub max_request_rows: Option<usize>,
    /// Class labels its answers classify with.
    pub labels: Option<Arc<[String]>>,
    /// How images are made into its image input, where it takes images.
    pub preprocess: Option<Arc<ImagePreprocess>>,
    /// Its profiled batch latency. With it, a request that would be answered after
    /// its deadline is refused at admission, and one that could no longer make it
    /// leaves the queue unrun; without it, only deadlines already passed count.
    pub latency_fit: Option<LatencyFit>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartOptions").field("task", &self.task).finish_non_exhaustive()
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            task: None,
            version: 1,
            warmup: WarmupConfig::disabled(),
            on_phase: None,
            on_answer: None,
            max_request_rows: None,
            labels: None,
            preprocess: None,
            latency_fit: None,
        }
    }
}
