//! A discrete-event simulator of the runtime under load: the requests of a load spec
//! (the same ones `modelless loadgen` sends), batches that take what the stored
//! profiles measured, and the same Wasm policies deciding on snapshots built by the
//! same builder as the control loop's, their decisions checked, clamped and refused
//! by the same control core ([`modelless_runtime::policy::core`]) on those snapshots
//! ([`actions_on_recorded`] holds it to a real run's recorded actions). It answers in
//! seconds what a real run answers in minutes, for one server or several behind least-connections balancing, and
//! writes the same results. `modelless simulate` drives it from the command line.
//!
//! Instances are modelled: sessions on the shared pool take the machine in turns, an
//! instance with threads of its own runs beside the others, batches that together hold
//! more cores than the machine has run that much slower (fixed when each starts), and
//! added instances serve after the variant's load time; the snapshot carries the
//! budget, which the control core holds decisions to.
//!
//! What it leaves out: the CPU a real process spends outside batches (the load
//! generator, request copies), memory (loads never run short of it unless the model's
//! budget says so), and the slowdown of a batch already running when another starts.

mod calibrate;
mod engine;
mod model;
mod optimum;
mod oracle;
mod ratio_line;
mod replay;
mod wasm;

pub use engine::{Decider, SimConfig, SimStats, decided, simulate};
pub use model::{SimBudget, SimModel, SimTask, SimVariant};
pub use optimum::{CAPACITIES, Optimum, Plan, cheapest, effective_accuracy, optimum, plan, share_of_gain};
pub use oracle::Oracle;
pub use ratio_line::RatioLine;
pub use replay::actions_on_recorded;
pub use wasm::WasmDecider;

mod server;
