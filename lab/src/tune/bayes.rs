//! Bayesian optimisation's proposal: a Gaussian process fitted to what was measured
//! ([`modelless_gp::NoisyProcess`], with a noise term chosen by likelihood), and the
//! unmeasured setting of highest expected improvement under it. Improvement is
//! counted from the lowest *fitted* cost of a measured setting, not from the
//! luckiest measurement: a lucky one lowers the fitted cost of its neighbourhood
//! only as far as the others allow.

use modelless_gp::NoisyProcess;
use rand::Rng;
use rand::rngs::StdRng;

use super::evaluation::{Evaluation, modelled_costs, modelled_noise};
use super::space::{KnobRange, KnobSpace, MAX_INSTANCES};

/// The revision of this proposal (the first fitted an interpolating process, the
/// second left the noise term to the likelihood alone, the third saw only the knobs).
pub const REVISION: u32 = 4;

/// The standard deviation of a measurement's logarithm, at least: a setting measured
/// again in interleaved rounds on a quiet 2-core machine spreads by 2.5–14 % from
/// its median over 3–5 rounds, a standard deviation of about 1.5–6 %.
const MEASUREMENT_NOISE: f64 = 0.05;

/// Random points of the space whose expected improvement is computed.
const RANDOM_CANDIDATES: usize = 2000;
/// The best measured settings whose neighbourhoods are searched too.
const LOCAL_CENTRES: usize = 3;
/// Neighbours of each of them (one or two knobs moved by a step).
const NEIGHBOURS: usize = 200;
/// A real knob's step, as a share of its range.
const REAL_STEP: f64 = 0.1;

/// The expected improvement below `best` of a normal belief (`mean`, `sd`) about a
/// cost to minimise.
pub(super) fn expected_improvement(mean: f64, sd: f64, best: f64) -> f64 {
    let gain = best - mean;
    // No doubt (or none to speak of, or not a number): the gain is what is expected.
    if sd.is_nan() || sd <= 1e-12 {
        return gain.max(0.0);
    }
    let z = gain / sd;
    let cdf = 0.5 * libm::erfc(-z / std::f64::consts::SQRT_2);
    let pdf = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
    (gain * cdf + sd * pdf).max(0.0)
}

/// `point` with each knob scaled to 0…1 over its range.
pub(super) fn scaled(space: &KnobSpace, point: &[f64]) -> Vec<f64> {
    space
        .ranges()
        .into_iter()
        .zip(space.clamp(point))
        .map(|((_, range), x)| {
            let (low, high) = bounds(range);
            if high > low { (x - low) / (high - low) } else { 0.0 }
        })
        .collect()
}

/// What the model sees of `point`: its knobs scaled to 0…1, and how the setting
/// shares the cores, which no one knob says. The cost of a setting turns on the
/// threads it runs at once against the cores (too few leave cores idle, too many
/// fight over them) and on whether idle sessions spin while they wait their turn;
/// those are products of instances, intra-op threads, turns and spinning that a
/// process with one length scale per knob would need far more than twenty
/// measurements to learn. In 60 replayed searches per strategy against the stored
/// measurements of MobileNetV2-1.0 and EfficientNet-Lite0 at 1, 8 and 32 clients,
/// bayes ÷ random went from 0.995–1.022 without them to 0.980–0.997 with them
/// (docs/tune.md, "Replayed").
fn model_input(space: &KnobSpace, point: &[f64]) -> Vec<f64> {
    let mut input = scaled(space, point);
    let setting = space.decode(point);
    let cores = space.limits().cores.max(1) as f64;
    let running =
        if setting.one_run_at_a_time { setting.intra_op_threads } else { setting.instances * setting.intra_op_threads };
    let running = running.max(1) as f64;
    let most = (MAX_INSTANCES * 2 * space.limits().cores.max(1)) as f64;
    let share = |ratio: f64, top: f64| if top > 1.0 { (ratio.ln().max(0.0) / top.ln()).min(1.0) } else { 0.0 };
    input.push(share(running / cores, most / cores));
    input.push(share(cores / running, cores));
    input.push(f64::from(u8::from(setting.one_run_at_a_time && setting.spinning)));
    input
}

/// Numbers [`model_input`] gives per point.
fn model_dimensions(space: &KnobSpace) -> usize {
    space.dimensions() + 3
}

fn bounds(range: KnobRange) -> (f64, f64) {
    match range {
        KnobRange::Int(low, high) => (f64::from(low), f64::from(high)),
        KnobRange::Float(low, high) => (low, high),
    }
}

