//! What a batch costs on the host, against its rows: a model that only averages its
//! `[N, 3, 224, 224]` input (`average_224.onnx`), so that the session's own work is
//! small and what the serving path adds around it shows.
//!
//! Run: `make bench` (or `cargo bench -p modelless-runtime --bench batch_cost`; append
//! `-- --quick` for a shorter run). For batches of 16 and 64, in rounds that take turns:
//! - raw: the session run by hand on one batch made once (ONNX Runtime's own cost);
//! - modelless: as many callers as the batch holds, each sending one image it owns
//!   (as an application that received it does), in a closed loop; the batches that
//!   formed full are timed from the answers: joining the inputs, the run, splitting.
//!
//! The ratio of the batch of 64 to the batch of 16 is the figure: 4 where cost follows
//! the rows. The table goes to stdout and to `<target>/modelless-bench/batch_cost.md`.

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

/// Median batch costs of one batch size, merged over rounds (ms).
#[derive(Default)]
struct Costs {
    raw: Vec<f64>,
    assemble: Vec<f64>,
    compute: Vec<f64>,
    split: Vec<f64>,
    whole: Vec<f64>,
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
            let served = closed_loop(&models[i], &image, batch, window);
            let full: Vec<&[f64; 4]> = served.iter().filter(|s| s[0] as usize == batch).collect();
            let column = |k: usize| median(&full.iter().map(|s| s[k]).collect::<Vec<_>>());
            costs[i].assemble.push(column(1));
            costs[i].compute.push(column(2));
            costs[i].split.push(column(3));
            costs[i].whole.push(column(1) + column(2) + column(3));
            eprintln!(
                "round {}/{rounds} batch {batch}: raw {:.2} ms | modelless {:.2} ms ({} full batches of {})",
                round + 1,
                median(&costs[i].raw[round..]),
                column(1) + column(2) + column(3),
                full.len(),
                served.len()
            );
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

/// `callers` threads each sending one image at a time for `duration`; per answer, the
/// batch it ran in: `[rows, joining ms, run ms, splitting ms]`.
fn closed_loop(model: &Arc<Model>, image: &[f32], callers: usize, duration: Duration) -> Vec<[f64; 4]> {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (model, stop, image) = (model.clone(), stop.clone(), image.to_vec());
            std::thread::spawn(move || {
                let mut served = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let Ok(input) = Tensor::new([1, IMAGE[0], IMAGE[1], IMAGE[2]], image.clone()) else { break };
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
         | batch | raw session | modelless: join | run | split | whole batch | whole ÷ rows |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for (batch, c) in BATCHES.iter().zip(costs) {
        let whole = median(&c.whole);
        let _ = writeln!(
            s,
            "| {batch} | {:.2} | {:.2} | {:.2} | {:.2} | {whole:.2} | {:.3} |",
            median(&c.raw),
            median(&c.assemble),
            median(&c.compute),
            median(&c.split),
            whole / *batch as f64
        );
    }
    let ratio = |f: &dyn Fn(&Costs) -> f64| f(&costs[1]) / f(&costs[0]);
    let _ = writeln!(
        s,
        "\nBatch of {} ÷ batch of {} (4.0 where cost follows the rows): modelless whole batch {:.2}, run alone {:.2}; \
         raw session {:.2}",
        BATCHES[1],
        BATCHES[0],
        ratio(&|c| median(&c.whole)),
        ratio(&|c| median(&c.compute)),
        ratio(&|c| median(&c.raw)),
    );
    s
}
