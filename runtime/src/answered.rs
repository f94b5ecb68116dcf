//! How each request ended, told to whoever keeps metrics (a task's traffic window).

use std::sync::Arc;
use std::time::Duration;

/// How a request ended, in one word: what the runtime tells its metrics, what a
/// queue says of a request it dropped, what the load generator logs and what the
/// simulator counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Answered, in time or late.
    #[serde(rename = "ok")]
    Served,
    /// Refused at admission: queue full, too large, would answer late, no variant
    /// accurate enough.
    Rejected,
    /// Its deadline passed, or would pass before a batch started now answered it,
    /// before it ran.
    Expired,
    /// Its caller went away before it ran.
    Abandoned,
    /// It failed: its batch, or any other error.
    Failed,
}

impl Outcome {
    /// Its name in logs and labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Served => "ok",
            Outcome::Rejected => "rejected",
            Outcome::Expired => "expired",
            Outcome::Abandoned => "abandoned",
            Outcome::Failed => "failed",
        }
    }
}

/// How a request admitted to a model ended, with its latency where it was answered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answered {
    /// It was answered after `latency` (from admission); `late` when after its deadline.
    Served {
        /// From admission to answer.
        latency: Duration,
        /// Whether it ran past its deadline.
        late: bool,
    },
    /// Its batch failed.
    Failed,
    /// Its deadline passed before it ran.
    Expired,
    /// Its caller went away before it ran.
    Abandoned,
}

impl Answered {
    /// How it ended, in one word.
    pub fn outcome(&self) -> Outcome {
        match self {
            Answered::Served { .. } => Outcome::Served,
            Answered::Failed => Outcome::Failed,
            Answered::Expired => Outcome::Expired,
            Answered::Abandoned => Outcome::Abandoned,
        }
    }
}

/// Called once for every request admitted, when it ends; on the thread that ends it, so
/// it must be quick.
pub type AnswerHook = Arc<dyn Fn(Answered) + Send + Sync>;
