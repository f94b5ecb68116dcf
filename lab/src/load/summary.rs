//! What a run comes to: per task and over all tasks, counts, SLO violations,
//! latency percentiles, goodput and effective accuracy; and the same second by second.

use std::collections::BTreeMap;
use std::fmt::Write;

use modelless_runtime::stats::percentile;
use serde::{Deserialize, Serialize};

use super::record::{Outcome, RequestRecord};
use super::stages::{StageBreakdown, stage_table};

/// A task as a run targets it: its latency SLO and its variants' accuracies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskTarget {
    /// The task.
    pub task: String,
    /// Latency SLO, ms.
    pub slo_ms: f64,
    /// Accuracy of each variant (the unit it was registered in, e.g. top-1 %).
    pub accuracies: BTreeMap<String, f64>,
}

impl TaskTarget {
    fn best_accuracy(&self) -> f64 {
        self.accuracies.values().copied().fold(0.0, f64::max)
    }

    /// The accuracy a request earned: its variant's if answered within the SLO, else 0.
    fn earned(&self, record: &RequestRecord) -> f64 {
        if self.in_slo(record) {
            record.variant.as_ref().and_then(|v| self.accuracies.get(v)).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    }

    fn in_slo(&self, record: &RequestRecord) -> bool {
        record.status == Outcome::Served && record.latency_ms <= self.slo_ms
    }
}

/// What the runtime looked like at the end of one second of a run, for one task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The second that ended (0 is the first).
    pub second: u32,
    /// The task.
    pub task: String,
    /// Its active variant.
    pub active: Option<String>,
    /// Requests waiting in its queue.
    pub queue_length: Option<u64>,
    /// The machine's CPU utilisation over the second, %.
    pub cpu_percent: Option<f64>,
    /// CPU time of the serving process over the second, s, where it is this one (the
    /// load generator's threads are in it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_s: Option<f64>,
    /// Page faults taken on the machine over the second.
    pub page_faults: Option<u64>,
    /// The serving process's resident memory at the end of the second, bytes, where
    /// the target can tell (a runtime in this process can, an endpoint cannot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// What the task and the machine held at the end of the second, where the target
    /// can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// Refusals found needless in the second (the variant could have served them: its
    /// queue empty, or answering under 0.8 of its profiled capacity), where the
    /// target can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needless_refusals: Option<u64>,
}

/// What a task held of the machine at one moment, as the budget counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Instances of its serving variant.
    pub instances: u32,
    /// Cores they hold of their own (0 on the pool sessions share).
    pub cores: f64,
    /// Cores every task's serving instances hold, the shared pool counted once.
    pub machine_cores: f64,
}

/// The figures of a run, for one task or all of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The task, or `all`.
    pub task: String,
    /// Requests sent.
    pub sent: u64,
    /// Answered (in time or late).
    pub completed: u64,
    /// Refused at admission.
    pub rejected: u64,
    /// Of those, refused while the variant could have served them (its queue empty, or
    /// answering under 0.8 of its profiled capacity that second), where the target
    /// told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needless_refusals: Option<u64>,
    /// Deadline passed before they ran.
    pub expired: u64,
    /// Other errors.
    pub failed: u64,
    /// Requests not answered, by their failure's kind (`overloaded`, `invalid_input`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures_by_reason: BTreeMap<String, u64>,
    /// Not answered within the SLO (late, refused, expired or failed).
    pub slo_violations: u64,
    /// `slo_violations` as a share of `sent`, %.
    pub slo_violation_pct: f64,
    /// Latency of the answered ones, ms.
    pub p50_ms: Option<f64>,
    /// 95th percentile, ms.
    pub p95_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Answers within the SLO per second of the run.
    pub goodput_per_s: f64,
    /// Answers (in time or late) per second of the run.
    #[serde(default)]
    pub throughput_per_s: f64,
    /// Mean accuracy over every request sent, counting one not answered within the SLO
    /// as 0.
    pub effective_accuracy: f64,
    /// The same with each accuracy divided by the task's best variant's, so that tasks
    /// of different scales can be pooled (1 is "always the best variant, always in
    /// time").
    pub normalized_accuracy: f64,
    /// Changes of the active variant seen second by second.
    pub variant_switches: u64,
    /// Longest queue seen at the end of a second.
    pub max_queue_length: Option<u64>,
    /// Where the answers' time went, where the server told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<StageBreakdown>,
    /// Cores held over the run, core·s, as the budget counts them: the task's own
    /// instances' for a task, the machine's for `all` (or a run of one task), where
    /// the target told them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_seconds: Option<f64>,
    /// CPU time the serving process took over the run, s, for `all` (or a run of one
    /// task), where it served in the load generator's process (whose threads count
    /// too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
}

