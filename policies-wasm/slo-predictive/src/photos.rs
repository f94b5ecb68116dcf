//! A line raised to what a request costs with photos (`photo_request_ms`, from the
//! variant's image profile): a line measured on tensors plus a decoding share learnt
//! from the pool's busy time says how much a variant carries only after photos have
//! arrived and been decoded; the measured capacity says it before.

use modelless_policy_abi::LatencyFit;

/// `fit` made to cost at least `request_ms` a request in full batches of `batch`:
/// its per-row part raised so that the demand it carries is no more than measured.
pub fn at_least(fit: LatencyFit, request_ms: f64, batch: u32) -> LatencyFit {
    let batch = f64::from(batch.max(1));
    let per_row = request_ms - fit.c_ms.max(0.0) / batch;
    LatencyFit { a_ms: fit.a_ms.max(per_row), ..fit }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cheaper_than_measured_is_raised_and_a_dearer_one_kept() {
        let fit = LatencyFit { a_ms: 4.0, c_ms: 8.0, r2: 0.99 };
        // Batches of 4: the line says 6 ms a request; measured 10.
        let raised = at_least(fit, 10.0, 4);
        assert!((raised.a_ms - 8.0).abs() < 1e-9 && raised.c_ms == 8.0, "{raised:?}");
        assert_eq!(at_least(fit, 5.0, 4), fit);
    }
}
