//! Serving a [`Runtime`] over KServe V2 (feature `server`): gRPC and HTTP/REST
//! endpoints, `/metrics`, and the model repository, which loads only what the config
//! declares or what lies under the configured repository root.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use modelless_runtime::kserve::{
    Code, InferenceService, OverrideLimits, Repository, RepositoryEntry, ServeError, ServerConfig, ServerError,
    path_under_root, plain_name,
};
use modelless_runtime::{TaskConfig, VariantConfig};

use crate::declared::Declared;
use crate::overrides::overridden;
use crate::runtime::Runtime;
use crate::server::Server;

impl Runtime {
    /// Serves this runtime over KServe V2 (gRPC and HTTP/REST, with `/metrics`) from
    /// the current tokio runtime, until [`Server::shutdown`].
    pub async fn serve(self: Arc<Self>, config: &ServerConfig) -> Result<Server, ServerError> {
        let repository = RuntimeRepository {
            runtime: self.clone(),
            root: config.model_repository.clone(),
            limits: config.override_limits.clone(),
        };
        let service = InferenceService::new(self.registry.clone(), Arc::new(repository))
            .with_limits(config.request_limits())
            .with_model_control(config.model_control_mode)
            .with_admin_token(config.admin_token().map_err(ServerError::Config)?);
        let service = Arc::new(service);
        modelless_runtime::kserve::Server::start(service, config).await.map(Server::new)
    }

