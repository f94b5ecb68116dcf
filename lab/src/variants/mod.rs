//! Variants made from one a task already has: a copy of an ONNX variant in another
//! precision, checked against it on the task's own kind of input, and written into
//! the config as a variant of the same task with the accuracy that check supports.
//!
//! - [`convert`]: the copy (fp16, int8 dynamic, int8 static QDQ), made by ONNX
//!   Runtime's own converters in the project's Python environment (the library that
//!   serves links none of it);
//! - [`calibration`]: the inputs a static int8 copy of an image variant is calibrated
//!   on, made from the photos by crops the compared images never use, through the
//!   variant's own preprocessing;
//! - [`pages`]: those of a `read-text` pipeline's stage, made from labelled pages as
//!   the pipeline makes them;
//! - [`photos`]: distinct images made from a few photos (crops, flips, JPEG
//!   qualities), so that no image is counted twice;
//! - [`judge`]: which of those a copy is made with and judged by, and the judging;
//! - [`agreement`]: how often the copy's top-1 class is the original's, and on how
//!   many images the original's own answer holds when every pixel moves one level;
//! - [`labelled`]: labelled images a user brings (a folder per class, or a CSV), and
//!   top-1 against their labels;
//! - [`reading`]: the character accuracy of a `read-text` pipeline on labelled pages;
//! - [`write`](mod@write): the new variant, added to the config file keeping its comments.

pub mod agreement;
pub mod calibration;
pub mod convert;
pub mod judge;
pub mod labelled;
pub mod pages;
pub mod photos;
pub mod reading;
pub mod write;

use std::path::{Path, PathBuf};

pub use agreement::Agreement;
pub use convert::CopyKind;
use judge::{Judge, Judged};
pub use labelled::{LabelScore, LabelledImage};
use modelless::RuntimeConfig;
pub use photos::MadeImage;
pub use reading::Reading;
pub use write::NewVariant;

