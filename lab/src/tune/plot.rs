//! The convergence plot: the best cost found so far against evaluations, one thin
//! line per search and a thick one for each strategy's mean over its seeds.

use std::collections::BTreeMap;

use super::search::{SearchTrace, Strategy};
use crate::plot::{Anchor, Canvas};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
const PAD: f64 = 60.0;

fn colour(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Bayes => "#1f77b4",
        Strategy::Random => "#ff7f0e",
    }
}

/// The plot of `traces` as SVG, titled `title`, each cost drawn as `shown` makes it
/// (rates are searched negated and drawn positive), the axis labelled `unit`.
pub fn convergence_svg(traces: &[SearchTrace], title: &str, unit: &str, shown: impl Fn(f64) -> f64) -> String {
    let curves: Vec<(Strategy, Vec<Option<f64>>)> =
        traces.iter().map(|t| (t.strategy, t.best_so_far().into_iter().map(|v| v.map(&shown)).collect())).collect();
    let evaluations = curves.iter().map(|(_, c)| c.len()).max().unwrap_or(0).max(2);
    let values = curves.iter().flat_map(|(_, c)| c.iter().flatten().copied());
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    let (low, high) = if low.is_finite() { (low, if high > low { high } else { low + 1.0 }) } else { (0.0, 1.0) };
    let margin = (high - low) * 0.05;
    let (low, high) = (low - margin, high + margin);
    let x = |i: usize| PAD + i as f64 / (evaluations - 1) as f64 * (WIDTH - 2.0 * PAD);
    let y = |v: f64| PAD + (high - v) / (high - low) * (HEIGHT - 2.0 * PAD);
    let mut page = Canvas::new(WIDTH, HEIGHT, title);
    let (bottom, right) = (HEIGHT - PAD, WIDTH - PAD);
    page.axes(PAD, PAD, right, bottom);
    for value in [high, low, (high + low) / 2.0] {
        page.text(PAD - 5.0, y(value) + 4.0, Anchor::End, &format!("{value:.1}"));
    }
    page.y_label(16.0, &format!("best so far ({unit})"));
    for i in [1, evaluations / 2, evaluations] {
        page.text(x(i - 1), bottom + 16.0, Anchor::Middle, &i.to_string());
    }
    page.text(WIDTH / 2.0, bottom + 34.0, Anchor::Middle, "evaluations");
    let line = |curve: &[Option<f64>]| -> Vec<(f64, f64)> {
        curve.iter().enumerate().filter_map(|(i, v)| v.map(|v| (x(i), y(v)))).collect()
    };
    for (strategy, curve) in &curves {
        page.polyline(&line(curve), colour(*strategy), 1.0, Some(0.35));
    }
    let mut by_strategy: BTreeMap<Strategy, Vec<&Vec<Option<f64>>>> = BTreeMap::new();
    for (strategy, curve) in &curves {
        by_strategy.entry(*strategy).or_default().push(curve);
    }
    for (n, (strategy, group)) in by_strategy.iter().enumerate() {
        let mean: Vec<Option<f64>> = (0..evaluations)
            .map(|i| {
                let at: Vec<f64> = group.iter().filter_map(|c| c.get(i).copied().flatten()).collect();
                (at.len() == group.len()).then(|| at.iter().sum::<f64>() / at.len() as f64)
            })
            .collect();
        page.polyline(&line(&mean), colour(*strategy), 3.0, None);
        let legend_y = PAD + 14.0 + 18.0 * n as f64;
        let label = format!("{} (mean of {} seeds)", strategy.name(), group.len());
        page.legend(right - 200.0, legend_y - 10.0, colour(*strategy), &label);
    }
    page.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::space::{KnobSpace, SpaceLimits};
    use crate::tune::{Evaluation, SearchOptions};

    fn trace(strategy: Strategy, costs: &[Option<f64>]) -> SearchTrace {
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false });
        let evaluations = costs
            .iter()
            .map(|&cost| Evaluation { point: vec![], setting: space.decode(&[]), cost, error: None })
            .collect();
        SearchTrace {
            strategy,
            options: SearchOptions { budget: costs.len(), initial: 1, seed: 0, confirm: 0 },
            evaluations,
        }
    }

    #[test]
    fn each_search_and_each_strategy_s_mean_is_drawn() {
        let traces = [
            trace(Strategy::Bayes, &[Some(30.0), Some(20.0), Some(25.0)]),
            trace(Strategy::Bayes, &[None, Some(40.0), Some(10.0)]),
            trace(Strategy::Random, &[Some(35.0), Some(33.0), Some(31.0)]),
        ];
        let svg = convergence_svg(&traces, "p99 at concurrency 8", "ms", |c| c);
        assert_eq!(svg.matches("<polyline").count(), 1 + 3 + 2, "axes, three searches, two means");
        assert!(svg.contains("bayes (mean of 2 seeds)") && svg.contains("random (mean of 1 seeds)"));
        // Best so far spans 10 to 40; the axis adds 5 % either side.
        assert!(svg.contains(">41.5<") && svg.contains(">8.5<"), "{svg}");
        // A rate, searched negated, is drawn as the rate.
        let negated = [trace(Strategy::Random, &[Some(-100.0), Some(-300.0)])];
        let svg = convergence_svg(&negated, "throughput", "answers/s", |c| -c);
        assert!(svg.contains(">310.0<") && svg.contains(">90.0<") && !svg.contains(">-"), "{svg}");
    }
}