/// A neighbour of `point`: one or two of its knobs moved one step (a whole number
/// for integers, a tenth of the range for reals) up or down, within the space.
pub(super) fn neighbour(space: &KnobSpace, point: &[f64], rng: &mut impl Rng) -> Vec<f64> {
    let ranges = space.ranges();
    let mut next = space.clamp(point);
    let moves = if ranges.len() > 1 && rng.random_bool(0.5) { 2 } else { 1 };
    let mut knobs: Vec<usize> = (0..ranges.len()).collect();
    for _ in 0..moves.min(knobs.len()) {
        let knob = knobs.swap_remove(rng.random_range(0..knobs.len()));
        let (low, high) = bounds(ranges[knob].1);
        let step = match ranges[knob].1 {
            KnobRange::Int(..) => 1.0,
            KnobRange::Float(..) => (high - low) * REAL_STEP,
        };
        // Down at the top of the range, up at its bottom, either way between.
        let up = next[knob] - step < low || (next[knob] + step <= high && rng.random_bool(0.5));
        next[knob] = (if up { next[knob] + step } else { next[knob] - step }).clamp(low, high);
    }
    space.clamp(&next)
}

/// The process fitted to `done`, and its fitted cost at each of them.
fn fitted(space: &KnobSpace, done: &[Evaluation]) -> Option<(NoisyProcess, Vec<f64>)> {
    let measured: Vec<f64> = done.iter().flat_map(|e| model_input(space, &e.point)).collect();
    let noise = modelled_noise(done, MEASUREMENT_NOISE);
    let model = NoisyProcess::fit(&measured, model_dimensions(space), &modelled_costs(done), noise).ok()?;
    let fitted = model.predict(&measured)?.into_iter().map(|(mean, _)| mean).collect();
    Some((model, fitted))
}

/// The points of the `count` measured settings of lowest fitted cost, one per
/// setting, lowest first, leaving out any setting whose measurement failed: what the
/// model, rather than the luckiest measurements, believes best. `None` where no
/// model could be fitted.
pub(super) fn lowest_fitted(space: &KnobSpace, done: &[Evaluation], count: usize) -> Option<Vec<Vec<f64>>> {
    let (_, fitted) = fitted(space, done)?;
    Some(lowest(done, &fitted, count).into_iter().map(|i| done[i].point.clone()).collect())
}

/// The indices in `done` of the `count` distinct settings of lowest `fitted` cost,
/// lowest first, none whose measurement failed.
fn lowest(done: &[Evaluation], fitted: &[f64], count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..done.len()).collect();
    order.sort_by(|&a, &b| fitted[a].total_cmp(&fitted[b]));
    let failed = |i: usize| done.iter().any(|e| e.setting == done[i].setting && e.cost.is_none());
    let mut chosen: Vec<usize> = Vec::new();
    for i in order {
        if chosen.len() < count && !failed(i) && !chosen.iter().any(|&c| done[c].setting == done[i].setting) {
            chosen.push(i);
        }
    }
    chosen
}

