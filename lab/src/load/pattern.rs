//! Offered load, second by second: how many requests per second a load pattern asks
//! for in each second of a run.

use serde::{Deserialize, Serialize};

use super::LoadError;
use super::bounds::{non_negative, within_run};
use super::trace::TraceConfig;

/// A load pattern. Each yields a finite run: `rates()` gives its requests per second,
/// one figure per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pattern {
    /// `rate` requests per second for `duration_s` seconds.
    Constant {
        /// Requests per second.
        rate: f64,
        /// Length of the run, in s.
        duration_s: u32,
    },
    /// From `start`, `step` more every `interval_s` seconds, while the rate stays at or
    /// below `stop`.
    Linear {
        /// First rate, requests per second.
        start: f64,
        /// Added at each step.
        step: f64,
        /// Seconds between steps.
        interval_s: u32,
        /// Highest rate; the run ends after the last step at or below it.
        stop: f64,
    },
    /// From `start`, multiplied by `factor` every `interval_s` seconds, while the rate
    /// stays at or below `stop`.
    Exponential {
        /// First rate, requests per second.
        start: f64,
        /// Growth per step (above 1).
        factor: f64,
        /// Seconds between steps.
        interval_s: u32,
        /// Highest rate; the run ends after the last step at or below it.
        stop: f64,
    },
    /// A recorded or synthetic trace of requests per second, reshaped.
    Trace(TraceConfig),
}

impl Pattern {
    /// Requests per second in each second of the run.
    pub fn rates(&self) -> Result<Vec<f64>, LoadError> {
        match self {
            Pattern::Constant { rate, duration_s } => {
                non_negative("rate", *rate)?;
                within_run("constant: `duration_s`", *duration_s as usize)?;
                Ok(vec![*rate; *duration_s as usize])
            }
            Pattern::Linear { start, step, interval_s, stop } => {
                if step.is_nan() || *step <= 0.0 {
                    return Err(LoadError::invalid("linear: `step` must be above 0"));
                }
                steps(*start, *interval_s, *stop, |rate| rate + step)
            }
            Pattern::Exponential { start, factor, interval_s, stop } => {
                if factor.is_nan() || *factor <= 1.0 || start.is_nan() || *start <= 0.0 {
                    return Err(LoadError::invalid("exponential: `factor` must be above 1 and `start` above 0"));
                }
                steps(*start, *interval_s, *stop, |rate| rate * factor)
            }
            Pattern::Trace(trace) => trace.rates(),
        }
    }
}

/// Rates that hold `interval_s` seconds each, from `start` through `next`, while at or
/// below `stop`.
fn steps(start: f64, interval_s: u32, stop: f64, next: impl Fn(f64) -> f64) -> Result<Vec<f64>, LoadError> {
    non_negative("start", start)?;
    non_negative("stop", stop)?;
    if interval_s == 0 {
        return Err(LoadError::invalid("`interval_s` must be at least 1"));
    }
    let mut rates = Vec::new();
    let mut rate = start;
    // A relative tolerance, so that 0.1 + 0.2-style sums still reach `stop`.
    while rate <= stop * (1.0 + 1e-9) {
        within_run("the steps up to `stop`", rates.len() + interval_s as usize)?;
        rates.extend(std::iter::repeat_n(rate, interval_s as usize));
        rate = next(rate);
    }
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_holds_its_rate_for_its_duration() {
        let rates = Pattern::Constant { rate: 12.5, duration_s: 4 }.rates().unwrap();
        assert_eq!(rates, vec![12.5; 4]);
    }

    #[test]
    fn linear_steps_up_each_interval_until_the_stop() {
        let rates = Pattern::Linear { start: 10.0, step: 5.0, interval_s: 2, stop: 20.0 }.rates().unwrap();
        assert_eq!(rates, vec![10.0, 10.0, 15.0, 15.0, 20.0, 20.0]);
        let rates = Pattern::Linear { start: 0.1, step: 0.1, interval_s: 1, stop: 0.3 }.rates().unwrap();
        assert_eq!(rates.len(), 3, "a stop reached by adding decimals counts: {rates:?}");
    }

    #[test]
    fn exponential_multiplies_each_interval_until_the_stop() {
        let rates = Pattern::Exponential { start: 2.0, factor: 2.0, interval_s: 3, stop: 20.0 }.rates().unwrap();
        assert_eq!(rates, [2.0, 4.0, 8.0, 16.0].iter().flat_map(|r| [*r; 3]).collect::<Vec<_>>());
    }

    #[test]
    fn patterns_that_would_never_end_or_make_no_sense_are_refused() {
        let bad = [
            Pattern::Linear { start: 1.0, step: 0.0, interval_s: 1, stop: 5.0 },
            Pattern::Linear { start: 1.0, step: 1.0, interval_s: 0, stop: 5.0 },
            Pattern::Exponential { start: 1.0, factor: 1.0, interval_s: 1, stop: 5.0 },
            Pattern::Exponential { start: 0.0, factor: 2.0, interval_s: 1, stop: 5.0 },
            Pattern::Constant { rate: -1.0, duration_s: 3 },
            Pattern::Constant { rate: f64::NAN, duration_s: 3 },
        ];
        for pattern in bad {
            assert!(matches!(pattern.rates(), Err(LoadError::Invalid(_))), "{pattern:?}");
        }
    }

    #[test]
    fn patterns_read_from_toml_by_kind() {
        let pattern: Pattern =
            toml::from_str("kind = \"linear\"\nstart = 1\nstep = 2\ninterval_s = 1\nstop = 5").unwrap();
        assert_eq!(pattern, Pattern::Linear { start: 1.0, step: 2.0, interval_s: 1, stop: 5.0 });
        assert!(toml::from_str::<Pattern>("kind = \"sawtooth\"").is_err());
    }
}
