//! Why a variant cannot serve its task's signature.

/// A variant that cannot serve its task: which tensor, why, and both signatures.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "variant `{variant}` does not fit task `{task}`: {tensor}: {reason} \
     (task: {task_signature}; variant: {variant_signature})"
)]
pub struct SignatureMismatch {
    /// The task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// The tensor that does not fit, as `input `x`` or `output `y``.
    pub tensor: String,
    /// What does not fit.
    pub reason: String,
    /// The task's signature, described.
    pub task_signature: String,
    /// The variant's own, described.
    pub variant_signature: String,
}
