//! Least squares through measured latencies.

use modelless_policy_abi::LatencyFit;

/// A least-squares line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    /// Slope.
    pub slope: f64,
    /// Value at 0.
    pub intercept: f64,
    /// Coefficient of determination over the points it was fitted to.
    pub r2: f64,
}

impl Line {
    /// The line's value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.slope * x + self.intercept
    }

    /// As a batch-latency fit, the line being milliseconds against rows.
    pub fn latency(&self) -> LatencyFit {
        LatencyFit { a_ms: self.slope, c_ms: self.intercept, r2: self.r2 }
    }
}

/// The least-squares line through `(x, y)` points, with its R². `None` for fewer than
/// two distinct x.
pub fn fit_line(points: &[(f64, f64)]) -> Option<Line> {
    let weighted: Vec<(f64, f64, f64)> = points.iter().map(|&(x, y)| (x, y, 1.0)).collect();
    fit_weighted_line(&weighted)
}

/// The least-squares line through `(x, y)` points; where they hold one distinct x
/// only, the line through the origin and their mean there: one batch size says
/// nothing of a fixed cost, and cost in proportion is the cautious reading beyond it.
/// `None` without points, or with that x not positive.
pub fn fit_line_or_proportional(points: &[(f64, f64)]) -> Option<Line> {
    fit_line(points).or_else(|| {
        let x = points.first()?.0;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
        (x > 0.0).then(|| Line { slope: mean_y / x, intercept: 0.0, r2: 1.0 })
    })
}

/// The latency line through `(batch size, ms)` points: the least squared *relative*
/// error (weights 1/y²), so that a batch of one is priced as closely as the largest.
/// A plain least-squares line is pulled by the largest batches and misprices the small
/// ones wherever latency bends away from a line there: flat on a GPU that a small batch
/// leaves idle, cheaper per row on a CPU whose caches a small batch leaves warm. Its
/// R² is the plain one over the points in ms, comparable with any other line's. Through
/// one batch size only, the line through the origin. `None` without points, or with a
/// latency that is not positive and finite.
pub fn fit_latency_line(points: &[(f64, f64)]) -> Option<Line> {
    if points.iter().any(|&(_, y)| !(y.is_finite() && y > 0.0)) {
        return None;
    }
    let weighted: Vec<(f64, f64, f64)> = points.iter().map(|&(x, y)| (x, y, 1.0 / (y * y))).collect();
    let Some(line) = fit_weighted_line(&weighted) else {
        return fit_line_or_proportional(points);
    };
    let unweighted: Vec<(f64, f64, f64)> = points.iter().map(|&(x, y)| (x, y, 1.0)).collect();
    Some(Line { r2: weighted_r2(&unweighted, line.slope, line.intercept), ..line })
}

