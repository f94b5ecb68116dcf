//! [`Follow`]: a tag polled on a thread of its own; each new digest it points at is
//! fetched and handed to the caller's `apply` (a policy reload, a model version's
//! load), which may refuse it. A failed poll changes nothing: what serves keeps
//! serving, and the status and the counters say the poll failed.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crossbeam_channel::{RecvTimeoutError, Sender};

use super::artifact::ArtifactKind;
use super::fetcher::{Fetched, Fetcher};
use super::location::{OciReference, Source};
use crate::error::Error;
use crate::metrics::serving_metrics;

/// What a followed tag serves, and how its polls went.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowStatus {
    /// The reference followed.
    pub reference: String,
    /// The digest of the manifest that serves.
    pub manifest: String,
    /// The digest of what it delivered (the module, the model file).
    pub blob: String,
    /// Since when it serves.
    pub since: SystemTime,
    /// When the registry was last asked.
    pub last_poll: Option<SystemTime>,
    /// Why the last poll failed, if it did.
    pub last_poll_error: Option<String>,
    /// Polls that failed since the follow began.
    pub failed_polls: u64,
    /// The last digest the tag moved to that was not applied, and why.
    pub last_refused: Option<(String, String)>,
}

impl FollowStatus {
    /// As JSON, times in seconds since the Unix epoch: what `GET /v2/policy` shows.
    pub fn to_json(&self) -> serde_json::Value {
        let unix = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        serde_json::json!({
            "reference": self.reference,
            "manifest": self.manifest,
            "blob": self.blob,
            "since_unix_s": unix(self.since),
            "last_poll_unix_s": self.last_poll.map(unix),
            "last_poll_error": self.last_poll_error,
            "failed_polls": self.failed_polls,
            "last_refused": self.last_refused.as_ref().map(|(digest, reason)| {
                serde_json::json!({ "manifest": digest, "reason": reason })
            }),
        })
    }
}

/// Takes a fetched artifact into service; an error refuses it.
pub type Apply = Box<dyn FnMut(&Fetched) -> Result<(), Error> + Send>;

/// A followed tag; dropping it stops the polls.
pub struct Follow {
    status: Arc<Mutex<FollowStatus>>,
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow").field("status", &self.status()).finish_non_exhaustive()
    }
}

impl Follow {
    /// Polls `reference` every `every`, `current` serving now; `apply` takes each new
    /// digest's artifact.
    pub fn start(
        fetcher: Arc<Fetcher>,
        reference: OciReference,
        kind: ArtifactKind,
        current: &Fetched,
        every: Duration,
        apply: Apply,
    ) -> Result<Follow, Error> {
        let status = Arc::new(Mutex::new(FollowStatus {
            reference: reference.to_string(),
            manifest: current.manifest.clone(),
            blob: current.blob.clone(),
            since: SystemTime::now(),
            last_poll: None,
            last_poll_error: current.offline.clone(),
            failed_polls: 0,
            last_refused: None,
        }));
        let (stop, stopped) = crossbeam_channel::bounded(1);
        let mut poll = Poll { fetcher, reference, kind, status: status.clone(), apply };
        let thread = std::thread::Builder::new()
            .name("modelless-follow".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    poll.once();
                }
            })
            .map_err(|e| Error::thread_start(format!("the follow of {}", status_reference(&status)), e))?;
        Ok(Follow { status, stop, thread: Some(thread) })
    }

    /// What it serves and how its polls went.
    pub fn status(&self) -> FollowStatus {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn status_reference(status: &Mutex<FollowStatus>) -> String {
    status.lock().unwrap_or_else(PoisonError::into_inner).reference.clone()
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Poll {
    fetcher: Arc<Fetcher>,
    reference: OciReference,
    kind: ArtifactKind,
    status: Arc<Mutex<FollowStatus>>,
    apply: Apply,
}

impl Poll {
    fn lock(&self) -> std::sync::MutexGuard<'_, FollowStatus> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn once(&mut self) {
        let label = self.reference.to_string();
        let polled = self.fetcher.resolve(&self.reference);
        serving_metrics().source_polled(&label, polled.is_ok());
        let manifest = {
            let mut status = self.lock();
            status.last_poll = Some(SystemTime::now());
            match polled {
                Ok(manifest) => {
                    if status.last_poll_error.take().is_some() {
                        tracing::info!(reference = %label, failed = status.failed_polls, "polls answered again");
                    }
                    manifest
                }
                Err(error) => {
                    status.failed_polls += 1;
                    // Said once per outage, not once per poll.
                    if status.last_poll_error.is_none() {
                        tracing::warn!(reference = %label, %error, "poll failed; what serves keeps serving");
                    }
                    status.last_poll_error = Some(error.to_string());
                    return;
                }
            }
        };
        {
            let status = self.lock();
            let refused_before = status.last_refused.as_ref().is_some_and(|(digest, _)| *digest == manifest);
            if status.manifest == manifest || refused_before {
                return;
            }
        }
        let pinned = Source::Oci(self.reference.pinned(&manifest));
        let applied = self.fetcher.fetch(&pinned, None, self.kind).and_then(|fetched| {
            (self.apply)(&fetched)?;
            if let Err(error) = self.fetcher.remember_tag(&self.reference, &fetched) {
                tracing::warn!(reference = %label, %error, "a restart with the registry down will serve the digest before");
            }
            Ok(fetched)
        });
        serving_metrics().source_updated(&label, applied.is_ok());
        let mut status = self.lock();
        match applied {
            Ok(fetched) => {
                tracing::info!(reference = %label, digest = %manifest, "followed tag moved; now serving it");
                status.manifest = fetched.manifest;
                status.blob = fetched.blob;
                status.since = SystemTime::now();
                status.last_refused = None;
            }
            Err(error) => {
                tracing::warn!(reference = %label, digest = %manifest, %error, "followed tag moved; refused");
                status.last_refused = Some((manifest, error.to_string()));
            }
        }
    }
}
