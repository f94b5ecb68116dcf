//! `modelless variants make`: a copy of a task's ONNX variant in another precision,
//! checked against it on photos and added to the config as a variant of the task.

use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use modelless_lab::variants::{CopyKind, MakeEvent, MakeRequest, convert, default_photos_folder, make_variant, photos};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Make copies of VARIANT of TASK (fp16: half precision, inputs and outputs kept
    /// in fp32; int8-dynamic: int8 weights, activations quantised at run time;
    /// int8-static: QDQ int8 calibrated on crops of the photos through the variant's
    /// preprocessing), serve each beside the original here, measure how often their
    /// top-1 classes agree on distinct images made from photos, and add it to the
    /// config with the original's accuracy times that agreement (marked as
    /// estimated).
    Make(MakeArgs),
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
    /// Distinct images to compare on.
    #[arg(long, default_value_t = 500)]
    images: usize,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Fp16,
    Int8Dynamic,
    Int8Static,
}

impl From<Kind> for CopyKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Fp16 => CopyKind::Fp16,
            Kind::Int8Dynamic => CopyKind::Int8Dynamic,
            Kind::Int8Static => CopyKind::Int8Static,
        }
    }
}

pub fn run(command: Command) -> anyhow::Result<()> {
    let Command::Make(args) = command;
    let folder = args
        .photos
        .or_else(default_photos_folder)
        .context("no photos: give --photos, or run `make setup`, which installs some in .modelless/photos")?;
    let photos = photos::photos_in(&folder)?;
    anyhow::ensure!(!photos.is_empty(), "{}: no JPEG or PNG photos", folder.display());
    let most = photos::most_images(photos.len());
    if args.images > most {
        eprintln!("{} photos make at most {most} distinct images: comparing on {most}", photos.len());
    }
    let (config, task, from) = (args.config, args.task, args.from);
    for kind in args.kind {
        let request = MakeRequest {
            config: config.clone(),
            task: task.clone(),
            from: from.clone(),
            kind: CopyKind::from(kind),
            photos: photos.clone(),
            images: args.images.min(most),
            python: convert::find_python(),
        };
        eprintln!("converting `{}` with {}", request.from, request.python.display());
        let bar = ProgressBar::hidden();
        let made = make_variant(&request, &mut |event| match event {
            MakeEvent::Calibrating { inputs } => eprintln!("calibrating on {inputs} inputs made from the photos"),
            MakeEvent::Converting(step) => eprintln!("  {step}"),
            MakeEvent::Converted(report) => said_of(&report),
            MakeEvent::Loaded { images } => {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar.set_length(images as u64);
                bar.set_style(
                    ProgressStyle::with_template("comparing top-1 {bar:30} {pos}/{len} images, {eta} left")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
            }
            MakeEvent::Compared(done) => bar.set_position(done as u64),
        })?;
        bar.finish_and_clear();
        let agreement = &made.agreement;
        println!(
            "{}: top-1 agreement with `{}` {:.2} % ({} of {} images); accuracy {} ({})",
            made.variant.name,
            request.from,
            agreement.share() * 100.0,
            agreement.agreed,
            agreement.images,
            made.variant.accuracy,
            made.variant.accuracy_source
        );
        for (image, want, got) in agreement.differed.iter().take(10) {
            println!("  differs: {image}: class {want} → {got}");
        }
        println!(
            "written: {} and variant `{}` in {}",
            made.file.display(),
            made.variant.name,
            request.config.display()
        );
    }
    Ok(())
}

/// What the converter said of a copy: all of it, then what was kept in float and
/// why, and why a copy slower than its original is.
fn said_of(report: &serde_json::Value) {
    eprintln!("converted: {report}");
    if let Some(why) = report["kept_float_why"].as_str() {
        eprintln!("kept in float: {why}");
    }
    if let Some(ratio) = report["speed_ratio"].as_f64() {
        eprintln!("speed against the original (batches of 8, interleaved): {ratio:.2}×");
    }
    if let Some(why) = report["slower_because"].as_str() {
        eprintln!("warning: the copy is slower than its original: {why}");
    }
}