/// A summary per task (in `targets` order) and, for more than one task, one of them
/// all. `duration_s` is the run's length, for goodput.
pub fn summarize(
    records: &[RequestRecord],
    targets: &[TaskTarget],
    samples: &[Sample],
    duration_s: f64,
) -> Vec<Summary> {
    let mut out: Vec<Summary> = targets
        .iter()
        .map(|target| {
            let mine: Vec<&RequestRecord> = records.iter().filter(|r| r.task == target.task).collect();
            let seen: Vec<&Sample> = samples.iter().filter(|s| s.task == target.task).collect();
            let own = |a: &Allocation| if targets.len() > 1 { a.cores } else { a.machine_cores };
            let alone = targets.len() == 1;
            Summary {
                core_seconds: held_over(&seen, own),
                cpu_seconds: if alone { cpu_over(&seen) } else { None },
                ..summary(&target.task, &mine, &|_| target, &seen, duration_s)
            }
        })
        .collect();
    if targets.len() > 1 {
        let by_name: BTreeMap<&str, &TaskTarget> = targets.iter().map(|t| (t.task.as_str(), t)).collect();
        let known: Vec<&RequestRecord> = records.iter().filter(|r| by_name.contains_key(r.task.as_str())).collect();
        let seen: Vec<&Sample> = samples.iter().collect();
        // The machine's figure is every task's sample's: count each second once.
        let first = targets.first().map(|t| t.task.as_str());
        let once: Vec<&Sample> = seen.iter().copied().filter(|s| Some(s.task.as_str()) == first).collect();
        let all = summary("all", &known, &|r| by_name[r.task.as_str()], &seen, duration_s);
        out.push(Summary { core_seconds: held_over(&once, |a| a.machine_cores), cpu_seconds: cpu_over(&once), ..all });
    }
    out
}

/// Cores held over `samples` (one a second), core·s, by `held` of each; `None` where
/// none told its allocation.
fn held_over(samples: &[&Sample], held: impl Fn(&Allocation) -> f64) -> Option<f64> {
    sum_told(samples, |s| s.allocation.as_ref().map(&held))
}

/// The serving process's CPU time over `samples` (one a second), s; `None` where none
/// told it.
fn cpu_over(samples: &[&Sample]) -> Option<f64> {
    sum_told(samples, |s| s.process_cpu_s)
}

/// Needless refusals over `samples`; `None` where none told them.
fn needless_over(samples: &[&Sample]) -> Option<u64> {
    let told: Vec<u64> = samples.iter().filter_map(|s| s.needless_refusals).collect();
    (!told.is_empty()).then(|| told.iter().sum())
}

/// The sum of what `figure` reads of each sample; `None` where it read none.
fn sum_told(samples: &[&Sample], figure: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    let told: Vec<f64> = samples.iter().filter_map(|s| figure(s)).collect();
    (!told.is_empty()).then(|| told.iter().sum())
}

