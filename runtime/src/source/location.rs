//! Where a policy module or a model version comes from: a file, an OCI reference
//! (`oci://registry/repository:tag`, or pinned `@sha256:…`), or an `https://` URL.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Where an artifact comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file on this machine.
    File(PathBuf),
    /// An artifact in an OCI registry.
    Oci(OciReference),
    /// An `https://` URL; what it gives is checked against a `sha256` the config holds.
    Https(String),
}

/// An artifact in an OCI registry: `registry/repository`, with a tag, a digest or
/// both (the digest then decides).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OciReference {
    /// The registry's host, with its port: `ghcr.io`, `127.0.0.1:5000`.
    pub registry: String,
    /// The repository in it: `team/policies/steer`.
    pub repository: String,
    /// The tag, followed when no digest pins it.
    pub tag: Option<String>,
    /// The manifest's digest, `sha256:` and 64 hex digits.
    pub digest: Option<String>,
}

const OCI_SCHEME: &str = "oci://";
const HTTPS_SCHEME: &str = "https://";

impl Source {
    /// Reads `text`: `oci://…` and `https://…` are remote, anything else a file.
    pub fn parse(text: &str) -> Result<Source, Error> {
        if let Some(rest) = text.strip_prefix(OCI_SCHEME) {
            return OciReference::parse(rest).map(Source::Oci);
        }
        if text.starts_with(HTTPS_SCHEME) {
            return Ok(Source::Https(text.to_string()));
        }
        if text.starts_with("http://") {
            return Err(Error::Config(format!(
                "{text}: a plain `http://` URL is not taken; use `https://` (or an `oci://` registry named \
                 in `sources.insecure_registries`)"
            )));
        }
        Ok(Source::File(PathBuf::from(text)))
    }

    /// The source a config's path field names: a file, or a remote reference written
    /// in it.
    pub fn of_path(path: &Path) -> Result<Source, Error> {
        match path.to_str() {
            Some(text) => Source::parse(text),
            None => Ok(Source::File(path.to_path_buf())),
        }
    }

    /// Whether it is fetched rather than read from a file.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Source::File(_))
    }

    /// The tagged reference a poll follows, when it is one no digest pins.
    pub fn followed(&self) -> Option<&OciReference> {
        match self {
            Source::Oci(reference) if reference.digest.is_none() => Some(reference),
            _ => None,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Oci(reference) => write!(f, "{reference}"),
            Source::Https(url) => f.write_str(url),
        }
    }
}

impl OciReference {
    /// Reads `registry/repository[:tag][@sha256:…]` (without `oci://`); a reference
    /// with neither tag nor digest follows `latest`.
    pub fn parse(text: &str) -> Result<OciReference, Error> {
        let bad = |why: &str| Err(Error::Config(format!("{OCI_SCHEME}{text}: {why}")));
        let (name, digest) = match text.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (text, None),
        };
        if let Some(digest) = digest
            && !is_sha256_digest(digest)
        {
            return bad("a digest is `sha256:` and 64 lowercase hex digits");
        }
        let Some((registry, path)) = name.split_once('/') else {
            return bad("name the registry first: `oci://registry[:port]/repository:tag`");
        };
        if registry.is_empty() || !registry.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) {
            return bad("the registry is a host with an optional port");
        }
        // A tag follows the last `:` of the last path component (a port's `:` is in
        // the registry, already split off).
        let last = path.rsplit('/').next().unwrap_or(path);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => (&path[..path.len() - tag.len() - 1], Some(tag)),
            None => (path, None),
        };
        let repository_ok = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            });
        if !repository_ok {
            return bad("a repository is lowercase letters, digits, `.`, `_`, `-`, in parts split by `/`");
        }
        if let Some(tag) = tag {
            let tag_ok = (1..=128).contains(&tag.len())
                && !tag.starts_with(['.', '-'])
                && tag.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !tag_ok {
                return bad("a tag is 1 to 128 letters, digits, `.`, `_`, `-`, not starting with `.` or `-`");
            }
        }
        let tag = match (tag, digest) {
            (None, None) => Some("latest".to_string()),
            (tag, _) => tag.map(str::to_string),
        };
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest: digest.map(str::to_string),
        })
    }

    /// The same artifact pinned to `digest`, the tag kept for the record.
    pub fn pinned(&self, digest: &str) -> OciReference {
        OciReference { digest: Some(digest.to_string()), ..self.clone() }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{OCI_SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Whether `text` is `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_are_read_with_their_registry_port_tag_and_digest() {
        let Source::Oci(tagged) = Source::parse("oci://127.0.0.1:5000/team/steer:v2").unwrap() else { panic!() };
        assert_eq!(
            (tagged.registry.as_str(), tagged.repository.as_str(), tagged.tag.as_deref()),
            ("127.0.0.1:5000", "team/steer", Some("v2"))
        );
        assert!(Source::Oci(tagged.clone()).followed().is_some());
        let pinned = Source::parse(&format!("oci://ghcr.io/a/b@{DIGEST}")).unwrap();
        assert_eq!(pinned.followed(), None, "a digest pins it");
        assert_eq!(pinned.to_string(), format!("oci://ghcr.io/a/b@{DIGEST}"));
        let latest = OciReference::parse("localhost:5000/p").unwrap();
        assert_eq!(latest.tag.as_deref(), Some("latest"));
        assert_eq!(tagged.pinned(DIGEST).to_string(), format!("oci://127.0.0.1:5000/team/steer:v2@{DIGEST}"));
    }

    #[test]
    fn a_malformed_reference_is_refused_saying_which_part() {
        for (text, part) in [
            ("oci://steer:v1", "registry first"),
            ("oci://r.io/Team/steer", "lowercase"),
            ("oci://r.io/a:-x", "a tag is"),
            ("oci://r.io/a@sha256:12", "digest"),
            ("http://r.io/p.wasm", "https"),
        ] {
            let refused = Source::parse(text).unwrap_err().to_string();
            assert!(refused.contains(part), "{text}: {refused}");
        }
    }

    #[test]
    fn anything_else_is_a_file_and_an_https_url_is_remote() {
        assert_eq!(Source::of_path(Path::new("models/a.onnx")).unwrap(), Source::File("models/a.onnx".into()));
        let url = Source::parse("https://example.org/p.wasm").unwrap();
        assert!(url.is_remote() && url.followed().is_none());
    }
}
