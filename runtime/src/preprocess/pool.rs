//! The preprocessing pool: threads that decode and resize images before requests join
//! a batching queue, sized apart from the models' sessions, behind a bounded queue, so
//! that batches form from ready tensors and a slow decode never holds a batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use serde::{Deserialize, Serialize};

use super::DecodeLimits;
use super::price::PrepPrice;
use crate::error::Error;

/// Settings of the preprocessing pool: `[preprocessing]` in the config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreprocessConfig {
    /// Threads that decode and resize; by default one per core the process may use.
    #[serde(default)]
    pub threads: Option<usize>,
    /// Requests that may wait for a thread; more are refused as overloaded.
    #[serde(default = "default_queue_size")]
    pub queue_size: usize,
    /// How large an image may be.
    #[serde(default)]
    pub limits: DecodeLimits,
}

fn default_queue_size() -> usize {
    1024
}

/// The most threads the pool starts.
pub const MAX_THREADS: usize = 256;

impl Default for PreprocessConfig {
    fn default() -> Self {
        PreprocessConfig { threads: None, queue_size: default_queue_size(), limits: DecodeLimits::default() }
    }
}

impl PreprocessConfig {
    /// Threads it starts: the configured number, or one per available core.
    pub fn thread_count(&self) -> usize {
        self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Checks the thread count and queue size.
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_THREADS).contains(&self.thread_count()) {
            return Err(Error::Config(format!("preprocessing: threads is outside 1..={MAX_THREADS}")));
        }
        if self.queue_size == 0 {
            return Err(Error::Config("preprocessing: queue_size must be at least 1".into()));
        }
        if self.limits.max_pixels == 0 {
            return Err(Error::Config("preprocessing: limits.max_pixels must be at least 1".into()));
        }
        Ok(())
    }
}

/// A unit of work: it runs once on one of the pool's threads.
pub type Job = Box<dyn FnOnce() + Send>;

/// How busy the pool is, for policies and `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolReading {
    /// When it was read.
    pub at: Instant,
    /// Threads.
    pub threads: usize,
    /// Jobs waiting for a thread now.
    pub queued: usize,
    /// The most that may wait.
    pub queue_size: usize,
    /// Time its threads have spent working since it started, in seconds.
    pub busy_seconds: f64,
}

impl PoolReading {
    /// Of the threads' time between `earlier` and this reading, the share spent
    /// working (0..=1).
    pub fn utilisation_since(&self, earlier: &PoolReading) -> f64 {
        let capacity = self.at.saturating_duration_since(earlier.at).as_secs_f64() * self.threads as f64;
        if capacity <= 0.0 {
            return 0.0;
        }
        ((self.busy_seconds - earlier.busy_seconds) / capacity).clamp(0.0, 1.0)
    }
}

struct Counters {
    queued: AtomicUsize,
    busy_ns: AtomicU64,
    /// Work predicted for the jobs queued and not started, ns.
    reserved_ns: AtomicU64,
}

/// A queued job's predicted work, counted in the pool's backlog until it is dropped
/// (when the job starts, or is not queued after all).
#[derive(Debug)]
pub struct Reservation {
    counters: Arc<Counters>,
    ns: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.counters.reserved_ns.fetch_sub(self.ns, Ordering::Relaxed);
    }
}

// Its atomics print nothing useful.
impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters").finish_non_exhaustive()
    }
}

/// Threads running preprocessing jobs from a bounded queue. Dropping the last handle
/// lets the threads finish what is queued and stop.
pub struct PreprocessPool {
    jobs: Sender<Job>,
    counters: Arc<Counters>,
    threads: usize,
    queue_size: usize,
    limits: DecodeLimits,
    price: PrepPrice,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for PreprocessPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreprocessPool").field("threads", &self.threads).finish_non_exhaustive()
    }
}

impl PreprocessPool {
    /// Starts the pool's threads.
    pub fn start(config: &PreprocessConfig) -> Result<Arc<PreprocessPool>, Error> {
        config.validate()?;
        let threads = config.thread_count();
        let (jobs, receiver) = crossbeam_channel::bounded::<Job>(config.queue_size);
        let counters = Arc::new(Counters {
            queued: AtomicUsize::new(0),
            busy_ns: AtomicU64::new(0),
            reserved_ns: AtomicU64::new(0),
        });
        for index in 0..threads {
            let (receiver, counters) = (receiver.clone(), counters.clone());
            std::thread::Builder::new()
                .name(format!("modelless-preprocess-{index}"))
                .spawn(move || run_jobs(receiver, counters))
                .map_err(|e| Error::thread_start("a preprocessing thread", e))?;
        }
        let (queue_size, limits, price) = (config.queue_size, config.limits, PrepPrice::default());
        Ok(Arc::new(PreprocessPool { jobs, counters, threads, queue_size, limits, price }))
    }

