//! Which variant serves a request: routing by accuracy, kept pure for unit tests.

/// Index of the variant that serves a request needing `min_accuracy`, among ready
/// variants listed cheapest first with their accuracies: the active one when it is
/// accurate enough, else the cheapest one that is; `None` when none is.
pub(crate) fn choose(accuracies: &[f64], active: usize, min_accuracy: Option<f64>) -> Option<usize> {
    let enough = |i: usize| min_accuracy.is_none_or(|m| accuracies[i] >= m);
    if active < accuracies.len() && enough(active) {
        return Some(active);
    }
    (0..accuracies.len()).find(|&i| enough(i))
}

#[cfg(test)]
mod tests {
    use super::choose;

    const FAMILY: [f64; 4] = [60.3, 65.4, 71.8, 75.0];

    #[test]
    fn without_an_accuracy_target_the_active_variant_serves() {
        assert_eq!(choose(&FAMILY, 2, None), Some(2));
    }

    #[test]
    fn an_active_variant_accurate_enough_serves_even_if_a_cheaper_one_would_do() {
        assert_eq!(choose(&FAMILY, 3, Some(60.0)), Some(3));
    }

    #[test]
    fn a_request_needing_more_goes_to_the_cheapest_variant_that_meets_it() {
        assert_eq!(choose(&FAMILY, 0, Some(70.0)), Some(2));
        assert_eq!(choose(&FAMILY, 1, Some(75.0)), Some(3));
    }

    #[test]
    fn nothing_accurate_enough_means_no_variant() {
        assert_eq!(choose(&FAMILY, 3, Some(80.0)), None);
        assert_eq!(choose(&[], 0, None), None);
    }
}
