//! What a copy is judged by, resolved against the config: the calibration inputs it
//! is made with, and the measurement that gives its accuracy.

use std::path::{Path, PathBuf};

use modelless::pipeline::PipelineConfig;
use modelless::preprocess::ImagePreprocess;
use modelless::{Runtime, RuntimeConfig, TaskConfig, VariantConfig};

use super::labelled::{self, LabelledImage};
use super::pages::{self, Stage};
use super::reading::{self, LabelledPage, Reading};
use super::{CALIBRATION_INPUTS, Evidence, MakeError, MakeEvent, Measured, agreement, calibration, photos};

/// A request's evidence, with what the config says of the variant copied.
#[derive(Debug)]
pub enum Judge<'a> {
    /// Photos, through the variant's own preprocessing.
    Photos {
        /// The photos.
        photos: &'a [PathBuf],
        /// Distinct images to compare on.
        images: usize,
        /// The variant's preprocessing.
        preprocess: &'a ImagePreprocess,
    },
    /// Photos to calibrate on, through the variant's own preprocessing, and the
    /// user's labelled images to score on.
    Labelled {
        /// The photos.
        photos: &'a [PathBuf],
        /// Where the labelled images were named.
        source: &'a Path,
        /// The images and their classes.
        images: Vec<LabelledImage>,
        /// The variant's preprocessing.
        preprocess: &'a ImagePreprocess,
    },
    /// Labelled pages, read by the pipeline the task is a stage of.
    Pages {
        /// Their folder.
        documents: &'a Path,
        /// Their labels.
        labelled: Vec<LabelledPage>,
        /// The pipeline.
        pipeline: PipelineConfig,
        /// The stage the task is.
        stage: Stage,
    },
}

/// The measured accuracy of a copy, what `accuracy_source` says of it, and the
/// measurement.
#[derive(Debug)]
pub struct Judged {
    /// The accuracy, on the original's scale.
    pub accuracy: f64,
    /// How it was measured.
    pub source: String,
    /// The measurement.
    pub measured: Measured,
}

