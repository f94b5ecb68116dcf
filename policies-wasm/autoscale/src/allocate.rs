//! Allocating the budget's cores among tasks, as INFaaS's model-autoscaler does: for
//! each task the most accurate allocation that serves its demand within the target,
//! the cheapest of those (cores held, and λ cores a second of loading); where the
//! budget is short, the step down that loses the least accuracy (weighted by demand)
//! per core freed, until the tasks fit.

use crate::options::Allocation;

/// A task as the allocation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    /// Requests a second arriving now, without the margin: what a variant must serve
    /// not to fall behind while instances load.
    pub arriving: f64,
    /// Requests a second to serve now, with a margin.
    pub demand: f64,
    /// The same where a rising rate is followed ahead: what instances are asked for
    /// before it arrives, never a reason to step accuracy down.
    pub ahead: f64,
    /// Its allocations.
    pub options: Vec<Allocation>,
}

impl Need {
    /// Whether `option` serves the demand within the target.
    fn serves(&self, option: &Allocation) -> bool {
        option.capacity >= self.demand
    }

    /// The most accurate of the options `keep` keeps that serve the demand, the
    /// cheapest of those, grown towards the demand ahead: the cheapest of its variant's
    /// that serve that, else the one of its variant's that serves most. Where none
    /// serves the demand, the one that serves most, the cheapest of those.
    fn best(&self, lambda: f64, keep: impl Fn(&Allocation) -> bool) -> Option<usize> {
        let kept = || self.options.iter().enumerate().filter(|(_, o)| keep(o));
        let by_accuracy_then_cost = |a: &(usize, &Allocation), b: &(usize, &Allocation)| {
            a.1.accuracy.total_cmp(&b.1.accuracy).then(b.1.cost(lambda).total_cmp(&a.1.cost(lambda)))
        };
        let serving = kept().filter(|(_, o)| self.serves(o)).max_by(by_accuracy_then_cost);
        let grown = serving.filter(|(_, chosen)| chosen.capacity < self.ahead).and_then(|(_, chosen)| {
            let same = || kept().filter(move |(_, o)| o.variant == chosen.variant);
            let cheapest = same()
                .filter(|(_, o)| o.capacity >= self.ahead)
                .min_by(|a, b| a.1.cost(lambda).total_cmp(&b.1.cost(lambda)));
            cheapest.or_else(|| same().max_by(|a, b| a.1.capacity.total_cmp(&b.1.capacity)))
        });
        let most = || {
            kept().max_by(|a, b| {
                a.1.capacity.total_cmp(&b.1.capacity).then(b.1.cost(lambda).total_cmp(&a.1.cost(lambda)))
            })
        };
        grown.or(serving).or_else(most).map(|(i, _)| i)
    }
}

/// Per task, the option (an index into its `options`, `None` for a task without any)
/// that the budget of `cores` gives it, after `held` cores that tasks not steered hold.
pub fn allocate(needs: &[Need], cores: f64, held: f64, lambda: f64) -> Vec<Option<usize>> {
    let mut chosen: Vec<Option<usize>> = needs.iter().map(|n| n.best(lambda, |_| true)).collect();
    let cores_of = |chosen: &[Option<usize>]| -> f64 {
        held + needs.iter().zip(chosen).filter_map(|(n, c)| Some(n.options[(*c)?].cores)).sum::<f64>()
    };
    // Each step frees cores of one task: at most as many steps as options.
    for _ in 0..needs.iter().map(|n| n.options.len()).sum::<usize>() {
        if cores_of(&chosen) <= cores + 1e-9 {
            break;
        }
        let Some((task, option)) = cheapest_step_down(needs, &chosen, lambda) else { break };
        chosen[task] = Some(option);
    }
    chosen
}