    /// Serves as [`Runtime::serve`] does until `shutdown` resolves, then stops as
    /// [`Server::shutdown`] does: not ready, no new connections, the requests under way
    /// answered (up to the config's drain timeout). [`crate::kserve::shutdown_signal`] resolves on
    /// Ctrl-C or SIGTERM, as a container's stop sends it.
    pub async fn serve_until(
        self: Arc<Self>,
        config: &ServerConfig,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServerError> {
        let server = self.serve(config).await?;
        shutdown.await;
        server.shutdown().await;
        Ok(())
    }
}

/// The repository of a runtime.
struct RuntimeRepository {
    runtime: Arc<Runtime>,
    root: Option<PathBuf>,
    limits: OverrideLimits,
}

/// What a repository name loads.
enum Source {
    Task(TaskConfig),
    Model(Box<VariantConfig>),
    Variant { task: String },
}

impl RuntimeRepository {
    fn declared(&self) -> Declared {
        self.runtime.declared.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn is_loaded(&self, name: &str) -> bool {
        self.runtime.tasks().iter().any(|t| t == name) || self.runtime.models().iter().any(|m| m == name)
    }

    fn find(&self, name: &str) -> Result<Source, ServeError> {
        let declared = self.declared();
        if let Some(task) = declared.tasks.into_iter().find(|t| t.name == name) {
            return Ok(Source::Task(task));
        }
        if let Some(model) = declared.models.into_iter().find(|m| m.name == name) {
            return Ok(Source::Model(Box::new(model)));
        }
        for task in self.runtime.tasks() {
            if let Ok(status) = self.runtime.task_status(&task)
                && status.variant(name).is_some()
            {
                return Ok(Source::Variant { task });
            }
        }
        let file = match &self.root {
            Some(root) => model_file(root, plain_name(name)?)?,
            None => None,
        };
        file.map(|path| Source::Model(Box::new(VariantConfig::plain(name, path)))).ok_or_else(|| {
            ServeError::new(Code::NotFound, format!("no model `{name}` in the config or the model repository"))
        })
    }
}

impl Repository for RuntimeRepository {
    fn index(&self) -> Vec<RepositoryEntry> {
        let mut entries: Vec<RepositoryEntry> = Vec::new();
        let mut add = |name: &str, version: String, ready: bool, reason: &str| {
            if !entries.iter().any(|e| e.name == name) {
                let state = if ready { "READY" } else { "UNAVAILABLE" };
                let reason = reason.to_string();
                entries.push(RepositoryEntry { name: name.to_string(), version, state: state.into(), reason });
            }
        };
        for task in self.runtime.tasks() {
            let Ok(status) = self.runtime.task_status(&task) else { continue };
            add(&task, String::new(), true, "");
            for variant in &status.variants {
                let version = variant.current.map(|v| v.to_string()).unwrap_or_default();
                let reason = if variant.current.is_some() { "" } else { "not loaded" };
                add(&variant.name, version, variant.current.is_some(), reason);
            }
        }
        for model in self.runtime.models() {
            let version = self.runtime.registry.get(&model).map(|m| m.version().to_string()).unwrap_or_default();
            add(&model, version, true, "");
        }
        // Pipelines are listed as Triton lists its ensembles: ready while every stage
        // has a variant serving.
        for name in self.runtime.pipelines() {
            let Ok(pipeline) = self.runtime.registry.pipeline(&name) else { continue };
            let idle = pipeline
                .stages()
                .into_iter()
                .find(|stage| !self.runtime.registry.task(stage).is_ok_and(|task| task.active_model().is_ok()));
            let reason = idle.as_ref().map(|stage| format!("stage `{stage}` has no variant serving"));
            add(&name, "1".into(), idle.is_none(), reason.as_deref().unwrap_or_default());
        }
        let declared = self.declared();
        let declared_names = declared.tasks.iter().map(|t| &t.name).chain(declared.models.iter().map(|m| &m.name));
        for name in declared_names {
            add(name, String::new(), false, "unloaded");
        }
        if let Some(root) = &self.root {
            for name in model_names(root) {
                add(&name, String::new(), false, "unloaded");
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    }

    fn load(&self, name: &str, config: Option<&str>) -> Result<(), ServeError> {
        if config.is_none() && self.is_loaded(name) {
            return Ok(());
        }
        match self.find(name)? {
            Source::Task(task) if config.is_none() => self.runtime.add_task(task).map(drop)?,
            Source::Task(_) => return Err(ServeError::invalid("a `config` override applies to models only")),
            Source::Variant { task } => self.runtime.load_variant(&task, name)?,
            Source::Model(model) => {
                let model = match config {
                    Some(config) => overridden(*model, config, self.root.as_deref(), &self.limits)?,
                    None => *model,
                };
                // A model loaded with new settings replaces the one serving.
                if self.is_loaded(name) {
                    self.runtime.unload_model(name)?;
                }
                self.runtime.load_model(model).map(drop)?;
            }
        }
        Ok(())
    }

    fn unload(&self, name: &str) -> Result<(), ServeError> {
        if self.runtime.tasks().iter().any(|t| t == name) {
            return Ok(self.runtime.remove_task(name)?);
        }
        if self.runtime.models().iter().any(|m| m == name) {
            return Ok(self.runtime.unload_model(name)?);
        }
        match self.find(name)? {
            Source::Variant { task } => Ok(self.runtime.unload_variant(&task, name)?),
            // Declared or in the repository, and not loaded: nothing to do.
            Source::Task(_) | Source::Model(_) => Ok(()),
        }
    }

    fn provenance(&self) -> serde_json::Value {
        #[cfg(feature = "policies")]
        let policy = self.runtime.policy_status().map(|status| {
            #[cfg(feature = "oci")]
            let source = self.runtime.policy_source_status().map(|s| s.to_json());
            #[cfg(not(feature = "oci"))]
            let source: Option<serde_json::Value> = None;
            serde_json::json!({
                "name": status.policy,
                "digest": status.policy_digest,
                "source": source,
                "on_fallback": status.on_fallback,
                "reloads": status.reloads,
                "shadow_digest": status.shadow_digest,
                "rollbacks": status.rollbacks,
                "watch": status.watch.as_ref().map(|w| w.to_json()),
                "reports": status.reports.iter().rev().take(8).collect::<Vec<_>>(),
            })
        });
        #[cfg(not(feature = "policies"))]
        let policy: Option<serde_json::Value> = None;
        #[cfg(feature = "oci")]
        let variants: Vec<serde_json::Value> = self
            .runtime
            .followed_variants()
            .iter()
            .map(|f| serde_json::json!({ "task": f.task, "variant": f.variant, "source": f.status.to_json() }))
            .collect();
        #[cfg(not(feature = "oci"))]
        let variants: Vec<serde_json::Value> = Vec::new();
        serde_json::json!({ "policy": policy, "variants": variants })
    }
}

/// The model file `name` stands for under `root`: `<name>.onnx`, `<name>/model.onnx`,
/// or the highest `<name>/<version>/model.onnx`.
fn model_file(root: &Path, name: &str) -> Result<Option<PathBuf>, ServeError> {
    let mut candidates = vec![PathBuf::from(format!("{name}.onnx")), Path::new(name).join("model.onnx")];
    let versions = std::fs::read_dir(root.join(name)).into_iter().flatten().flatten();
    let latest = versions.filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok()).max();
    if let Some(version) = latest {
        candidates.push(Path::new(name).join(version.to_string()).join("model.onnx"));
    }
    for candidate in candidates {
        let path = path_under_root(root, &candidate)?;
        if path.is_file() {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Names of the models under `root`.
fn model_names(root: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(root).into_iter().flatten().flatten();
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let file_name = entry.file_name().to_str()?.to_string();
            let name = file_name.strip_suffix(".onnx").unwrap_or(&file_name).to_string();
            model_file(root, &name).ok().flatten().map(|_| name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}
