//! The machine's memory, from /proc/meminfo, and the page faults taken on it, from
//! /proc/vmstat.

/// (total, available) bytes; `None` where /proc/meminfo cannot be read.
pub fn machine_memory() -> Option<(u64, u64)> {
    parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse(meminfo: &str) -> Option<(u64, u64)> {
    let kib = |key: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some((kib("MemTotal:")? * 1024, kib("MemAvailable:")? * 1024))
}

/// The memory limit of this process's cgroup (v2 `memory.max`, else v1
/// `memory.limit_in_bytes`), where one is set below what the machine has.
pub fn cgroup_memory_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let v2 = own.lines().find_map(|l| l.strip_prefix("0::")).map(|dir| format!("/sys/fs/cgroup{dir}/memory.max"));
    let candidates = v2
        .into_iter()
        .chain(["/sys/fs/cgroup/memory.max".into(), "/sys/fs/cgroup/memory/memory.limit_in_bytes".into()]);
    let limit = candidates.filter_map(|path| std::fs::read_to_string(path).ok()).find_map(|text| parse_limit(&text))?;
    let total = machine_memory().map_or(u64::MAX, |(total, _)| total);
    (limit < total).then_some(limit)
}

/// A cgroup memory limit file's value; `None` for `max` (no limit).
fn parse_limit(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Page faults taken on the machine since it started (`pgfault` of /proc/vmstat);
/// `None` where it cannot be read.
///
/// A fault is a trap into the kernel, dearer on a virtual machine (about 10 µs each in
/// runs beside other work on a 2-vCPU guest): thousands in one second slow every batch,
/// so the load generator's timeline shows them beside CPU utilisation.
pub fn machine_page_faults() -> Option<u64> {
    parse_page_faults(&std::fs::read_to_string("/proc/vmstat").ok()?)
}

/// Page faults the calling thread has taken so far (`minflt`, field 10 of
/// `/proc/thread-self/stat`): what a batch run on it faulted in, where the run has no
/// other threads. `None` where it cannot be read.
pub fn pages_faulted_by_this_thread() -> Option<u64> {
    super::cpu::stat_field(&std::fs::read_to_string("/proc/thread-self/stat").ok()?, 10)
}

/// The resident memory of this process now (`VmRSS` of /proc/self/status), bytes;
/// `None` where it cannot be read.
pub fn process_rss_bytes() -> Option<u64> {
    parse_rss(&std::fs::read_to_string("/proc/self/status").ok()?)
}

fn parse_rss(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    Some(line.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
}

fn parse_page_faults(vmstat: &str) -> Option<u64> {
    vmstat.lines().find_map(|l| l.strip_prefix("pgfault ")).and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_in_bytes() {
        assert_eq!(parse_rss("Name:\tx\nVmRSS:\t  123456 kB\nVmSwap:\t0 kB\n"), Some(123_456 * 1024));
        assert_eq!(parse_rss("Name:\tx\n"), None);
        assert!(process_rss_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn reads_total_and_available() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\n";
        assert_eq!(parse(meminfo), Some((24_576_000 * 1024, 20_480_000 * 1024)));
        assert_eq!(parse("MemTotal: 1 kB\n"), None);
        assert!(machine_memory().is_some_and(|(total, available)| total >= available && available > 0));
    }

    #[test]
    fn reads_the_page_fault_counter() {
        let vmstat = "pgpgin 10\npgfault 123456\npgmajfault 7\n";
        assert_eq!(parse_page_faults(vmstat), Some(123_456));
        assert_eq!(parse_page_faults("pgmajfault 7\n"), None);
        let before = machine_page_faults().unwrap();
        // Touching fresh pages faults them in.
        let pages = vec![1u8; 64 << 20];
        assert!(pages.iter().step_by(4096).all(|&b| b == 1));
        assert!(machine_page_faults().unwrap() > before);
    }

    #[test]
    fn this_threads_faults_count_the_pages_it_touches() {
        // Above any mmap threshold this process sets, so the block is freshly mapped
        // even where freed memory of other tests is kept.
        let bytes = 260 << 20;
        let before = pages_faulted_by_this_thread().unwrap();
        let pages = vec![1u8; bytes];
        assert!(pages.iter().step_by(4096).all(|&b| b == 1));
        let faulted = pages_faulted_by_this_thread().unwrap() - before;
        assert!(faulted >= (bytes / 4096 / 2) as u64, "{faulted} pages for 260 MiB");
    }
}
