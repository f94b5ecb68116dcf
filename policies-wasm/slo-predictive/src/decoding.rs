//! What decoding the requests' images takes from the cores the sessions run on. A
//! variant's line is measured on tensors; with photos, each request is also decoded
//! and resized on the same cores, and a variant then keeps up with less demand than
//! its line says. The pool's busy share over the last tick, against the requests
//! that arrived, gives the decoding time of one request; spread over the machine's
//! cores it is added to every request's share of the machine (see
//! [`Decoding::per_row_ms`]), so that the demand a variant can carry falls as it
//! would with photos before its runs show it.

use modelless_policy_abi::Snapshot;
use serde::{Deserialize, Serialize};

/// Weight of the newest tick's figure.
const WEIGHT: f64 = 0.3;
/// Least demand (requests a second, all tasks) a tick's figure is taken from: below
/// it a few requests' decodes say little.
const MIN_DEMAND_PER_S: f64 = 5.0;

/// Decoding time per request, smoothed over ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Decoding {
    /// Pool thread time one request took, ms; 0 until seen.
    ms_per_request: f64,
    /// The machine's cores, as last seen.
    cores: u32,
}

impl Decoding {
    /// Takes in the pool's busy share over the last tick against the demand of every
    /// task (requests refused before decoding count too: the figure errs low).
    pub fn observe(&mut self, snapshot: &Snapshot) {
        self.cores = snapshot.system.cores;
        let Some(pool) = &snapshot.system.preprocessing else { return };
        let demand: f64 = snapshot.tasks.iter().map(|t| t.demand.per_s_1s).sum();
        if demand < MIN_DEMAND_PER_S {
            return;
        }
        let busy_ms_per_s = pool.utilisation_percent / 100.0 * f64::from(pool.threads) * 1e3;
        let sample = busy_ms_per_s / demand;
        if sample.is_finite() && sample >= 0.0 {
            self.ms_per_request += WEIGHT * (sample - self.ms_per_request);
        }
    }

    /// The machine time a request's decoding takes, as rows' time on all cores: its
    /// pool time spread over the cores.
    pub fn per_row_ms(&self) -> f64 {
        self.ms_per_request / f64::from(self.cores.max(1))
    }
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{Demand, PreprocessingSnapshot, SystemSnapshot, TaskSnapshot};

    use super::*;

    fn snapshot(per_s: f64, busy_percent: Option<f64>) -> Snapshot {
        let task = TaskSnapshot { demand: Demand { per_s_1s: per_s, ..Demand::default() }, ..TaskSnapshot::default() };
        let preprocessing = busy_percent.map(|utilisation_percent| PreprocessingSnapshot {
            threads: 2,
            utilisation_percent,
            ..PreprocessingSnapshot::default()
        });
        Snapshot {
            tasks: vec![task],
            system: SystemSnapshot { cores: 2, preprocessing, ..SystemSnapshot::default() },
            ..Snapshot::default()
        }
    }

    #[test]
    fn the_pools_busy_time_over_the_demand_is_spread_over_the_cores() {
        let mut decoding = Decoding::default();
        // 2 threads 30 % busy: 600 ms of decoding a second for 100 requests, 6 ms each,
        // 3 ms of a 2-core machine.
        for _ in 0..60 {
            decoding.observe(&snapshot(100.0, Some(30.0)));
        }
        assert!((decoding.per_row_ms() - 3.0).abs() < 1e-6, "{decoding:?}");
        // Tensors only: the pool idles, and the cost fades.
        for _ in 0..60 {
            decoding.observe(&snapshot(100.0, Some(0.0)));
        }
        assert!(decoding.per_row_ms() < 1e-6, "{decoding:?}");
    }

    #[test]
    fn without_a_pool_or_demand_nothing_is_learnt() {
        let mut decoding = Decoding::default();
        decoding.observe(&snapshot(100.0, None));
        decoding.observe(&snapshot(1.0, Some(90.0)));
        assert_eq!(decoding.per_row_ms(), 0.0);
    }
}
