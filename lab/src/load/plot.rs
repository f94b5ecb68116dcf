//! A run as a picture, like the TU Delft thesis's figures: per task, what it held of
//! the machine (instances, and the cores they and every task's hold) where the run
//! told it; under it the latency of every request over time with the SLO line and the
//! demand, on bands of the variant serving; under that the machine's CPU
//! utilisation. And where the time went, stage by stage, over the run.

use std::collections::BTreeMap;

use super::record::{Outcome, RequestRecord};
use super::runner::RunResult;
use super::stages::StageBreakdown;
use crate::plot::{Anchor, Canvas};

const BANDS: [&str; 6] = ["#cfe8ff", "#ffe2c6", "#d9f2d0", "#f3d6f0", "#fff3b0", "#e0e0e0"];
const WIDTH: f64 = 1000.0;
const PAD: f64 = 55.0;
const PANEL: f64 = 260.0;
const CPU_PANEL: f64 = 110.0;
const ALLOCATION_PANEL: f64 = 100.0;
const INSTANCES_PURPLE: &str = "#9467bd";
const CORES_ORANGE: &str = "#ff7f0e";
const SLO_RED: &str = "#d62728";
const DEMAND_BLUE: &str = "#1f77b4";

/// The plot of `task` in `run`, as SVG.
pub fn task_svg(run: &RunResult, task: &str, title: &str) -> String {
    let Some(target) = run.targets.iter().find(|t| t.task == task) else { return String::new() };
    let seconds = f64::from(run.duration_s.max(1));
    let records: Vec<_> = run.records.iter().filter(|r| r.task == task).collect();
    let mut answered: Vec<f64> = records.iter().filter(|r| r.status == Outcome::Served).map(|r| r.latency_ms).collect();
    answered.sort_by(f64::total_cmp);
    let p999 = answered.get(answered.len() * 999 / 1000).copied().unwrap_or(0.0);
    let y_max = p999.max(target.slo_ms * 1.5).max(1.0);
    let mut demand = vec![0.0f64; run.duration_s as usize];
    for r in &records {
        if let Some(d) = demand.get_mut(r.sent_s as usize) {
            *d += 1.0;
        }
    }
    let demand_max = demand.iter().copied().fold(1.0, f64::max) * 1.1;
    let x = |t: f64| PAD + t / seconds * (WIDTH - 2.0 * PAD);
    let samples: Vec<_> = run.samples.iter().filter(|s| s.task == task).collect();
    let allocated = samples.iter().any(|s| s.allocation.is_some());
    let above = if allocated { ALLOCATION_PANEL + 2.0 * PAD } else { 0.0 };
    let top = PAD + above;
    let y = |ms: f64| top + PANEL - ms.min(y_max) / y_max * PANEL;
    let mut page = Canvas::new(WIDTH, above + PANEL + CPU_PANEL + 3.0 * PAD, title);
    if allocated {
        allocation_panel(&mut page, &samples, PAD, seconds);
    }

    // Bands of the active variant, one colour per variant.
    let mut colours: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, colour) in target.accuracies.keys().zip(BANDS.iter().cycle()) {
        colours.insert(name, colour);
    }
    for sample in &samples {
        let Some(active) = sample.active.as_deref() else { continue };
        let colour = colours.get(active).copied().unwrap_or("#eeeeee");
        let (x0, x1) = (x(f64::from(sample.second)), x(f64::from(sample.second + 1)));
        page.rect((x0, top), (x1 - x0 + 0.3, PANEL), colour, Some(active));
    }
    for (i, (name, colour)) in colours.iter().enumerate() {
        page.legend(PAD + 10.0 + 150.0 * i as f64, top + PANEL + 28.0, colour, name);
    }

    // Every request: answered in time black, late or failed red (failed at the top).
    for r in &records {
        let in_slo = r.status == Outcome::Served && r.latency_ms <= target.slo_ms;
        let (colour, ms) = if r.status == Outcome::Served {
            (if in_slo { "black" } else { SLO_RED }, r.latency_ms)
        } else {
            (SLO_RED, y_max)
        };
        page.dot(x(r.sent_s), y(ms), 1.1, colour);
    }
    let slo_y = y(target.slo_ms);
    page.dashed((PAD, slo_y), (WIDTH - PAD, slo_y), SLO_RED, "6 4");
    page.text_coloured(WIDTH - PAD - 4.0, slo_y - 4.0, Anchor::End, SLO_RED, &format!("SLO {:.0} ms", target.slo_ms));
    let path: Vec<(f64, f64)> =
        demand.iter().enumerate().map(|(t, d)| (x(t as f64 + 0.5), top + PANEL - d / demand_max * PANEL)).collect();
    page.polyline(&path, DEMAND_BLUE, 1.5, None);
    axes(&mut page, top, PANEL, seconds);
    page.text(PAD - 4.0, top + 10.0, Anchor::End, &format!("{y_max:.0} ms"));
    let demand_label = format!("demand (blue), up to {demand_max:.0}/s");
    page.text_coloured(WIDTH - PAD - 200.0, top - 6.0, Anchor::Start, DEMAND_BLUE, &demand_label);

    // CPU utilisation.
    let cpu_top = top + PANEL + 2.0 * PAD;
    let cy = |p: f64| cpu_top + CPU_PANEL - p.clamp(0.0, 100.0) / 100.0 * CPU_PANEL;
    let cpu: Vec<(f64, f64)> =
        samples.iter().filter_map(|s| s.cpu_percent.map(|c| (x(f64::from(s.second) + 0.5), cy(c)))).collect();
    page.polyline(&cpu, "#2ca02c", 1.5, None);
    axes(&mut page, cpu_top, CPU_PANEL, seconds);
    page.text(PAD - 4.0, cpu_top + 10.0, Anchor::End, "100 %");
    page.text(PAD, cpu_top - 6.0, Anchor::Start, "CPU utilisation of the machine");
    page.finish()
}

