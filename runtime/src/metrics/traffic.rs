//! A task's traffic as requests flow: shared by the request path (arrivals,
//! rejections), the instances (answers, through an [`AnswerHook`]) and the control
//! loop (what the snapshot reports).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use modelless_policy_abi::{Demand, PhotoTraffic};

use super::photo_mix::PhotoMix;
use super::window::{TickCounts, TrafficWindow};
use crate::answered::{AnswerHook, Answered};
use crate::error::Error;

/// A task's traffic window and requests in flight, safe to share.
#[derive(Debug)]
pub struct TaskTraffic {
    window: Mutex<TrafficWindow>,
    photos: Mutex<PhotoMix>,
    /// Whether any request carried photos: until one does, tensor requests leave the
    /// mix alone without taking its lock.
    photos_seen: AtomicBool,
    in_flight: AtomicI64,
    started: Instant,
}

/// What a tick reads of a task's traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficReading {
    /// Arrival rates.
    pub demand: Demand,
    /// Requests admitted and not yet ended.
    pub in_flight: u64,
    /// What happened since the last reading.
    pub tick: TickCounts,
    /// What the recent requests carried as photos, once any did.
    pub photos: Option<PhotoTraffic>,
}

impl Default for TaskTraffic {
    fn default() -> Self {
        TaskTraffic {
            window: Mutex::default(),
            photos: Mutex::default(),
            photos_seen: AtomicBool::new(false),
            in_flight: AtomicI64::new(0),
            started: Instant::now(),
        }
    }
}

impl TaskTraffic {
    /// A request arrived carrying `photos` photos of `bytes` encoded in all (none:
    /// tensors), whether or not it is then admitted.
    pub fn carried(&self, photos: usize, bytes: u64) {
        if photos == 0 && !self.photos_seen.load(Ordering::Relaxed) {
            return;
        }
        self.photos_seen.store(true, Ordering::Relaxed);
        self.photos.lock().unwrap_or_else(PoisonError::into_inner).arrived(photos, bytes);
    }

    /// A request arrived and was admitted.
    pub fn admitted(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let now = self.second();
        self.lock().arrived(now);
    }

    /// A request counted as admitted was refused after all with `error` (its model's
    /// queue was full or would have answered it late, or its inputs did not fit).
    pub fn unadmitted(&self, error: &Error) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.lock().rejected_for(error.kind());
    }

    /// A request arrived and was refused.
    pub fn refused(&self) {
        let now = self.second();
        let mut window = self.lock();
        window.arrived(now);
        window.rejected();
    }

    /// The hook the task's models tell how each admitted request ended.
    pub fn answer_hook(self: &Arc<Self>) -> AnswerHook {
        let traffic = Arc::downgrade(self);
        Arc::new(move |answered| {
            if let Some(traffic) = traffic.upgrade() {
                traffic.ended(answered);
            }
        })
    }

    /// An admitted request ended as `answered`.
    pub fn ended(&self, answered: Answered) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let mut window = self.lock();
        match answered {
            Answered::Served { latency, late } => window.answered(latency.as_secs_f64() * 1e3, late),
            Answered::Expired => window.expired(),
            Answered::Failed | Answered::Abandoned => {}
        }
    }

    /// Requests arriving per second over the last 1, 10 and 60 s, without taking
    /// what the next read counts.
    pub fn demand(&self) -> Demand {
        let now = self.second();
        self.lock().demand(now)
    }

    /// The demand the task's demand ratio holds against its capacity (see
    /// [`TrafficWindow::demand_ahead`]).
    pub fn demand_ahead(&self, surge_weight: f64, lead_s: f64) -> f64 {
        let now = self.second();
        self.lock().demand_ahead(now, surge_weight, lead_s)
    }

    /// Demand, requests in flight and what happened since the last read, which the
    /// next read counts afresh.
    pub fn read(&self) -> TrafficReading {
        let now = self.second();
        let mut window = self.lock();
        TrafficReading {
            demand: window.demand(now),
            in_flight: self.in_flight.load(Ordering::Relaxed).max(0) as u64,
            tick: window.take_tick(),
            photos: self.photos.lock().unwrap_or_else(PoisonError::into_inner).reading(),
        }
    }

    /// Requests turned away since the last reading because their queue could not take
    /// them (see [`TrafficWindow::turned_away`]).
    pub fn turned_away(&self) -> u64 {
        self.lock().turned_away()
    }

    fn second(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn lock(&self) -> MutexGuard<'_, TrafficWindow> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_admitted_request_is_in_flight_until_its_hook_call() {
        let traffic = Arc::new(TaskTraffic::default());
        let hook = traffic.answer_hook();
        for _ in 0..4 {
            traffic.admitted();
        }
        traffic.refused();
        hook(Answered::Served { latency: Duration::from_millis(20), late: false });
        hook(Answered::Served { latency: Duration::from_millis(200), late: true });
        hook(Answered::Expired);
        let reading = traffic.read();
        assert_eq!(reading.in_flight, 1);
        assert_eq!((reading.tick.slo_violations, reading.tick.rejections), (2, 1));
        assert_eq!(reading.tick.latencies_ms, vec![20.0, 200.0]);
        hook(Answered::Abandoned);
        assert_eq!(traffic.read().in_flight, 0);
        // Tensors alone say nothing of photos; once photos come, the mix counts both.
        traffic.carried(0, 0);
        assert_eq!(traffic.read().photos, None);
        traffic.carried(1, 50_000);
        traffic.carried(0, 0);
        let photos = traffic.read().photos.unwrap();
        assert!(photos.share < 1.0 && photos.mean_bytes == 50_000.0, "{photos:?}");
    }
}
