//! How each request ended, told to whoever keeps metrics (a task's traffic window).

use std::sync::Arc;
use std::time::Duration;

/// How a request admitted to a model ended.
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

/// Called once for every request admitted, when it ends; on the thread that ends it, so
/// it must be quick.
pub type AnswerHook = Arc<dyn Fn(Answered) + Send + Sync>;
