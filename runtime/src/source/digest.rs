//! An artifact's identity: the SHA-256 of its bytes, as OCI registries write it.

use sha2::{Digest as _, Sha256};

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The hex part of a digest [`sha256_digest`] wrote.
pub fn hex_of(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_the_sha256_of_the_bytes() {
        // The SHA-256 of the empty input, as every implementation gives it.
        let empty = sha256_digest(b"");
        assert_eq!(empty, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex_of(&empty).len(), 64);
        assert_ne!(sha256_digest(b"a"), empty);
    }
}
