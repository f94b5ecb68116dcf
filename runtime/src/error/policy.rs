//! Why a policy module could not be loaded, or a call to it gave no decision.

use std::path::PathBuf;
use std::sync::Arc;

use super::Cause;

/// A policy failure. Each has a [`kind`](PolicyError::kind) to count it by.
///
/// Two failures are equal when they are of the same variant with equal fields; two
/// [`Read`](PolicyError::Read) failures compare their I/O errors by kind and message.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The bytes are not a valid WebAssembly module.
    #[error("not a valid WebAssembly module: {0}")]
    Invalid(#[source] Cause),
    /// The module lacks the ABI marker export: it is not a policy, or one of another
    /// ABI version.
    #[error("no `{marker}` export: not a policy of ABI version {version}")]
    WrongAbi {
        /// The marker expected.
        marker: &'static str,
        /// The ABI version the host speaks.
        version: u32,
    },
    /// A component that is not of the policy world: an export missing, or of another
    /// type.
    #[error("a component, but not of the `{world}` world: {source}")]
    WrongWorld {
        /// The world expected.
        world: &'static str,
        /// What does not match.
        #[source]
        source: Cause,
    },
    /// A required export is missing or has the wrong type.
    #[error("export `{name}` is missing or is not {expected}")]
    MissingExport {
        /// The export.
        name: String,
        /// What it must be.
        expected: &'static str,
    },
    /// Instantiating the module failed (its start function trapped, or it needs
    /// imports the host does not give).
    #[error("cannot instantiate: {0}")]
    Instantiate(#[source] Cause),
    /// The call ran past its deadline.
    #[error("ran past its deadline of {deadline_ms} ms")]
    Timeout {
        /// The deadline.
        deadline_ms: u64,
    },
    /// The call used up its fuel.
    #[error("ran out of fuel")]
    OutOfFuel,
    /// The module tried to grow its memory past the cap.
    #[error("tried to grow its memory past the cap of {limit_bytes} bytes")]
    MemoryLimit {
        /// The cap.
        limit_bytes: usize,
    },
    /// The call trapped (a panic, unreachable, out-of-bounds access, stack overflow).
    #[error("trapped: {0}")]
    Trap(#[source] Cause),
    /// The output is larger than the host takes.
    #[error("output of {len} bytes is over the limit of {limit} bytes")]
    OversizedOutput {
        /// Its length.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// The output lies outside the module's memory or is too large to take.
    #[error("invalid output: {0}")]
    InvalidOutput(String),
    /// The output is not the JSON expected of it.
    #[error("invalid output: {what}: {source}")]
    UnreadableOutput {
        /// What it should have been: `a decision`, `state`.
        what: &'static str,
        /// The JSON parser's error.
        #[source]
        source: Cause,
    },
    /// What the host gives the module could not be written as JSON.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What: `the snapshot`, `the parameters`, `the state`.
        what: &'static str,
        /// The JSON writer's error.
        #[source]
        source: Cause,
    },
    /// The policy answered `{"error": …}`.
    #[error("the policy reported: {0}")]
    Reported(String),
    /// The host could not start: its engine or its clock thread. No module is at fault.
    #[error("the policy host cannot start {what}: {source}")]
    Host {
        /// What: `its engine`, `its clock`.
        what: &'static str,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The module file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Arc<std::io::Error>,
    },
}

impl PartialEq for PolicyError {
    fn eq(&self, other: &Self) -> bool {
        use PolicyError::*;
        match (self, other) {
            (Invalid(a), Invalid(b)) | (Instantiate(a), Instantiate(b)) | (Trap(a), Trap(b)) => a == b,
            (InvalidOutput(a), InvalidOutput(b)) | (Reported(a), Reported(b)) => a == b,
            (UnreadableOutput { what: a, source: s }, UnreadableOutput { what: b, source: t })
            | (Encode { what: a, source: s }, Encode { what: b, source: t })
            | (Host { what: a, source: s }, Host { what: b, source: t })
            | (WrongWorld { world: a, source: s }, WrongWorld { world: b, source: t }) => a == b && s == t,
            (WrongAbi { marker: a, version: v }, WrongAbi { marker: b, version: w }) => a == b && v == w,
            (MissingExport { name: a, expected: x }, MissingExport { name: b, expected: y }) => a == b && x == y,
            (Timeout { deadline_ms: a }, Timeout { deadline_ms: b }) => a == b,
            (OutOfFuel, OutOfFuel) => true,
            (MemoryLimit { limit_bytes: a }, MemoryLimit { limit_bytes: b }) => a == b,
            (OversizedOutput { len: a, limit: x }, OversizedOutput { len: b, limit: y }) => a == b && x == y,
            (Read { path: a, source: s }, Read { path: b, source: t }) => {
                a == b && s.kind() == t.kind() && s.to_string() == t.to_string()
            }
            // Failures of different variants. Listed, not `_`, so that a new variant
            // must be compared above before this builds.
            (
                Invalid(_)
                | WrongAbi { .. }
                | WrongWorld { .. }
                | MissingExport { .. }
                | Instantiate(_)
                | Timeout { .. }
                | OutOfFuel
                | MemoryLimit { .. }
                | Trap(_)
                | OversizedOutput { .. }
                | InvalidOutput(_)
                | UnreadableOutput { .. }
                | Encode { .. }
                | Reported(_)
                | Host { .. }
                | Read { .. },
                _,
            ) => false,
        }
    }
}

impl PolicyError {
    /// A short name of the failure's kind, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyError::Invalid(_) => "invalid_module",
            PolicyError::WrongAbi { .. } | PolicyError::WrongWorld { .. } => "wrong_abi",
            PolicyError::MissingExport { .. } => "missing_export",
            PolicyError::Instantiate(_) => "instantiate",
            PolicyError::Timeout { .. } => "timeout",
            PolicyError::OutOfFuel => "out_of_fuel",
            PolicyError::MemoryLimit { .. } => "memory_limit",
            PolicyError::Trap(_) => "trap",
            PolicyError::OversizedOutput { .. } => "oversized_output",
            PolicyError::InvalidOutput(_) | PolicyError::UnreadableOutput { .. } => "invalid_output",
            PolicyError::Encode { .. } => "encode",
            PolicyError::Reported(_) => "reported",
            PolicyError::Host { .. } => "host",
            PolicyError::Read { .. } => "read",
        }
    }
}
