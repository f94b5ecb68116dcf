//! Variants made from one a task already has: a copy of an ONNX variant in another
//! precision, checked against it on real photos, and written into the config as a
//! variant of the same task with the accuracy that check supports.
//!
//! - [`convert`]: the copy (fp16, int8 dynamic, int8 static QDQ), made by ONNX
//!   Runtime's own converters in the project's Python environment (the library that
//!   serves links none of it);
//! - [`calibration`]: the inputs a static int8 copy is calibrated on, made from the
//!   photos by crops the compared images never use, through the variant's own
//!   preprocessing;
//! - [`photos`]: distinct images made from a few photos (crops, flips, JPEG
//!   qualities), so that no image is counted twice;
//! - [`agreement`]: how often the copy's top-1 class is the original's;
//! - [`write`](mod@write): the new variant, added to the config file keeping its comments.

pub mod agreement;
pub mod calibration;
pub mod convert;
pub mod photos;
pub mod write;

use std::path::{Path, PathBuf};

pub use agreement::Agreement;
pub use convert::CopyKind;
use modelless::{Runtime, RuntimeConfig};
pub use photos::MadeImage;
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
    /// The photos the images compared are made from.
    pub photos: Vec<PathBuf>,
    /// How many distinct images are compared.
    pub images: usize,
    /// The Python that runs the converter.
    pub python: PathBuf,
}

/// Calibration inputs a static int8 copy is made with, at most (two thirds
/// calibrate, the rest choose how to quantise).
const CALIBRATION_INPUTS: usize = 240;

/// Progress of [`make_variant`], for the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum MakeEvent {
    /// Calibration inputs are written; the converter runs on them.
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
}

/// The variant made and added.
#[derive(Clone, Debug)]
pub struct MadeVariant {
    /// As it was written into the config.
    pub variant: NewVariant,
    /// Its model file.
    pub file: PathBuf,
    /// Its agreement with its original.
    pub agreement: Agreement,
}

/// Makes the copy, serves it beside its original in this process, measures their
/// top-1 agreement on the images, and only then adds it to the config, with the
/// original's accuracy times that agreement, marked as estimated.
pub fn make_variant(request: &MakeRequest, on_event: &mut dyn FnMut(MakeEvent)) -> Result<MadeVariant, MakeError> {
    let config = RuntimeConfig::from_file(&request.config)?;
    let (task, from) = (&request.task, &request.from);
    let mut task_config = config
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
    if original.preprocess.is_none() {
        return Err(MakeError::Config(format!(
            "variant `{from}` takes no images (no `preprocess`): a copy is checked against it on photos"
        )));
    }
    let name = format!("{from}-{}", request.kind.name());
    let stem = original.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| from.clone());
    let file_name = format!("{stem}.{}.onnx", request.kind.name());
    let file = original.path.with_file_name(&file_name);
    let report = match (request.kind.calibrated(), &original.preprocess) {
        (true, Some(preprocess)) => {
            // Beside the copy, and gone once it is made, whether or not it was.
            let folder = file.with_extension("calibration");
            std::fs::create_dir_all(&folder).map_err(|source| MakeError::Io { path: folder.clone(), source })?;
            let count = calibration::most_inputs(request.photos.len()).min(CALIBRATION_INPUTS);
            let made = calibration::write_inputs(&request.photos, preprocess, count, &folder).and_then(|written| {
                on_event(MakeEvent::Calibrating { inputs: written });
                let progress = &mut |step: &str| on_event(MakeEvent::Converting(step.to_string()));
                convert::make_copy(&request.python, request.kind, &original.path, &file, Some(&folder), progress)
            });
            let _ = std::fs::remove_dir_all(&folder);
            made?
        }
        _ => {
            let progress = &mut |step: &str| on_event(MakeEvent::Converting(step.to_string()));
            convert::make_copy(&request.python, request.kind, &original.path, &file, None, progress)?
        }
    };
    on_event(MakeEvent::Converted(report));

    let mut copy = original.clone();
    (copy.name, copy.path, copy.preload) = (name.clone(), file.clone(), true);
    task_config.variants = vec![modelless::VariantConfig { preload: true, ..original.clone() }, copy];
    task_config.active = Some(from.clone());
    let runtime = Runtime::builder()
        .with_onnxruntime(config.onnxruntime.clone())
        .with_preprocessing(config.preprocessing.clone())
        .with_task(task_config)
        .build()?;
    let images = photos::made_images(&request.photos, request.images)?;
    on_event(MakeEvent::Loaded { images: images.len() });
    let agreement =
        agreement::top1_agreement(&runtime, task, from, &name, &images, &mut |n| on_event(MakeEvent::Compared(n)))?;
    let accuracy = original.variant_accuracy() * agreement.share();
    let variant = NewVariant {
        name,
        file_name,
        accuracy: (accuracy * 1000.0).round() / 1000.0,
        accuracy_source: format!(
            "estimated: {from}'s {} × {:.2} % top-1 agreement with it on {} distinct images made from {} photos \
             ({} copy)",
            original.variant_accuracy(),
            agreement.share() * 100.0,
            agreement.images,
            request.photos.len(),
            request.kind.name()
        ),
    };
    write::add_variant(&request.config, task, from, &variant)?;
    Ok(MadeVariant { variant, file, agreement })
}

/// The photos the project's setup installs (`.modelless/photos`, from the working
/// folder up), for a command given none.
pub fn default_photos_folder() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().map(|d| d.join(".modelless/photos")).find(|p| Path::is_dir(p))
}