/// The weighted least-squares line through `(x, y, weight)` points, with its weighted
/// R². `None` without two distinct x of positive weight.
pub fn fit_weighted_line(points: &[(f64, f64, f64)]) -> Option<Line> {
    let w: f64 = points.iter().map(|p| p.2).sum();
    if w <= 0.0 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.2 * p.0).sum::<f64>() / w;
    let mean_y = points.iter().map(|p| p.2 * p.1).sum::<f64>() / w;
    let sxx: f64 = points.iter().map(|p| p.2 * (p.0 - mean_x).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| p.2 * (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let a = sxy / sxx;
    let c = mean_y - a * mean_x;
    Some(Line { slope: a, intercept: c, r2: weighted_r2(points, a, c) })
}

/// The weighted R² of the line `a·x + c` over `(x, y, weight)` points of positive
/// total weight.
fn weighted_r2(points: &[(f64, f64, f64)], a: f64, c: f64) -> f64 {
    let mean_y = points.iter().map(|p| p.2 * p.1).sum::<f64>() / points.iter().map(|p| p.2).sum::<f64>();
    let ss_res: f64 = points.iter().map(|p| p.2 * (p.1 - (a * p.0 + c)).powi(2)).sum();
    let ss_tot: f64 = points.iter().map(|p| p.2 * (p.1 - mean_y).powi(2)).sum();
    if ss_tot == 0.0 { 1.0 } else { 1.0 - ss_res / ss_tot }
}

/// The fit to keep, or why none is kept: a fit whose R² is below
/// [`modelless_policy_abi::MIN_FIT_R2`] is reported and dropped, so that admission
/// never prices requests with noise (it then admits on room alone).
pub(crate) fn trusted_fit(name: &str, fit: Option<LatencyFit>) -> (Option<LatencyFit>, Option<String>) {
    match fit.as_ref().and_then(LatencyFit::distrust) {
        Some(reason) => {
            tracing::warn!(model = name, %reason, "latency fit not kept");
            (None, Some(reason))
        }
        None => (fit, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_batch_size_gives_a_line_through_the_origin() {
        let line = fit_line_or_proportional(&[(2.0, 10.0), (2.0, 12.0)]).unwrap();
        assert_eq!((line.slope, line.intercept), (5.5, 0.0));
        assert!(fit_line(&[(2.0, 10.0)]).is_none(), "no least-squares line through one x");
        let two = fit_line_or_proportional(&[(1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((two.slope - 2.0).abs() < 1e-12 && (two.intercept - 1.0).abs() < 1e-12);
        assert!(fit_line_or_proportional(&[]).is_none());
    }

    #[test]
    fn recovers_a_and_c_of_an_exact_line() {
        let points: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0].iter().map(|&b| (b, 3.5 * b + 1.25)).collect();
        let fit = fit_line(&points).unwrap().latency();
        assert!((fit.a_ms - 3.5).abs() < 1e-9 && (fit.c_ms - 1.25).abs() < 1e-9);
        assert!((fit.r2 - 1.0).abs() < 1e-12);
        assert!((fit.predict_ms(32) - 113.25).abs() < 1e-9);
    }

    #[test]
    fn noise_lowers_r2_but_keeps_the_slope_close() {
        // Deterministic "noise" of ±2 % around a = 4, c = 2.
        let points: Vec<(f64, f64)> = (1u32..=32)
            .map(|b| {
                let wobble = if b.is_multiple_of(2) { 1.02 } else { 0.98 };
                (f64::from(b), (4.0 * f64::from(b) + 2.0) * wobble)
            })
            .collect();
        let fit = fit_line(&points).unwrap().latency();
        assert!((fit.a_ms - 4.0).abs() < 0.1, "a = {}", fit.a_ms);
        assert!((fit.c_ms - 2.0).abs() < 1.5, "c = {}", fit.c_ms);
        assert!(fit.r2 > 0.99 && fit.r2 < 1.0, "r2 = {}", fit.r2);
    }

    #[test]
    fn a_fit_below_the_least_r2_is_dropped_with_its_reason() {
        // The GPU sweep that timed first runs of new shapes: R² 0.038.
        let noisy = LatencyFit { a_ms: 0.138, c_ms: 130.0, r2: 0.038 };
        let (fit, reason) = trusted_fit("resnet50", Some(noisy));
        assert_eq!(fit, None);
        let reason = reason.expect("a reason");
        assert!(reason.contains("R² 0.038 below 0.9"), "{reason}");
        let good = LatencyFit { a_ms: 0.24, c_ms: 1.6, r2: 0.995 };
        assert_eq!(trusted_fit("resnet50", Some(good)), (Some(good), None));
        assert_eq!(trusted_fit("resnet50", None), (None, None));
        let nan = LatencyFit { a_ms: f64::NAN, c_ms: 1.0, r2: 1.0 };
        assert!(!nan.is_trusted());
    }

    #[test]
    fn a_line_that_prices_a_batch_of_one_at_nothing_is_dropped_with_its_reason() {
        // fp16 ResNet-50 on a CPU: per-row cost grows with the batch, and the line
        // through the sweep (R² 0.999) is negative at one row.
        let points: Vec<(f64, f64)> =
            [(1.0, 6.2), (2.0, 9.0), (4.0, 19.0), (8.0, 60.0), (16.0, 140.0), (64.0, 580.0)].to_vec();
        let line = fit_line(&points).unwrap().latency();
        assert!(line.r2 > 0.99 && line.predict_ms(1) < 0.0, "{line:?}");
        let (fit, reason) = trusted_fit("resnet50-fp16", Some(line));
        assert_eq!(fit, None);
        assert!(reason.as_deref().is_some_and(|r| r.contains("for a batch of 1")), "{reason:?}");
        let falling = LatencyFit { a_ms: -0.5, c_ms: 40.0, r2: 0.95 };
        assert!(trusted_fit("x", Some(falling)).1.is_some_and(|r| r.contains("a -0.500 ms/row")));
        // A small negative intercept that still prices one row is kept.
        let kept = LatencyFit { a_ms: 1.712, c_ms: -0.387, r2: 0.998 };
        assert_eq!(trusted_fit("mobilenet", Some(kept)), (Some(kept), None));
    }

    #[test]
    fn the_latency_line_prices_small_batches_as_closely_as_large_ones() {
        // efficientnet-lite0's warm medians on a 2-core CPU, batch 1 to 64: a batch of
        // one is cheaper per row than the line through the large batches says.
        let points: Vec<(f64, f64)> =
            [(1.0, 7.679), (2.0, 13.457), (4.0, 25.386), (8.0, 44.447), (16.0, 83.391), (32.0, 161.8), (64.0, 318.4)]
                .to_vec();
        let worst = |line: &Line| points.iter().map(|&(x, y)| (line.at(x) / y - 1.0).abs()).fold(0.0, f64::max);
        let plain = fit_line(&points).unwrap();
        let relative = fit_latency_line(&points).unwrap();
        assert!((plain.at(1.0) / 7.679 - 1.0) > 0.2, "{plain:?}");
        assert!((relative.at(1.0) / 7.679 - 1.0).abs() < 0.05, "{relative:?}");
        assert!(worst(&relative) < 0.1 && worst(&relative) < worst(&plain), "{relative:?} {plain:?}");
        assert!(relative.r2 > 0.99 && relative.r2 < plain.r2, "the plain line has the least squares: {relative:?}");
        // An exact line is recovered whatever the weights.
        let exact: Vec<(f64, f64)> = [1.0, 4.0, 16.0].iter().map(|&b| (b, 0.5 * b + 2.0)).collect();
        let line = fit_latency_line(&exact).unwrap();
        assert!((line.slope - 0.5).abs() < 1e-9 && (line.intercept - 2.0).abs() < 1e-9 && line.r2 > 1.0 - 1e-12);
        // One batch size: the line through the origin; a latency of nothing: no line.
        assert_eq!(fit_latency_line(&[(4.0, 10.0)]).map(|l| (l.slope, l.intercept)), Some((2.5, 0.0)));
        assert!(fit_latency_line(&[(1.0, 0.0), (2.0, 3.0)]).is_none());
        assert!(fit_latency_line(&[]).is_none());
    }

    #[test]
    fn one_batch_size_is_not_a_line() {
        assert!(fit_line(&[(4.0, 10.0)]).is_none());
        assert!(fit_line(&[(4.0, 10.0), (4.0, 11.0)]).is_none());
    }

    #[test]
    fn weights_count_as_repeated_points() {
        let weighted = fit_weighted_line(&[(1.0, 2.0, 3.0), (2.0, 5.0, 1.0), (4.0, 7.0, 2.0)]).unwrap();
        let repeated = fit_line(&[(1.0, 2.0), (1.0, 2.0), (1.0, 2.0), (2.0, 5.0), (4.0, 7.0), (4.0, 7.0)]).unwrap();
        assert!((weighted.slope - repeated.slope).abs() < 1e-12);
        assert!((weighted.intercept - repeated.intercept).abs() < 1e-12);
        assert!((weighted.r2 - repeated.r2).abs() < 1e-12);
        assert!(fit_weighted_line(&[(1.0, 2.0, 0.0), (2.0, 5.0, 0.0)]).is_none(), "no weight");
    }
}
