//! Which variant serves a request: routing by accuracy, kept pure for unit tests.

/// Index of the variant that serves a request needing `min_accuracy`, among ready
/// variants listed in configured order with their accuracies: the active one when it
/// is accurate enough, else the cheapest one that is (by `costs` when every variant
/// has one, else the first in order); `None` when none is.
pub(crate) fn choose(
    accuracies: &[f64],
    costs: Option<&[f64]>,
    active: usize,
    min_accuracy: Option<f64>,
) -> Option<usize> {
    let enough = |i: usize| min_accuracy.is_none_or(|m| accuracies[i] >= m);
    if active < accuracies.len() && enough(active) {
        return Some(active);
    }
    let candidates = (0..accuracies.len()).filter(|&i| enough(i));
    match costs {
        Some(costs) if costs.len() == accuracies.len() => candidates.min_by(|&x, &y| costs[x].total_cmp(&costs[y])),
        _ => candidates.min(),
    }
}

/// The variants a request routed to `chosen` may go to instead when `chosen` would
/// refuse it as unable to answer in time: the ready ones that cost less than `chosen`
/// (by `costs`, which every variant must have) and are accurate enough, the most
/// accurate first. Empty without costs: nothing then says which is cheaper.
pub(crate) fn spill_order(
    accuracies: &[f64],
    costs: Option<&[f64]>,
    chosen: usize,
    min_accuracy: Option<f64>,
) -> Vec<usize> {
    let Some(costs) = costs.filter(|c| c.len() == accuracies.len() && chosen < c.len()) else { return Vec::new() };
    let mut cheaper: Vec<usize> = (0..accuracies.len())
        .filter(|&i| costs[i] < costs[chosen])
        .filter(|&i| min_accuracy.is_none_or(|m| accuracies[i] >= m))
        .collect();
    cheaper.sort_by(|&x, &y| accuracies[y].total_cmp(&accuracies[x]));
    cheaper
}

#[cfg(test)]
mod tests {
    use super::{choose, spill_order};

    #[test]
    fn a_request_spills_to_cheaper_variants_accurate_enough_the_most_accurate_first() {
        // Cost follows accuracy: the 75.0 one costs most.
        let costs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(spill_order(&FAMILY, Some(&costs), 3, None), [2, 1, 0]);
        assert_eq!(spill_order(&FAMILY, Some(&costs), 3, Some(65.0)), [2, 1]);
        assert_eq!(spill_order(&FAMILY, Some(&costs), 0, None), Vec::<usize>::new(), "nothing cheaper");
        // By cost, not by the configured order.
        assert_eq!(spill_order(&FAMILY, Some(&[4.0, 1.0, 2.0, 3.0]), 3, None), [2, 1]);
        assert_eq!(spill_order(&FAMILY, None, 3, None), Vec::<usize>::new(), "without costs, nowhere");
    }

    const FAMILY: [f64; 4] = [60.3, 65.4, 71.8, 75.0];

    #[test]
    fn without_an_accuracy_target_the_active_variant_serves() {
        assert_eq!(choose(&FAMILY, None, 2, None), Some(2));
    }

    #[test]
    fn an_active_variant_accurate_enough_serves_even_if_a_cheaper_one_would_do() {
        assert_eq!(choose(&FAMILY, None, 3, Some(60.0)), Some(3));
    }

    #[test]
    fn a_request_needing_more_goes_to_the_cheapest_variant_that_meets_it() {
        assert_eq!(choose(&FAMILY, None, 0, Some(70.0)), Some(2));
        assert_eq!(choose(&FAMILY, None, 1, Some(75.0)), Some(3));
    }

    #[test]
    fn with_profiled_costs_the_cheapest_by_cost_serves_whatever_the_configured_order() {
        // Listed in an order that is not the cost order: the 71.8 one is the cheapest.
        let costs = [4.0, 3.0, 1.0, 8.0];
        assert_eq!(choose(&FAMILY, Some(&costs), 0, Some(65.0)), Some(2));
        assert_eq!(choose(&FAMILY, Some(&costs), 0, Some(62.0)), Some(2));
        assert_eq!(choose(&FAMILY, Some(&costs), 0, Some(72.0)), Some(3));
        // The active variant still serves when it is accurate enough.
        assert_eq!(choose(&FAMILY, Some(&costs), 1, Some(62.0)), Some(1));
        // Costs that do not cover every variant are not used.
        assert_eq!(choose(&FAMILY, Some(&costs[..2]), 0, Some(62.0)), Some(1));
    }

    #[test]
    fn nothing_accurate_enough_means_no_variant() {
        assert_eq!(choose(&FAMILY, None, 3, Some(80.0)), None);
        assert_eq!(choose(&[], None, 0, None), None);
    }
}
