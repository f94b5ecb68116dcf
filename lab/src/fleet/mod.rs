//! A fleet of replicas that Kubernetes scales, simulated, to compare scalers on
//! traces of an hour or more: replicas that batch and refuse as the runtime does on
//! one variant's profiled line, behind a least-connections balancer; pods that are
//! ready a measured start time after they are asked for and drain when removed; and
//! the scalers users configure: the HPA (its algorithm and default behaviour) on the
//! replicas' `modelless_task_demand_ratio` or on CPU, KServe's concurrency target
//! (Knative's KPA), and static provisioning for the peak. `modelless fleet` drives
//! it from the command line.
//!
//! What it leaves out: the scrape and adapter lag of the metrics (each scaler reads
//! fresh figures at its sync), the batching queue delay (the fleet's replicas run
//! with none), variant switches (a replica serves one variant), and Knative's
//! activator (requests go through the same balancer under every scaler).

mod hpa;
mod kpa;
mod plot;
mod pods;
mod replica;
mod report;
mod scaler;
mod sim;
mod trace;

pub use hpa::{Hpa, HpaConfig, PodMetric, metric_replicas};
pub use kpa::{Kpa, KpaConfig};
pub use plot::fleet_svg;
pub use replica::ReplicaModel;
pub use report::{FleetReport, FleetRow};
pub use scaler::{ScalerConfig, ScalerKind};
pub use sim::{FleetConfig, FleetRun, FleetSecond, FleetTotals, run_fleet};
pub use trace::FleetTrace;
