//! Where the time of one image request goes, at zero load: the three sizes
//! AbouElhamayed et al. measured on Triton (60×70, 500×375, 3564×2880 JPEGs, made by
//! `scripts/data/gen_images.py`), each sent one at a time to EfficientNet-Lite0 as JPEG
//! bytes. Prints the median of each stage (decode, preprocess, queue, compute, the
//! rest) in ms and as a share of the total, beside the paper's share of CPU
//! preprocessing (56 % for the medium image, 97 % for the large one).
//!
//! ```text
//! cargo run --release -p modelless-examples --example image_stages [-- ROUNDS]
//! ```

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use modelless::preprocess::ImagePreprocess;
use modelless::{Inputs, Runtime, Slo, TaskConfig, Timings, VariantConfig, WarmupConfig};

/// (file, the paper's share of preprocessing in end-to-end latency with CPU preprocessing).
const SIZES: [(&str, Option<f64>); 3] = [("small.jpg", None), ("medium.jpg", Some(56.0)), ("large.jpg", Some(97.0))];

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(30), |r| r.parse()).context("ROUNDS")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.modelless");
    let model = root.join("efficientnet/efficientnet-lite0.onnx");
    let preprocess = ImagePreprocess::new(224, [127.0; 3], [128.0; 3]);
    let variant = VariantConfig::new("efficientnet-lite0", &model, 75.1)
        .with_warmup(WarmupConfig::default())
        .with_preprocess(preprocess);
    let runtime = Runtime::builder().with_task(TaskConfig::new("classify").with_variant(variant)).build()?;
    println!("| image | bytes | decode | preprocess | queue | compute | rest | total | preprocessing share | paper |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (file, paper) in SIZES {
        let path = root.join("images/bench").join(file);
        let bytes = std::fs::read(&path).with_context(|| format!("{} (run scripts/setup/base.sh)", path.display()))?;
        let mut timings: Vec<Timings> = Vec::with_capacity(rounds);
        for round in 0..rounds + 3 {
            let answer = runtime.infer_task_blocking("classify", Inputs::image(bytes.clone()), Slo::default())?;
            if round >= 3 {
                timings.push(answer.timings);
            }
        }
        let median = |stage: fn(&Timings) -> Duration| {
            let mut values: Vec<f64> = timings.iter().map(|t| stage(t).as_secs_f64() * 1e3).collect();
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let decode = median(|t| t.decode);
        let preprocess = median(|t| t.preprocess);
        let queue = median(|t| t.queue);
        let compute = median(|t| t.compute);
        let total = median(|t| t.total);
        let rest = (total - decode - preprocess - queue - compute).max(0.0);
        let share = 100.0 * (decode + preprocess) / total;
        let paper = paper.map_or("–".to_string(), |p| format!("{p:.0} %"));
        println!(
            "| {file} | {} | {decode:.2} | {preprocess:.2} | {queue:.2} | {compute:.2} | {rest:.2} | {total:.2} | \
             {share:.0} % | {paper} |",
            bytes.len()
        );
    }
    Ok(())
}