fn summary<'a>(
    name: &str,
    records: &[&RequestRecord],
    target_of: &dyn Fn(&RequestRecord) -> &'a TaskTarget,
    samples: &[&Sample],
    duration_s: f64,
) -> Summary {
    let count = |status: Outcome| records.iter().filter(|r| r.status == status).count() as u64;
    let sent = records.len() as u64;
    let in_slo = records.iter().filter(|r| target_of(r).in_slo(r)).count() as u64;
    let mut latencies: Vec<f64> =
        records.iter().filter(|r| r.status == Outcome::Served).map(|r| r.latency_ms).collect();
    let mut at = |q| (!latencies.is_empty()).then(|| percentile(&mut latencies, q));
    let (p50_ms, p95_ms, p99_ms) = (at(0.5), at(0.95), at(0.99));
    let per_request = |f: &dyn Fn(&RequestRecord) -> f64| {
        if sent == 0 { 0.0 } else { records.iter().map(|r| f(r)).sum::<f64>() / sent as f64 }
    };
    let effective_accuracy = per_request(&|r| target_of(r).earned(r));
    let normalized_accuracy = per_request(&|r| {
        let target = target_of(r);
        let best = target.best_accuracy();
        if best > 0.0 { target.earned(r) / best } else { 0.0 }
    });
    Summary {
        task: name.to_string(),
        sent,
        completed: count(Outcome::Served),
        rejected: count(Outcome::Rejected),
        expired: count(Outcome::Expired),
        failed: count(Outcome::Failed),
        failures_by_reason: records.iter().filter_map(|r| r.failure_kind()).fold(BTreeMap::new(), |mut by, kind| {
            *by.entry(kind.to_string()).or_default() += 1;
            by
        }),
        slo_violations: sent - in_slo,
        slo_violation_pct: if sent == 0 { 0.0 } else { 100.0 * (sent - in_slo) as f64 / sent as f64 },
        p50_ms,
        p95_ms,
        p99_ms,
        goodput_per_s: if duration_s > 0.0 { in_slo as f64 / duration_s } else { 0.0 },
        throughput_per_s: if duration_s > 0.0 { count(Outcome::Served) as f64 / duration_s } else { 0.0 },
        effective_accuracy,
        normalized_accuracy,
        variant_switches: switches(samples),
        needless_refusals: needless_over(samples),
        max_queue_length: samples.iter().filter_map(|s| s.queue_length).max(),
        stages: StageBreakdown::of(records.iter().copied()),
        core_seconds: None,
        cpu_seconds: None,
    }
}

/// Changes of each task's active variant from one second to the next.
fn switches(samples: &[&Sample]) -> u64 {
    let mut last: BTreeMap<&str, &str> = BTreeMap::new();
    let mut count = 0;
    let mut ordered = samples.to_vec();
    ordered.sort_by_key(|s| s.second);
    for sample in ordered {
        let Some(active) = sample.active.as_deref() else { continue };
        if let Some(before) = last.insert(&sample.task, active) {
            count += u64::from(before != active);
        }
    }
    count
}

/// One second of one task: requests sent in it and how they fared, and the samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// The second (0 is the first).
    pub second: u32,
    /// The task.
    pub task: String,
    /// Requests sent in it.
    pub sent: u64,
    /// Of those, answered within the SLO.
    pub in_slo: u64,
    /// Of those, not.
    pub slo_violations: u64,
    /// Median latency of those answered, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// The active variant at its end.
    pub active: Option<String>,
    /// The queue at its end.
    pub queue_length: Option<u64>,
    /// CPU over it, %.
    pub cpu_percent: Option<f64>,
    /// Page faults on the machine over it.
    pub page_faults: Option<u64>,
    /// The serving process's resident memory at its end, bytes.
    pub rss_bytes: Option<u64>,
    /// What the task and the machine held at its end.
    pub allocation: Option<Allocation>,
    /// Refusals found needless in it.
    pub needless_refusals: Option<u64>,
}