/// The next point to measure: of random points and neighbours of the best measured
/// settings, the one of highest expected improvement that has not been measured;
/// `None` where no model could be fitted or every candidate was measured already.
pub(super) fn propose(space: &KnobSpace, done: &[Evaluation], rng: &mut StdRng) -> Option<Vec<f64>> {
    let (model, fitted) = fitted(space, done)?;
    let best = fitted.iter().copied().fold(f64::INFINITY, f64::min);

    let mut candidates: Vec<Vec<f64>> = (0..RANDOM_CANDIDATES).map(|_| space.sample(rng)).collect();
    for centre in lowest(done, &fitted, LOCAL_CENTRES) {
        for _ in 0..NEIGHBOURS {
            candidates.push(neighbour(space, &done[centre].point, rng));
        }
    }
    let settings: Vec<_> = done.iter().map(|e| space.decode(&e.point)).collect();
    candidates.retain(|c| !settings.contains(&space.decode(c)));
    if candidates.is_empty() {
        return None;
    }
    let scaled_candidates: Vec<f64> = candidates.iter().flat_map(|c| model_input(space, c)).collect();
    let belief = model.predict(&scaled_candidates)?;
    let improvement = |i: usize| expected_improvement(belief[i].0, belief[i].1, best);
    let chosen = (0..candidates.len()).max_by(|&a, &b| {
        // Where nothing is expected to improve, the lowest fitted cost.
        improvement(a).total_cmp(&improvement(b)).then(belief[b].0.total_cmp(&belief[a].0))
    })?;
    candidates.into_iter().nth(chosen)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::tune::space::SpaceLimits;

    #[test]
    fn expected_improvement_follows_its_formula() {
        // At the incumbent, EI = sd · φ(0).
        let at_best = expected_improvement(1.0, 2.0, 1.0);
        assert!((at_best - 2.0 / (2.0 * std::f64::consts::PI).sqrt()).abs() < 1e-9, "{at_best}");
        // Far below the incumbent with little doubt, EI is the gain itself.
        assert!((expected_improvement(-5.0, 0.01, 1.0) - 6.0).abs() < 1e-6);
        // Far above it with little doubt, nothing; with no doubt at all, nothing either.
        assert!(expected_improvement(10.0, 0.01, 1.0) < 1e-12);
        assert_eq!(expected_improvement(2.0, 0.0, 1.0), 0.0);
        // Doubt is worth something: at the same mean, more spread expects more.
        assert!(expected_improvement(1.5, 1.0, 1.0) > expected_improvement(1.5, 0.5, 1.0));
        // z = 1: gain·Φ(1) + sd·φ(1) with Φ(1) = 0.841345, φ(1) = 0.241971.
        let z1 = expected_improvement(0.0, 1.0, 1.0);
        assert!((z1 - (0.841_344_746 + 0.241_970_725)).abs() < 1e-6, "{z1}");
    }

    #[test]
    fn the_lowest_fitted_settings_are_distinct_measured_and_in_the_models_order() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 32, cores: 2, images: false, gpu: false });
        let mut rng = StdRng::seed_from_u64(11);
        let measure = |point: Vec<f64>, cost: Option<f64>| Evaluation {
            setting: space.decode(&point),
            point,
            cost,
            error: cost.is_none().then(|| "failed".into()),
        };
        let mut done: Vec<Evaluation> =
            (0..10).map(|i| measure(space.sample(&mut rng), Some(100.0 + 7.0 * f64::from(i)))).collect();
        // The best setting measured twice, and a setting that once failed measured
        // lowest of all the other time.
        done.push(measure(done[0].point.clone(), Some(104.0)));
        done.push(measure(done[5].point.clone(), None));
        done[5].cost = Some(90.0);
        let chosen = lowest_fitted(&space, &done, 4).unwrap_or_else(|| panic!("no model of {done:?}"));
        assert_eq!(chosen.len(), 4);
        let settings: Vec<_> = chosen.iter().map(|p| space.decode(p)).collect();
        assert!(settings.iter().enumerate().all(|(i, s)| !settings[..i].contains(s)), "distinct: {settings:?}");
        assert!(!settings.contains(&done[5].setting), "a setting that failed is not confirmed");
        let (_, fitted) = fitted(&space, &done).unwrap_or_else(|| panic!("no model of {done:?}"));
        let fitted_of = |p: &Vec<f64>| done.iter().position(|e| &e.point == p).map(|i| fitted[i]).unwrap();
        assert!(chosen.windows(2).all(|w| fitted_of(&w[0]) <= fitted_of(&w[1])), "lowest first");
        let unchosen = (0..done.len()).filter(|&i| i != 5 && i != 11 && !settings.contains(&done[i].setting));
        let worst_chosen = fitted_of(&chosen[3]);
        assert!(unchosen.map(|i| fitted[i]).all(|f| f >= worst_chosen), "none left out fits lower");
    }

    #[test]
    fn the_model_sees_how_a_setting_shares_the_cores() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 32, cores: 2, images: false, gpu: false });
        let input = |instances: f64, threads: f64, turns: f64, spinning: f64| {
            let point = [8.0, 1000.0, 0.0, instances, threads, turns, spinning];
            let input = model_input(&space, &point);
            assert_eq!(input.len(), model_dimensions(&space));
            assert_eq!(input[..7], scaled(&space, &point)[..], "the knobs come first, as they are");
            (input[7], input[8], input[9])
        };
        // Two single-threaded sessions on two cores: neither over nor under.
        assert_eq!(input(2.0, 1.0, 0.0, 1.0), (0.0, 0.0, 0.0));
        // One single-threaded session leaves a core idle: fully under.
        assert_eq!(input(1.0, 1.0, 0.0, 0.0), (0.0, 1.0, 0.0));
        // Taking turns, only one session's threads run at once.
        assert_eq!(input(4.0, 2.0, 1.0, 0.0), (0.0, 0.0, 0.0));
        // Four sessions of four threads, all at once: the most oversubscribed there is.
        assert_eq!(input(4.0, 4.0, 0.0, 0.0), (1.0, 0.0, 0.0));
        let (over, under, _) = input(2.0, 2.0, 0.0, 0.0);
        assert!(over > 0.0 && over < 1.0 && under == 0.0, "{over}");
        // Idle sessions spinning while they wait their turn.
        assert_eq!(input(3.0, 1.0, 1.0, 1.0).2, 1.0);
    }

    #[test]
    fn a_neighbour_moves_one_or_two_knobs_one_step_within_the_space() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 32, cores: 2, images: true, gpu: false });
        let ranges = space.ranges();
        let mut rng = StdRng::seed_from_u64(7);
        let (mut ones, mut twos) = (0, 0);
        for _ in 0..500 {
            let origin = space.sample(&mut rng);
            let next = neighbour(&space, &origin, &mut rng);
            assert_eq!(next, space.clamp(&next), "within the space");
            let moved: Vec<usize> = (0..origin.len()).filter(|&i| (origin[i] - next[i]).abs() > 1e-9).collect();
            match moved.len() {
                1 => ones += 1,
                2 => twos += 1,
                n => panic!("{n} knobs moved: {origin:?} -> {next:?}"),
            }
            for i in moved {
                let step = match ranges[i].1 {
                    KnobRange::Int(..) => 1.0,
                    KnobRange::Float(low, high) => (high - low) * REAL_STEP,
                };
                assert!((origin[i] - next[i]).abs() <= step + 1e-9, "{} moved by more than a step", ranges[i].0);
            }
        }
        assert!(ones > 100 && twos > 100, "one knob {ones} times, two {twos} times");
    }
}
