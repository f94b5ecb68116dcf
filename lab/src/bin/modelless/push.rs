//! `modelless policy push` and `modelless variants push`: a policy module (checked
//! first) or a model file pushed to an OCI registry, for replicas that follow the tag.
//! Policies go in the Wasm OCI artifact layout (config
//! `application/vnd.wasm.config.v0+json`, one `application/wasm` layer), annotated
//! with the ABI they speak, the language they were written in and the source's digest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::{Context, bail};
use modelless_runtime::policy::ModuleKind;
use modelless_runtime::source::{self, Artifact, Fetcher, OciReference, Source, SourcesConfig};

/// Where to push and with which credentials.
#[derive(clap::Args)]
pub struct Destination {
    /// Where: `oci://registry[:port]/repository:tag`.
    pub reference: String,
    /// A Docker-format config.json with credentials (default: `$DOCKER_CONFIG/config.json`
    /// or `~/.docker/config.json`, when there is one).
    #[arg(long)]
    pub docker_config: Option<PathBuf>,
    /// A file holding a bearer token for the registry.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Speak plain HTTP to the registry (one on this machine or the cluster's network).
    #[arg(long)]
    pub plain_http: bool,
}

/// What a policy push adds to the module.
#[derive(clap::Args)]
pub struct PolicyPushArgs {
    /// The module (`.wasm`).
    pub module: PathBuf,
    #[command(flatten)]
    pub destination: Destination,
    /// Snapshots `policy check` dry-runs it on before the push, JSON Lines.
    #[arg(long)]
    pub snapshots: Option<PathBuf>,
    /// Parameters for its `init` in that check, as JSON.
    #[arg(long)]
    pub parameters: Option<String>,
    /// The longest one decision may take in that check, ms: the `deadline_ms` of the
    /// replicas' config (an interpreter's first call takes longer than the default 10).
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// The folder of its source, whose digest is written in the annotations.
    #[arg(long)]
    pub source: Option<PathBuf>,
    /// The language it was written in (default: the one its `producers` section names).
    #[arg(long)]
    pub language: Option<String>,
}

/// What a model push takes.
#[derive(clap::Args)]
pub struct ModelPushArgs {
    /// The model file (`.onnx`, or TorchScript `.pt`).
    pub model: PathBuf,
    #[command(flatten)]
    pub destination: Destination,
    /// Its format, when its extension does not say.
    #[arg(long, value_enum)]
    pub format: Option<ModelFormatArg>,
}

/// A model's format.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ModelFormatArg {
    /// ONNX.
    Onnx,
    /// TorchScript.
    Torchscript,
}

impl Destination {
    fn reference(&self) -> anyhow::Result<OciReference> {
        match Source::parse(&self.reference)? {
            Source::Oci(reference) if reference.digest.is_none() => Ok(reference),
            Source::Oci(_) => bail!("{}: push to a tag; the registry gives the digest", self.reference),
            _ => bail!("{}: push to an `oci://registry/repository:tag` reference", self.reference),
        }
    }

    fn fetcher(&self, reference: &OciReference) -> anyhow::Result<Fetcher> {
        let docker_config = self.docker_config.clone().or_else(default_docker_config);
        let config = SourcesConfig {
            docker_config,
            token_file: self.token_file.clone(),
            insecure_registries: if self.plain_http { vec![reference.registry.clone()] } else { Vec::new() },
            // Nothing is fetched; the cache is only where a fetcher would keep blobs.
            cache: Some(std::env::temp_dir().join("modelless-push")),
            ..SourcesConfig::default()
        };
        Ok(Fetcher::new(&config)?)
    }

    fn push(&self, artifact: Artifact) -> anyhow::Result<()> {
        let reference = self.reference()?;
        let (bytes, started) = (artifact.bytes.len(), Instant::now());
        let digest = self.fetcher(&reference)?.push(&reference, artifact)?;
        println!(
            "pushed {:.1} MB to {reference} in {:.2} s\ndigest: {digest}\npinned: {}",
            bytes as f64 / 1e6,
            started.elapsed().as_secs_f64(),
            reference.pinned(&digest)
        );
        Ok(())
    }
}

