//! Helpers the sdk's benchmarks share: files setup made, where results go.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// `.modelless/<relative>` in the working directory or the nearest of its ancestors.
pub fn setup_file(relative: &str) -> Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .map(|d| d.join(".modelless").join(relative))
        .find(|p| p.exists())
        .with_context(|| format!(".modelless/{relative} not found: run scripts/setup/base.sh"))
}

/// `<target>/modelless-bench`: results files of the benchmarks.
pub fn output_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf)));
    target.unwrap_or_else(|| PathBuf::from("target")).join("modelless-bench")
}
