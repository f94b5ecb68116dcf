//! The credential repository load and unload calls need under explicit model control:
//! a bearer token read from a file (as a Kubernetes Secret mounts one), compared with
//! what a call presents in HTTP's `Authorization` or gRPC's `authorization` metadata.

use std::path::{Path, PathBuf};

use super::status::{Code, ServeError};

/// The token file, read again at every check so that a rotated Secret takes effect
/// without a restart.
#[derive(Clone, Debug)]
pub struct AdminToken {
    path: PathBuf,
}

impl AdminToken {
    /// The token of the file at `path`, refused when it cannot be read or is empty.
    pub fn load(path: &Path) -> Result<AdminToken, String> {
        let token = AdminToken { path: path.to_path_buf() };
        token.read()?;
        Ok(token)
    }

    fn read(&self) -> Result<String, String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("admin token file {}: {e}", self.path.display()))?;
        let token = text.trim().to_string();
        if token.is_empty() {
            return Err(format!("admin token file {} is empty", self.path.display()));
        }
        Ok(token)
    }

    /// Passes when `authorization` (the header's or metadata's value) is
    /// `Bearer <the token>`; else UNAUTHENTICATED, saying what was missing.
    pub fn check(&self, authorization: Option<&str>) -> Result<(), ServeError> {
        let unauthenticated = |why: &str| {
            ServeError::new(
                Code::Unauthenticated,
                format!("repository load and unload need the admin bearer token (`Authorization: Bearer …`): {why}"),
            )
        };
        let presented = authorization.ok_or_else(|| unauthenticated("none was given"))?;
        let presented = bearer(presented).ok_or_else(|| unauthenticated("the credential is not a bearer token"))?;
        let token = self.read().map_err(|e| ServeError::new(Code::Internal, e))?;
        if !same(presented.as_bytes(), token.as_bytes()) {
            return Err(unauthenticated("the token does not match"));
        }
        Ok(())
    }
}

/// The token of an `Authorization` value `Bearer <token>` (the scheme in any case).
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> (tempfile::TempDir, AdminToken) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, text).unwrap();
        let token = AdminToken::load(&path).unwrap();
        (dir, token)
    }

    #[test]
    fn only_the_bearer_token_of_the_file_passes() {
        let (_dir, admin) = token("s3cret\n");
        assert!(admin.check(Some("Bearer s3cret")).is_ok());
        assert!(admin.check(Some("bearer  s3cret ")).is_ok());
        for wrong in [None, Some("Bearer s3cre"), Some("Basic s3cret"), Some("s3cret"), Some("Bearer ")] {
            let refused = admin.check(wrong).unwrap_err();
            assert_eq!(refused.code, Code::Unauthenticated, "{wrong:?}: {refused}");
        }
    }

    #[test]
    fn a_rotated_token_takes_effect_and_an_empty_file_is_refused() {
        let (dir, admin) = token("old");
        std::fs::write(dir.path().join("token"), "new").unwrap();
        assert!(admin.check(Some("Bearer old")).is_err());
        assert!(admin.check(Some("Bearer new")).is_ok());
        std::fs::write(dir.path().join("token"), " \n").unwrap();
        assert!(AdminToken::load(&dir.path().join("token")).unwrap_err().contains("is empty"));
        assert!(AdminToken::load(&dir.path().join("missing")).is_err());
    }
}
