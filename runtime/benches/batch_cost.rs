//! What a batch costs on the host, against its rows: a model that only averages its
//! `[N, 3, 224, 224]` input (`average_224.onnx`), so that the session's own work is
//! small and what the serving path adds around it shows.
//!
//! Run: `make bench` (or `cargo bench -p modelless-runtime --bench batch_cost`; append
//! `-- --quick` for a shorter run). For batches of 16 and 64, in rounds that take turns:
//! - raw: the session run by hand on one batch made once (ONNX Runtime's own cost);
//! - modelless, one image: as many callers as the batch holds, in a closed loop, all
//!   sending the same image (as `modelless loadgen` does);
//! - modelless, own images: the same, each request with an image of its own (as an
//!   application that received them has), so that joining reads 64 images' memory.
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
use modelless_runtime::{BatchingConfig, InferOptions, Inputs, Model, Tensor};
use ort::session::Session;
use ort::value::TensorRef;

const IMAGE: [usize; 3] = [3, 224, 224];
const BATCHES: [usize; 2] = [16, 64];

/// Where the requests' images come from.
#[derive(Clone, Copy, PartialEq)]
enum Images {
    /// One image, shared by every request.
    Shared,
    /// A copy of its own for each request.
    Own,
}

/// Median batch costs of one batch size, merged over rounds (ms).
#[derive(Default)]
struct Costs {
    raw: Vec<f64>,
    /// Per kind of images: joining, run, splitting, the whole batch.
    served: [[Vec<f64>; 4]; 2],
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, window) = if quick { (2, Duration::from_secs(1)) } else { (5, Duration::from_secs(3)) };
    let model_path = common::models_dir()?.join("average_224.onnx");
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let env_config = OrtEnvironmentConfig::default().with_intra_op_threads(cores);
    let env = environment(&env_config)?;
    let mut session = Session::builder(&env)?.commit_from_file(&model_path)?;
    let image: Vec<f32> = (0..IMAGE.iter().product::<usize>()).map(|i| (i % 255) as f32 / 255.0).collect();
    let models = BATCHES
        .iter()
        .map(|&batch| {
            // A delay long enough for every caller to send again after its answer.
            let batching = BatchingConfig::default().with_max_batch_size(batch).with_max_queue_delay_us(20_000);
            let factory = OrtBackend::factory(env_config.clone(), model_path.clone(), OrtSessionConfig::default());
            Ok(Arc::new(Model::start(&format!("average-b{batch}"), factory, 1, batching)?))
        })
        .collect::<Result<Vec<_>>>()?;
    eprintln!("model {} | {cores} cores | batches {BATCHES:?} | {rounds} rounds", model_path.display());
    let mut costs: Vec<Costs> = BATCHES.iter().map(|_| Costs::default()).collect();
    for round in 0..rounds {
        for turn in 0..BATCHES.len() {
            let i = (turn + round) % BATCHES.len();
            let batch = BATCHES[i];
            costs[i].raw.push(raw_batch_ms(&mut session, &image, batch, window)?);
            let mut line = format!("round {}/{rounds} batch {batch}: raw {:.2} ms", round + 1, costs[i].raw[round]);
            for (k, images) in [Images::Shared, Images::Own].into_iter().enumerate() {
                let served = closed_loop(&models[i], &image, images, batch, window);
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
    let report = render(&costs, cores);
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

const LABELS: [&str; 2] = ["one image", "own images"];

/// `callers` threads each sending one image at a time for `duration`; per answer, the
/// batch it ran in: `[rows, joining ms, run ms, splitting ms]`.
fn closed_loop(model: &Arc<Model>, image: &[f32], images: Images, callers: usize, duration: Duration) -> Vec<[f64; 4]> {
    let stop = Arc::new(AtomicBool::new(false));
    let shape = [1, IMAGE[0], IMAGE[1], IMAGE[2]];
    let shared = Tensor::new(shape, image.to_vec()).ok();
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (model, stop, image, shared) = (model.clone(), stop.clone(), image.to_vec(), shared.clone());
            std::thread::spawn(move || {
                let mut served = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let input = match (images, &shared) {
                        (Images::Shared, Some(shared)) => shared.clone(),
                        _ => match Tensor::new(shape, image.clone()) {
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

fn render(costs: &[Costs], cores: usize) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "Batch cost on the host: average_224.onnx, {cores} cores, medians over rounds (ms a batch)\n\n\
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
    let _ = writeln!(
        s,
        "\nBatch of {} ÷ batch of {} (4.0 where cost follows the rows): modelless whole batch, one image {:.2}, \
         own images {:.2}; raw session {:.2}",
        BATCHES[1],
        BATCHES[0],
        ratio(&|c| median(&c.served[0][3])),
        ratio(&|c| median(&c.served[1][3])),
        ratio(&|c| median(&c.raw)),
    );
    s
}
