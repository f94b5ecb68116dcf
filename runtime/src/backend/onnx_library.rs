//! Finds the ONNX Runtime shared library where users install it, in this order:
//!
//! 1. `library_path` in the runtime's ONNX Runtime config;
//! 2. the `ORT_DYLIB_PATH` variable;
//! 3. `.modelless/onnxruntime/lib/` in the working directory or the nearest of its
//!    ancestors (where a checkout's setup puts it);
//! 4. the per-user directory that `modelless setup` fills: `$XDG_DATA_HOME/modelless/
//!    onnxruntime/lib`, by default `~/.local/share/modelless/onnxruntime/lib`;
//! 5. the `onnxruntime` package that `pip install onnxruntime` (or `onnxruntime-gpu`)
//!    put in the active Python environment (`$VIRTUAL_ENV`, `$CONDA_PREFIX`), the
//!    user's site-packages (`~/.local/lib/python3.*`), or the system's
//!    (`/usr/lib/python3/dist-packages`, `/usr/local/lib/python3.*`);
//! 6. where the system's dynamic loader looks: `LD_LIBRARY_PATH`, `ldconfig`'s cache,
//!    `/usr/local/lib`, `/usr/lib`.
//!
//! A library whose file name gives a version older than this build needs is passed
//! over, and said so: a Python environment often holds an older ONNX Runtime.

use std::path::{Path, PathBuf};

use crate::error::BackendError;
pub use crate::error::library::{SearchedPlace, advise_as_the_cli};

/// The library's file name on this platform.
#[cfg(target_os = "macos")]
pub const LIBRARY_NAME: &str = "libonnxruntime.dylib";
/// The library's file name on this platform.
#[cfg(not(target_os = "macos"))]
pub const LIBRARY_NAME: &str = "libonnxruntime.so";

/// Where the setup script puts the library, relative to the project root.
pub const PROJECT_LIBRARY_DIR: &str = ".modelless/onnxruntime/lib";

/// The oldest ONNX Runtime this build loads (`ort`'s API level).
pub const MINIMUM_VERSION: (u32, u32) = (1, ort::MINOR_VERSION);

/// The ONNX Runtime release that `modelless setup` installs by default: the one this
/// build is tested with.
pub const TESTED_VERSION: &str = "1.31.1";

/// The roots the search starts from, read from the process by [`SearchRoots::of_process`]
/// or set by hand (tests).
#[derive(Clone, Debug, Default)]
pub struct SearchRoots {
    /// `library_path` of the config.
    pub configured: Option<PathBuf>,
    /// `ORT_DYLIB_PATH`.
    pub from_variable: Option<PathBuf>,
    /// The working directory.
    pub working_dir: PathBuf,
    /// The per-user library directory.
    pub user_dir: Option<PathBuf>,
    /// Python environments, most specific first: each a prefix holding
    /// `lib/python3.*/site-packages`, or a site-packages directory itself.
    pub python: Vec<PathBuf>,
    /// Whether to try, last, what the system's dynamic loader would find.
    pub ask_loader: bool,
    /// `LD_LIBRARY_PATH`, for the loader.
    pub loader_path: Option<PathBuf>,
}

impl SearchRoots {
    /// The roots of this process: its environment variables, working directory and home.
    pub fn of_process(configured: Option<&Path>) -> Self {
        let var = env_path;
        let home = var("HOME");
        let mut python: Vec<PathBuf> = [var("VIRTUAL_ENV"), var("CONDA_PREFIX")].into_iter().flatten().collect();
        python.extend(home.iter().map(|h| h.join(".local")));
        python.extend(["/usr/lib/python3/dist-packages", "/usr/local", "/usr"].map(PathBuf::from));
        SearchRoots {
            configured: configured.map(Path::to_path_buf),
            from_variable: var("ORT_DYLIB_PATH"),
            working_dir: std::env::current_dir().unwrap_or_default(),
            user_dir: user_library_dir(),
            python,
            ask_loader: true,
            loader_path: var("LD_LIBRARY_PATH"),
        }
    }
}

/// The environment variable `name` as a path, unless unset or empty.
fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The per-user directory `modelless setup` installs the library into.
pub fn user_library_dir() -> Option<PathBuf> {
    let data = env_path("XDG_DATA_HOME").or_else(|| env_path("HOME").map(|h| h.join(".local/share")))?;
    Some(data.join("modelless/onnxruntime/lib"))
}

/// Finds the library from the roots of this process; `configured` is the config's
/// `library_path`.
pub fn find_library(configured: Option<&Path>) -> Result<PathBuf, BackendError> {
    find_library_from(&SearchRoots::of_process(configured))
}

