//! Compiled policies on disk, so that a restart or a reload of a module seen before
//! skips Cranelift (seconds and hundreds of MB for an interpreter's component): each
//! artefact is keyed by the module's SHA-256 and by the engine's compatibility hash
//! (wasmtime's version and every setting that changes the code), and written whole or
//! not at all. The folder must be as trusted as the binary: what it holds is native
//! code the host runs.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::Module;
use wasmtime::component::Component;

/// A module compiled, of either kind.
pub(super) enum Compiled {
    Core(Module),
    Component(Component),
}

/// Where compiled artefacts are kept, and how they are named for this engine.
#[derive(Clone, Debug)]
pub(super) struct CompiledCache {
    dir: PathBuf,
    engine_key: u64,
}

impl CompiledCache {
    pub(super) fn new(dir: &Path, engine: &Engine) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        CompiledCache { dir: dir.to_path_buf(), engine_key: hasher.finish() }
    }

    /// The file the module of `digest` compiled as `kind` is kept in.
    fn path(&self, digest: &str, kind: &str) -> PathBuf {
        self.dir.join(format!("{}-{:016x}.{kind}.cwasm", crate::source::hex_of(digest), self.engine_key))
    }

    /// The artefact of the module of `digest`, if one was kept and this engine can
    /// load it.
    pub(super) fn load(&self, engine: &Engine, digest: &str, component: bool) -> Option<Compiled> {
        let path = self.path(digest, if component { "component" } else { "module" });
        if !path.is_file() {
            return None;
        }
        // SAFETY: the file was written by `store` below from what this engine
        // compiled, under a name that carries the module's hash and the engine's
        // compatibility hash; wasmtime checks its header against the engine again.
        // The folder is as trusted as the binary (see the module's docs).
        #[allow(unsafe_code, reason = "loading native code wasmtime compiled earlier is unsafe by its nature")]
        let loaded = unsafe {
            if component {
                Component::deserialize_file(engine, &path).map(Compiled::Component)
            } else {
                Module::deserialize_file(engine, &path).map(Compiled::Core)
            }
        };
        match loaded {
            Ok(compiled) => Some(compiled),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "a cached policy artefact was not loaded; compiling");
                None
            }
        }
    }

    /// Keeps the artefact of the module of `digest`; a failure to keep it is logged,
    /// never fatal.
    pub(super) fn store(&self, digest: &str, compiled: &Compiled) {
        let (serialized, kind) = match compiled {
            Compiled::Core(module) => (module.serialize(), "module"),
            Compiled::Component(component) => (component.serialize(), "component"),
        };
        let path = self.path(digest, kind);
        let kept = serialized.map_err(|e| e.to_string()).and_then(|artefact| {
            std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
            let partial = path.with_extension(format!("partial.{}", std::process::id()));
            std::fs::write(&partial, artefact).map_err(|e| e.to_string())?;
            std::fs::rename(&partial, &path).map_err(|e| e.to_string())
        });
        if let Err(error) = kept {
            tracing::warn!(path = %path.display(), %error, "a compiled policy could not be cached");
        }
    }
}