/// The run second by second, per task, for `seconds` seconds.
pub fn timeline(records: &[RequestRecord], targets: &[TaskTarget], samples: &[Sample], seconds: u32) -> Vec<Second> {
    let mut rows = Vec::new();
    for target in targets {
        let mut per_second: Vec<Vec<&RequestRecord>> = vec![Vec::new(); seconds as usize];
        for r in records.iter().filter(|r| r.task == target.task) {
            if let Some(bucket) = per_second.get_mut(r.sent_s.max(0.0) as usize) {
                bucket.push(r);
            }
        }
        for (second, sent) in per_second.into_iter().enumerate() {
            let second = second as u32;
            let in_slo = sent.iter().filter(|r| target.in_slo(r)).count() as u64;
            let mut latencies: Vec<f64> =
                sent.iter().filter(|r| r.status == Outcome::Served).map(|r| r.latency_ms).collect();
            let mut at = |q| (!latencies.is_empty()).then(|| percentile(&mut latencies, q));
            let (p50_ms, p99_ms) = (at(0.5), at(0.99));
            let sample = samples.iter().find(|s| s.second == second && s.task == target.task);
            rows.push(Second {
                second,
                task: target.task.clone(),
                sent: sent.len() as u64,
                in_slo,
                slo_violations: sent.len() as u64 - in_slo,
                p50_ms,
                p99_ms,
                active: sample.and_then(|s| s.active.clone()),
                queue_length: sample.and_then(|s| s.queue_length),
                cpu_percent: sample.and_then(|s| s.cpu_percent),
                page_faults: sample.and_then(|s| s.page_faults),
                rss_bytes: sample.and_then(|s| s.rss_bytes),
                allocation: sample.and_then(|s| s.allocation),
                needless_refusals: sample.and_then(|s| s.needless_refusals),
            });
        }
    }
    rows
}

/// The timeline as CSV.
pub fn timeline_csv(rows: &[Second]) -> String {
    let mut out = String::from(
        "second,task,sent,in_slo,slo_violations,p50_ms,p99_ms,active,queue_length,cpu_percent,page_faults,rss_mib,\
         instances,task_cores,machine_cores,needless_refusals\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2}"));
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.second,
            r.task,
            r.sent,
            r.in_slo,
            r.slo_violations,
            opt(r.p50_ms),
            opt(r.p99_ms),
            r.active.as_deref().unwrap_or(""),
            r.queue_length.map_or(String::new(), |q| q.to_string()),
            opt(r.cpu_percent),
            r.page_faults.map_or(String::new(), |n| n.to_string()),
            opt(r.rss_bytes.map(|b| b as f64 / (1024.0 * 1024.0))),
            r.allocation.map_or(String::new(), |a| a.instances.to_string()),
            opt(r.allocation.map(|a| a.cores)),
            opt(r.allocation.map(|a| a.machine_cores)),
            r.needless_refusals.map_or(String::new(), |n| n.to_string()),
        );
    }
    out
}

/// Failures by kind as a table cell: `overloaded 3, invalid_input 1`, or `-`.
fn failures(by_reason: &BTreeMap<String, u64>) -> String {
    if by_reason.is_empty() {
        return "-".into();
    }
    by_reason.iter().map(|(kind, n)| format!("{kind} {n}")).collect::<Vec<_>>().join(", ")
}

