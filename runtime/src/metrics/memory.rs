//! The machine's memory, from /proc/meminfo.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_total_and_available() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\n";
        assert_eq!(parse(meminfo), Some((24_576_000 * 1024, 20_480_000 * 1024)));
        assert_eq!(parse("MemTotal: 1 kB\n"), None);
        assert!(machine_memory().is_some_and(|(total, available)| total >= available && available > 0));
    }
}