/// `$DOCKER_CONFIG/config.json`, or `~/.docker/config.json`, where it exists.
fn default_docker_config() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker")))?;
    Some(dir.join("config.json")).filter(|path| path.is_file())
}

/// Checks the module as `policy check` does, then pushes it; a module the check
/// refuses is not pushed.
pub fn push_policy(args: PolicyPushArgs, kind: ModuleKind) -> anyhow::Result<()> {
    let bytes = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    let digest = source::sha256_digest(&bytes);
    let (abi, os) = match kind {
        ModuleKind::Core => (format!("core-v{}", modelless::policy_abi::ABI_VERSION), "wasip1"),
        ModuleKind::Component => ("modelless:policy/policy@1.0.0".to_string(), "wasip2"),
    };
    let language = args.language.clone().or_else(|| producers_language(&bytes)).unwrap_or_else(|| "unknown".into());
    let mut annotations = BTreeMap::from([
        (source::ANNOTATION_ABI.to_string(), abi),
        (source::ANNOTATION_LANGUAGE.to_string(), language),
        (source::ANNOTATION_CREATED.to_string(), rfc3339(SystemTime::now())),
    ]);
    if let Some(folder) = &args.source {
        annotations.insert(source::ANNOTATION_SOURCE_DIGEST.to_string(), source_digest(folder)?);
    }
    let config = serde_json::json!({
        "created": annotations[source::ANNOTATION_CREATED],
        "architecture": "wasm",
        "os": os,
        "layerDigests": [digest],
    });
    let title = file_name(&args.module);
    args.destination.push(Artifact {
        bytes,
        layer_media_type: source::WASM_LAYER_MEDIA_TYPE.into(),
        layer_annotations: BTreeMap::from([(source::ANNOTATION_TITLE.to_string(), title)]),
        config_media_type: source::WASM_CONFIG_MEDIA_TYPE.into(),
        config: serde_json::to_vec(&config)?,
        annotations,
    })
}