impl<'a> Judge<'a> {
    /// `evidence` for copies of `original`, a variant of `task` in `config`.
    pub fn new(
        evidence: &'a Evidence,
        config: &RuntimeConfig,
        task: &str,
        original: &'a VariantConfig,
    ) -> Result<Judge<'a>, MakeError> {
        let preprocess = || {
            original.preprocess.as_ref().ok_or_else(|| {
                MakeError::Config(format!(
                    "variant `{}` takes no images (no `preprocess`): a copy is checked against it on photos",
                    original.name
                ))
            })
        };
        match evidence {
            Evidence::Photos { photos, images } => {
                Ok(Judge::Photos { photos, images: *images, preprocess: preprocess()? })
            }
            Evidence::Labelled { photos, labelled } => {
                let labels = task_labels(config, task)?;
                let images = labelled::labelled_images(labelled, labels.as_deref())?;
                Ok(Judge::Labelled { photos, source: labelled, images, preprocess: preprocess()? })
            }
            Evidence::Pages { documents } => {
                let (pipeline, stage) = pages::stage_of(config, task).ok_or_else(|| {
                    MakeError::Config(format!(
                        "task `{task}` is neither the detection nor the recognition stage of a `read-text` \
                         pipeline: a copy is checked on pages only there"
                    ))
                })?;
                let labelled = reading::labelled_pages(documents)?;
                Ok(Judge::Pages { documents, labelled, pipeline, stage })
            }
        }
    }

    /// Writes the inputs the converter takes into `folder`; returns how many.
    pub fn write_inputs(
        &self,
        config: &RuntimeConfig,
        original: &VariantConfig,
        folder: &Path,
    ) -> Result<usize, MakeError> {
        match self {
            Judge::Photos { photos, preprocess, .. } | Judge::Labelled { photos, preprocess, .. } => {
                let count = calibration::most_inputs(photos.len()).min(CALIBRATION_INPUTS);
                calibration::write_inputs(photos, preprocess, count, folder)
            }
            Judge::Pages { documents, labelled, pipeline, stage } => {
                let source = (*documents, labelled.as_slice());
                pages::write_inputs(config, (pipeline, stage), original, source, CALIBRATION_INPUTS, folder)
            }
        }
    }

    /// Serves `paired` (the task with the original, active, and the copy `copy`) in
    /// this process and measures the copy against the original.
    pub fn measure(
        &self,
        config: &RuntimeConfig,
        paired: TaskConfig,
        (original, copy, kind): (&VariantConfig, &str, &str),
        on_event: &mut dyn FnMut(MakeEvent),
    ) -> Result<Judged, MakeError> {
        let (task, from) = (paired.name.clone(), original.name.as_str());
        match self {
            Judge::Photos { photos, images, .. } => {
                let runtime = serving(config, paired)?;
                let images = photos::made_images(photos, *images)?;
                on_event(MakeEvent::Loaded { images: images.len() });
                let compared = &mut |n| on_event(MakeEvent::Compared(n));
                let agreement = agreement::top1_agreement(&runtime, &task, from, copy, &images, compared)?;
                let source = format!(
                    "estimated: {from}'s {} × {:.2} % top-1 agreement with it on {} distinct images made from {} \
                     photos ({kind} copy); {from} keeps its own top-1 on {:.1} % of them when every pixel moves one \
                     level, and on those the copy agrees {:.2} %",
                    original.variant_accuracy(),
                    agreement.share() * 100.0,
                    agreement.images,
                    photos.len(),
                    agreement.steady_share() * 100.0,
                    agreement.steady_agreement() * 100.0,
                );
                let accuracy = original.variant_accuracy() * agreement.share();
                Ok(Judged { accuracy, source, measured: Measured::Agreement(agreement) })
            }
            Judge::Labelled { source, images, .. } => {
                let runtime = serving(config, paired)?;
                on_event(MakeEvent::Loaded { images: images.len() });
                let scored = &mut |n| on_event(MakeEvent::Compared(n));
                let score = labelled::top1_against_labels(&runtime, &task, (from, copy), images, scored)?;
                if score.original_correct == 0 {
                    return Err(MakeError::Config(format!(
                        "{from} gets none of the {} labelled images in {} right: are their labels the task's classes?",
                        score.images,
                        source.display()
                    )));
                }
                let ratio = score.copy_accuracy() / score.original_accuracy();
                let source = format!(
                    "measured: top-1 against the labels of {} images ({}) is {:.2} % with this {kind} copy and {:.2} % \
                     with {from}; {from}'s {} × their ratio",
                    score.images,
                    source.display(),
                    score.copy_accuracy(),
                    score.original_accuracy(),
                    original.variant_accuracy(),
                );
                Ok(Judged { accuracy: original.variant_accuracy() * ratio, source, measured: Measured::Labels(score) })
            }
            Judge::Pages { documents, labelled, pipeline, .. } => {
                let tasks =
                    config.tasks.iter().map(|t| if t.name == task { paired.clone() } else { t.clone() }).collect();
                let runtime = Runtime::builder()
                    .with_config(RuntimeConfig { tasks, policy: None, server: None, ..config.clone() })
                    .build()?;
                let mut read_with = |variant: &str| -> Result<Reading, MakeError> {
                    runtime.switch_variant(&task, variant)?;
                    on_event(MakeEvent::Reading { variant: variant.to_string(), pages: labelled.len() });
                    let read = &mut |n| on_event(MakeEvent::Read(n));
                    reading::read_pages(&runtime, &pipeline.name, documents, labelled, read)
                };
                let (with_original, with_copy) = (read_with(from)?, read_with(copy)?);
                let ratio = with_copy.accuracy() / with_original.accuracy().max(f64::MIN_POSITIVE);
                let source = format!(
                    "measured: `{}`'s character accuracy on {} labelled pages ({}) is {:.2} % with this {kind} copy \
                     and {:.2} % with {from}; {from}'s {} × their ratio",
                    pipeline.name,
                    with_copy.pages,
                    documents.display(),
                    with_copy.accuracy(),
                    with_original.accuracy(),
                    original.variant_accuracy(),
                );
                let measured = Measured::Reading { original: with_original, copy: with_copy };
                Ok(Judged { accuracy: original.variant_accuracy() * ratio, source, measured })
            }
        }
    }
}

/// The class names of `task`'s label file, where it has one.
fn task_labels(config: &RuntimeConfig, task: &str) -> Result<Option<Vec<String>>, MakeError> {
    let Some(path) = config.tasks.iter().find(|t| t.name == task).and_then(|t| t.labels.as_ref()) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|source| MakeError::Io { path: path.clone(), source })?;
    Ok(Some(text.lines().map(|l| l.trim_end_matches('\r').to_string()).collect()))
}

/// A runtime serving `paired` alone, with `config`'s ONNX Runtime and preprocessing.
fn serving(config: &RuntimeConfig, paired: TaskConfig) -> Result<Runtime, MakeError> {
    Ok(Runtime::builder()
        .with_onnxruntime(config.onnxruntime.clone())
        .with_preprocessing(config.preprocessing.clone())
        .with_task(paired)
        .build()?)
}
