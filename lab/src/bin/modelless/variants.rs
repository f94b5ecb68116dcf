//! `modelless variants make`: a copy of a task's ONNX variant in another precision,
//! checked against it on photos (an image task) or labelled pages (a stage of a
//! `read-text` pipeline) and added to the config as a variant of the task.

use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use modelless::RuntimeConfig;
use modelless_lab::variants::{
    CopyKind, Evidence, MakeEvent, MakeRequest, Measured, convert, default_documents_folder, default_photos_folder,
    make_variant, pages, photos,
};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Make copies of VARIANT of TASK (fp16: half precision, inputs and outputs kept
    /// in fp32; folded: float32, the element-wise steps around the convolutions taken
    /// into them, exactly; int8-dynamic: int8 weights, activations quantised at run time;
    /// int8-static: QDQ int8 calibrated on the task's own inputs), serve each beside
    /// the original here, measure it, and add it to the config with the accuracy
    /// measured. An image task's copy is calibrated on crops of the photos through
    /// the variant's preprocessing, and its accuracy is the original's times how
    /// often their top-1 classes agree on distinct images made from the photos
    /// (marked as estimated); with `--labelled`, it is the original's times the ratio
    /// of their top-1 accuracies against the labels (measured). A copy of a `read-text` pipeline's detection or
    /// recognition stage is calibrated on labelled pages (whole pages, or the lines
    /// found on them) and its accuracy is the original's times the ratio of the
    /// pipeline's character accuracies on the pages with each.
    Make(MakeArgs),
    /// Push a model file to an OCI registry as a model version, for replicas whose
    /// variant follows the tag.
    Push(crate::push::ModelPushArgs),
}

#[derive(clap::Args)]
pub struct MakeArgs {
    /// The config; it gains the new variant, its comments kept.
    config: PathBuf,
    /// The task.
    #[arg(long)]
    task: String,
    /// The variant to copy.
    #[arg(long = "from")]
    from: String,
    /// What the copies are made in, one each (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fp16")]
    kind: Vec<Kind>,
    /// A folder of JPEG and PNG photos to make the compared images from (default: the
    /// photos `make setup` installs, `.modelless/photos`).
    #[arg(long)]
    photos: Option<PathBuf>,
    /// Labelled images to measure an image task's copies on, top-1 against the
    /// labels, instead of estimating by agreement: a folder with a folder per class,
    /// or a CSV of `image,label` rows (paths relative to it); a class is a line of
    /// the task's `labels` file or its index. The photos still calibrate.
    #[arg(long)]
    labelled: Option<PathBuf>,
    /// Distinct images to compare on.
    #[arg(long, default_value_t = 500)]
    images: usize,
    /// For a stage of a `read-text` pipeline: the labelled pages (`labels.jsonl` and
    /// the pages, as `scripts/data/gen_documents.py` writes them; default: those `make
    /// setup` makes, `.modelless/documents`).
    #[arg(long)]
    pages: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Fp16,
    Folded,
    Int8Dynamic,
    Int8Static,
}

impl From<Kind> for CopyKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Fp16 => CopyKind::Fp16,
            Kind::Folded => CopyKind::Folded,
            Kind::Int8Dynamic => CopyKind::Int8Dynamic,
            Kind::Int8Static => CopyKind::Int8Static,
        }
    }
}

