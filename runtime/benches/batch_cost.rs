//! What a batch costs on the host, against its rows: a model that only averages its
//! `[N, 3, 224, 224]` input (`average_224.onnx`), so that the session's own work is
//! small and what the serving path adds around it shows.
//!
//! Run: `make bench` (or `cargo bench -p modelless-runtime --bench batch_cost`; append
//! `-- --quick` for a shorter run, `-- --no-spin` for ONNX Runtime's pool threads to
//! sleep between runs instead of spinning, its default). For batches of 16 and 64, in
//! rounds that take turns:
//! - raw: the session run by hand on one batch made once (ONNX Runtime's own cost);
//! - modelless, one image: as many callers as the batch holds, in a closed loop, all
//!   sending the same image (as `modelless loadgen` does);
//! - modelless, own images: the same, each request with an image of its own (as an
//!   application that received them has), so that joining reads 64 images' memory;
//! - staged, joined then copied / joined in staging: own images, on a session that
//!   stages each batch in memory of its own first, as one on a GPU does with
//!   `pinned_inputs` (here in host memory): the worker joins the batch and the session
//!   copies it into its staging, or the session joins it there directly (what it does).
//!
//! Batches that formed full are timed from their answers: joining the inputs, the run,
//! splitting the outputs. The ratio of the batch of 64 to the batch of 16 is the figure:
//! 4 where cost follows the rows. The table goes to stdout and to
//! `<target>/modelless-bench/batch_cost.md`.

#[allow(dead_code)] // its arrivals helper serves the other benchmarks
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use modelless_runtime::backend::onnx::{OrtBackend, OrtEnvironmentConfig, OrtSessionConfig, environment};
use modelless_runtime::backend::{Backend, BackendFactory, Batch, BatchOutput, Device, ModelMetadata};
use modelless_runtime::{BackendError, BatchingConfig, InferOptions, Inputs, Model, Tensor};
use ort::session::Session;
use ort::value::TensorRef;

const IMAGE: [usize; 3] = [3, 224, 224];
const BATCHES: [usize; 2] = [16, 64];

/// How requests are served, each by a model of its own.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// One image, shared by every request.
    SharedImage,
    /// A copy of its own for each request.
    OwnImages,
    /// Own images, joined by the worker and then copied into the session's staging.
    StagedCopied,
    /// Own images, joined in the session's staging.
    StagedJoined,
}

const MODES: [Mode; 4] = [Mode::SharedImage, Mode::OwnImages, Mode::StagedCopied, Mode::StagedJoined];
const LABELS: [&str; 4] = ["one image", "own images", "staged, joined then copied", "staged, joined in staging"];

/// Median batch costs of one batch size, merged over rounds (ms).
#[derive(Default)]
struct Costs {
    raw: Vec<f64>,
    /// Per mode: joining, run, splitting, the whole batch.
    served: [[Vec<f64>; 4]; 4],
}

/// A session that takes its batches joined, whatever it could take: the worker joins
/// them, as it does for any backend that stages nothing.
struct JoinedFirst(OrtBackend);

impl Backend for JoinedFirst {
    fn metadata(&self) -> &ModelMetadata {
        self.0.metadata()
    }

    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
        self.0.infer(batch)
    }
}

