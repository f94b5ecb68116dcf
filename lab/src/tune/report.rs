//! The tables of `results.md`: per objective, what each strategy found and how it
//! remeasured against the default and the model alone, with the noise; every
//! remeasured setting round by round; the best setting as TOML to paste.

use std::fmt::Write as _;

use super::candidates::{Candidate, Role};
use super::{Objective, SearchTrace, ServingSetting, Strategy};
use crate::stats::{extremes, mean_and_sd, mean_and_sd_text, median, relative_spread};

/// The table of one objective: per strategy the best each search found and its
/// remeasured median (mean ± sd over seeds), the default, and the noise.
pub fn table(
    what: &str,
    objective: &Objective,
    traces: &[SearchTrace],
    candidates: &[Candidate],
    rounds: usize,
) -> String {
    let unit = objective.unit();
    let shown = |v: f64| objective.shown(v);
    let mut s = format!(
        "\n### {what}\n\n| setting | best found in the search, {unit} | remeasured (median of {rounds} interleaved rounds), {unit} | searches |\n|---|---:|---:|---:|\n"
    );
    let mut remeasured_by = std::collections::BTreeMap::new();
    for strategy in [Strategy::Bayes, Strategy::Random] {
        let found: Vec<f64> =
            traces.iter().filter(|t| t.strategy == strategy).filter_map(|t| Some(t.best()?.cost)).map(shown).collect();
        let again: Vec<f64> = candidates
            .iter()
            .filter(|c| c.role == Role::Found(strategy))
            .filter_map(Candidate::median)
            .map(shown)
            .collect();
        if found.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            strategy.name(),
            mean_and_sd_text(&found),
            mean_and_sd_text(&again),
            found.len()
        );
        remeasured_by.insert(strategy, mean_and_sd(&again).map(|(m, _)| m));
    }
    let default = candidates.iter().find(|c| c.role == Role::Default);
    let model_alone = candidates.iter().find(|c| c.role == Role::ModelAlone).and_then(Candidate::median);
    let default_median = default.and_then(Candidate::median).map(shown);
    let _ = writeln!(s, "| default | – | {} | – |", default_median.map_or("failed".into(), |m| format!("{m:.2}")));
    if let Some(alone) = model_alone {
        let _ = writeln!(s, "| model alone, no serving (reference) | – | {:.2} | – |", shown(alone));
    }
    // Noise: how far one setting's measurements spread over the rounds, as a share of
    // their median (the default's, and the median of every candidate's).
    let spreads: Vec<f64> = candidates
        .iter()
        .filter(|c| c.role != Role::ModelAlone)
        .filter_map(|c| relative_spread(&c.measured()))
        .collect();
    let percent = |share: Option<f64>| share.map_or("–".into(), |m| format!("{:.1} %", m * 100.0));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.3}", a / b),
        _ => "–".into(),
    };
    let bayes = remeasured_by.get(&Strategy::Bayes).copied().flatten();
    let random = remeasured_by.get(&Strategy::Random).copied().flatten();
    let _ = writeln!(
        s,
        "\nRemeasured, bayes ÷ random: {}; bayes ÷ default: {} ({}). Noise: a setting's measurements spread \
         over the rounds by {} of their median (the default's: {}).\n",
        ratio(bayes, random),
        ratio(bayes, default_median),
        if objective.lower_is_better() { "below 1 is better" } else { "above 1 is better" },
        median(&spreads).map_or("–".into(), |m| format!("{} (median)", percent(Some(m)))),
        percent(default.and_then(|d| relative_spread(&d.measured()))),
    );
    let better = |ratio: f64| if objective.lower_is_better() { ratio < 1.0 } else { ratio > 1.0 };
    for (what, a, b) in [
        ("bayes ÷ random", Role::Found(Strategy::Bayes), Role::Found(Strategy::Random)),
        ("bayes ÷ default", Role::Found(Strategy::Bayes), Role::Default),
    ] {
        let ratios = per_round_ratios(candidates, a, b);
        if let Some(line) = describe_ratios(what, &ratios, better) {
            let _ = writeln!(s, "{line}");
        }
    }
    s.push('\n');
    if let Some(alone) = model_alone.map(shown) {
        let _ = writeln!(
            s,
            "The model alone (its sessions run back to back at the best batch size the clients can fill, \
             with no queue, batching or preprocessing) would give {alone:.2} {unit}: default ÷ model alone {}, \
             bayes ÷ model alone {}. No setting can come much below it.\n",
            ratio(default_median, Some(alone)),
            ratio(bayes, Some(alone)),
        );
    }
    s
}

