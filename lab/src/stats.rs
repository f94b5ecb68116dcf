//! The few statistics the lab's tables and searches report, written once: the
//! middle value, mean ± sd, extremes and spread, quantiles.

pub use modelless_runtime::stats::percentile;

/// The middle value (the upper middle of an even count); `None` when there is none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

/// The value at `q` (0..=1) of `sorted` (lowest first), by the nearest index to
/// `q × (n − 1)`; `None` for no values.
pub fn quantile_of_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    sorted.get((last as f64 * q.clamp(0.0, 1.0)).round() as usize).copied()
}

/// The mean and the sample standard deviation (0 for one value); `None` for none.
pub fn mean_and_sd(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len().max(2) - 1) as f64;
    Some((mean, var.sqrt()))
}

/// `mean ± sd` of `values` for a table, or a dash where there are none.
pub fn mean_and_sd_text(values: &[f64]) -> String {
    mean_and_sd(values).map_or("–".into(), |(m, sd)| format!("{m:.2} ± {sd:.2}"))
}

/// The lowest and the highest of `values` (infinities for none).
pub fn extremes(values: &[f64]) -> (f64, f64) {
    values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)))
}

/// How far `values` spread (highest less lowest) as a share of their median; `None`
/// for fewer than two values or a median of zero.
pub fn relative_spread(values: &[f64]) -> Option<f64> {
    let (low, high) = extremes(values);
    let median = median(values)?;
    (values.len() >= 2 && median != 0.0).then(|| (high - low) / median.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_upper_middle_and_none_of_nothing() {
        assert_eq!(median(&[12.0, 10.0, 11.0]), Some(11.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(3.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn spread_is_relative_to_the_median_and_needs_two_values() {
        let spread = relative_spread(&[12.0, 10.0, 11.0]).unwrap();
        assert!((spread - 2.0 / 11.0).abs() < 1e-12);
        assert!((relative_spread(&[-12.0, -10.0, -11.0]).unwrap() - spread).abs() < 1e-12);
        assert_eq!(relative_spread(&[5.0]), None, "one value tells no spread");
        assert_eq!(extremes(&[]), (f64::INFINITY, f64::NEG_INFINITY));
    }

    #[test]
    fn mean_and_sd_use_the_sample_variance() {
        let (mean, sd) = mean_and_sd(&[1.0, 2.0, 3.0]).unwrap();
        assert!((mean - 2.0).abs() < 1e-12 && (sd - 1.0).abs() < 1e-12);
        assert_eq!(mean_and_sd(&[7.0]), Some((7.0, 0.0)));
        assert_eq!(mean_and_sd_text(&[]), "–");
    }

    #[test]
    fn quantiles_take_the_nearest_index() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_of_sorted(&sorted, 0.0), Some(1.0));
        assert_eq!(quantile_of_sorted(&sorted, 0.5), Some(3.0));
        assert_eq!(quantile_of_sorted(&sorted, 0.6), Some(3.0));
        assert_eq!(quantile_of_sorted(&sorted, 1.0), Some(5.0));
        assert_eq!(quantile_of_sorted(&[], 0.5), None);
    }
}
