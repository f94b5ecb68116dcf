//! Replaying the search strategies against what was already measured: a surrogate
//! objective that interpolates a variant's stored measurements (the nearest measured
//! settings in the scaled knob space, weighted by distance, on the logarithm of the
//! cost), with measurement noise drawn anew at each evaluation. A replayed search
//! costs milliseconds where a real one costs minutes, so strategies can be compared
//! over many seeds, each recommendation judged by the surrogate's noiseless cost, and
//! both placed against the best the landscape holds.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};

use super::bayes::scaled;
use super::search::{SearchOptions, SearchTrace, Strategy, search};
use super::space::{KnobSpace, ServingSetting};

/// Measured settings whose costs are blended into one surrogate cost.
const NEIGHBOURS: usize = 4;
/// Added to each neighbour's distance before it is inverted: a measurement at the
/// very setting weighs most without drowning the others' evidence about its noise.
const DISTANCE_FLOOR: f64 = 0.05;

/// How far apart two settings are along one knob, per unit of its scaled range: the
/// knobs that decide how the cores are shared (instances, threads, taking turns,
/// spinning) change the cost by whole factors, the batching knobs by less.
fn knob_weight(name: &str) -> f64 {
    match name {
        "one_run_at_a_time" | "spinning" => 3.0,
        "instances" | "intra_op_threads" => 2.0,
        "max_batch_size" | "preprocessing_threads" => 1.0,
        _ => 0.5,
    }
}

/// A cost for every setting of a space, interpolated from measurements.
#[derive(Clone, Debug)]
pub struct Surrogate {
    space: KnobSpace,
    weights: Vec<f64>,
    /// Each measurement's scaled point and the logarithm of its cost.
    measured: Vec<(Vec<f64>, f64)>,
}

impl Surrogate {
    /// The surrogate of `measured` (settings and their positive costs) over `space`;
    /// `None` where nothing positive was measured.
    pub fn new(space: KnobSpace, measured: &[(ServingSetting, f64)]) -> Option<Self> {
        let weights = space.ranges().iter().map(|(name, _)| knob_weight(name)).collect();
        let measured: Vec<(Vec<f64>, f64)> = measured
            .iter()
            .filter(|(_, cost)| cost.is_finite() && *cost > 0.0)
            .map(|(setting, cost)| (scaled(&space, &space.encode(setting)), cost.ln()))
            .collect();
        (!measured.is_empty()).then_some(Surrogate { space, weights, measured })
    }

    /// Measurements it interpolates.
    pub fn measurements(&self) -> usize {
        self.measured.len()
    }

    /// Its noiseless cost of `setting`.
    pub fn cost(&self, setting: &ServingSetting) -> f64 {
        let point = scaled(&self.space, &self.space.encode(setting));
        let mut nearest: Vec<(f64, f64)> = self
            .measured
            .iter()
            .map(|(other, log_cost)| {
                let distance = point.iter().zip(other).zip(&self.weights).map(|((a, b), w)| w * (a - b).abs()).sum();
                (distance, *log_cost)
            })
            .collect();
        nearest.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (weighted, total) = nearest.iter().take(NEIGHBOURS).fold((0.0, 0.0), |(sum, total), (d, log_cost)| {
            let weight = 1.0 / (d + DISTANCE_FLOOR);
            (sum + weight * log_cost, total + weight)
        });
        (weighted / total).exp()
    }

    /// Its costs at `samples` settings drawn uniformly from the space, lowest first:
    /// the landscape a search explores.
    pub fn landscape(&self, samples: usize, seed: u64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut costs: Vec<f64> =
            (0..samples).map(|_| self.cost(&self.space.decode(&self.space.sample(&mut rng)))).collect();
        costs.sort_by(f64::total_cmp);
        costs
    }
}

/// One replayed search, judged by the surrogate's noiseless cost.
#[derive(Clone, Debug)]
pub struct Replayed {
    /// The search as it went, with the noisy costs it saw.
    pub trace: SearchTrace,
    /// The noiseless cost of what it recommends (`None` where it recommends nothing).
    pub recommended: Option<f64>,
    /// The noiseless cost of the best setting it measured: what it would recommend
    /// if it could see through the noise.
    pub best_measured: Option<f64>,
}

