//! The `log` crate's macros, routed to the host's `modelless.log` import.

/// Sends every record the `log` macros make to the host, at the ABI's level (0 error
/// … 4 trace); the host keeps what its filter lets through. Installed by the kit's
/// exports before they call the policy; natively (tests) it installs nothing, so a
/// test may install its own logger.
pub fn install_host_logger() {
    #[cfg(target_arch = "wasm32")]
    {
        static HOST: HostLogger = HostLogger;
        if log::set_logger(&HOST).is_ok() {
            log::set_max_level(log::LevelFilter::Trace);
        }
    }
}

#[cfg(any(test, target_arch = "wasm32"))]
/// The ABI's number for `level`.
fn abi_level(level: log::Level) -> i32 {
    match level {
        log::Level::Error => 0,
        log::Level::Warn => 1,
        log::Level::Info => 2,
        log::Level::Debug => 3,
        log::Level::Trace => 4,
    }
}

#[cfg(target_arch = "wasm32")]
struct HostLogger;

#[cfg(target_arch = "wasm32")]
impl log::Log for HostLogger {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        super::raw::log(abi_level(record.level()), &record.args().to_string());
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_numbered_as_the_abi_numbers_them() {
        let levels = [log::Level::Error, log::Level::Warn, log::Level::Info, log::Level::Debug, log::Level::Trace];
        assert_eq!(levels.map(abi_level), [0, 1, 2, 3, 4]);
    }
}