/// Finds the library from `roots`, in the order of the module docs.
pub fn find_library_from(roots: &SearchRoots) -> Result<PathBuf, BackendError> {
    let mut searched = Vec::new();
    let project =
        roots.working_dir.ancestors().map(|d| d.join(PROJECT_LIBRARY_DIR).join(LIBRARY_NAME)).find(|p| p.is_file());
    let project = project.unwrap_or_else(|| roots.working_dir.join(PROJECT_LIBRARY_DIR).join(LIBRARY_NAME));
    let fixed = [
        ("library_path in the config", roots.configured.clone()),
        ("ORT_DYLIB_PATH", roots.from_variable.clone()),
        ("./.modelless in the working directory or above (a checkout's setup)", Some(project)),
        ("the per-user directory", roots.user_dir.as_ref().map(|d| d.join(LIBRARY_NAME))),
    ];
    let fixed = fixed.into_iter().filter_map(|(source, path)| Some((source, path?)));
    if let Some(found) = first_usable(fixed, &mut searched) {
        return Ok(found);
    }
    match find_in_python(roots) {
        Ok(found) => return Ok(found),
        Err(passed_over) => searched.extend(passed_over),
    }
    // Asked last, and only when reached: it runs `ldconfig`.
    if roots.ask_loader {
        let loader = loader_candidates(roots.loader_path.as_deref()).into_iter().map(|path| (LOADER, path));
        if let Some(found) = first_usable(loader, &mut searched) {
            return Ok(found);
        }
    }
    Err(BackendError::LibraryNotFound { searched, fix: crate::error::library::fix() })
}

/// The first of `candidates` this build can load; those passed over go to `searched`.
fn first_usable(
    candidates: impl IntoIterator<Item = (&'static str, PathBuf)>,
    searched: &mut Vec<SearchedPlace>,
) -> Option<PathBuf> {
    for (source, path) in candidates {
        match usable(source, path) {
            Ok(found) => return Some(found),
            Err(place) => searched.push(place),
        }
    }
    None
}

/// The newest usable library in the Python environments of `roots`, the most specific
/// environment first; else the places passed over.
pub fn find_in_python(roots: &SearchRoots) -> Result<PathBuf, Vec<SearchedPlace>> {
    let mut searched = Vec::new();
    for root in &roots.python {
        let libraries = package_libraries(root);
        if libraries.is_empty() {
            searched.push(SearchedPlace { source: PYTHON, path: package_pattern(root), outcome: "not there".into() });
        }
        if let Some(found) = first_usable(libraries.into_iter().map(|l| (PYTHON, l)), &mut searched) {
            return Ok(found);
        }
    }
    Err(searched)
}

/// Where under `root` an `onnxruntime` package would be, as the error names it.
fn package_pattern(root: &Path) -> PathBuf {
    if root.file_name().is_some_and(|n| n.to_string_lossy().ends_with("-packages")) {
        root.join("onnxruntime")
    } else {
        root.join("lib/python3.*/site-packages/onnxruntime")
    }
}

/// `path` if it holds a library this build can load, else why not.
fn usable(source: &'static str, path: PathBuf) -> Result<PathBuf, SearchedPlace> {
    let outcome = match (path.is_file(), file_version(&path)) {
        (false, _) => "not there".to_string(),
        (true, Some(v)) if v < MINIMUM_VERSION => {
            let (major, minor) = MINIMUM_VERSION;
            format!("version {}.{}, older than the {major}.{minor} this build needs", v.0, v.1)
        }
        (true, _) => return Ok(path),
    };
    Err(SearchedPlace { source, path, outcome })
}

const PYTHON: &str = "a Python environment (pip install onnxruntime)";
const LOADER: &str = "the system's dynamic loader";

/// The libraries the system's dynamic loader would find by name: in the directories
/// of `library_path` (`LD_LIBRARY_PATH`), in `ldconfig`'s cache, in the default
/// directories.
fn loader_candidates(library_path: Option<&Path>) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> =
        library_path.iter().flat_map(std::env::split_paths).map(|d| d.join(LIBRARY_NAME)).collect();
    let cached = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .find_map(|ldconfig| std::process::Command::new(ldconfig).arg("-p").output().ok())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    // Lines of `ldconfig -p` read `\tlibonnxruntime.so.1 (libc6,x86-64) => /usr/lib/libonnxruntime.so.1`.
    candidates.extend(
        cached
            .lines()
            .filter(|line| line.trim_start().starts_with(LIBRARY_NAME))
            .filter_map(|line| line.split("=> ").nth(1))
            .map(|path| PathBuf::from(path.trim())),
    );
    candidates.extend(["/usr/local/lib", "/usr/lib"].map(|d| Path::new(d).join(LIBRARY_NAME)));
    candidates
}

/// The ONNX Runtime libraries, newest first, of the `onnxruntime` packages under
/// `root`: a site-packages directory (or an unpacked wheel), or a prefix with
/// `lib/python3.*/{site,dist}-packages`.
pub fn package_libraries(root: &Path) -> Vec<PathBuf> {
    let mut sites = vec![root.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(root.join("lib")) {
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        // Newest Python first.
        pythons.sort_by_key(|p| std::cmp::Reverse(python_minor(p)));
        sites.extend(pythons.iter().flat_map(|p| [p.join("site-packages"), p.join("dist-packages")]));
    }
    let mut found: Vec<PathBuf> = sites
        .iter()
        .filter_map(|site| std::fs::read_dir(site.join("onnxruntime/capi")).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| is_library_file(&n.to_string_lossy())))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(file_version(p)));
    found
}