/// Runs one search of `strategy` against `surrogate`, each evaluation's cost the
/// surrogate's times a log-normal noise of standard deviation `noise` (in the
/// logarithm), drawn from `noise_seed`.
pub fn replay(
    surrogate: &Surrogate,
    strategy: Strategy,
    options: SearchOptions,
    noise: f64,
    noise_seed: u64,
) -> Replayed {
    let mut rng = StdRng::seed_from_u64(noise_seed);
    // No noise where none (or none that makes sense) is asked for.
    let normal = Normal::new(0.0, noise).ok();
    let trace = search(
        &surrogate.space,
        strategy,
        options,
        &mut |_, setting| Ok(surrogate.cost(setting) * normal.map_or(1.0, |n| n.sample(&mut rng).exp())),
        &mut |_| {},
    );
    let recommended = trace.best().map(|best| surrogate.cost(&best.setting));
    let best_measured =
        trace.evaluations.iter().map(|e| surrogate.cost(&e.setting)).min_by(f64::total_cmp).filter(|c| c.is_finite());
    Replayed { trace, recommended, best_measured }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::space::{PreferredSizes, SpaceLimits};

    fn space() -> KnobSpace {
        KnobSpace::new(SpaceLimits { max_batch: 32, cores: 2, images: false, gpu: false })
    }

    fn setting(instances: usize, threads: usize, batch: usize) -> ServingSetting {
        ServingSetting {
            max_batch_size: batch,
            max_queue_delay_us: 1000,
            preferred_batch_sizes: PreferredSizes::None,
            instances,
            intra_op_threads: threads,
            one_run_at_a_time: false,
            spinning: false,
            preprocessing_threads: None,
            cuda: None,
        }
    }

    #[test]
    fn the_surrogate_keeps_to_what_was_measured_and_blends_between() {
        let measured = vec![(setting(1, 1, 8), 200.0), (setting(2, 1, 8), 100.0), (setting(4, 4, 8), 400.0)];
        let surrogate = Surrogate::new(space(), &measured).unwrap_or_else(|| panic!("no surrogate of {measured:?}"));
        assert_eq!(surrogate.measurements(), 3);
        let at = |s: &ServingSetting| surrogate.cost(s);
        // Near a measurement, near its cost; never outside the measured range.
        assert!((at(&setting(2, 1, 8)) / 100.0 - 1.0).abs() < 0.5, "{}", at(&setting(2, 1, 8)));
        assert!(at(&setting(2, 1, 8)) < at(&setting(1, 1, 8)));
        assert!(at(&setting(1, 1, 8)) < at(&setting(4, 4, 8)));
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..200 {
            let cost = at(&space().decode(&space().sample(&mut rng)));
            assert!((100.0 - 1e-9..=400.0 + 1e-9).contains(&cost), "{cost}");
        }
        assert!(Surrogate::new(space(), &[(setting(1, 1, 1), f64::NAN)]).is_none());
    }

    #[test]
    fn a_replayed_search_is_judged_by_the_noiseless_cost_and_repeats_with_its_seeds() {
        // Cheapest at two single-threaded instances, dearer the further from them.
        let mut measured = Vec::new();
        for instances in 1..=4 {
            for threads in 1..=4 {
                for batch in [1, 8, 32] {
                    let cost = 100.0 * (1.0 + (instances as f64 - 2.0).abs() + (threads as f64 - 1.0));
                    measured.push((setting(instances, threads, batch), cost));
                }
            }
        }
        let surrogate = Surrogate::new(space(), &measured).unwrap_or_else(|| panic!("no surrogate of {measured:?}"));
        let options = SearchOptions { budget: 20, initial: 5, seed: 4, confirm: 3 };
        let one = replay(&surrogate, Strategy::Random, options, 0.05, 9);
        let again = replay(&surrogate, Strategy::Random, options, 0.05, 9);
        assert_eq!(one.trace, again.trace, "same seeds, same search");
        let recommended = one.recommended.unwrap_or_else(|| panic!("no recommendation: {:?}", one.trace));
        let best_measured = one.best_measured.unwrap_or_else(|| panic!("nothing measured: {:?}", one.trace));
        assert!(best_measured <= recommended, "{best_measured} > {recommended}");
        let measured_costs: Vec<f64> = one.trace.evaluations.iter().filter_map(|e| e.cost).collect();
        assert_eq!(measured_costs.len(), 20);
        // Noise of 5 % moves costs, but not by whole factors.
        for e in &one.trace.evaluations {
            let ratio = e.cost.unwrap_or(f64::NAN) / surrogate.cost(&e.setting);
            assert!((0.7..1.4).contains(&ratio), "{ratio}");
        }
        let landscape = surrogate.landscape(500, 1);
        assert!(landscape.windows(2).all(|w| w[0] <= w[1]));
        assert!(landscape[0] <= recommended && recommended < landscape[landscape.len() / 2] * 1.5);
    }
}