/// The step down that frees cores for the least accuracy lost per core (weighted by
/// demand), among those that still serve the demand; where none does, the one that
/// loses the least capacity per core.
fn cheapest_step_down(needs: &[Need], chosen: &[Option<usize>], lambda: f64) -> Option<(usize, usize)> {
    let mut serving: Option<(f64, usize, usize)> = None;
    let mut short: Option<(f64, usize, usize)> = None;
    for (task, need) in needs.iter().enumerate() {
        let Some(now) = chosen[task].map(|c| need.options[c]) else { continue };
        let Some(next) = need.best(lambda, |o| o.cores < now.cores - 1e-9) else { continue };
        let option = need.options[next];
        let freed = now.cores - option.cores;
        if need.serves(&option) {
            let lost = need.demand * (now.accuracy - option.accuracy).max(0.0) / freed;
            if serving.is_none_or(|(l, ..)| lost < l) {
                serving = Some((lost, task, next));
            }
        } else {
            let lost = (now.capacity.min(need.demand) - option.capacity).max(0.0) / freed;
            if short.is_none_or(|(l, ..)| lost < l) {
                short = Some((lost, task, next));
            }
        }
    }
    serving.or(short).map(|(_, task, option)| (task, option))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options of one variant of `accuracy` whose instance serves `per_instance` a
    /// second on one core, up to `most` instances; loaded and warm.
    fn variant(index: usize, accuracy: f64, per_instance: f64, most: u32) -> Vec<Allocation> {
        (1..=most)
            .map(|n| Allocation {
                variant: index,
                accuracy,
                instances: n,
                cores: f64::from(n),
                load_s: 0.0,
                capacity: per_instance * f64::from(n),
            })
            .collect()
    }

    fn need(demand: f64) -> Need {
        // large serves 10/s an instance, small 30/s.
        Need {
            arriving: demand,
            demand,
            ahead: demand,
            options: [variant(0, 80.0, 10.0, 4), variant(1, 70.0, 30.0, 4)].concat(),
        }
    }

    fn picked(needs: &[Need], cores: f64) -> Vec<(usize, u32)> {
        allocate(needs, cores, 0.0, 0.5)
            .into_iter()
            .zip(needs)
            .map(|(c, n)| {
                let o = n.options[c.unwrap()];
                (o.variant, o.instances)
            })
            .collect()
    }

    #[test]
    fn a_task_gets_the_most_accurate_variant_that_serves_it_on_the_fewest_instances() {
        assert_eq!(picked(&[need(5.0)], 4.0), [(0, 1)]);
        assert_eq!(picked(&[need(25.0)], 4.0), [(0, 3)]);
        assert_eq!(picked(&[need(25.0)], 2.0), [(1, 1)], "two cores: the small one");
        assert_eq!(picked(&[need(200.0)], 4.0), [(1, 4)], "nothing serves 200/s: what serves most");
    }

    #[test]
    fn a_short_budget_steps_down_where_it_costs_least_accuracy_per_core() {
        // a at 25/s would take 3 cores on large, b at 5/s one: 4 in 3. a stepping down
        // to small frees 2 cores for 10 points of 25/s; b cannot free any.
        assert_eq!(picked(&[need(25.0), need(5.0)], 3.0), [(1, 1), (0, 1)]);
        // With 4 cores both keep large.
        assert_eq!(picked(&[need(25.0), need(5.0)], 4.0), [(0, 3), (0, 1)]);
    }

    #[test]
    fn the_demand_ahead_grows_the_instances_but_never_steps_accuracy_down() {
        // 15/s now, 35/s ahead: large's two serve now, four ahead.
        let rising = Need { ahead: 35.0, ..need(15.0) };
        assert_eq!(picked(std::slice::from_ref(&rising), 4.0), [(0, 4)]);
        // On three cores large cannot serve what comes: it grows as far as it can, and
        // is not swapped for small, which could.
        assert_eq!(picked(std::slice::from_ref(&rising), 3.0), [(0, 3)], "as many as the budget holds");
        // Where the budget is short, the instances grown for what comes go first.
        assert_eq!(picked(&[rising, need(15.0)], 4.0), [(0, 2), (0, 2)]);
    }

    #[test]
    fn loading_costs_lambda_cores_a_second_among_equally_accurate_options() {
        // Two variants of one accuracy: the warm one, though it holds a core more,
        // against one that loads for 4 s at λ = 0.5 (2 cores' worth).
        let mut cold = variant(1, 80.0, 30.0, 1);
        cold[0].load_s = 4.0;
        let warm = variant(0, 80.0, 15.0, 2);
        let need = Need { arriving: 25.0, demand: 25.0, ahead: 25.0, options: [warm, cold].concat() };
        let chosen = allocate(std::slice::from_ref(&need), 4.0, 0.0, 0.5)[0].unwrap();
        assert_eq!((need.options[chosen].variant, need.options[chosen].instances), (0, 2));
        let chosen = allocate(std::slice::from_ref(&need), 4.0, 0.0, 0.1)[0].unwrap();
        assert_eq!(need.options[chosen].variant, 1, "loading is cheap at λ = 0.1");
    }
}
