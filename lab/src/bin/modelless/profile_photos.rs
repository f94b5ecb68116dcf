//! `modelless profile`'s second part: every image variant's capacity with whole photos
//! (decode, resize and inference on the cores they share), per size class, through a
//! runtime built from the config; stored beside the models with their profiles.

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use modelless::profile::{ImageCapacity, ImageCapacityOptions, ImageSizeClass, Profile};
use modelless::{Runtime, RuntimeConfig};
use modelless_lab::load::ImageSet;

/// Distinct photos generated per size class, sent in turn.
const PHOTOS_PER_CLASS: usize = 4;
/// Seed of the generated photos: the same photos on every machine.
const PHOTO_SEED: u64 = 500;

/// One row of the table: a variant's capacity with photos of one size class.
pub struct PhotoRow {
    variant: String,
    capacity: ImageCapacity,
    reused: bool,
}

/// Measures (or finds stored) the capacity of every variant that declares `preprocess`
/// with photos of each of `sizes`, `each` seconds per class; `force` measures again.
pub fn profile_photos(
    config: &RuntimeConfig,
    sizes: &[(u32, u32)],
    each: Duration,
    force: bool,
) -> anyhow::Result<Vec<PhotoRow>> {
    let image_tasks: Vec<(String, Vec<String>)> = config
        .tasks
        .iter()
        .map(|t| {
            (t.name.clone(), t.variants.iter().filter(|v| v.preprocess.is_some()).map(|v| v.name.clone()).collect())
        })
        .filter(|(_, variants): &(String, Vec<String>)| !variants.is_empty())
        .collect();
    if image_tasks.is_empty() || sizes.is_empty() {
        return Ok(Vec::new());
    }
    let classes: Vec<ImageSizeClass> = sizes
        .iter()
        .map(|&(w, h)| {
            let set = ImageSet::generated(&[(w, h); PHOTOS_PER_CLASS], PHOTO_SEED)?;
            Ok(ImageSizeClass { name: format!("{w}x{h}"), photos: (0..set.len()).map(|i| set.get(i).into()).collect() })
        })
        .collect::<anyhow::Result<_>>()?;
    eprintln!("photos: building the runtime of the config to measure its image variants with whole photos");
    let runtime = Runtime::builder().with_config(config.clone()).build()?;
    let options = ImageCapacityOptions { duration: each, clients: None };
    let mut rows = Vec::new();
    for (task, variants) in &image_tasks {
        let active = runtime.active_variant(task)?;
        for variant in variants {
            runtime.load_variant(task, variant)?;
            let stored = if force { None } else { runtime.image_profile(task, variant)? };
            for class in &classes {
                if let Some(capacity) = stored.as_ref().and_then(|p| p.capacity(&class.name)) {
                    rows.push(PhotoRow { variant: variant.clone(), capacity: capacity.clone(), reused: true });
                    continue;
                }
                let bar = ProgressBar::new(each.as_millis() as u64);
                bar.set_style(
                    ProgressStyle::with_template("{prefix:>30} [{bar:30}] {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                );
                bar.set_prefix(format!("{variant} {}", class.name));
                bar.set_message("photos in a closed loop");
                let capacity = runtime.measure_image_capacity(task, variant, class, &options, &mut |done, _| {
                    bar.set_position((done * 1e3) as u64)
                })?;
                bar.finish_with_message(format!("{:.1} photos/s", capacity.requests_per_s));
                rows.push(PhotoRow { variant: variant.clone(), capacity, reused: false });
            }
            if *variant != active {
                runtime.unload_variant(task, variant)?;
            }
        }
    }
    Ok(rows)
}

/// The table of `rows`, beside the tensor profiles' maximal throughput (`profiles`, by
/// variant name).
pub fn render_photos(rows: &[PhotoRow], profiles: &HashMap<String, &Profile>) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\nCapacity with whole photos: a closed loop of photos through the variant's own request path, decode, \
         resize and inference sharing the cores. This is the capacity of an image variant whose requests carry \
         photos; \"session alone\" is the tensor profile's maximal throughput above, which leaves decoding out.\n\n",
    );
    let _ = writeln!(
        s,
        "| variant | size class | photos/s | session alone req/s | ÷ session | mean batch | decode ms | resize ms | queue ms | compute ms | clients | source |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in rows {
        let c = &row.capacity;
        let alone = profiles.get(&row.variant).and_then(|p| p.max_throughput).map(|t| t.requests_per_s);
        let (alone, ratio) =
            alone.map_or(("-".into(), "-".into()), |a| (format!("{a:.1}"), format!("{:.2}", c.requests_per_s / a)));
        let source = if row.reused { "stored" } else { "measured" };
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {alone} | {ratio} | {:.1} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {source} |",
            row.variant,
            c.size_class,
            c.requests_per_s,
            c.mean_batch,
            c.decode_ms,
            c.preprocess_ms,
            c.queue_ms,
            c.compute_ms,
            c.clients
        );
    }
    s
}
