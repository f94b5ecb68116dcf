//! The model repository extension: what can be loaded, and loading and unloading by
//! name. The embedding application decides what a name loads ([`Repository`]); the
//! check that keeps paths inside the repository root is here.

use std::path::{Component, Path, PathBuf};

use super::status::{Code, ServeError};

/// One model of the repository, as the index lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryEntry {
    /// Its name.
    pub name: String,
    /// Its serving version; empty when not loaded.
    pub version: String,
    /// `READY` or `UNAVAILABLE`.
    pub state: String,
    /// Why it is in that state, if there is more to say.
    pub reason: String,
}

/// Loads and unloads models by name, for the repository endpoints. Calls block until
/// done; the endpoints make them off their async workers.
pub trait Repository: Send + Sync + 'static {
    /// Everything that can be loaded or is loaded.
    fn index(&self) -> Vec<RepositoryEntry>;
    /// Loads `name` (a declared model or task, or a model file under the repository
    /// root), `config` (JSON) overriding its settings; loading what is loaded succeeds.
    fn load(&self, name: &str, config: Option<&str>) -> Result<(), ServeError>;
    /// Unloads `name`; what it queued still runs.
    fn unload(&self, name: &str) -> Result<(), ServeError>;
    /// What this replica runs, for `GET /v2/policy`: its policy (name, digest, the tag
    /// it follows and how its polls went) and the variants that follow tags.
    fn provenance(&self) -> serde_json::Value {
        serde_json::json!({ "policy": null, "variants": [] })
    }
}

/// The `config` override of a load request's parameters (given as strings where
/// they are strings). File uploads (`file:` parameters) are refused: models come
/// from the repository root only.
pub fn load_config<'a>(
    parameters: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<Option<String>, ServeError> {
    let mut config = None;
    for (key, value) in parameters {
        match (key, value) {
            ("config", Some(json)) => config = Some(json.to_string()),
            ("config", None) => return Err(ServeError::invalid("parameter `config` must be a JSON string")),
            (file, _) if file.starts_with("file:") => {
                return Err(ServeError::new(
                    Code::PermissionDenied,
                    "model files are not uploaded; place them under the repository root",
                ));
            }
            _ => {}
        }
    }
    Ok(config)
}

/// `relative` inside `root`, refused when it is absolute, climbs out with `..`, or
/// leads outside through a link. The file need not exist; its nearest existing
/// ancestor is what is checked.
pub fn path_under_root(root: &Path, relative: &Path) -> Result<PathBuf, ServeError> {
    let denied = || {
        ServeError::new(
            Code::PermissionDenied,
            format!("`{}` is outside the model repository {}", relative.display(), root.display()),
        )
    };
    if relative.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(denied());
    }
    let root = root
        .canonicalize()
        .map_err(|e| ServeError::new(Code::Unavailable, format!("model repository {}: {e}", root.display())))?;
    let joined = root.join(relative);
    let existing = joined.ancestors().find_map(|a| a.canonicalize().ok()).ok_or_else(denied)?;
    if !existing.starts_with(&root) {
        return Err(denied());
    }
    Ok(joined)
}

/// A model name that may be looked up as a path: one plain component.
pub fn plain_name(name: &str) -> Result<&str, ServeError> {
    let mut components = Path::new(name).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) if !name.contains('\\') => Ok(name),
        _ => Err(ServeError::new(Code::PermissionDenied, format!("model name `{name}` is not a plain name"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_root_are_denied() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("inside")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("outside"), root.join("link")).ok();

        assert!(path_under_root(&root, Path::new("inside/model.onnx")).is_ok());
        assert!(path_under_root(&root, Path::new("new/model.onnx")).is_ok());
        for bad in ["../outside/model.onnx", "/etc/passwd", "inside/../../outside", "link/model.onnx"] {
            let error = path_under_root(&root, Path::new(bad)).unwrap_err();
            assert_eq!(error.code, Code::PermissionDenied, "{bad}");
        }
        assert!(plain_name("resnet").is_ok());
        for bad in ["../x", "a/b", "/abs", "..", "."] {
            assert_eq!(plain_name(bad).unwrap_err().code, Code::PermissionDenied, "{bad}");
        }
    }
}
