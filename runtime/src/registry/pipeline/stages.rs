//! One request's way through a pipeline's stages: items submitted under what is left
//! of its deadline, priced before they run, timed as they answer.

use std::time::{Duration, Instant};

use super::price::{StagePrices, units};
use super::{FindTask, StageTime};
use crate::error::Error;
use crate::request::{Inputs, Output, Slo};

/// A request's way through the stages.
pub struct Stages<'a> {
    pub(super) find: &'a FindTask,
    pub(super) prices: &'a StagePrices,
    pub(super) deadline: Option<Instant>,
    pub(super) slo: Slo,
    pub(super) pipeline: &'a str,
    pub(super) times: Vec<StageTime>,
}

impl std::fmt::Debug for Stages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stages").field("pipeline", &self.pipeline).field("deadline", &self.deadline).finish()
    }
}

impl Stages<'_> {
    /// The pipeline's name.
    pub fn pipeline(&self) -> &str {
        self.pipeline
    }

    /// What is left of the request's time, `None` without a deadline.
    pub fn time_left(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Runs `items` through `task`, all submitted before any is waited for, and returns
    /// their answers in the items' order. Each item inherits the request's deadline
    /// (what is left of it) and priority. No items, no work: an empty answer.
    ///
    /// Before anything is submitted the items are priced by their size at what the
    /// stage's earlier answers cost per unit (pixels, elements); when that work alone
    /// would outlast the deadline the request is refused with
    /// [`Error::WouldMissDeadline`] and the stage runs nothing.
    pub fn run(&mut self, task: &str, items: Vec<Inputs>) -> Result<Vec<Output>, Error> {
        let started = Instant::now();
        let count = items.len();
        let mut answers = Vec::with_capacity(count);
        let sizes: Vec<f64> = items.iter().map(units).collect();
        if count > 0 {
            let stage = (self.find)(task)?;
            let slo = match self.time_left() {
                Some(left) if left.is_zero() => {
                    return Err(Error::DeadlineExceeded { model: self.pipeline.to_string() });
                }
                Some(left) => {
                    self.check_price(task, &sizes, left)?;
                    Slo { latency: Some(left), min_accuracy: None, ..self.slo }
                }
                None => Slo { min_accuracy: None, ..self.slo },
            };
            let tickets = items.into_iter().map(|item| stage.submit(item, &slo)).collect::<Result<Vec<_>, _>>()?;
            for ticket in tickets {
                answers.push(ticket.wait()?);
            }
            self.prices.learn(task, &sizes, &answers);
        }
        let mut variants: Vec<String> = Vec::new();
        for answer in &answers {
            if !variants.iter().any(|v| **v == *answer.model) {
                variants.push(answer.model.to_string());
            }
        }
        self.times.push(StageTime { task: task.to_string(), items: count, elapsed: started.elapsed(), variants });
        Ok(answers)
    }

    /// Refuses items whose predicted work through `task` outlasts `left`.
    fn check_price(&self, task: &str, sizes: &[f64], left: Duration) -> Result<(), Error> {
        let Some(predicted) = self.prices.predict(task, sizes.iter().sum()) else { return Ok(()) };
        if predicted <= left {
            return Ok(());
        }
        Err(Error::WouldMissDeadline {
            model: format!("{}/{task}", self.pipeline),
            predicted,
            left,
            retry_after: predicted - left,
        })
    }
}