const STAGE_COLOURS: [&str; 6] = ["#d62728", "#ff7f0e", "#bcbd22", "#1f77b4", "#9467bd", "#c7c7c7"];

/// Where the time of `records` (one task's) went, second by second over `seconds`:
/// the mean of each stage per request sent in the second, stacked; `None` where no
/// answer told its stages.
pub fn stages_svg(records: &[&RequestRecord], seconds: u32, title: &str) -> Option<String> {
    let seconds = seconds.max(1);
    let mut sent: Vec<Vec<&RequestRecord>> = vec![Vec::new(); seconds as usize];
    for &r in records {
        if let Some(bucket) = sent.get_mut(r.sent_s.max(0.0) as usize) {
            bucket.push(r);
        }
    }
    let per_second: Vec<Option<StageBreakdown>> = sent.into_iter().map(StageBreakdown::of).collect();
    let y_max = per_second.iter().flatten().map(|b| b.latency_ms).fold(0.0, f64::max) * 1.1;
    if y_max <= 0.0 {
        return None;
    }
    let (top, height) = (PAD, PANEL);
    let bar = (WIDTH - 2.0 * PAD) / f64::from(seconds);
    let mut page = Canvas::new(WIDTH, top + height + 2.0 * PAD, title);
    for (second, breakdown) in per_second.iter().enumerate() {
        let Some(b) = breakdown else { continue };
        let x = PAD + bar * second as f64;
        let mut bottom = top + height;
        for ((name, ms), colour) in b.parts().iter().zip(STAGE_COLOURS) {
            let h = ms / y_max * height;
            page.rect((x, bottom - h), ((bar - 1.0).max(0.5), h), colour, Some(&format!("{name} {ms:.2} ms")));
            bottom -= h;
        }
    }
    axes(&mut page, top, height, f64::from(seconds));
    page.text(PAD - 4.0, top + 10.0, Anchor::End, &format!("{y_max:.1} ms"));
    page.text(PAD, top - 6.0, Anchor::Start, "mean ms per request sent in each second");
    let legend_y = top + height + 28.0;
    for (i, ((name, _), colour)) in StageBreakdown::default().parts().iter().zip(STAGE_COLOURS).enumerate() {
        page.legend(PAD + 150.0 * i as f64, legend_y, colour, name);
    }
    Some(page.finish())
}

/// Instances of the serving variant, the cores they hold of their own, and the cores
/// every task's instances hold, second by second, in a panel at `top`.
fn allocation_panel(page: &mut Canvas, samples: &[&super::Sample], top: f64, seconds: f64) {
    let x = |t: f64| PAD + t / seconds * (WIDTH - 2.0 * PAD);
    let most = samples
        .iter()
        .filter_map(|s| s.allocation)
        .map(|a| f64::from(a.instances).max(a.cores).max(a.machine_cores))
        .fold(1.0, f64::max)
        .ceil();
    let y = |v: f64| top + ALLOCATION_PANEL - v / most * ALLOCATION_PANEL;
    let steps = |of: &dyn Fn(&super::Allocation) -> f64| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| s.allocation.as_ref().map(|a| (s.second, of(a))))
            .flat_map(|(second, v)| [(x(f64::from(second)), y(v)), (x(f64::from(second + 1)), y(v))])
            .collect()
    };
    page.polyline(&steps(&|a| a.machine_cores), "#7f7f7f", 1.2, Some(0.7));
    page.polyline(&steps(&|a| a.cores), CORES_ORANGE, 1.8, None);
    page.polyline(&steps(&|a| f64::from(a.instances)), INSTANCES_PURPLE, 1.8, None);
    axes(page, top, ALLOCATION_PANEL, seconds);
    page.text(PAD - 4.0, top + 10.0, Anchor::End, &format!("{most:.0}"));
    page.legend(PAD + 10.0, top - 20.0, INSTANCES_PURPLE, "instances");
    page.legend(PAD + 160.0, top - 20.0, CORES_ORANGE, "cores held by the task");
    page.legend(PAD + 380.0, top - 20.0, "#7f7f7f", "cores held by every task");
}

/// A panel's axes, with time ticks in s.
fn axes(page: &mut Canvas, top: f64, height: f64, seconds: f64) {
    let bottom = top + height;
    page.axes(PAD, top, WIDTH - PAD, bottom);
    for i in 0..=5 {
        let t = seconds * f64::from(i) / 5.0;
        let xt = PAD + t / seconds * (WIDTH - 2.0 * PAD);
        page.text(xt, bottom + 15.0, Anchor::Middle, &format!("{t:.0} s"));
    }
}