/// Why a variant could not be made or added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MakeError {
    /// The config or the variant asked for.
    #[error("{0}")]
    Config(String),
    /// The converter could not be run, or failed.
    #[error("the converter ({program}) failed: {reason}")]
    Converter {
        /// The Python it ran with.
        program: PathBuf,
        /// What it said.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A photo could not be read or encoded.
    #[error("photo {path}: {source}")]
    Photo {
        /// The photo.
        path: PathBuf,
        /// Why.
        #[source]
        source: image::ImageError,
    },
    /// The runtime refused or failed the copy or a request to it.
    #[error(transparent)]
    Runtime(#[from] modelless::Error),
    /// A calibration image could not be preprocessed.
    #[error("a calibration image: {0}")]
    Preprocess(#[from] modelless::preprocess::PreprocessError),
    /// The config file could not be edited.
    #[error("the config does not parse as TOML: {0}")]
    Toml(#[source] toml_edit::TomlError),
}

/// What to make.
#[derive(Clone, Debug)]
pub struct MakeRequest {
    /// The config file, which gains the new variant.
    pub config: PathBuf,
    /// The task.
    pub task: String,
    /// The variant copied.
    pub from: String,
    /// What the copy is made in.
    pub kind: CopyKind,
    /// What the copy is calibrated and judged on.
    pub evidence: Evidence,
    /// The Python that runs the converter.
    pub python: PathBuf,
}

/// What a copy is calibrated and judged on: its task's own kind of input.
#[derive(Clone, Debug)]
pub enum Evidence {
    /// An image task's: distinct images made from photos, on which the copy's top-1
    /// class is compared with the original's.
    Photos {
        /// The photos.
        photos: Vec<PathBuf>,
        /// How many distinct images are compared.
        images: usize,
    },
    /// An image task's where the user brings labelled images: the copy is calibrated
    /// on crops of the photos as above, and both it and the original are scored
    /// top-1 against the labels.
    Labelled {
        /// The photos it is calibrated on.
        photos: Vec<PathBuf>,
        /// The labelled images: a folder with a folder per class, or a CSV of
        /// `image,label` rows ([`labelled::labelled_images`]).
        labelled: PathBuf,
    },
    /// A `read-text` pipeline stage's: labelled pages (`labels.jsonl` and the pages),
    /// on which the pipeline's character accuracy with the copy is measured against
    /// that with the original.
    Pages {
        /// The folder of the pages and their labels.
        documents: PathBuf,
    },
}

/// Calibration inputs a static int8 copy is made with, at most (two thirds
/// calibrate, the rest choose how to quantise).
pub(crate) const CALIBRATION_INPUTS: usize = 240;

/// Progress of [`make_variant`], for the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum MakeEvent {
    /// Inputs of the task are written for the converter, which calibrates a static
    /// copy on them and times a dynamic one.
    Calibrating {
        /// How many.
        inputs: usize,
    },
    /// A step of the converter's, as it says it.
    Converting(String),
    /// The copy is written; the converter's report.
    Converted(serde_json::Value),
    /// Both variants are loaded; `images` images to compare.
    Loaded {
        /// Images to compare.
        images: usize,
    },
    /// Images compared so far.
    Compared(usize),
    /// The pipeline starts reading `pages` pages with `variant` serving the task.
    Reading {
        /// The variant.
        variant: String,
        /// Pages to read.
        pages: usize,
    },
    /// Pages read so far with that variant.
    Read(usize),
}

/// The variant made and added.
#[derive(Clone, Debug)]
pub struct MadeVariant {
    /// As it was written into the config.
    pub variant: NewVariant,
    /// Its model file.
    pub file: PathBuf,
    /// How it compared with its original.
    pub measured: Measured,
}

/// How a copy compared with its original.
#[derive(Clone, Debug)]
pub enum Measured {
    /// Their top-1 agreement on images.
    Agreement(Agreement),
    /// Their top-1 against the labels of the user's images.
    Labels(LabelScore),
    /// The pipeline's reading of the labelled pages with each.
    Reading {
        /// With the original.
        original: Reading,
        /// With the copy.
        copy: Reading,
    },
}

/// Makes the copy, serves it beside its original in this process, measures it on the
/// request's evidence, and only then adds it to the config with the accuracy that
/// supports: the original's times their top-1 agreement (marked as estimated), or
/// times the ratio of their top-1 accuracies against labelled images, or of the
/// pipeline's character accuracies with each.
pub fn make_variant(request: &MakeRequest, on_event: &mut dyn FnMut(MakeEvent)) -> Result<MadeVariant, MakeError> {
    let config = RuntimeConfig::from_file(&request.config)?;
    let (task, from) = (&request.task, &request.from);
    let task_config = config
        .tasks
        .iter()
        .find(|t| &t.name == task)
        .cloned()
        .ok_or_else(|| MakeError::Config(format!("the config has no task `{task}`")))?;
    let original = task_config
        .variants
        .iter()
        .find(|v| &v.name == from)
        .cloned()
        .ok_or_else(|| MakeError::Config(format!("task `{task}` has no variant `{from}`")))?;
    let judge = Judge::new(&request.evidence, &config, task, &original)?;
    let name = format!("{from}-{}", request.kind.name());
    let file_name = copy_file_name(&task_config, &original, request.kind);
    let file = original.path.with_file_name(&file_name);
    let report = if request.kind.takes_inputs() {
        // Beside the copy, and gone once it is made, whether or not it was.
        let folder = file.with_extension("calibration");
        std::fs::create_dir_all(&folder).map_err(|source| MakeError::Io { path: folder.clone(), source })?;
        let made = judge.write_inputs(&config, &original, &folder).and_then(|inputs| {
            on_event(MakeEvent::Calibrating { inputs });
            let progress = &mut |step: &str| on_event(MakeEvent::Converting(step.to_string()));
            convert::make_copy(&request.python, request.kind, &original.path, &file, Some(&folder), progress)
        });
        let _ = std::fs::remove_dir_all(&folder);
        made?
    } else {
        let progress = &mut |step: &str| on_event(MakeEvent::Converting(step.to_string()));
        convert::make_copy(&request.python, request.kind, &original.path, &file, None, progress)?
    };
    on_event(MakeEvent::Converted(report));

    let mut copy = original.clone();
    (copy.name, copy.path, copy.preload) = (name.clone(), file.clone(), true);
    let mut paired = task_config;
    paired.variants = vec![modelless::VariantConfig { preload: true, ..original.clone() }, copy];
    paired.active = Some(from.clone());
    let judged = judge.measure(&config, paired, (&original, &name, request.kind.name()), on_event)?;
    let Judged { accuracy, source: accuracy_source, measured } = judged;
    let variant = NewVariant { name, file_name, accuracy: (accuracy * 1e4).round() / 1e4, accuracy_source };
    write::add_variant(&request.config, task, from, &variant)?;
    Ok(MadeVariant { variant, file, measured })
}

/// The copy's file name, beside the original's: `<stem>.<kind>.onnx`, or
/// `<stem>.<variant>.<kind>.onnx` where other variants of the task share the
/// original's file (read at other sizes, they calibrate differently).
fn copy_file_name(task: &modelless::TaskConfig, original: &modelless::VariantConfig, kind: CopyKind) -> String {
    let stem = original.path.file_stem().map_or_else(|| original.name.clone(), |s| s.to_string_lossy().into_owned());
    let shared = task.variants.iter().any(|v| v.name != original.name && v.path == original.path);
    if shared {
        format!("{stem}.{}.{}.onnx", original.name, kind.name())
    } else {
        format!("{stem}.{}.onnx", kind.name())
    }
}

/// The photos the project's setup installs (`.modelless/photos`, from the working
/// folder up), for a command given none.
pub fn default_photos_folder() -> Option<PathBuf> {
    installed(".modelless/photos")
}

/// The labelled pages the project's setup makes (`.modelless/documents`, from the
/// working folder up), for a command given none.
pub fn default_documents_folder() -> Option<PathBuf> {
    installed(".modelless/documents")
}

fn installed(folder: &str) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().map(|d| d.join(folder)).find(|p| Path::is_dir(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_named_after_its_variant_where_the_file_is_shared() {
        let variant = |name: &str, path: &str| -> modelless::VariantConfig {
            toml::from_str(&format!("name = \"{name}\"\npath = \"{path}\"")).unwrap()
        };
        let mut task: modelless::TaskConfig = toml::from_str("name = \"t\"\nvariants = []").unwrap();
        task.variants = vec![variant("lite0", "m/efficientnet-lite0.onnx"), variant("det-736", "m/det.onnx")];
        assert_eq!(
            copy_file_name(&task, &task.variants[0], CopyKind::Int8Static),
            "efficientnet-lite0.int8-static.onnx"
        );
        assert_eq!(copy_file_name(&task, &task.variants[1], CopyKind::Fp16), "det.fp16.onnx");
        task.variants.push(variant("det-640", "m/det.onnx"));
        assert_eq!(copy_file_name(&task, &task.variants[1], CopyKind::Int8Static), "det.det-736.int8-static.onnx");
    }
}
