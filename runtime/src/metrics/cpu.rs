//! CPU utilisation of the machine and of this process, from /proc, as a share of all
//! cores over the time between two samples.

use std::time::Instant;

/// Busy and total jiffies of the whole machine (`/proc/stat`), and jiffies this
/// process used (`/proc/self/stat`), at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuSample {
    host_busy: u64,
    host_total: u64,
    host_cores: usize,
    process: u64,
    at: Instant,
}

/// Utilisation between two samples, in % of all cores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuUtilisation {
    /// The whole machine.
    pub host_percent: f64,
    /// This process.
    pub process_percent: f64,
    /// This process's CPU time over the span, s (every core's together).
    pub process_seconds: f64,
}

impl CpuSample {
    /// A sample now; `None` where /proc cannot be read.
    pub fn now() -> Option<CpuSample> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let (host_busy, host_total) = host_jiffies(&stat)?;
        let host_cores = host_cores(&stat);
        let process = process_jiffies(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        Some(CpuSample { host_busy, host_total, host_cores, process, at: Instant::now() })
    }

    /// Utilisation from `earlier` to this sample; `None` when no time passed.
    pub fn since(&self, earlier: &CpuSample) -> Option<CpuUtilisation> {
        let total = self.host_total.checked_sub(earlier.host_total).filter(|&t| t > 0)?;
        let busy = self.host_busy.saturating_sub(earlier.host_busy);
        // The process's jiffies are of one core each; the machine's total counts every
        // core, so it is the right denominator for both.
        let process = self.process.saturating_sub(earlier.process);
        // The machine's jiffies are its cores' over the span: the process's share of
        // them, times the cores, times the span, is its CPU time.
        let share = process as f64 / total as f64;
        let span_s = self.at.saturating_duration_since(earlier.at).as_secs_f64();
        Some(CpuUtilisation {
            host_percent: 100.0 * busy as f64 / total as f64,
            process_percent: (100.0 * share).min(100.0),
            process_seconds: share * self.host_cores.max(1) as f64 * span_s,
        })
    }

    /// When it was taken.
    pub fn taken_at(&self) -> Instant {
        self.at
    }
}

/// (busy, total) jiffies from the `cpu` line of `/proc/stat`: user nice system idle
/// iowait irq softirq steal …; idle and iowait are not busy, steal is not ours.
fn host_jiffies(stat: &str) -> Option<(u64, u64)> {
    let fields: Vec<u64> =
        stat.lines().next()?.strip_prefix("cpu ")?.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    let get = |i: usize| fields.get(i).copied().unwrap_or(0);
    let total: u64 = (0..8).map(get).sum::<u64>() - get(7);
    let idle = get(3) + get(4);
    Some((total.saturating_sub(idle), total))
}

/// The machine's cores: the `cpuN` lines of `/proc/stat`.
fn host_cores(stat: &str) -> usize {
    stat.lines()
        .filter(|l| l.strip_prefix("cpu").is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit())))
        .count()
}

/// Field `number` (1-based, as `man proc` counts) of a `/proc/…/stat` line, counted
/// from the last `)`: the command name before it may hold spaces and parentheses.
pub(crate) fn stat_field(stat: &str, number: usize) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // after_name starts at field 3 (state).
    after_name.split_whitespace().nth(number.checked_sub(3)?)?.parse().ok()
}

/// utime + stime from `/proc/self/stat` (fields 14 and 15).
fn process_jiffies(stat: &str) -> Option<u64> {
    Some(stat_field(stat, 14)? + stat_field(stat, 15)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_busy_leaves_out_idle_iowait_and_steal() {
        let stat = "cpu  100 10 50 800 40 0 5 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(host_jiffies(stat), Some((165, 1005)));
        assert_eq!(host_jiffies("intr 1 2 3"), None);
        assert_eq!(host_cores(stat), 1, "the cpu line is the sum, cpu0 a core");
    }

    #[test]
    fn process_time_is_read_after_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 8 0 100 0";
        assert_eq!(process_jiffies(stat), Some(22));
    }

    #[test]
    fn a_busy_thread_shows_in_both_figures() {
        let before = CpuSample::now().unwrap();
        let until = Instant::now() + std::time::Duration::from_millis(300);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let use_ = CpuSample::now().unwrap().since(&before).unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        // One spinning thread is one core's worth, give or take the sampling's jiffies.
        assert!(use_.process_percent > 50.0 / cores, "{use_:?}");
        assert!(use_.host_percent >= use_.process_percent * 0.8, "{use_:?}");
        assert!(use_.host_percent <= 100.0, "{use_:?}");
        // 300 ms of one core, within the jiffies' resolution and what else ran.
        assert!((0.15..=1.0).contains(&use_.process_seconds), "{use_:?}");
    }
}
