//! Remote sources of the runtime's artifacts: policy modules and model versions
//! fetched from OCI registries or `https://` URLs into the blob cache, and the tags
//! followed, each new digest going through the same path a reload or a new version
//! takes (see `modelless_runtime::source`).

use std::path::{Path, PathBuf};
#[cfg(feature = "oci")]
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use modelless_runtime::source::{ArtifactKind, Source, SourcesConfig};
#[cfg(feature = "oci")]
use modelless_runtime::source::{Fetched, Fetcher, Follow, FollowStatus};
use modelless_runtime::{Error, TaskConfig};

/// The fetcher the runtime's remote sources share, made when first needed, and the
/// model versions it follows.
pub(crate) struct Sources {
    config: SourcesConfig,
    #[cfg(feature = "oci")]
    fetcher: OnceLock<Arc<Fetcher>>,
    #[cfg(feature = "oci")]
    followed_variants: Mutex<Vec<Following>>,
}

/// A task's variant whose versions come from a followed tag.
#[cfg(feature = "oci")]
struct Following {
    task: String,
    variant: String,
    follow: Follow,
}

/// What a task's variant followed by tag serves, and how its polls went.
#[cfg(feature = "oci")]
#[derive(Clone, Debug)]
pub struct FollowedVariant {
    /// The task.
    pub task: String,
    /// The variant.
    pub variant: String,
    /// What its tag serves.
    pub status: FollowStatus,
}

/// A variant of a task whose path was a tag: it is followed once the task serves.
#[cfg_attr(not(feature = "oci"), allow(dead_code))]
pub(crate) struct ToFollow {
    task: String,
    variant: String,
    #[cfg(feature = "oci")]
    reference: modelless_runtime::source::OciReference,
    #[cfg(feature = "oci")]
    fetched: Fetched,
}

/// A fetched artifact: its file and its digest.
pub(crate) struct Local {
    pub path: PathBuf,
    #[cfg(feature = "oci")]
    pub fetched: Option<Fetched>,
}

impl Sources {
    pub(crate) fn new(config: SourcesConfig) -> Self {
        Sources {
            config,
            #[cfg(feature = "oci")]
            fetcher: OnceLock::new(),
            #[cfg(feature = "oci")]
            followed_variants: Mutex::new(Vec::new()),
        }
    }

    /// The time between two polls of a followed tag.
    #[cfg_attr(not(feature = "oci"), allow(dead_code))]
    pub(crate) fn poll_interval(&self) -> std::time::Duration {
        self.config.poll_interval()
    }

    #[cfg(feature = "oci")]
    pub(crate) fn fetcher(&self) -> Result<Arc<Fetcher>, Error> {
        if let Some(fetcher) = self.fetcher.get() {
            return Ok(fetcher.clone());
        }
        let fetcher = Arc::new(Fetcher::new(&self.config)?);
        Ok(self.fetcher.get_or_init(|| fetcher).clone())
    }

    /// The artifact `path` names, as a file here: a file as it is, a remote source
    /// fetched (a build without the `oci` feature refuses it).
    pub(crate) fn fetch(&self, path: &Path, sha256: Option<&str>, kind: ArtifactKind) -> Result<Local, Error> {
        let source = Source::of_path(path)?;
        if !source.is_remote() && sha256.is_none() {
            return Ok(Local {
                path: path.to_path_buf(),
                #[cfg(feature = "oci")]
                fetched: None,
            });
        }
        #[cfg(feature = "oci")]
        {
            let fetched = self.fetcher()?.fetch(&source, sha256, kind)?;
            Ok(Local { path: fetched.path.clone(), fetched: Some(fetched) })
        }
        #[cfg(not(feature = "oci"))]
        {
            let _ = kind;
            Err(Error::fetch(source, modelless_runtime::FetchError::NotBuiltIn))
        }
    }

    /// Fetches the tasks' remote variants, pointing each at its file in the cache;
    /// returns those whose tags are to be followed once the tasks serve.
    pub(crate) fn fetch_variants(&self, tasks: &mut [TaskConfig]) -> Result<Vec<ToFollow>, Error> {
        #[cfg_attr(not(feature = "oci"), allow(unused_mut))]
        let mut to_follow = Vec::new();
        for task in tasks {
            for variant in &mut task.variants {
                let source = Source::of_path(&variant.path)?;
                if !source.is_remote() {
                    continue;
                }
                let local = self.fetch(&variant.path, variant.sha256.as_deref(), ArtifactKind::Model)?;
                variant.path = local.path;
                variant.sha256 = None;
                #[cfg(feature = "oci")]
                if let (Some(reference), Some(fetched)) = (source.followed(), local.fetched) {
                    to_follow.push(ToFollow {
                        task: task.name.clone(),
                        variant: variant.name.clone(),
                        reference: reference.clone(),
                        fetched,
                    });
                }
            }
        }
        Ok(to_follow)
    }

    /// Follows each tag of `to_follow`: a new digest is loaded as a new version of its
    /// variant, which the old one serves until it is warm (or keeps serving, if it
    /// cannot be loaded).
    #[cfg(feature = "oci")]
    pub(crate) fn follow_variants(
        &self,
        to_follow: Vec<ToFollow>,
        registry: &Arc<modelless_runtime::Registry>,
    ) -> Result<(), Error> {
        for ToFollow { task, variant, reference, fetched } in to_follow {
            let (registry, task_name, variant_name) = (registry.clone(), task.clone(), variant.clone());
            let apply = Box::new(move |fetched: &Fetched| {
                registry.task(&task_name)?.load_version(&variant_name, fetched.path.clone()).map(drop)
            });
            let follow =
                Follow::start(self.fetcher()?, reference, ArtifactKind::Model, &fetched, self.poll_interval(), apply)?;
            self.lock_followed().push(Following { task, variant, follow });
        }
        Ok(())
    }

    /// What each followed variant serves.
    #[cfg(feature = "oci")]
    pub(crate) fn followed_variants(&self) -> Vec<FollowedVariant> {
        let followed = self.lock_followed();
        followed
            .iter()
            .map(|f| FollowedVariant { task: f.task.clone(), variant: f.variant.clone(), status: f.follow.status() })
            .collect()
    }

    #[cfg(feature = "oci")]
    fn lock_followed(&self) -> std::sync::MutexGuard<'_, Vec<Following>> {
        self.followed_variants.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
