//! `modelless variants make` end to end on a generated model: the converter in the
//! project's Python (half precision, and int8 calibrated on the photos), the copy
//! served beside its original, the config edited; a copy measured against a user's
//! labelled images; and a copy that does not load, which is reported and not added.

use std::path::{Path, PathBuf};

use modelless::{Inputs, Runtime, RuntimeConfig, Slo};
use modelless_lab::variants::{Agreement, CopyKind, Evidence, MakeEvent, MakeRequest, Measured, convert, make_variant};

use crate::common;

/// A config with one image task answered by zoo_a (mean colour → 10 scores), its
/// models copied into `dir` so that the copy is written there.
fn config(dir: &Path) -> PathBuf {
    std::fs::copy(common::models_dir().join("zoo_a.onnx"), dir.join("zoo_a.onnx")).unwrap();
    let text = r#"# Colours.
[[tasks]]
name = "colour"

[[tasks.variants]]
name = "zoo-a"
path = "zoo_a.onnx" # the generated one
accuracy = 50.0
preprocess = { size = 8 }
"#;
    let path = dir.join("colour.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn request(config: PathBuf, python: PathBuf, kind: CopyKind) -> MakeRequest {
    let folder = common::crate_dir().join("../.modelless/photos");
    let photos = ["astronaut.png", "chelsea.png"].iter().map(|p| folder.join(p)).collect();
    let evidence = Evidence::Photos { photos, images: 24 };
    MakeRequest { config, task: "colour".into(), from: "zoo-a".into(), kind, evidence, python }
}

fn agreed(measured: &Measured) -> &Agreement {
    match measured {
        Measured::Agreement(agreement) => agreement,
        other => panic!("an image copy is judged by top-1 agreement, not {other:?}"),
    }
}

#[test]
fn a_half_precision_copy_is_measured_and_added_with_its_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let made = make_variant(&request(path.clone(), convert::find_python(), CopyKind::Fp16), &mut |_| {}).unwrap();
    let agreement = agreed(&made.measured);
    assert_eq!(agreement.images, 24);
    assert!(agreement.agreed_steady <= agreement.steady.min(agreement.agreed), "{agreement:?}");
    // The model answers by the mean colour, which pixels moved one level either way
    // barely change.
    assert!(agreement.steady >= 20, "{agreement:?}");
    assert!(agreement.share() >= 0.9, "{agreement:?}");
    let config = RuntimeConfig::from_file(&path).unwrap();
    let copy = config.tasks[0].variants.iter().find(|v| v.name == "zoo-a-fp16").expect("the copy is added");
    assert_eq!(copy.path, dir.path().join("zoo_a.fp16.onnx"));
    assert!((copy.variant_accuracy() - 50.0 * agreement.share()).abs() < 1e-3);
    let source = copy.accuracy_source.as_deref().unwrap();
    assert!(source.starts_with("estimated") && source.contains("24 distinct images"), "{source}");
    assert!(source.contains("when every pixel moves one level"), "{source}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("# Colours.") && text.contains("# the generated one"), "comments kept:\n{text}");
}

#[test]
fn an_int8_copy_is_calibrated_on_the_photos_and_says_what_it_kept_in_float() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let mut events = Vec::new();
    let request = request(path.clone(), convert::find_python(), CopyKind::Int8Static);
    let made = make_variant(&request, &mut |event| events.push(event)).unwrap();
    let calibrated = events.iter().find_map(|e| match e {
        MakeEvent::Calibrating { inputs } => Some(*inputs),
        _ => None,
    });
    assert!(calibrated.is_some_and(|n| n >= 60), "calibrated on crops of both photos: {calibrated:?}");
    let steps: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            MakeEvent::Converting(step) => Some(step.as_str()),
            _ => None,
        })
        .collect();
    assert!(steps.iter().any(|s| s.starts_with("candidate 1 of")), "the converter says its steps: {steps:?}");
    let report = events
        .iter()
        .find_map(|e| match e {
            MakeEvent::Converted(report) => Some(report.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(report["kind"], "int8-static");
    assert!(report["kept_float_why"].as_str().is_some_and(|why| !why.is_empty()), "{report}");
    assert!(report["speed_ratio"].as_f64().is_some_and(|r| r > 0.0), "{report}");
    assert!(!dir.path().join("zoo_a.int8-static.calibration").exists(), "the calibration inputs are gone");
    assert!(agreed(&made.measured).share() >= 0.8, "{:?}", made.measured);
    let config = RuntimeConfig::from_file(&path).unwrap();
    let copy = config.tasks[0].variants.iter().find(|v| v.name == "zoo-a-int8-static").expect("the copy is added");
    let source = copy.accuracy_source.as_deref().unwrap();
    assert!(source.contains("int8-static copy") && source.contains("24 distinct images"), "{source}");
}

/// The class `path`'s model gives each image, served on its own.
fn classes_given(path: &Path, images: &[Vec<u8>]) -> Vec<usize> {
    let runtime = Runtime::builder().with_config(RuntimeConfig::from_file(path).unwrap()).build().unwrap();
    let class_of = |bytes: &Vec<u8>| {
        let output = runtime.infer_task_blocking("colour", Inputs::image(bytes.clone()), Slo::default()).unwrap();
        let scores = output.first().unwrap().as_slice::<f32>().unwrap().to_vec();
        (0..scores.len()).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap()
    };
    images.iter().map(class_of).collect()
}

#[test]
fn a_copy_is_measured_against_labelled_images_where_the_user_brings_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("name = \"colour\"\n", "name = \"colour\"\nlabels = \"classes.txt\"\n");
    std::fs::write(&path, text).unwrap();
    let names: Vec<String> = (0..10).map(|i| format!("colour {i}")).collect();
    std::fs::write(dir.path().join("classes.txt"), names.join("\n")).unwrap();
    // Plain colours the model tells apart by their mean; half labelled as the
    // original answers, half one class off.
    let images: Vec<Vec<u8>> = (0..12u8)
        .map(|i| {
            let image = image::RgbImage::from_pixel(16, 16, image::Rgb([i * 21, 255 - i * 19, (i % 3) * 120]));
            let mut png = Vec::new();
            image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
            png
        })
        .collect();
    let answers = classes_given(&path, &images);
    let set = dir.path().join("labelled");
    for (i, (png, answer)) in images.iter().zip(&answers).enumerate() {
        let folder = set.join(&names[label_of(i, *answer)]);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{i}.png")), png).unwrap();
    }
    let mut request = request(path.clone(), convert::find_python(), CopyKind::Fp16);
    let Evidence::Photos { photos, .. } = request.evidence else { unreachable!() };
    request.evidence = Evidence::Labelled { photos: photos.clone(), labelled: set.clone() };
    let made = make_variant(&request, &mut |_| {}).unwrap();
    let Measured::Labels(score) = &made.measured else { panic!("judged by the labels: {:?}", made.measured) };
    assert_eq!((score.images, score.original_correct), (12, 6), "{score:?}");
    assert!(score.agreed >= 11 && score.copy_correct.abs_diff(6) <= 1, "{score:?}");
    let config = RuntimeConfig::from_file(&path).unwrap();
    let copy = config.tasks[0].variants.iter().find(|v| v.name == "zoo-a-fp16").expect("the copy is added");
    let ratio = score.copy_accuracy() / score.original_accuracy();
    assert!((copy.variant_accuracy() - 50.0 * ratio).abs() < 1e-3, "{:?}", copy.accuracy);
    let source = copy.accuracy_source.as_deref().unwrap();
    assert!(source.starts_with("measured: top-1 against the labels of 12 images"), "{source}");

    // A label the task does not know: refused before anything is made.
    let before = std::fs::read_to_string(&path).unwrap();
    let csv = dir.path().join("set.csv");
    std::fs::write(&csv, "image,label\nlabelled/a.png,colour 3\nlabelled/b.png,mauve\n").unwrap();
    request.evidence = Evidence::Labelled { photos, labelled: csv.clone() };
    let error = make_variant(&request, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("line 3") && error.contains("`mauve`"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "the config is left as it was");

    // An image that does not decode is named; labels the original never gives are
    // refused rather than turned into a ratio over nothing.
    std::fs::write(set.join("broken.png"), b"not a png").unwrap();
    std::fs::write(&csv, "labelled/broken.png,colour 3\n").unwrap();
    request.evidence = Evidence::Labelled { photos: request_photos(&request), labelled: csv.clone() };
    let error = make_variant(&request, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("labelled image") && error.contains("broken.png"), "{error}");
    let rows: Vec<String> = answers
        .iter()
        .enumerate()
        .map(|(i, answer)| format!("labelled/{}/{i}.png,{}", names[label_of(i, *answer)], (answer + 1) % 10))
        .collect();
    std::fs::write(&csv, rows.join("\n")).unwrap();
    let error = make_variant(&request, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("gets none of the 12 labelled images"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "the config is left as it was");
}

/// The class the test labels image `i` with: the original's answer for every other
/// image, one class off for the rest.
fn label_of(i: usize, answer: usize) -> usize {
    if i.is_multiple_of(2) { answer } else { (answer + 1) % 10 }
}

fn request_photos(request: &MakeRequest) -> Vec<PathBuf> {
    match &request.evidence {
        Evidence::Photos { photos, .. } | Evidence::Labelled { photos, .. } => photos.clone(),
        other => panic!("no photos in {other:?}"),
    }
}

#[test]
fn a_copy_that_does_not_load_is_reported_and_not_added() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let before = std::fs::read_to_string(&path).unwrap();
    // A converter that writes no model: `python - KIND IN OUT [CALIBRATION]`, the
    // script on stdin.
    let broken = dir.path().join("broken-python");
    std::fs::write(&broken, "#!/bin/sh\ncat >/dev/null\necho 'not a model' > \"$4\"\necho '{}'\n").unwrap();
    let mut permissions = std::fs::metadata(&broken).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&broken, permissions).unwrap();
    for (kind, name) in [(CopyKind::Fp16, "zoo-a-fp16"), (CopyKind::Int8Static, "zoo-a-int8-static")] {
        let error = make_variant(&request(path.clone(), broken.clone(), kind), &mut |_| {}).unwrap_err();
        assert!(error.to_string().contains(name), "the copy is named: {error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "the config is left as it was");
    }
}

#[test]
fn a_folded_copy_of_a_model_with_nothing_to_fold_is_refused_and_not_added() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path());
    let before = std::fs::read_to_string(&path).unwrap();
    let error = make_variant(&request(path.clone(), convert::find_python(), CopyKind::Folded), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(error.contains("nothing to fold"), "the converter says why: {error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "the config is left as it was");
    assert!(!dir.path().join("zoo_a.folded.onnx").exists(), "no copy is left");
}

/// Runs a check of the converter's in `tests/integration/data`, which says `ok`.
fn converter_check(script: &str) {
    let dir = tempfile::tempdir().unwrap();
    let check = common::crate_dir().join("tests/integration/data").join(script);
    let output = std::process::Command::new(convert::find_python())
        .arg(&check)
        .arg(common::crate_dir().join("../scripts/models"))
        .arg(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && said.starts_with("ok"), "{said}");
}

#[test]
fn biases_corrected_for_rounded_weights_give_each_output_its_float_mean() {
    converter_check("bias_correction.py");
}

#[test]
fn affine_steps_and_hard_swish_are_taken_into_the_convolutions_exactly() {
    converter_check("folding.py");
}
