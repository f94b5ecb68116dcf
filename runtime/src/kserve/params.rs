//! Request parameters that modelless reads: `latency_ms`, `min_accuracy` and
//! `priority` make the SLO of a model-less request; `timeout` (µs, as Triton reads
//! it) bounds how long the request may wait. Other parameters are ignored, as the
//! protocol allows.

use std::time::Duration;

use super::status::ServeError;
use crate::request::Priority;

/// A parameter value, from either protocol.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float.
    Double(f64),
    /// A string.
    Str(String),
}

impl ParamValue {
    fn number(&self) -> Option<f64> {
        match self {
            ParamValue::Int(v) => Some(*v as f64),
            ParamValue::UInt(v) => Some(*v as f64),
            ParamValue::Double(v) => Some(*v),
            ParamValue::Str(s) => s.trim().parse().ok(),
            ParamValue::Bool(_) => None,
        }
    }

    /// The value as a non-negative integer, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            ParamValue::Int(v) => u64::try_from(*v).ok(),
            ParamValue::UInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ParamValue::Bool(b) => serde_json::json!(b),
            ParamValue::Int(i) => serde_json::json!(i),
            ParamValue::UInt(u) => serde_json::json!(u),
            ParamValue::Double(d) => serde_json::json!(d),
            ParamValue::Str(s) => serde_json::json!(s),
        }
    }
}

/// The parameters modelless acts on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InferParams {
    /// Latency target (`latency_ms`); also the request's deadline.
    pub latency: Option<Duration>,
    /// Least accuracy of the variant that may serve it (`min_accuracy`).
    pub min_accuracy: Option<f64>,
    /// `priority`: "high" or 1 (Triton's highest) is high; "normal", 0 or other
    /// levels are normal.
    pub priority: Priority,
    /// Longest wait before running (`timeout`, in µs).
    pub timeout: Option<Duration>,
}

impl InferParams {
    /// Reads the parameters modelless knows; a known one of the wrong type or range
    /// is refused.
    pub fn parse<'a>(params: impl IntoIterator<Item = (&'a str, ParamValue)>) -> Result<InferParams, ServeError> {
        let mut parsed = InferParams::default();
        for (name, value) in params {
            let number = || {
                value.number().filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                    ServeError::invalid(format!("parameter `{name}` must be a number ≥ 0, got {value:?}"))
                })
            };
            match name {
                "latency_ms" => parsed.latency = Some(millis(name, number()?)?),
                "min_accuracy" => parsed.min_accuracy = Some(number()?),
                "timeout" => parsed.timeout = Some(Duration::from_micros(number()? as u64)),
                "priority" => parsed.priority = priority(&value)?,
                _ => {}
            }
        }
        Ok(parsed)
    }
}

fn priority(value: &ParamValue) -> Result<Priority, ServeError> {
    match value {
        ParamValue::Str(s) if s.eq_ignore_ascii_case("high") => Ok(Priority::High),
        ParamValue::Str(s) if s.eq_ignore_ascii_case("normal") => Ok(Priority::Normal),
        ParamValue::Int(1) | ParamValue::UInt(1) => Ok(Priority::High),
        ParamValue::Int(v) if *v >= 0 => Ok(Priority::Normal),
        ParamValue::UInt(_) => Ok(Priority::Normal),
        other => Err(ServeError::invalid(format!(
            "parameter `priority` must be \"high\", \"normal\" or a level ≥ 0, got {other:?}"
        ))),
    }
}

/// A latency from parameter `name`, given in milliseconds; one too long for a
/// `Duration` is refused.
fn millis(name: &str, ms: f64) -> Result<Duration, ServeError> {
    Duration::try_from_secs_f64(ms.max(0.0) / 1000.0)
        .map_err(|_| ServeError::invalid(format!("parameter `{name}` of {ms} ms is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_parameters_are_read_in_any_numeric_form() {
        let params = InferParams::parse([
            ("latency_ms", ParamValue::Double(12.5)),
            ("min_accuracy", ParamValue::Str("70".into())),
            ("priority", ParamValue::Int(1)),
            ("timeout", ParamValue::UInt(3000)),
            ("sequence_id", ParamValue::Int(7)),
        ])
        .unwrap();
        assert_eq!(params.latency, Some(Duration::from_micros(12_500)));
        assert_eq!(params.min_accuracy, Some(70.0));
        assert_eq!(params.priority, Priority::High);
        assert_eq!(params.timeout, Some(Duration::from_millis(3)));
    }

    #[test]
    fn known_parameters_of_the_wrong_type_are_refused() {
        assert!(InferParams::parse([("latency_ms", ParamValue::Bool(true))]).is_err());
        assert!(InferParams::parse([("latency_ms", ParamValue::Double(-1.0))]).is_err());
        assert!(InferParams::parse([("priority", ParamValue::Str("urgent".into()))]).is_err());
        assert!(InferParams::parse([("latency_ms", ParamValue::Double(9.6e173))]).is_err());
    }
}
