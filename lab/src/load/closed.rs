//! The closed-loop driver: a fixed number of clients per task, each sending its next
//! request as soon as its last one is answered. What a throughput benchmark at a given
//! concurrency measures (the open-loop driver measures behaviour under a given demand).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::record::{Outcome, RequestRecord};
use super::runner::{Answer, DRAIN, Progress, RunResult, Sampler, Target};
use super::{LoadError, LoadSpec};

/// The most clients a task may have.
pub const MAX_CONCURRENCY: usize = 10_000;

/// The least a refused client waits before its next request, and what it waits where
/// the refusal names no time (a full queue): a client that resent at once would spin
/// on refusals and take the cores the server needs.
const MIN_BACKOFF: Duration = Duration::from_millis(5);
/// The most it waits, whatever the refusal says.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What the clients share: the records of ended requests and the send time of each
/// client's request under way.
#[derive(Default)]
struct Ledger {
    records: Vec<RequestRecord>,
    under_way: HashMap<(usize, usize), f64>,
}

/// Runs each task of `spec` with `concurrency` clients from its `start_s` for as long
/// as its pattern lasts (the pattern's rates are not used), calling `progress` once a
/// second. A request still under way once the drain time after the end has passed
/// counts as failed.
pub async fn run_closed(
    target: Arc<dyn Target>,
    spec: &LoadSpec,
    concurrency: usize,
    progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<RunResult, LoadError> {
    if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
        return Err(LoadError::invalid(format!("concurrency must be 1..={MAX_CONCURRENCY}, not {concurrency}")));
    }
    let rates = spec.rates()?;
    let duration_s = rates.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let targets = target.targets();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let sent = Arc::new(AtomicU64::new(0));
    let mut sampler = Sampler::new(target.clone(), &targets);
    let start = Instant::now();
    let mut clients = Vec::new();
    for (task, task_rates) in rates.iter().enumerate() {
        let (begin, end) = (f64::from(spec.tasks[task].start_s), task_rates.len() as f64);
        for client in 0..concurrency {
            let (target, ledger, sent) = (target.clone(), ledger.clone(), sent.clone());
            let name = targets[task].task.clone();
            clients.push(tokio::spawn(async move {
                sleep_until(start + Duration::from_secs_f64(begin)).await;
                loop {
                    let sent_s = start.elapsed().as_secs_f64();
                    if sent_s >= end {
                        break;
                    }
                    if let Ok(mut ledger) = ledger.lock() {
                        ledger.under_way.insert((task, client), sent_s);
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                    let answer = target.send(task).await;
                    let latency_ms = (start.elapsed().as_secs_f64() - sent_s) * 1e3;
                    let backoff = backoff(&answer);
                    if let Ok(mut ledger) = ledger.lock() {
                        ledger.under_way.remove(&(task, client));
                        ledger.records.push(answer.record(name.clone(), sent_s, latency_ms));
                    }
                    if let Some(wait) = backoff {
                        tokio::time::sleep(wait).await;
                    }
                }
            }));
        }
    }
    let (mut samples, mut runs) = (Vec::new(), Vec::new());
    for second in 1..=duration_s {
        sleep_until(start + Duration::from_secs(u64::from(second))).await;
        let (now, ran) = sampler.sample(second - 1);
        let ended = ledger.lock().map_or(0, |l| l.records.len() as u64);
        progress(&Progress { second, duration_s, sent: sent.load(Ordering::Relaxed), ended, samples: now.clone() });
        samples.extend(now);
        runs.extend(ran);
    }
    let give_up = Instant::now() + DRAIN;
    for client in clients {
        if tokio::time::timeout_at(give_up, client).await.is_err() {
            break;
        }
    }
    let mut ledger = std::mem::take(&mut *ledger.lock().map_err(|_| LoadError::Target("a client panicked".into()))?);
    let drain_ms = DRAIN.as_secs_f64() * 1e3;
    for (&(task, _), &sent_s) in &ledger.under_way {
        ledger.records.push(RequestRecord::unanswered(&targets[task].task, sent_s, drain_ms));
    }
    ledger.records.sort_by(|a, b| a.sent_s.total_cmp(&b.sent_s));
    Ok(RunResult { targets, records: ledger.records, samples, runs, duration_s })
}

/// How long a client waits after `answer` before its next request: after a refusal,
/// what the refusal asks for (within bounds), as a client honouring the server's
/// pushback does; nothing after any other answer.
fn backoff(answer: &Answer) -> Option<Duration> {
    (answer.status == Outcome::Rejected)
        .then(|| answer.retry_after.unwrap_or(MIN_BACKOFF).clamp(MIN_BACKOFF, MAX_BACKOFF))
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::load::summary::TaskTarget;

    /// Answers after `delay`, counting how many requests are under way at once.
    struct Slow {
        delay: Duration,
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl Target for Slow {
        fn targets(&self) -> Vec<TaskTarget> {
            vec![TaskTarget { task: "t".into(), slo_ms: 1000.0, accuracies: Default::default() }]
        }

        fn send(&self, _task: usize) -> Pin<Box<dyn Future<Output = Answer> + Send + 'static>> {
            let (delay, now, most) = (self.delay, self.now.clone(), self.most.clone());
            Box::pin(async move {
                let under_way = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(under_way, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Answer {
                    status: Outcome::Served,
                    variant: Some("v".into()),
                    batch_size: Some(1),
                    reason: None,
                    stages: None,
                    retry_after: None,
                }
            })
        }

        fn observe(&self, _task: usize) -> (Option<String>, Option<u64>) {
            (Some("v".into()), None)
        }
    }

    #[tokio::test]
    async fn each_client_keeps_one_request_under_way_for_the_whole_run() {
        let spec: LoadSpec =
            toml::from_str("[[tasks]]\ntask = \"t\"\npattern = { kind = \"constant\", rate = 1, duration_s = 1 }")
                .unwrap();
        let most = Arc::new(AtomicUsize::new(0));
        let target = Slow { delay: Duration::from_millis(20), now: Arc::new(AtomicUsize::new(0)), most: most.clone() };
        let mut seconds = 0;
        let result = run_closed(Arc::new(target), &spec, 4, &mut |_| seconds += 1).await.unwrap();
        assert_eq!(most.load(Ordering::SeqCst), 4, "four clients, never more under way");
        let n = result.records.len();
        // 4 clients × 1 s / 20 ms = 200 at most; timer slack on a busy machine costs some.
        assert!((60..=204).contains(&n), "{n} requests");
        assert!(result.records.iter().all(|r| r.status == Outcome::Served && r.latency_ms >= 19.0));
        assert!(result.records.windows(2).all(|w| w[0].sent_s <= w[1].sent_s));
        assert_eq!((seconds, result.duration_s), (1, 1));
        assert!(
            run_closed(Arc::new(Slow { delay: Duration::ZERO, now: most.clone(), most }), &spec, 0, &mut |_| {})
                .await
                .is_err()
        );
    }

    /// Refuses every request at once, naming `retry_after`.
    struct Refusing {
        retry_after: Option<Duration>,
    }

    impl Target for Refusing {
        fn targets(&self) -> Vec<TaskTarget> {
            vec![TaskTarget { task: "t".into(), slo_ms: 100.0, accuracies: Default::default() }]
        }

        fn send(&self, _task: usize) -> Pin<Box<dyn Future<Output = Answer> + Send + 'static>> {
            let retry_after = self.retry_after;
            Box::pin(async move {
                Answer {
                    status: Outcome::Rejected,
                    variant: None,
                    batch_size: None,
                    reason: Some("would_miss_deadline".into()),
                    stages: None,
                    retry_after,
                }
            })
        }

        fn observe(&self, _task: usize) -> (Option<String>, Option<u64>) {
            (None, None)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_client_waits_what_the_refusal_asks_before_sending_again() {
        let spec: LoadSpec =
            toml::from_str("[[tasks]]\ntask = \"t\"\npattern = { kind = \"constant\", rate = 1, duration_s = 1 }")
                .unwrap();
        // The clock is the test's: each client sends at 0, the wait, twice the wait, …
        for (retry_after, per_client) in [
            (Some(Duration::from_millis(50)), 20),
            (Some(Duration::ZERO), 200),
            (None, 200),
            (Some(Duration::from_secs(9)), 1),
        ] {
            let result = run_closed(Arc::new(Refusing { retry_after }), &spec, 2, &mut |_| {}).await.unwrap();
            assert_eq!(result.records.len(), 2 * per_client, "refusals asking for {retry_after:?}");
            assert!(result.records.iter().all(|r| r.status == Outcome::Rejected));
        }
    }
}
