//! Registry credentials, the way Kubernetes gives them: a Docker-format
//! `config.json` (a `kubernetes.io/dockerconfigjson` pull secret mounted as a file)
//! or a file holding a bearer token. Both are read at every use, so a rotated secret
//! takes effect without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Error;

/// How to prove who we are to a registry.
#[derive(Clone, PartialEq, Eq)]
pub enum RegistryAuth {
    /// No credentials.
    Anonymous,
    /// A user name and password (or access token), sent as HTTP basic authentication or
    /// exchanged for a registry token.
    Basic {
        /// The user.
        username: String,
        /// The password or token.
        password: String,
    },
    /// A bearer token sent as it is.
    Bearer(String),
}

// Secrets stay out of logs.
impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryAuth::Anonymous => f.write_str("Anonymous"),
            RegistryAuth::Basic { username, .. } => write!(f, "Basic({username}, …)"),
            RegistryAuth::Bearer(_) => f.write_str("Bearer(…)"),
        }
    }
}

/// Where credentials are read from; with neither, registries are asked anonymously.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// A Docker-format `config.json`: its `auths` entry for a registry is used.
    pub docker_config: Option<PathBuf>,
    /// A file holding a bearer token, for registries `docker_config` has no entry for.
    pub token_file: Option<PathBuf>,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    registrytoken: Option<String>,
}

impl Credentials {
    /// The credentials for `registry` (a host with its port).
    pub fn for_registry(&self, registry: &str) -> Result<RegistryAuth, Error> {
        if let Some(path) = &self.docker_config
            && let Some(auth) = docker_auth(path, registry)?
        {
            return Ok(auth);
        }
        match &self.token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path).map_err(|e| Error::io("read the token file", path, e))?;
                match token.trim() {
                    "" => Err(Error::Config(format!("the token file {} is empty", path.display()))),
                    token => Ok(RegistryAuth::Bearer(token.to_string())),
                }
            }
            None => Ok(RegistryAuth::Anonymous),
        }
    }
}

/// The entry of the config at `path` for `registry`; an `auths` key may carry a
/// scheme and a path (`https://index.docker.io/v1/`).
fn docker_auth(path: &Path, registry: &str) -> Result<Option<RegistryAuth>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read the registry config", path, e))?;
    let bad = |why: String| Error::Config(format!("the registry config {}: {why}", path.display()));
    let config: DockerConfig = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let host_of = |key: &str| {
        let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
        key.split('/').next().unwrap_or(key).to_string()
    };
    let Some(entry) = config.auths.iter().find(|(key, _)| host_of(key) == registry).map(|(_, entry)| entry) else {
        return Ok(None);
    };
    if let Some(token) = &entry.registrytoken {
        return Ok(Some(RegistryAuth::Bearer(token.clone())));
    }
    if let (Some(username), Some(password)) = (&entry.username, &entry.password) {
        return Ok(Some(RegistryAuth::Basic { username: username.clone(), password: password.clone() }));
    }
    let Some(encoded) = &entry.auth else {
        return Err(bad(format!("the entry for {registry} has no `auth`, `username`/`password` or `registrytoken`")));
    };
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| bad(format!("the `auth` for {registry} is not base64 of `user:password`")))?;
    let (username, password) = decoded
        .split_once(':')
        .ok_or_else(|| bad(format!("the `auth` for {registry} is not base64 of `user:password`")))?;
    Ok(Some(RegistryAuth::Basic { username: username.to_string(), password: password.to_string() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> (tempfile::TempDir, Credentials) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        (dir, Credentials { docker_config: Some(path), token_file: None })
    }

    #[test]
    fn a_docker_config_gives_each_registry_its_entry() {
        // `dXNlcjpzM2NyZXQ=` is base64 of `user:s3cret`.
        let (_dir, credentials) = config(
            r#"{"auths": {"127.0.0.1:5000": {"auth": "dXNlcjpzM2NyZXQ="},
                         "https://ghcr.io/v2/": {"username": "bot", "password": "pat"},
                         "quay.io": {"registrytoken": "tok"}}}"#,
        );
        let basic = |u: &str, p: &str| RegistryAuth::Basic { username: u.into(), password: p.into() };
        assert_eq!(credentials.for_registry("127.0.0.1:5000").unwrap(), basic("user", "s3cret"));
        assert_eq!(credentials.for_registry("ghcr.io").unwrap(), basic("bot", "pat"));
        assert_eq!(credentials.for_registry("quay.io").unwrap(), RegistryAuth::Bearer("tok".into()));
        assert_eq!(credentials.for_registry("other.io").unwrap(), RegistryAuth::Anonymous);
        assert!(!format!("{:?}", basic("user", "s3cret")).contains("s3cret"), "secrets stay out of logs");
    }

    #[test]
    fn a_broken_entry_is_refused_naming_the_registry_and_a_token_file_is_read_at_each_use() {
        let (_dir, credentials) = config(r#"{"auths": {"r.io": {"auth": "not base64!"}}}"#);
        let refused = credentials.for_registry("r.io").unwrap_err().to_string();
        assert!(refused.contains("r.io") && refused.contains("base64"), "{refused}");

        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "first\n").unwrap();
        let credentials = Credentials { docker_config: None, token_file: Some(token.clone()) };
        assert_eq!(credentials.for_registry("r.io").unwrap(), RegistryAuth::Bearer("first".into()));
        std::fs::write(&token, "rotated").unwrap();
        assert_eq!(credentials.for_registry("r.io").unwrap(), RegistryAuth::Bearer("rotated".into()));
    }
}
