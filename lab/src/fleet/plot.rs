//! A fleet's runs as a picture: per scaler, the replicas it wanted and those ready
//! over time, over the replicas the demand needed at one replica's capacity; under
//! it the requests not answered within the target, second by second. Runs drawn
//! together share their axes, so scalers compare at a glance.

use super::sim::FleetRun;
use crate::plot::{Anchor, Canvas, tick};

const WIDTH: f64 = 1000.0;
const PAD: f64 = 55.0;
const REPLICAS_PANEL: f64 = 170.0;
const LATE_PANEL: f64 = 70.0;
/// One run's panels and the gaps around them.
const RUN_HEIGHT: f64 = REPLICAS_PANEL + LATE_PANEL + 75.0;
const WANTED: &str = "#ff7f0e";
const READY: &str = "#1f77b4";
const NEEDED: &str = "#9a9a9a";
const LATE: &str = "#d62728";

/// `runs` (of one trace) as SVG, one pair of panels each; `capacity_per_s` is one
/// replica's, which turns arrivals into the replicas they need.
pub fn fleet_svg(runs: &[FleetRun], capacity_per_s: f64, title: &str) -> String {
    let seconds = runs.iter().map(|r| r.seconds.len()).max().unwrap_or(0).max(1);
    let needed = |run: &FleetRun| -> Vec<f64> {
        run.seconds.iter().map(|s| s.arrived as f64 / capacity_per_s.max(1e-9)).collect()
    };
    let replicas_max = runs
        .iter()
        .flat_map(|r| r.seconds.iter().map(|s| f64::from(s.wanted.max(s.ready))).chain(needed(r)))
        .fold(1.0, f64::max)
        .ceil();
    let late_max = runs.iter().flat_map(|r| r.seconds.iter().map(|s| s.late as f64)).fold(1.0, f64::max);
    let x = |t: f64| PAD + t / seconds as f64 * (WIDTH - 2.0 * PAD);
    let mut page = Canvas::new(WIDTH, PAD + RUN_HEIGHT * runs.len().max(1) as f64, title);
    for (i, run) in runs.iter().enumerate() {
        let top = PAD + RUN_HEIGHT * i as f64;
        let y = |r: f64| top + REPLICAS_PANEL - r / replicas_max * REPLICAS_PANEL;
        let t = &run.totals;
        let heading = format!(
            "{}: {:.0} replica-s, {:.2} % within the SLO, {} late, at most {} replicas",
            run.scaler,
            t.replica_seconds,
            t.within_slo_share() * 100.0,
            t.late(),
            t.max_replicas
        );
        page.text(PAD, top - 8.0, Anchor::Start, &heading);
        let line = |values: Vec<f64>| -> Vec<(f64, f64)> {
            values.iter().enumerate().map(|(s, v)| (x(s as f64 + 0.5), y(*v))).collect()
        };
        page.polyline(&line(needed(run)), NEEDED, 0.8, Some(0.8));
        page.polyline(&line(run.seconds.iter().map(|s| f64::from(s.wanted)).collect()), WANTED, 1.5, None);
        page.polyline(&line(run.seconds.iter().map(|s| f64::from(s.ready)).collect()), READY, 1.5, None);
        axes(&mut page, top, REPLICAS_PANEL, seconds as f64);
        page.text(PAD - 4.0, top + 10.0, Anchor::End, &tick(replicas_max));
        page.text(PAD - 4.0, top + REPLICAS_PANEL, Anchor::End, "0");
        let legend = top + REPLICAS_PANEL + 22.0;
        page.legend(PAD + 200.0, legend, WANTED, "replicas wanted");
        page.legend(PAD + 360.0, legend, READY, "replicas ready");
        page.legend(PAD + 510.0, legend, NEEDED, "replicas the arrivals need");

        let late_top = legend + 22.0;
        let bar = (WIDTH - 2.0 * PAD) / seconds as f64;
        for (s, second) in run.seconds.iter().enumerate().filter(|(_, s)| s.late > 0) {
            let h = (second.late as f64 / late_max * LATE_PANEL).max(1.0);
            page.rect((x(s as f64), late_top + LATE_PANEL - h), (bar.max(1.0), h), LATE, None);
        }
        page.axes(PAD, late_top, WIDTH - PAD, late_top + LATE_PANEL);
        page.text(PAD - 4.0, late_top + 10.0, Anchor::End, &tick(late_max));
        page.text_coloured(PAD + 4.0, late_top + 10.0, Anchor::Start, LATE, "late answers per second");
    }
    page.finish()
}

/// A panel's axes, with time ticks in minutes.
fn axes(page: &mut Canvas, top: f64, height: f64, seconds: f64) {
    let bottom = top + height;
    page.axes(PAD, top, WIDTH - PAD, bottom);
    for i in 0..=6 {
        let t = seconds * f64::from(i) / 6.0;
        let xt = PAD + t / seconds * (WIDTH - 2.0 * PAD);
        page.text(xt, bottom + 14.0, Anchor::Middle, &format!("{} min", tick(t / 60.0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{FleetSecond, FleetTotals, ScalerKind};

    #[test]
    fn each_run_draws_wanted_ready_and_needed_lines_and_a_bar_per_late_second() {
        let second = |late, wanted| FleetSecond { arrived: 100, late, wanted, ready: 1, held: wanted };
        let run = |scaler| FleetRun {
            scaler,
            totals: FleetTotals::default(),
            seconds: vec![second(0, 1), second(3, 2), second(0, 2), second(5, 1)],
        };
        let svg = fleet_svg(&[run(ScalerKind::Demand), run(ScalerKind::Cpu)], 50.0, "fleet");
        assert_eq!(svg.matches("<polyline").count(), 2 * (3 + 2), "three lines and two panels' axes a run");
        assert_eq!(svg.matches(&format!(r#"fill="{LATE}"/>"#)).count(), 2 * 2, "two late seconds a run");
        assert!(svg.contains(">demand: ") && svg.contains(">cpu: "), "{svg}");
    }
}