/// Per round, the mean cost of the candidates in role `a` over that of those in role
/// `b`, both measured in that round: what the machine did in a round falls on both,
/// so these ratios spread less than the settings' own rounds do. Rounds where either
/// side has no measurement are left out.
pub fn per_round_ratios(candidates: &[Candidate], a: Role, b: Role) -> Vec<f64> {
    let rounds = candidates.iter().map(|c| c.costs.len()).max().unwrap_or(0);
    let mean_in = |role: Role, round: usize| {
        let costs: Vec<f64> = candidates
            .iter()
            .filter(|c| c.role == role)
            .filter_map(|c| c.costs.get(round).copied().flatten())
            .collect();
        (!costs.is_empty()).then(|| costs.iter().sum::<f64>() / costs.len() as f64)
    };
    (0..rounds)
        .filter_map(|round| Some(mean_in(a, round)? / mean_in(b, round)?))
        .filter(|ratio| ratio.is_finite())
        .collect()
}

/// One line saying how per-round ratios fell: their median, range, and in how many
/// rounds the first side was the better.
pub fn describe_ratios(what: &str, ratios: &[f64], better: impl Fn(f64) -> bool) -> Option<String> {
    let middle = median(ratios)?;
    let (low, high) = extremes(ratios);
    let won = ratios.iter().filter(|&&r| better(r)).count();
    Some(format!(
        "Per round, {what}: median {middle:.3}, from {low:.3} to {high:.3}; better in {won} of {} rounds.",
        ratios.len()
    ))
}

/// Every remeasured setting with its cost in each round, in the order the rounds
/// measured them: where a setting's rounds split, or the default moves between
/// runs, it shows here and not in the medians.
pub fn rounds_table(objective: &Objective, candidates: &[Candidate]) -> String {
    let rounds = candidates.iter().map(|c| c.costs.len()).max().unwrap_or(0);
    let mut s = format!("Every remeasured setting, {} per round:\n\n| setting | what it sets |", objective.unit());
    for round in 1..=rounds {
        let _ = write!(s, " round {round} |");
    }
    s.push_str(" median | spread |\n|---|---|");
    s.push_str(&"---:|".repeat(rounds + 2));
    s.push('\n');
    for c in candidates {
        let what = if c.role == Role::ModelAlone { "its sessions alone".into() } else { c.setting.brief() };
        let _ = write!(s, "| {} | {what} |", c.label);
        for round in 0..rounds {
            match c.costs.get(round).copied().flatten() {
                Some(cost) => {
                    let _ = write!(s, " {:.2} |", objective.shown(cost));
                }
                None => s.push_str(" failed |"),
            }
        }
        let median = c.median().map_or("–".into(), |m| format!("{:.2}", objective.shown(m)));
        let spread = relative_spread(&c.measured()).map_or("–".into(), |v| format!("{:.1} %", v * 100.0));
        let _ = writeln!(s, " {median} | {spread} |");
    }
    s.push('\n');
    s
}

/// The setting as TOML to paste into the config.
pub fn toml_snippet(task: &str, variant: &str, setting: &ServingSetting) -> String {
    let mut s = String::from("[onnxruntime]\n");
    let _ = writeln!(s, "intra_op_threads = {}", setting.intra_op_threads);
    let _ = writeln!(s, "one_run_at_a_time = {}", setting.one_run_at_a_time);
    let _ = writeln!(s, "spinning = {}", setting.spinning);
    if let Some(threads) = setting.preprocessing_threads {
        let _ = writeln!(s, "\n[preprocessing]\nthreads = {threads}");
    }
    let _ = writeln!(s, "\n# In [[tasks]] name = \"{task}\", [[tasks.variants]] name = \"{variant}\":");
    let _ = writeln!(s, "instances = {}", setting.instances);
    let _ = writeln!(s, "batching.max_batch_size = {}", setting.max_batch_size);
    let _ = writeln!(s, "batching.max_queue_delay_us = {}", setting.max_queue_delay_us);
    let _ = writeln!(
        s,
        "batching.preferred_batch_sizes = {:?}",
        setting.preferred_batch_sizes.sizes(setting.max_batch_size)
    );
    if let Some(cuda) = &setting.cuda {
        let _ = writeln!(s, "onnx.cuda.conv_algo_search = \"{}\"", cuda.search_name());
        let _ = writeln!(s, "onnx.cuda.tf32 = {}", cuda.tf32);
        let _ = writeln!(s, "onnx.cuda.prefer_nhwc = {}", cuda.prefer_nhwc);
        let _ = writeln!(s, "onnx.cuda.conv_max_workspace = {}", cuda.conv_max_workspace);
        let _ = writeln!(s, "onnx.cuda.pinned_inputs = {}", cuda.pinned_inputs);
        let _ = writeln!(s, "onnx.cuda.cuda_graph = {}", cuda.cuda_graph);
    }
    s
}