/// Pushes a model file as one layer of its format.
pub fn push_model(args: ModelPushArgs) -> anyhow::Result<()> {
    let format = match (args.format, args.model.extension().and_then(|e| e.to_str())) {
        (Some(format), _) => format,
        (None, Some("onnx")) => ModelFormatArg::Onnx,
        (None, Some("pt" | "pth" | "torchscript")) => ModelFormatArg::Torchscript,
        _ => bail!("{}: say its format with --format (onnx or torchscript)", args.model.display()),
    };
    let (name, media_type) = match format {
        ModelFormatArg::Onnx => ("onnx", source::ONNX_LAYER_MEDIA_TYPE),
        ModelFormatArg::Torchscript => ("torchscript", source::TORCHSCRIPT_LAYER_MEDIA_TYPE),
    };
    let bytes = std::fs::read(&args.model).with_context(|| format!("reading {}", args.model.display()))?;
    if bytes.is_empty() {
        bail!("{} is empty", args.model.display());
    }
    let created = rfc3339(SystemTime::now());
    let config = serde_json::json!({ "format": name, "created": created, "file": file_name(&args.model) });
    args.destination.push(Artifact {
        bytes,
        layer_media_type: media_type.into(),
        layer_annotations: BTreeMap::from([(source::ANNOTATION_TITLE.to_string(), file_name(&args.model))]),
        config_media_type: source::MODEL_CONFIG_MEDIA_TYPE.into(),
        config: serde_json::to_vec(&config)?,
        annotations: BTreeMap::from([
            (source::ANNOTATION_MODEL_FORMAT.to_string(), name.to_string()),
            (source::ANNOTATION_CREATED.to_string(), created),
        ]),
    })
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The digest of a source folder: every file but build outputs, by relative path, in
/// order; the same tree gives the same digest on any machine.
fn source_digest(folder: &Path) -> anyhow::Result<String> {
    const SKIPPED: [&str; 5] = ["target", "node_modules", ".git", "build", "__pycache__"];
    let mut files = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            let name = file_name(&path);
            if path.is_dir() {
                if !SKIPPED.contains(&name.as_str()) {
                    pending.push(path);
                }
            } else if !name.ends_with(".wasm") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut all = Vec::new();
    for path in files {
        let relative = path.strip_prefix(folder).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let content = std::fs::read(&path)?;
        all.extend_from_slice(format!("{relative}\0{}\0", content.len()).as_bytes());
        all.extend_from_slice(&content);
    }
    Ok(source::sha256_digest(&all))
}

/// The first language a module's `producers` custom section names (`Rust`, `C11`).
fn producers_language(wasm: &[u8]) -> Option<String> {
    let mut at = 8; // magic and version (or, for a component, its layer)
    while at < wasm.len() {
        let id = wasm[at];
        at += 1;
        let size = leb(wasm, &mut at)? as usize;
        let end = at.checked_add(size).filter(|end| *end <= wasm.len())?;
        if id == 0 {
            let mut inner = at;
            let name_len = leb(wasm, &mut inner)? as usize;
            let name = wasm.get(inner..inner + name_len)?;
            inner += name_len;
            if name == b"producers" {
                return language_field(&wasm[inner..end]);
            }
        }
        at = end;
    }
    None
}

/// The `language` field of a `producers` section's body.
fn language_field(body: &[u8]) -> Option<String> {
    let mut at = 0;
    let string = |at: &mut usize| -> Option<String> {
        let len = leb(body, at)? as usize;
        let text = body.get(*at..*at + len)?;
        *at += len;
        Some(String::from_utf8_lossy(text).into_owned())
    };
    for _ in 0..leb(body, &mut at)? {
        let field = string(&mut at)?;
        let values = leb(body, &mut at)?;
        let mut first = None;
        for _ in 0..values {
            let (name, _version) = (string(&mut at)?, string(&mut at)?);
            first.get_or_insert(name);
        }
        if field == "language" {
            return first;
        }
    }
    None
}

/// An unsigned LEB128 number at `at`.
fn leb(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// `time` as RFC 3339 in UTC, to the second.
fn rfc3339(time: SystemTime) -> String {
    let seconds = time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((seconds / 86_400) as i64, seconds % 86_400);
    // Howard Hinnant's days-to-civil: the proleptic Gregorian date of a day number.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_rfc3339_dates() {
        let at = |s: u64| rfc3339(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // 2026-12-07 22:36:39 UTC, and a leap day.
        assert_eq!(at(1_796_682_999), "2026-12-07T22:36:39Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn the_language_is_read_from_the_producers_section() {
        // A module with a `producers` section: language Rust, processed-by rustc.
        let mut section = Vec::new();
        let push_str = |v: &mut Vec<u8>, s: &str| {
            v.push(s.len() as u8);
            v.extend_from_slice(s.as_bytes());
        };
        push_str(&mut section, "producers");
        section.push(2);
        push_str(&mut section, "language");
        section.push(1);
        push_str(&mut section, "Rust");
        push_str(&mut section, "");
        push_str(&mut section, "processed-by");
        section.push(1);
        push_str(&mut section, "rustc");
        push_str(&mut section, "1.95.0");
        let mut wasm = b"\0asm\x01\0\0\0".to_vec();
        wasm.push(0);
        wasm.push(section.len() as u8);
        wasm.extend_from_slice(&section);
        assert_eq!(producers_language(&wasm).as_deref(), Some("Rust"));
        assert_eq!(producers_language(b"\0asm\x01\0\0\0"), None);
    }
}