fn python_minor(dir: &Path) -> u32 {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.strip_prefix("python3.").and_then(|m| m.parse().ok()).unwrap_or(0)
}

/// Whether `name` is the ONNX Runtime library itself, with or without a version
/// (`libonnxruntime.so.1.31.1`, `libonnxruntime.1.31.1.dylib`), not one of its
/// providers.
fn is_library_file(name: &str) -> bool {
    let stem = LIBRARY_NAME.split('.').next().unwrap_or(LIBRARY_NAME);
    let rest = name.strip_prefix(stem).unwrap_or("x");
    rest.starts_with('.') && (rest.contains(".so") || rest.ends_with(".dylib"))
}

/// The version a library's file name gives (`libonnxruntime.so.1.31.1` → 1.31), if any.
pub fn file_version(path: &Path) -> Option<(u32, u32)> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let mut numbers = name.split('.').filter_map(|part| part.parse::<u32>().ok());
    Some((numbers.next()?, numbers.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"not really a library").unwrap();
    }

    fn roots(dir: &Path) -> SearchRoots {
        SearchRoots {
            working_dir: dir.join("app/src"),
            user_dir: Some(dir.join("data/modelless/onnxruntime/lib")),
            python: vec![dir.join("venv"), dir.join("home/.local")],
            ..SearchRoots::default()
        }
    }

    #[test]
    fn every_place_is_searched_in_order_and_named_when_none_holds_the_library() {
        let dir = tempfile::tempdir().unwrap();
        let mut roots = roots(dir.path());
        roots.from_variable = Some(dir.path().join("nowhere/libonnxruntime.so"));
        let Err(BackendError::LibraryNotFound { searched, fix }) = find_library_from(&roots) else {
            panic!("found a library in an empty directory");
        };
        let sources: Vec<&str> = searched.iter().map(|s| s.source).collect();
        assert_eq!(
            sources,
            [
                "ORT_DYLIB_PATH",
                "./.modelless in the working directory or above (a checkout's setup)",
                "the per-user directory",
                "a Python environment (pip install onnxruntime)",
                "a Python environment (pip install onnxruntime)",
            ]
        );
        assert_eq!(fix, crate::error::library::fix_for(false), "a test is no command line");
        let message = BackendError::LibraryNotFound { searched, fix }.to_string();
        assert!(message.contains("nowhere/libonnxruntime.so"), "{message}");
        // An app is told first what it sets itself, and nothing of a CLI it lacks.
        let advice = message.lines().next().unwrap();
        assert!(advice.contains("ORT_DYLIB_PATH") && advice.contains("with_library_path"), "{advice}");
        assert!(!message.contains("modelless setup") && !message.contains("scripts/"), "{message}");
        let for_the_cli = crate::error::library::fix_for(true);
        assert!(for_the_cli.starts_with("run `modelless setup`"), "{for_the_cli}");
    }

    #[test]
    fn the_project_directory_comes_before_the_user_one_and_the_user_one_before_python() {
        let dir = tempfile::tempdir().unwrap();
        let roots = roots(dir.path());
        let in_venv = dir.path().join("venv/lib/python3.12/site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1");
        touch(&in_venv);
        assert_eq!(find_library_from(&roots).unwrap(), in_venv);
        let per_user = dir.path().join("data/modelless/onnxruntime/lib").join(LIBRARY_NAME);
        touch(&per_user);
        assert_eq!(find_library_from(&roots).unwrap(), per_user);
        let in_project = dir.path().join("app").join(PROJECT_LIBRARY_DIR).join(LIBRARY_NAME);
        touch(&in_project);
        assert_eq!(find_library_from(&roots).unwrap(), in_project, "found from a subdirectory of the project");
    }

    #[test]
    fn an_older_onnxruntime_in_one_environment_is_passed_over_for_a_newer_one_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let roots = roots(dir.path());
        let old = dir.path().join("venv/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime.so.1.16.3");
        touch(&old);
        touch(
            &dir.path().join("venv/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime_providers_shared.so"),
        );
        let Err(BackendError::LibraryNotFound { searched, .. }) = find_library_from(&roots) else {
            panic!("took a library older than the build needs");
        };
        let passed_over = searched.iter().find(|s| s.path == old).unwrap();
        assert!(passed_over.outcome.contains("version 1.16"), "{passed_over}");
        let user_site =
            dir.path().join("home/.local/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1");
        touch(&user_site);
        assert_eq!(find_library_from(&roots).unwrap(), user_site);
    }

    #[test]
    fn library_files_are_told_from_providers_and_versions_read_from_names() {
        assert!(is_library_file("libonnxruntime.so.1.31.1"));
        assert!(is_library_file("libonnxruntime.so"));
        assert!(!is_library_file("libonnxruntime_providers_shared.so"));
        assert!(!is_library_file("onnxruntime_pybind11_state.so"));
        assert_eq!(file_version(Path::new("libonnxruntime.so.1.31.1")), Some((1, 31)));
        assert_eq!(file_version(Path::new("libonnxruntime.so")), None);
    }
}
