//! The bound on a model's sessions.

use crate::error::Error;

/// The most sessions one model runs: each is a thread and a copy of the weights,
/// and more than this is a mistake in a config, not a way to serve faster.
pub const MAX_INSTANCES: usize = 256;

/// Refuses 0 instances and more than [`MAX_INSTANCES`].
pub(crate) fn check_instances(name: &str, instances: usize) -> Result<(), Error> {
    if !(1..=MAX_INSTANCES).contains(&instances) {
        return Err(Error::Config(format!("`{name}`: instances {instances} is outside 1..={MAX_INSTANCES}")));
    }
    Ok(())
}
