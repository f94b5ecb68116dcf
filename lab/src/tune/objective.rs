//! What a setting is judged by: a goal ([`Goal`]) and the load it is measured under
//! ([`Objective`]), the cost a measurement gives it (lower is better: rates are
//! negated) and how that cost is shown to people.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::measure::Measured;

/// What a setting is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// 99th percentile latency at a concurrency (closed loop), lower is better.
    P99,
    /// Mean latency at a concurrency (closed loop), lower is better.
    Mean,
    /// Answers per second at an open-loop rate, scaled down by how far p99 exceeds
    /// the SLO: higher is better.
    Throughput,
    /// Answers within their SLO per second under a load file: higher is better.
    Goodput,
}

/// One objective: a goal and the load it is measured under. Serialised into the key
/// of every stored search, so its fields and their order are part of the store.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Objective {
    /// What is judged.
    pub goal: Goal,
    /// Clients sending back to back (p99 and mean): a closed loop.
    pub concurrency: Option<usize>,
    /// Requests per second, open loop (throughput).
    pub rate: Option<f64>,
    /// The p99 the throughput must stay within, ms (throughput).
    pub slo_ms: Option<f64>,
    /// The load file (goodput).
    pub load: Option<PathBuf>,
}

impl Objective {
    /// The cost to minimise: latency as it is, rates negated.
    pub fn cost(&self, m: &Measured) -> Result<f64, String> {
        let latency = |v: Option<f64>| v.ok_or_else(|| format!("no request was answered ({} failed)", m.failed));
        match self.goal {
            Goal::P99 => latency(m.p99_ms),
            Goal::Mean => latency(m.mean_ms),
            Goal::Throughput => {
                let slo = self.slo_ms.unwrap_or(f64::INFINITY);
                let within = m.p99_ms.map_or(0.0, |p99| (slo / p99).min(1.0));
                Ok(-m.throughput_per_s * within)
            }
            Goal::Goodput => Ok(-m.goodput_per_s),
        }
    }

    /// The cost as people read it (rates positive again).
    pub fn shown(&self, cost: f64) -> f64 {
        if self.lower_is_better() { cost } else { -cost }
    }

    /// Whether a lower shown value is better (latencies) or a higher one (rates).
    pub fn lower_is_better(&self) -> bool {
        matches!(self.goal, Goal::P99 | Goal::Mean)
    }

    /// The unit of a shown cost.
    pub fn unit(&self) -> &'static str {
        if self.lower_is_better() { "ms" } else { "answers/s" }
    }

    /// What it is, in words.
    pub fn label(&self) -> String {
        match self.goal {
            Goal::P99 => format!("p99 at concurrency {}", self.concurrency.unwrap_or(1)),
            Goal::Mean => format!("mean latency at concurrency {}", self.concurrency.unwrap_or(1)),
            Goal::Throughput => format!(
                "throughput at {} req/s, p99 within {} ms",
                self.rate.unwrap_or(0.0),
                self.slo_ms.unwrap_or(0.0)
            ),
            Goal::Goodput => format!("goodput under {}", self.load.as_deref().unwrap_or(Path::new("?")).display()),
        }
    }

    /// A name for its files.
    pub fn slug(&self) -> String {
        match self.goal {
            Goal::P99 | Goal::Mean => format!("{:?}-c{}", self.goal, self.concurrency.unwrap_or(1)).to_lowercase(),
            Goal::Throughput => format!("throughput-{}", self.rate.unwrap_or(0.0)),
            Goal::Goodput => "goodput".into(),
        }
    }

    /// The measuring command's flags that say it (`--objective` and its load).
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["--objective".into(), format!("{:?}", self.goal).to_lowercase()];
        let mut add = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                args.extend([flag.to_string(), value]);
            }
        };
        add("--concurrency", self.concurrency.map(|c| c.to_string()));
        add("--rate", self.rate.map(|r| r.to_string()));
        add("--slo-ms", self.slo_ms.map(|s| s.to_string()));
        add("--load", self.load.as_ref().map(|p| p.display().to_string()));
        args
    }
}