pub fn run(command: Command) -> anyhow::Result<()> {
    let args = match command {
        Command::Make(args) => args,
        Command::Push(args) => return crate::push::push_model(args),
    };
    let evidence = evidence(&args)?;
    let (config, task, from) = (args.config, args.task, args.from);
    for kind in args.kind {
        let request = MakeRequest {
            config: config.clone(),
            task: task.clone(),
            from: from.clone(),
            kind: CopyKind::from(kind),
            evidence: evidence.clone(),
            python: convert::find_python(),
        };
        eprintln!("converting `{}` with {}", request.from, request.python.display());
        let bar = ProgressBar::hidden();
        let show = |length: usize, template: &str| {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.reset();
            bar.set_length(length as u64);
            bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        };
        let made = make_variant(&request, &mut |event| match event {
            MakeEvent::Calibrating { inputs } => {
                eprintln!(
                    "{inputs} inputs of the task made for the converter (to calibrate, or to time a dynamic copy)"
                )
            }
            MakeEvent::Converting(step) => eprintln!("  {step}"),
            MakeEvent::Converted(report) => said_of(&report),
            MakeEvent::Loaded { images } => show(images, "comparing top-1 {bar:30} {pos}/{len} images, {eta} left"),
            MakeEvent::Compared(done) | MakeEvent::Read(done) => bar.set_position(done as u64),
            MakeEvent::Reading { variant, pages } => {
                bar.finish_and_clear();
                show(pages, &format!("reading with {variant} {{bar:30}} {{pos}}/{{len}} pages, {{eta}} left"));
            }
        })?;
        bar.finish_and_clear();
        match &made.measured {
            Measured::Agreement(agreement) => {
                println!(
                    "{}: top-1 agreement with `{}` {:.2} % ({} of {} images)",
                    made.variant.name,
                    request.from,
                    agreement.share() * 100.0,
                    agreement.agreed,
                    agreement.images,
                );
                println!(
                    "  `{}` itself keeps its answer on {:.1} % of them when every pixel moves one level; on those the \
                     copy agrees {:.2} % ({} of {})",
                    request.from,
                    agreement.steady_share() * 100.0,
                    agreement.steady_agreement() * 100.0,
                    agreement.agreed_steady,
                    agreement.steady,
                );
                for (image, want, got) in agreement.differed.iter().take(10) {
                    println!("  differs: {image}: class {want} → {got}");
                }
            }
            Measured::Labels(score) => println!(
                "{}: top-1 {:.2} % against the labels of {} images, against {:.2} % with `{}` (they agree on {} of them)",
                made.variant.name,
                score.copy_accuracy(),
                score.images,
                score.original_accuracy(),
                request.from,
                score.agreed,
            ),
            Measured::Reading { original, copy } => println!(
                "{}: character accuracy {:.2} % (lines exact {:.1} %), against {:.2} % ({:.1} %) with `{}`, on {} pages",
                made.variant.name,
                copy.accuracy(),
                100.0 * copy.exact as f64 / copy.lines.max(1) as f64,
                original.accuracy(),
                100.0 * original.exact as f64 / original.lines.max(1) as f64,
                request.from,
                copy.pages
            ),
        }
        println!("{}: accuracy {} ({})", made.variant.name, made.variant.accuracy, made.variant.accuracy_source);
        println!(
            "written: {} and variant `{}` in {}",
            made.file.display(),
            made.variant.name,
            request.config.display()
        );
    }
    Ok(())
}

/// What the copies are judged on: labelled pages for a stage of a `read-text`
/// pipeline, the user's labelled images where given, photos otherwise.
fn evidence(args: &MakeArgs) -> anyhow::Result<Evidence> {
    let config = RuntimeConfig::from_file(&args.config)?;
    if pages::stage_of(&config, &args.task).is_some() {
        let documents = args.pages.clone().or_else(default_documents_folder).context(
            "no labelled pages: give --pages, or run `make setup`, which makes some in .modelless/documents",
        )?;
        anyhow::ensure!(documents.join("labels.jsonl").is_file(), "{}: no labels.jsonl", documents.display());
        return Ok(Evidence::Pages { documents });
    }
    let folder = args
        .photos
        .clone()
        .or_else(default_photos_folder)
        .context("no photos: give --photos, or run `make setup`, which installs some in .modelless/photos")?;
    let photos = photos::photos_in(&folder)?;
    anyhow::ensure!(!photos.is_empty(), "{}: no JPEG or PNG photos", folder.display());
    if let Some(labelled) = &args.labelled {
        return Ok(Evidence::Labelled { photos, labelled: labelled.clone() });
    }
    let most = photos::most_images(photos.len());
    if args.images > most {
        eprintln!("{} photos make at most {most} distinct images: comparing on {most}", photos.len());
    }
    Ok(Evidence::Photos { photos, images: args.images.min(most) })
}

/// What the converter said of a copy: all of it, then what was kept in float and
/// why, and why a copy slower than its original is.
fn said_of(report: &serde_json::Value) {
    eprintln!("converted: {report}");
    if let Some(why) = report["rewritten_why"].as_str() {
        eprintln!("rewritten: {why}");
    }
    if let Some(why) = report["kept_float_why"].as_str() {
        eprintln!("kept in float: {why}");
    }
    if let Some(ratio) = report["speed_ratio"].as_f64() {
        eprintln!("speed against the original (interleaved rounds): {ratio:.2}×");
    }
    if let Some(faster) = report["faster_but_less_alike"].as_str() {
        eprintln!("kept for agreement over speed: {faster}");
    }
    if let Some(why) = report["slower_because"].as_str() {
        eprintln!("warning: the copy is slower than its original: {why}");
    }
}
