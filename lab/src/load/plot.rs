//! A run as a picture, like the TU Delft thesis's figures: per task, the latency of
//! every request over time with the SLO line and the demand, on bands of the variant
//! serving; under it the machine's CPU utilisation. And where the time went, stage
//! by stage, over the run.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::record::{RequestRecord, Status};
use super::runner::RunResult;
use super::stages::StageBreakdown;

const BANDS: [&str; 6] = ["#cfe8ff", "#ffe2c6", "#d9f2d0", "#f3d6f0", "#fff3b0", "#e0e0e0"];
const WIDTH: f64 = 1000.0;
const PAD: f64 = 55.0;
const PANEL: f64 = 260.0;
const CPU_PANEL: f64 = 110.0;

/// The plot of `task` in `run`, as SVG.
pub fn task_svg(run: &RunResult, task: &str, title: &str) -> String {
    let Some(target) = run.targets.iter().find(|t| t.task == task) else { return String::new() };
    let seconds = f64::from(run.duration_s.max(1));
    let records: Vec<_> = run.records.iter().filter(|r| r.task == task).collect();
    let mut answered: Vec<f64> = records.iter().filter(|r| r.status == Status::Ok).map(|r| r.latency_ms).collect();
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
    let height = PANEL + CPU_PANEL + 3.0 * PAD;
    let x = |t: f64| PAD + t / seconds * (WIDTH - 2.0 * PAD);
    let top = PAD;
    let y = |ms: f64| top + PANEL - ms.min(y_max) / y_max * PANEL;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{title}</text>"#, WIDTH / 2.0);

    // Bands of the active variant, one colour per variant.
    let samples: Vec<_> = run.samples.iter().filter(|s| s.task == task).collect();
    let mut colours: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, colour) in target.accuracies.keys().zip(BANDS.iter().cycle()) {
        colours.insert(name, colour);
    }
    for sample in &samples {
        let Some(active) = sample.active.as_deref() else { continue };
        let colour = colours.get(active).copied().unwrap_or("#eeeeee");
        let (x0, x1) = (x(f64::from(sample.second)), x(f64::from(sample.second + 1)));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{top}" width="{:.1}" height="{PANEL}" fill="{colour}"><title>{active}</title></rect>"#,
            x1 - x0 + 0.3
        );
    }
    for (i, (name, colour)) in colours.iter().enumerate() {
        let lx = PAD + 10.0 + 150.0 * i as f64;
        let _ = writeln!(s, r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{colour}"/>"#, top + PANEL + 28.0);
        let _ = writeln!(s, r#"<text x="{}" y="{}">{name}</text>"#, lx + 16.0, top + PANEL + 39.0);
    }

    // Every request: answered in time black, late or failed red (failed at the top).
    for r in &records {
        let in_slo = r.status == Status::Ok && r.latency_ms <= target.slo_ms;
        let (colour, ms) = if r.status == Status::Ok {
            (if in_slo { "black" } else { "#d62728" }, r.latency_ms)
        } else {
            ("#d62728", y_max)
        };
        let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="1.1" fill="{colour}"/>"#, x(r.sent_s), y(ms));
    }
    let slo_y = y(target.slo_ms);
    let _ = writeln!(
        s,
        r##"<line x1="{PAD}" y1="{slo_y:.1}" x2="{:.1}" y2="{slo_y:.1}" stroke="#d62728" stroke-dasharray="6 4"/>"##,
        WIDTH - PAD
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" fill="#d62728" text-anchor="end">SLO {:.0} ms</text>"##,
        WIDTH - PAD - 4.0,
        slo_y - 4.0,
        target.slo_ms
    );
    let path: Vec<String> = demand
        .iter()
        .enumerate()
        .map(|(t, d)| format!("{:.1},{:.1}", x(t as f64 + 0.5), top + PANEL - d / demand_max * PANEL))
        .collect();
    let _ = writeln!(s, r##"<polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>"##, path.join(" "));
    axes(&mut s, top, PANEL, seconds);
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">{y_max:.0} ms</text>"#, PAD - 4.0, top + 10.0);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" fill="#1f77b4">demand (blue), up to {demand_max:.0}/s</text>"##,
        WIDTH - PAD - 200.0,
        top - 6.0
    );

    // CPU utilisation.
    let cpu_top = top + PANEL + 2.0 * PAD;
    let cy = |p: f64| cpu_top + CPU_PANEL - p.clamp(0.0, 100.0) / 100.0 * CPU_PANEL;
    let cpu: Vec<String> = samples
        .iter()
        .filter_map(|s| s.cpu_percent.map(|c| format!("{:.1},{:.1}", x(f64::from(s.second) + 0.5), cy(c))))
        .collect();
    let _ = writeln!(s, r##"<polyline points="{}" fill="none" stroke="#2ca02c" stroke-width="1.5"/>"##, cpu.join(" "));
    axes(&mut s, cpu_top, CPU_PANEL, seconds);
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">100 %</text>"#, PAD - 4.0, cpu_top + 10.0);
    let _ = writeln!(s, r#"<text x="{PAD}" y="{}">CPU utilisation of the machine</text>"#, cpu_top - 6.0);
    s.push_str("</svg>\n");
    s
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
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{}" font-family="sans-serif" font-size="12">"#,
        top + height + 2.0 * PAD
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{title}</text>"#, WIDTH / 2.0);
    for (second, breakdown) in per_second.iter().enumerate() {
        let Some(b) = breakdown else { continue };
        let x = PAD + bar * second as f64;
        let mut bottom = top + height;
        for ((name, ms), colour) in b.parts().iter().zip(STAGE_COLOURS) {
            let h = ms / y_max * height;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{colour}"><title>{name} {ms:.2} ms</title></rect>"#,
                bottom - h,
                (bar - 1.0).max(0.5)
            );
            bottom -= h;
        }
    }
    axes(&mut s, top, height, f64::from(seconds));
    let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">{y_max:.1} ms</text>"#, PAD - 4.0, top + 10.0);
    let _ = writeln!(s, r#"<text x="{PAD}" y="{}">mean ms per request sent in each second</text>"#, top - 6.0);
    let legend_y = top + height + 28.0;
    for (i, ((name, _), colour)) in StageBreakdown::default().parts().iter().zip(STAGE_COLOURS).enumerate() {
        let lx = PAD + 150.0 * i as f64;
        let _ = writeln!(s, r#"<rect x="{lx}" y="{legend_y}" width="12" height="12" fill="{colour}"/>"#);
        let _ = writeln!(s, r#"<text x="{}" y="{}">{name}</text>"#, lx + 16.0, legend_y + 11.0);
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// A panel's axes, with time ticks in s.
fn axes(s: &mut String, top: f64, height: f64, seconds: f64) {
    let bottom = top + height;
    let _ = writeln!(s, r#"<line x1="{PAD}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="black"/>"#, WIDTH - PAD);
    let _ = writeln!(s, r#"<line x1="{PAD}" y1="{top}" x2="{PAD}" y2="{bottom}" stroke="black"/>"#);
    for i in 0..=5 {
        let t = seconds * f64::from(i) / 5.0;
        let xt = PAD + t / seconds * (WIDTH - 2.0 * PAD);
        let _ = writeln!(s, r#"<text x="{xt:.1}" y="{}" text-anchor="middle">{t:.0} s</text>"#, bottom + 15.0);
    }
}
