//! `modelless variants make` on a stage of the `read-text` pipeline (PP-OCRv4's real
//! models, examples/read_text.toml) and the project's labelled pages: calibration
//! inputs made as the pipeline makes them, the pipeline's reading scored as
//! `scripts/bench/ocr_accuracy.py` scores it, and a copy judged by that reading.

use std::path::{Path, PathBuf};

use modelless::{Runtime, RuntimeConfig};
use modelless_lab::variants::pages::{self, Stage};
use modelless_lab::variants::reading::{self, LabelledPage};
use modelless_lab::variants::{CopyKind, Evidence, MakeRequest, Measured, convert, make_variant};

use crate::common::crate_dir;

fn example() -> RuntimeConfig {
    RuntimeConfig::from_file(crate_dir().join("../examples/read_text.toml")).unwrap()
}

fn documents() -> PathBuf {
    let dir = crate_dir().join("../.modelless/documents");
    assert!(dir.join("labels.jsonl").is_file(), "no labelled pages in {}: run scripts/setup/base.sh", dir.display());
    dir
}

fn first_pages(n: usize) -> Vec<LabelledPage> {
    reading::labelled_pages(&documents()).unwrap().into_iter().take(n).collect()
}

/// The calibration inputs written into `folder`: each one's shape, and all values.
fn written(folder: &Path) -> (Vec<Vec<usize>>, Vec<f32>) {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("meta.json")).unwrap()).unwrap();
    let shapes = serde_json::from_value(meta["shapes"].clone()).unwrap();
    let bytes = std::fs::read(folder.join("inputs.f32")).unwrap();
    (shapes, bytes.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
}

#[test]
fn each_stage_is_calibrated_on_what_the_pipeline_feeds_it() {
    let config = example();
    assert!(matches!(pages::stage_of(&config, "detect-text"), Some((_, Stage::Detect))));
    assert!(matches!(pages::stage_of(&config, "recognize-text"), Some((_, Stage::Recognize))));
    assert!(pages::stage_of(&config, "text-direction").is_none(), "no copy of the direction classifier is judged");
    let labelled = first_pages(4);
    let source = (documents(), labelled.clone());
    let source = (source.0.as_path(), source.1.as_slice());

    let (pipeline, stage) = pages::stage_of(&config, "recognize-text").unwrap();
    let rec = config.tasks.iter().find(|t| t.name == "recognize-text").unwrap().variants[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let count = pages::write_inputs(&config, (&pipeline, &stage), &rec, source, 100, dir.path()).unwrap();
    let lines: usize = labelled.iter().map(|p| p.lines.len()).sum();
    assert!(count.abs_diff(lines) <= 1, "one input a line the detector found: {count} for {lines} labelled lines");
    let (shapes, values) = written(dir.path());
    assert_eq!(shapes.len(), count);
    assert!(shapes.iter().all(|s| s[..2] == [3, 48] && s[2] >= 320), "48 rows, at least 320 wide: {shapes:?}");
    assert!(values.iter().all(|v| (-1.0..=1.0).contains(v)) && values.iter().any(|v| *v < -0.5), "normalised pixels");

    let (pipeline, stage) = pages::stage_of(&config, "detect-text").unwrap();
    let det = config.tasks.iter().find(|t| t.name == "detect-text").unwrap().variants[0].clone();
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(pages::write_inputs(&config, (&pipeline, &stage), &det, source, 2, dir.path()).unwrap(), 2);
    let (shapes, _) = written(dir.path());
    for shape in &shapes {
        let (h, w) = (shape[1], shape[2]);
        assert!(
            shape[0] == 3 && h % 32 == 0 && w % 32 == 0 && h.min(w) >= 736,
            "a whole page as det-736 sees it: {shape:?}"
        );
    }
}

#[test]
fn a_reading_is_scored_against_its_own_page_labels() {
    let runtime = Runtime::builder().with_config(example()).build().unwrap();
    let labelled = first_pages(4);
    let reading = reading::read_pages(&runtime, "read-text", &documents(), &labelled, &mut |_| {}).unwrap();
    assert_eq!(reading.pages, 4);
    assert_eq!(reading.lines, labelled.iter().map(|p| p.lines.len()).sum::<usize>());
    assert!(reading.accuracy() > 85.0, "PP-OCRv4 reads the project's pages: {reading:?}");
    // The same pages scored against other pages' labels: nothing matches.
    let mut swapped = labelled.clone();
    swapped.rotate_left(1);
    for (page, other) in swapped.iter_mut().zip(&labelled) {
        page.file.clone_from(&other.file);
    }
    let wrong = reading::read_pages(&runtime, "read-text", &documents(), &swapped, &mut |_| {}).unwrap();
    assert!(wrong.accuracy() < 50.0, "labels of other pages: {wrong:?}");
}

#[test]
fn a_recognition_copy_is_judged_by_the_pipelines_reading_of_labelled_pages() {
    let dir = tempfile::tempdir().unwrap();
    let ocr = crate_dir().join("../.modelless/ocr");
    std::fs::copy(ocr.join("rec.onnx"), dir.path().join("rec.onnx")).unwrap();
    let text = std::fs::read_to_string(crate_dir().join("../examples/read_text.toml"))
        .unwrap()
        .replace("../.modelless/ocr/rec.onnx", "rec.onnx")
        .replace("../.modelless/ocr/", &format!("{}/", ocr.display()));
    let config = dir.path().join("read_text.toml");
    std::fs::write(&config, text).unwrap();
    // Three pages and their labels.
    let pages_dir = dir.path().join("pages");
    std::fs::create_dir(&pages_dir).unwrap();
    let labels = std::fs::read_to_string(documents().join("labels.jsonl")).unwrap();
    let three: Vec<&str> = labels.lines().take(3).collect();
    std::fs::write(pages_dir.join("labels.jsonl"), three.join("\n")).unwrap();
    for page in first_pages(3) {
        std::fs::copy(documents().join(&page.file), pages_dir.join(&page.file)).unwrap();
    }
    let request = MakeRequest {
        config: config.clone(),
        task: "recognize-text".into(),
        from: "rec-v4".into(),
        kind: CopyKind::Fp16,
        evidence: Evidence::Pages { documents: pages_dir },
        python: convert::find_python(),
    };
    let made = make_variant(&request, &mut |_| {}).unwrap();
    let Measured::Reading { original, copy } = made.measured else { panic!("judged on pages: {:?}", made.measured) };
    assert_eq!((original.pages, copy.pages), (3, 3));
    assert!((copy.accuracy() - original.accuracy()).abs() < 2.0, "half precision reads alike: {original:?} {copy:?}");
    let written = RuntimeConfig::from_file(&config).unwrap();
    let task = written.tasks.iter().find(|t| t.name == "recognize-text").unwrap();
    let added = task.variants.iter().find(|v| v.name == "rec-v4-fp16").expect("the copy is added");
    assert_eq!(added.path, dir.path().join("rec.fp16.onnx"));
    let expected = 1.0 * copy.accuracy() / original.accuracy();
    assert!((added.variant_accuracy() - expected).abs() < 1e-3, "{} vs {expected}", added.variant_accuracy());
    let source = added.accuracy_source.as_deref().unwrap();
    assert!(source.starts_with("measured") && source.contains("3 labelled pages"), "{source}");
}