/// The report's lines for the best remeasured candidate of `variant` of `task`: its
/// label and setting, and the setting as TOML.
pub fn best_remeasured(task: &str, variant: &str, best: &Candidate) -> String {
    let snippet = toml_snippet(task, variant, &best.setting);
    format!("Best remeasured: {} ({}).\n\n```toml\n{snippet}```\n\n", best.label, best.setting.brief())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Goal, KnobSpace, SpaceLimits};

    #[test]
    fn the_rounds_table_lists_every_setting_s_rounds_and_failures() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false });
        let objective =
            Objective { goal: Goal::Throughput, concurrency: None, rate: Some(100.0), slo_ms: Some(50.0), load: None };
        let candidate = |label: &str, role, costs: Vec<Option<f64>>| Candidate {
            label: label.into(),
            role,
            setting: space.decode(&[4.0, 500.0, 0.0, 2.0, 1.0, 0.0, 1.0]),
            costs,
        };
        let candidates = [
            candidate("default", Role::Default, vec![Some(-90.0), Some(-80.0), Some(-100.0)]),
            candidate("bayes seed 0", Role::Found(Strategy::Bayes), vec![Some(-95.0), None, Some(-99.0)]),
        ];
        let table = rounds_table(&objective, &candidates);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 3, "a header and a row per setting:\n{table}");
        assert!(rows[0].contains("round 3 | median | spread"), "{table}");
        assert_eq!(
            rows[1],
            "| default | batch 4 delay 500 µs preferred None instances 2 threads 1 spin | 90.00 | 80.00 | 100.00 | 90.00 | 22.2 % |"
        );
        assert!(rows[2].contains("| 95.00 | failed | 99.00 | 95.00 | 4.2 % |"), "{}", rows[2]);
    }

    #[test]
    fn per_round_ratios_compare_sides_within_each_round_and_skip_rounds_a_side_missed() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false });
        let candidate =
            |role, costs: Vec<Option<f64>>| Candidate { label: String::new(), role, setting: space.decode(&[]), costs };
        let bayes = Role::Found(Strategy::Bayes);
        let random = Role::Found(Strategy::Random);
        // Round 2 is slow for everyone; round 3 lost both random searches.
        let candidates = [
            candidate(Role::Default, vec![Some(100.0), Some(150.0), Some(100.0)]),
            candidate(bayes, vec![Some(80.0), Some(120.0), Some(90.0)]),
            candidate(bayes, vec![Some(100.0), Some(150.0), None]),
            candidate(random, vec![Some(100.0), Some(150.0), None]),
            candidate(random, vec![Some(100.0), None, None]),
        ];
        let ratios = per_round_ratios(&candidates, bayes, random);
        assert_eq!(ratios, vec![0.9, 0.9], "the slow round cancels; the third has no random");
        let against_default = per_round_ratios(&candidates, bayes, Role::Default);
        assert_eq!(against_default, vec![0.9, 0.9, 0.9]);
        let line = describe_ratios("bayes ÷ default", &[0.9, 1.1, 0.95], |r| r < 1.0).unwrap();
        assert_eq!(line, "Per round, bayes ÷ default: median 0.950, from 0.900 to 1.100; better in 2 of 3 rounds.");
        assert_eq!(describe_ratios("x", &[], |r| r < 1.0), None);
    }
}
