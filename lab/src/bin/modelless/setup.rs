//! `modelless setup`: puts ONNX Runtime in the per-user directory, where every
//! application that links modelless finds it without `ORT_DYLIB_PATH` or a config.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use modelless::backend::onnx::OrtEnvironmentConfig;
use modelless_runtime::backend::onnx_library::{
    LIBRARY_NAME, SearchRoots, TESTED_VERSION, file_version, user_library_dir,
};
use modelless_runtime::backend::onnx_library::{find_in_python, package_libraries};

#[derive(clap::Args)]
pub struct Args {
    /// The library to install. Without it: the newest usable one in a Python environment
    /// (`pip install onnxruntime`), else the one in PyPI's `onnxruntime` wheel, fetched
    /// with `python3 -m pip download`.
    #[arg(long)]
    from: Option<PathBuf>,
    /// Fetch the wheel from PyPI even if a Python environment has a usable library.
    #[arg(long)]
    download: bool,
    /// The `onnxruntime` release to fetch from PyPI.
    #[arg(long, default_value = TESTED_VERSION)]
    onnxruntime_version: String,
    /// Install here instead of the per-user directory.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(dir) = args.dir.clone().or_else(user_library_dir) else {
        bail!("no per-user directory: neither XDG_DATA_HOME nor HOME is set; pass --dir");
    };
    let scratch = std::env::temp_dir().join(format!("modelless-setup-{}", std::process::id()));
    let installed = source_library(&args, &scratch).and_then(|source| install(&source, &dir));
    let _ = std::fs::remove_dir_all(&scratch);
    let installed = installed?;
    println!("[3/3] loading it to check");
    let config = OrtEnvironmentConfig::default().with_library_path(&installed);
    modelless_runtime::backend::onnx::environment(&config)
        .with_context(|| format!("{} does not load", installed.display()))?;
    println!("ONNX Runtime installed: {}", installed.display());
    println!("applications that link modelless now find it without ORT_DYLIB_PATH");
    Ok(())
}

/// The library to install, fetched into `scratch` if it has to be.
fn source_library(args: &Args, scratch: &Path) -> anyhow::Result<PathBuf> {
    if let Some(from) = &args.from {
        println!("[1/3] taking {}", from.display());
        return Ok(from.clone());
    }
    let in_python = || find_in_python(&SearchRoots::of_process(None)).ok();
    if let Some(found) = (!args.download).then(in_python).flatten() {
        println!("[1/3] taking the one of a Python environment: {}", found.display());
        return Ok(found);
    }
    let wheel_dir = scratch.join("wheel");
    println!("[1/3] fetching onnxruntime=={} from PyPI (python3 -m pip download)", args.onnxruntime_version);
    let requirement = format!("onnxruntime=={}", args.onnxruntime_version);
    python(
        &["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest"],
        &wheel_dir,
        &requirement,
    )?;
    let wheel = std::fs::read_dir(&wheel_dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("pip downloaded no wheel")?;
    let unpacked = scratch.join("unpacked");
    python(&["-m", "zipfile", "-e"], &wheel, &unpacked.display().to_string())?;
    package_libraries(&unpacked).into_iter().next().context("the wheel holds no ONNX Runtime library")
}

/// Runs `python3 ARGS PATH EXTRA`, failing with its output.
fn python(args: &[&str], path: &Path, extra: &str) -> anyhow::Result<()> {
    let out = Command::new("python3")
        .args(args)
        .arg(path)
        .arg(extra)
        .output()
        .context("python3 is needed to fetch ONNX Runtime from PyPI (or pass --from)")?;
    if !out.status.success() {
        bail!("python3 {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Copies `source` (and the providers' shared library beside it, which the GPU
/// providers need) into `dir`, named `LIBRARY_NAME` too; gives the path to load.
fn install(source: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    println!("[2/3] copying into {}", dir.display());
    if !source.is_file() {
        bail!("{} is not a file", source.display());
    }
    if let Some((major, minor)) = file_version(source) {
        println!("      version {major}.{minor}");
    }
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    let name = source.file_name().context("the library has no file name")?;
    let copy = |from: &Path, to: &Path| std::fs::copy(from, to).with_context(|| format!("copying to {}", to.display()));
    copy(source, &dir.join(name))?;
    let providers = source.with_file_name(LIBRARY_NAME.replace("onnxruntime", "onnxruntime_providers_shared"));
    if providers.is_file() {
        copy(&providers, &dir.join(providers.file_name().unwrap_or_default()))?;
    }
    let plain = dir.join(LIBRARY_NAME);
    if name != LIBRARY_NAME {
        let _ = std::fs::remove_file(&plain);
        link_or_copy(&dir.join(name), &plain)?;
    }
    Ok(plain)
}

#[cfg(unix)]
fn link_or_copy(target: &Path, link: &Path) -> anyhow::Result<()> {
    let relative = target.file_name().context("no file name")?;
    std::os::unix::fs::symlink(relative, link).with_context(|| link.display().to_string())
}

#[cfg(not(unix))]
fn link_or_copy(target: &Path, link: &Path) -> anyhow::Result<()> {
    std::fs::copy(target, link).map(drop).with_context(|| link.display().to_string())
}
