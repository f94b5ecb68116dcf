//! Reads labelled pages through the `read-text` pipeline (PP-OCRv4, the stages of
//! examples/read_text.toml) and writes what it read, one JSON line a page:
//! `{"file", "lines": [{"text", "box", "score"}]}`, for `scripts/bench/ocr_accuracy.py` to
//! score against the labels and against RapidOCR.
//!
//! ```text
//! cargo run --release -p modelless-lab --example read_pages -- \
//!     [--pages N] [--detect det-736|det-640|det-480] [--recognize rec-v4]
//!     [--padding page-groups|steps] [--config FILE] [--documents DIR] [--out FILE]
//! ```

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use modelless::pipeline::{LinePaddingKind, PipelineValue};
use modelless::{Inputs, Runtime, RuntimeConfig, Slo};

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize()?;
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let pages: usize = flag("--pages").map_or(Ok(usize::MAX), |p| p.parse())?;
    let detect = flag("--detect").unwrap_or_else(|| "det-736".into());
    let out = flag("--out").unwrap_or_else(|| root.join("target/read_pages.jsonl").display().to_string());

    let config = flag("--config").map_or_else(|| root.join("examples/read_text.toml"), Into::into);
    let mut config = RuntimeConfig::from_file(config)?;
    if let Some(padding) = flag("--padding") {
        let padding: LinePaddingKind = serde_json::from_value(padding.into()).context("--padding")?;
        config.pipelines.iter_mut().for_each(|p| p.line_padding = padding);
    }
    let runtime = Runtime::builder().with_config(config).build()?;
    runtime.switch_variant("detect-text", &detect)?;
    if let Some(recognize) = flag("--recognize") {
        runtime.switch_variant("recognize-text", &recognize)?;
    }

    let documents = flag("--documents").map_or_else(|| root.join(".modelless/documents"), Into::into);
    let labels = std::fs::read_to_string(documents.join("labels.jsonl")).context("run scripts/setup/base.sh first")?;
    let mut written = std::io::BufWriter::new(std::fs::File::create(&out)?);
    for (i, line) in labels.lines().take(pages).enumerate() {
        let file = serde_json::from_str::<serde_json::Value>(line)?["file"]
            .as_str()
            .context("a page without a file")?
            .to_string();
        let bytes = std::fs::read(documents.join(&file))?;
        let answer = runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes), Slo::default())?;
        let texts = answer.get("text").and_then(PipelineValue::texts).context("no text")?;
        let boxes = answer
            .get("boxes")
            .and_then(PipelineValue::tensor)
            .and_then(|t| t.as_slice::<f32>())
            .context("no boxes")?;
        let scores = answer
            .get("scores")
            .and_then(PipelineValue::tensor)
            .and_then(|t| t.as_slice::<f32>())
            .context("no scores")?;
        let lines: Vec<serde_json::Value> = texts
            .iter()
            .zip(boxes.chunks(8))
            .zip(scores)
            .map(|((text, quad), score)| {
                let corners: Vec<[f32; 2]> = quad.chunks(2).map(|p| [p[0], p[1]]).collect();
                serde_json::json!({ "text": text, "box": corners, "score": score })
            })
            .collect();
        writeln!(written, "{}", serde_json::json!({ "file": file, "lines": lines }))?;
        eprint!("\r  {} pages read", i + 1);
    }
    eprintln!("\nread_pages: {out}");
    Ok(())
}
