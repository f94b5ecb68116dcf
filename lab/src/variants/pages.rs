//! The calibration inputs of a `read-text` pipeline's stage, made from labelled pages
//! as the pipeline makes them: for the detection task, whole pages through the
//! variant's own preprocessing; for the recognition task, the lines the pipeline's
//! detector finds on them, cut and padded by the glue (`ocr::recognition_inputs`).

use std::path::Path;

use modelless::pipeline::{GlueKind, PipelineAnswer, PipelineConfig, PipelineValue};
use modelless::preprocess::image_tensor;
use modelless::{Inputs, Runtime, RuntimeConfig, Slo, VariantConfig};
use modelless_runtime::ocr::recognition_inputs;

use super::MakeError;
use super::calibration::InputsFile;
use super::reading::LabelledPage;

/// Pages a detector copy is calibrated on at most: each is megabytes of floats.
const DETECT_PAGES: usize = 30;

/// Which stage of a `read-text` pipeline a task is.
#[derive(Clone, Debug, PartialEq)]
pub enum Stage {
    /// It finds the lines on a page.
    Detect,
    /// It reads a line.
    Recognize,
}

/// The `read-text` pipeline of `config` that `task` is a stage of, and which stage
/// (the direction classifier is none a copy is made for here).
pub fn stage_of(config: &RuntimeConfig, task: &str) -> Option<(PipelineConfig, Stage)> {
    config.pipelines.iter().filter(|p| p.glue == GlueKind::ReadText).find_map(|pipeline| {
        let stages = pipeline.read_text_config();
        let stage = if stages.detect == task {
            Stage::Detect
        } else if stages.recognize == task {
            Stage::Recognize
        } else {
            return None;
        };
        Some((pipeline.clone(), stage))
    })
}

/// Writes up to `count` calibration inputs for `variant`, the `stage` of `pipeline`
/// in `config`, made from `pages` (in `documents`), into `folder`; returns how many.
pub fn write_inputs(
    config: &RuntimeConfig,
    (pipeline, stage): (&PipelineConfig, &Stage),
    variant: &VariantConfig,
    (documents, pages): (&Path, &[LabelledPage]),
    count: usize,
    folder: &Path,
) -> Result<usize, MakeError> {
    let read = |page: &LabelledPage| {
        let path = documents.join(&page.file);
        std::fs::read(&path).map_err(|source| MakeError::Io { path, source })
    };
    match stage {
        Stage::Detect => {
            let preprocess = variant.preprocess.as_ref().ok_or_else(|| {
                MakeError::Config(format!(
                    "detection variant `{}` has no `preprocess` to make pages its inputs",
                    variant.name
                ))
            })?;
            let mut written = InputsFile::create(folder, preprocess.input.clone())?;
            for page in pages.iter().take(count.min(DETECT_PAGES)) {
                written.push(&image_tensor(&read(page)?, preprocess)?)?;
            }
            written.finish()
        }
        Stage::Recognize => {
            let finder = line_finder(config, pipeline)?;
            let padding = pipeline.read_text_config().padding;
            let mut written = InputsFile::create(folder, None)?;
            for page in pages {
                let answer = finder.infer_pipeline_blocking(FIND_LINES, Inputs::image(read(page)?), Slo::default())?;
                let lines = line_cuts(&answer)?;
                let inputs = recognition_inputs(&lines, padding)
                    .map_err(|e| MakeError::Config(format!("the lines of {}: {e}", page.file)))?;
                for input in inputs {
                    if written.len() == count {
                        return written.finish();
                    }
                    written.push(&input)?;
                }
            }
            written.finish()
        }
    }
}

/// The name the line finder is served by here.
const FIND_LINES: &str = "find-lines";

/// `pipeline`'s first half (its detection task as `config` has it, and the glue that
/// cuts the lines), served in this process.
fn line_finder(config: &RuntimeConfig, pipeline: &PipelineConfig) -> Result<Runtime, MakeError> {
    let detect = pipeline.read_text_config().detect;
    let task = config
        .tasks
        .iter()
        .find(|t| t.name == detect)
        .cloned()
        .ok_or_else(|| MakeError::Config(format!("the config has no task `{detect}`, the pipeline's detector")))?;
    let finder = PipelineConfig { name: FIND_LINES.into(), glue: GlueKind::FindLines, ..pipeline.clone() };
    let config = RuntimeConfig {
        models: Vec::new(),
        tasks: vec![task],
        pipelines: vec![finder],
        policy: None,
        server: None,
        ..config.clone()
    };
    Ok(Runtime::builder().with_config(config).build()?)
}

/// The upright line cuts of a `find-lines` answer.
fn line_cuts(answer: &PipelineAnswer) -> Result<Vec<image::RgbImage>, MakeError> {
    let Some(PipelineValue::Bytes(cuts)) = answer.get("lines") else {
        return Err(MakeError::Config("the line finder answered no lines".into()));
    };
    cuts.iter()
        .map(|png| {
            image::load_from_memory(png)
                .map(|cut| cut.to_rgb8())
                .map_err(|e| MakeError::Config(format!("a line cut does not decode: {e}")))
        })
        .collect()
}
