//! The bounds a load's settings share: a run's length, and numbers that must not be
//! negative.

use super::{LoadError, MAX_RUN_S};

/// Refuses a pattern longer than a run may be, before its rates are made.
pub(super) fn within_run(what: &str, seconds: usize) -> Result<(), LoadError> {
    if seconds > MAX_RUN_S as usize {
        return Err(LoadError::invalid(format!("{what} makes a run of {seconds} s, over the most of {MAX_RUN_S} s")));
    }
    Ok(())
}

pub(super) fn non_negative(what: &str, value: f64) -> Result<(), LoadError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(LoadError::invalid(format!("`{what}` must be a finite number at or above 0, not {value}")))
    }
}