/// Summaries as a Markdown table, each row headed by its label (a policy, a run);
/// then, where the server told where the time went, a table of that.
pub fn markdown_table(rows: &[(String, Summary)]) -> String {
    let mut out = String::from(
        "| run | task | sent | SLO violations % | p50 ms | p99 ms | answers/s | goodput/s | eff. accuracy | norm. accuracy | switches | rejected | needless | max queue | failures |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for (label, s) in rows {
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {:.3} | {} | {} | {:.1} | {:.1} | {:.2} | {:.3} | {} | {} | {} | {} | {} |",
            s.task,
            s.sent,
            s.slo_violation_pct,
            ms(s.p50_ms),
            ms(s.p99_ms),
            s.throughput_per_s,
            s.goodput_per_s,
            s.effective_accuracy,
            s.normalized_accuracy,
            s.variant_switches,
            s.rejected,
            s.needless_refusals.map_or("-".to_string(), |n| n.to_string()),
            s.max_queue_length.map_or("-".to_string(), |q| q.to_string()),
            failures(&s.failures_by_reason),
        );
    }
    let stages = stage_table(
        rows.iter().filter_map(|(label, s)| s.stages.as_ref().map(|b| (label.as_str(), s.task.as_str(), b))),
    );
    if !stages.is_empty() {
        let _ = write!(out, "\nWhere the time went (mean ms per answer, share of its latency):\n\n{stages}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(task: &str, sent_s: f64, status: Outcome, latency_ms: f64, variant: Option<&str>) -> RequestRecord {
        RequestRecord {
            task: task.into(),
            sent_s,
            status,
            latency_ms,
            variant: variant.map(Into::into),
            batch_size: None,
            stages: None,
            reason: match status {
                Outcome::Served => None,
                Outcome::Rejected => Some(crate::load::record::reason("queue_full", "queue full")),
                _ => Some(crate::load::record::reason("expired", "expired")),
            },
        }
    }

    fn target(task: &str, slo_ms: f64, variants: &[(&str, f64)]) -> TaskTarget {
        TaskTarget {
            task: task.into(),
            slo_ms,
            accuracies: variants.iter().map(|(v, a)| (v.to_string(), *a)).collect(),
        }
    }

    fn sample(task: &str, second: u32, active: &str, queue: u64) -> Sample {
        Sample {
            second,
            task: task.into(),
            active: Some(active.into()),
            queue_length: Some(queue),
            ..Sample::default()
        }
    }

    #[test]
    fn a_hand_made_log_sums_up_as_worked_out_by_hand() {
        let a = target("a", 100.0, &[("small", 60.0), ("big", 80.0)]);
        let records = vec![
            record("a", 0.1, Outcome::Served, 50.0, Some("big")), // in time: 80
            record("a", 0.2, Outcome::Served, 90.0, Some("small")), // in time: 60
            record("a", 1.1, Outcome::Served, 150.0, Some("big")), // late: 0
            record("a", 1.2, Outcome::Rejected, 0.5, None),       // 0
            record("a", 1.3, Outcome::Expired, 100.0, None),      // 0
            record("b", 1.4, Outcome::Served, 10.0, Some("x")),   // another task
        ];
        let samples = [
            sample("a", 0, "big", 0),
            sample("a", 1, "small", 7),
            sample("a", 2, "small", 3),
            sample("a", 3, "big", 0),
        ];
        let s = &summarize(&records, std::slice::from_ref(&a), &samples, 2.0)[0];
        assert_eq!((s.sent, s.completed, s.rejected, s.expired, s.failed), (5, 3, 1, 1, 0));
        let by_reason: Vec<(&str, u64)> = s.failures_by_reason.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        assert_eq!(by_reason, [("expired", 1), ("queue_full", 1)]);
        assert_eq!(s.slo_violations, 3);
        assert!((s.slo_violation_pct - 60.0).abs() < 1e-9);
        assert_eq!(s.p50_ms, Some(90.0));
        assert!((s.goodput_per_s - 1.0).abs() < 1e-9, "2 in time over 2 s");
        assert!((s.effective_accuracy - 28.0).abs() < 1e-9, "(80 + 60) / 5");
        assert!((s.normalized_accuracy - 0.35).abs() < 1e-9, "(1 + 0.75) / 5");
        assert_eq!(s.variant_switches, 2, "big → small → big");
        assert_eq!(s.max_queue_length, Some(7));
    }

    #[test]
    fn the_pooled_summary_normalises_each_task_by_its_own_best_variant() {
        let targets = [target("a", 100.0, &[("a1", 50.0)]), target("b", 10.0, &[("b1", 40.0), ("b2", 80.0)])];
        let records = vec![
            record("a", 0.0, Outcome::Served, 20.0, Some("a1")), // 1.0
            record("b", 0.0, Outcome::Served, 5.0, Some("b1")),  // 0.5
            record("b", 0.0, Outcome::Served, 20.0, Some("b2")), // late: 0
            record("b", 0.0, Outcome::Failed, 1.0, None),        // 0
        ];
        let all = summarize(&records, &targets, &[], 1.0);
        assert_eq!(all.len(), 3);
        let pooled = &all[2];
        assert_eq!(pooled.task, "all");
        assert_eq!((pooled.sent, pooled.slo_violations, pooled.failed), (4, 2, 1));
        assert!((pooled.normalized_accuracy - 1.5 / 4.0).abs() < 1e-9);
        assert!((pooled.effective_accuracy - 90.0 / 4.0).abs() < 1e-9);
        assert_eq!(all[1].p99_ms.map(|p| p > 5.0), Some(true));
    }

    #[test]
    fn the_timeline_buckets_requests_by_the_second_they_were_sent() {
        let a = target("a", 100.0, &[("v", 1.0)]);
        let records = vec![
            record("a", 0.1, Outcome::Served, 50.0, Some("v")),
            record("a", 0.9, Outcome::Served, 150.0, Some("v")),
            record("a", 2.5, Outcome::Rejected, 1.0, None),
        ];
        let allocation = Allocation { instances: 3, cores: 3.0, machine_cores: 4.0 };
        let faulting = Sample {
            page_faults: Some(2_352),
            rss_bytes: Some(300 << 20),
            allocation: Some(allocation),
            needless_refusals: Some(1),
            ..sample("a", 1, "v", 4)
        };
        let rows = timeline(&records, &[a], &[faulting], 3);
        let counts: Vec<(u64, u64, u64)> = rows.iter().map(|r| (r.sent, r.in_slo, r.slo_violations)).collect();
        assert_eq!(counts, vec![(2, 1, 1), (0, 0, 0), (1, 0, 1)]);
        assert_eq!(rows[1].queue_length, Some(4));
        assert_eq!(rows[0].p99_ms.map(|p| p > 140.0), Some(true));
        let csv = timeline_csv(&rows);
        assert_eq!(csv.lines().count(), 4);
        assert_eq!(csv.lines().nth(2), Some("1,a,0,0,0,,,v,4,,2352,300.00,3,3.00,4.00,1"));
        assert_eq!(csv.lines().nth(1), Some("0,a,2,1,1,50.00,150.00,,,,,,,,,"), "seconds without a sample");
    }

    #[test]
    fn core_seconds_add_up_each_tasks_own_and_the_machines_once_a_second() {
        let targets = [target("a", 100.0, &[("v", 1.0)]), target("b", 100.0, &[("v", 1.0)])];
        let held = |task: &str, second, cores, machine_cores| Sample {
            allocation: Some(Allocation { instances: cores as u32, cores, machine_cores }),
            process_cpu_s: Some(0.5 + f64::from(second)),
            ..sample(task, second, "v", 0)
        };
        let samples = [held("a", 0, 1.0, 3.0), held("b", 0, 2.0, 3.0), held("a", 1, 3.0, 4.0), held("b", 1, 1.0, 4.0)];
        let all = summarize(&[], &targets, &samples, 2.0);
        let core_seconds: Vec<Option<f64>> = all.iter().map(|s| s.core_seconds).collect();
        assert_eq!(core_seconds, [Some(4.0), Some(3.0), Some(7.0)]);
        let cpu_seconds: Vec<Option<f64>> = all.iter().map(|s| s.cpu_seconds).collect();
        assert_eq!(cpu_seconds, [None, None, Some(2.0)], "the process's, each second once: 0.5 + 1.5");
        assert_eq!(summarize(&[], &targets[..1], &[sample("a", 0, "v", 0)], 1.0)[0].core_seconds, None);
    }

    #[test]
    fn an_empty_run_sums_up_to_zeros_not_to_nonsense() {
        let s = &summarize(&[], &[target("a", 1.0, &[])], &[], 0.0)[0];
        assert_eq!((s.sent, s.slo_violations), (0, 0));
        assert_eq!((s.slo_violation_pct, s.effective_accuracy, s.goodput_per_s), (0.0, 0.0, 0.0));
        assert_eq!(s.p50_ms, None);
    }
}