    /// The pool of a process that configured none: default settings, started once.
    pub fn shared_default() -> Result<Arc<PreprocessPool>, Error> {
        static DEFAULT: std::sync::OnceLock<Arc<PreprocessPool>> = std::sync::OnceLock::new();
        if let Some(pool) = DEFAULT.get() {
            return Ok(pool.clone());
        }
        let pool = PreprocessPool::start(&PreprocessConfig::default())?;
        Ok(DEFAULT.get_or_init(|| pool).clone())
    }

    /// The image limits its jobs decode within.
    pub fn limits(&self) -> &DecodeLimits {
        &self.limits
    }

    /// Queues `job`; `Err` with it given back when the queue is full.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        match self.jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                self.counters.queued.fetch_sub(1, Ordering::Relaxed);
                Err(job)
            }
        }
    }

    /// What its images cost per pixel, as its decodes have shown.
    pub fn price(&self) -> &PrepPrice {
        &self.price
    }

    /// Counts `work` in the backlog until the reservation is dropped: hand it to the
    /// job, which drops it once its images are prepared (a decode under way holds a
    /// thread as long as one waiting would: a 3564×2880 photo, over 100 ms).
    pub fn reserve(&self, work: Duration) -> Reservation {
        let ns = u64::try_from(work.as_nanos()).unwrap_or(u64::MAX / 2);
        self.counters.reserved_ns.fetch_add(ns, Ordering::Relaxed);
        Reservation { counters: self.counters.clone(), ns }
    }

    /// How long a job queued now waits for a thread, as the predicted work of the jobs
    /// queued and under way shared among the threads (those under way counted whole).
    pub fn backlog(&self) -> Duration {
        Duration::from_nanos(self.counters.reserved_ns.load(Ordering::Relaxed) / self.threads.max(1) as u64)
    }

    /// Its threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The most jobs that may wait.
    pub fn queue_size(&self) -> usize {
        self.queue_size
    }

    /// Its queue now, and the time its threads have worked so far.
    pub fn read(&self) -> PoolReading {
        PoolReading {
            at: Instant::now(),
            threads: self.threads,
            queued: self.counters.queued.load(Ordering::Relaxed),
            queue_size: self.queue_size,
            busy_seconds: self.counters.busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

fn run_jobs(jobs: Receiver<Job>, counters: Arc<Counters>) {
    for job in jobs {
        counters.queued.fetch_sub(1, Ordering::Relaxed);
        let started = Instant::now();
        // A panicking job loses its own request (its reply is dropped), not the thread.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            crate::metrics::serving_metrics().request_panicked("preprocess");
        }
        counters.busy_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn a_full_queue_gives_the_job_back_and_the_threads_report_their_work() {
        let config = PreprocessConfig { threads: Some(1), queue_size: 2, ..PreprocessConfig::default() };
        let pool = PreprocessPool::start(&config).unwrap();
        let before = pool.read();
        let (release, hold) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        pool.submit(Box::new(move || {
            started.send(()).unwrap();
            hold.recv().unwrap();
        }))
        .unwrap_or_else(|_| panic!("room for the first"));
        running.recv().unwrap();
        let (done, finished) = mpsc::channel();
        for i in 0..2 {
            let done = done.clone();
            assert!(pool.submit(Box::new(move || done.send(i).unwrap())).is_ok());
        }
        assert_eq!(pool.read().queued, 2);
        assert!(pool.submit(Box::new(|| {})).is_err(), "a third waiting job finds the queue full");
        std::thread::sleep(Duration::from_millis(50));
        release.send(()).unwrap();
        assert_eq!([finished.recv().unwrap(), finished.recv().unwrap()], [0, 1]);
        let reading = pool.read();
        assert_eq!((reading.threads, reading.queued), (1, 0));
        let utilisation = reading.utilisation_since(&before);
        assert!(utilisation > 0.5, "it was busy for most of the time: {utilisation}");
        pool.submit(Box::new(|| panic!("a bad job"))).unwrap_or_else(|_| panic!("room"));
        let (done, finished) = mpsc::channel();
        pool.submit(Box::new(move || done.send(()).unwrap())).unwrap_or_else(|_| panic!("room"));
        finished.recv_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn the_backlog_is_the_reserved_work_shared_among_the_threads() {
        let config = PreprocessConfig { threads: Some(2), ..PreprocessConfig::default() };
        let pool = PreprocessPool::start(&config).unwrap();
        let first = pool.reserve(Duration::from_millis(40));
        let second = pool.reserve(Duration::from_millis(20));
        assert_eq!(pool.backlog(), Duration::from_millis(30));
        drop(first);
        assert_eq!(pool.backlog(), Duration::from_millis(10));
        drop(second);
        assert_eq!(pool.backlog(), Duration::ZERO);
    }
}