/// Sessions of `path` on the CPU for `mode`.
fn factory(mode: Mode, env_config: &OrtEnvironmentConfig, path: &std::path::Path) -> BackendFactory {
    let (env_config, path) = (env_config.clone(), path.to_path_buf());
    if matches!(mode, Mode::SharedImage | Mode::OwnImages) {
        return OrtBackend::factory(env_config, path, OrtSessionConfig::default());
    }
    Arc::new(move || {
        let env = environment(&env_config)?;
        let staged = OrtBackend::load(&env, &path, &OrtSessionConfig::default(), Device::Cpu)?.with_host_staging()?;
        Ok(if mode == Mode::StagedCopied { Box::new(JoinedFirst(staged)) } else { Box::new(staged) })
    })
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let spinning = !std::env::args().any(|a| a == "--no-spin");
    let (rounds, window) = if quick { (2, Duration::from_secs(1)) } else { (5, Duration::from_secs(3)) };
    let model_path = common::models_dir()?.join("average_224.onnx");
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let env_config = OrtEnvironmentConfig::default().with_intra_op_threads(cores).with_spinning(spinning);
    let env = environment(&env_config)?;
    let mut session = Session::builder(&env)?.commit_from_file(&model_path)?;
    let image: Vec<f32> = (0..IMAGE.iter().product::<usize>()).map(|i| (i % 255) as f32 / 255.0).collect();
    // Per batch size, per mode.
    let models = BATCHES
        .iter()
        .map(|&batch| {
            // A delay long enough for every caller to send again after its answer.
            let batching = BatchingConfig::default().with_max_batch_size(batch).with_max_queue_delay_us(20_000);
            MODES
                .iter()
                .enumerate()
                .map(|(k, &mode)| {
                    let factory = factory(mode, &env_config, &model_path);
                    Ok(Arc::new(Model::start(&format!("average-b{batch}-{k}"), factory, 1, batching.clone())?))
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    eprintln!(
        "model {} | {cores} cores | spinning {spinning} | batches {BATCHES:?} | {rounds} rounds",
        model_path.display()
    );
    let mut costs: Vec<Costs> = BATCHES.iter().map(|_| Costs::default()).collect();
    for round in 0..rounds {
        for turn in 0..BATCHES.len() {
            let i = (turn + round) % BATCHES.len();
            let batch = BATCHES[i];
            costs[i].raw.push(raw_batch_ms(&mut session, &image, batch, window)?);
            let mut line = format!("round {}/{rounds} batch {batch}: raw {:.2} ms", round + 1, costs[i].raw[round]);
            for (k, &mode) in MODES.iter().enumerate() {
                let served = closed_loop(&models[i][k], &image, mode == Mode::SharedImage, batch, window);
                let full: Vec<&[f64; 4]> = served.iter().filter(|s| s[0] as usize == batch).collect();
                let column = |c: usize| median(&full.iter().map(|s| s[c]).collect::<Vec<_>>());
                let parts = [column(1), column(2), column(3)];
                for (slot, value) in costs[i].served[k].iter_mut().zip(parts.into_iter().chain([parts.iter().sum()])) {
                    slot.push(value);
                }
                line += &format!(" | {} {:.2} ms ({} full batches)", LABELS[k], parts.iter().sum::<f64>(), full.len());
            }
            eprintln!("{line}");
        }
    }
    let report = render(&costs, cores, spinning);
    println!("{report}");
    let out_dir = common::output_dir();
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(out_dir.join("batch_cost.md"), &report)?;
    eprintln!("written to {}", out_dir.display());
    Ok(())
}

/// Median ms of the session run by hand on one batch of `batch` images made once.
fn raw_batch_ms(session: &mut Session, image: &[f32], batch: usize, duration: Duration) -> Result<f64> {
    let data: Vec<f32> = image.iter().copied().cycle().take(image.len() * batch).collect();
    let shape = [batch, IMAGE[0], IMAGE[1], IMAGE[2]];
    let mut times = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        let outputs = session.run(ort::inputs![TensorRef::from_array_view((shape, &data[..]))?])?;
        std::hint::black_box(outputs[0].try_extract_tensor::<f32>()?.1.to_vec());
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&times))
}

/// `callers` threads each sending one image at a time for `duration`, the same one or
/// each a copy of its own; per answer, the batch it ran in: `[rows, joining ms, run ms,
/// splitting ms]`.
fn closed_loop(model: &Arc<Model>, image: &[f32], shared: bool, callers: usize, duration: Duration) -> Vec<[f64; 4]> {
    let stop = Arc::new(AtomicBool::new(false));
    let shape = [1, IMAGE[0], IMAGE[1], IMAGE[2]];
    let shared = Tensor::new(shape, image.to_vec()).ok().filter(|_| shared);
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (model, stop, image, shared) = (model.clone(), stop.clone(), image.to_vec(), shared.clone());
            std::thread::spawn(move || {
                let mut served = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let input = match &shared {
                        Some(shared) => shared.clone(),
                        None => match Tensor::new(shape, image.clone()) {
                            Ok(input) => input,
                            Err(_) => break,
                        },
                    };
                    let Ok(output) = model.submit(Inputs::from(input), InferOptions::default()).and_then(|t| t.wait())
                    else {
                        break;
                    };
                    let ms = |d: Duration| d.as_secs_f64() * 1e3;
                    let t = output.timings;
                    served.push([output.batch_size as f64, ms(t.compute_input), ms(t.compute), ms(t.postprocess)]);
                }
                served
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().flat_map(|t| t.join().unwrap_or_default()).collect()
}

fn render(costs: &[Costs], cores: usize, spinning: bool) -> String {
    use std::fmt::Write;
    let pool = if spinning { "pool threads spinning" } else { "pool threads sleeping" };
    let mut s = format!(
        "Batch cost on the host: average_224.onnx, {cores} cores, {pool}, medians over rounds (ms a batch)\n\n\
         | batch | images | raw session | modelless: join | run | split | whole batch | whole ÷ rows |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|\n"
    );
    for (batch, c) in BATCHES.iter().zip(costs) {
        for (label, served) in LABELS.iter().zip(&c.served) {
            let [join, run, split, whole] = served.each_ref().map(|v| median(v));
            let _ = writeln!(
                s,
                "| {batch} | {label} | {:.2} | {join:.2} | {run:.2} | {split:.2} | {whole:.2} | {:.3} |",
                median(&c.raw),
                whole / *batch as f64
            );
        }
    }
    let ratio = |f: &dyn Fn(&Costs) -> f64| f(&costs[1]) / f(&costs[0]);
    let whole = |mode: usize| move |c: &Costs| median(&c.served[mode][3]);
    let _ = writeln!(
        s,
        "\nBatch of {} ÷ batch of {} (4.0 where cost follows the rows): modelless whole batch, one image {:.2}, \
         own images {:.2}, staged and joined in staging {:.2}; raw session {:.2}",
        BATCHES[1],
        BATCHES[0],
        ratio(&whole(0)),
        ratio(&whole(1)),
        ratio(&whole(3)),
        ratio(&|c| median(&c.raw)),
    );
    let staged: Vec<String> = BATCHES
        .iter()
        .zip(costs)
        .map(|(batch, c)| format!("batch of {batch} {:.2}", whole(3)(c) / whole(2)(c)))
        .collect();
    let _ = writeln!(
        s,
        "\nStaged, joined in staging ÷ joined then copied, whole batch (below 1: the copy saved): {}",
        staged.join(", ")
    );
    s
}
