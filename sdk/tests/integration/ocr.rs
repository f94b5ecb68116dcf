//! The `read-text` pipeline on PP-OCRv4's real models (examples/read_text.toml) and the
//! project's labelled pages (scripts/data/gen_documents.py, made by scripts/setup/base.sh).

use std::sync::Arc;
use std::time::Duration;

use modelless::ocr::{Alphabet, ReadText, ReadTextConfig};
use modelless::pipeline::{PipelineAnswer, PipelineValue};
use modelless::{Error, Inputs, Runtime, RuntimeConfig, Slo};
use serde::Deserialize;

use crate::common::crate_dir;

#[derive(Deserialize)]
pub(crate) struct Page {
    pub file: String,
    pub lines: Vec<Label>,
}

#[derive(Deserialize)]
pub(crate) struct Label {
    pub text: String,
}

pub(crate) fn documents() -> std::path::PathBuf {
    let dir = crate_dir().join("../.modelless/documents");
    assert!(dir.join("labels.jsonl").is_file(), "no labelled pages in {}: run scripts/setup/base.sh", dir.display());
    dir
}

pub(crate) fn page(index: usize) -> (Vec<u8>, Page) {
    let labels = std::fs::read_to_string(documents().join("labels.jsonl")).unwrap();
    let page: Page = serde_json::from_str(labels.lines().nth(index).unwrap()).unwrap();
    (std::fs::read(documents().join(&page.file)).unwrap(), page)
}

/// The three stages and the pipeline `read-text` over them, as the example declares
/// them, its glue then set to `config`.
pub(crate) fn runtime(config: ReadTextConfig) -> Runtime {
    let runtime_config = RuntimeConfig::from_file(crate_dir().join("../examples/read_text.toml")).unwrap();
    let runtime = Runtime::builder().with_config(runtime_config).build().unwrap();
    assert_eq!(runtime.pipelines(), ["read-text"], "the config declares the pipeline");
    runtime.remove_pipeline("read-text").unwrap();
    let dictionary = std::fs::read_to_string(crate_dir().join("../.modelless/ocr/dictionary.txt")).unwrap();
    runtime.add_pipeline("read-text", Arc::new(ReadText::new(config, Alphabet::from_dictionary(&dictionary)))).unwrap();
    runtime
}

pub(crate) fn texts(answer: &PipelineAnswer) -> Vec<String> {
    answer.get("text").and_then(PipelineValue::texts).unwrap().to_vec()
}

/// Edit distance between two strings, in characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = (row[j + 1] + 1).min(row[j] + 1).min(previous + usize::from(ca != *cb));
            previous = row[j + 1];
            row[j + 1] = here;
        }
    }
    row[b.len()]
}

#[test]
fn a_rendered_page_is_read_line_by_line_top_to_bottom() {
    let runtime = runtime(ReadTextConfig::default());
    // Page 1 holds five lines, page 2 ten (the generator cycles 1, 5, 10, 25).
    for index in [1, 2] {
        let (bytes, labels) = page(index);
        let answer = runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes), Slo::default()).unwrap();
        let read = texts(&answer);
        let want: Vec<&str> = labels.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(read.len(), want.len(), "{}: read {read:?}, labelled {want:?}", labels.file);
        // PP-OCRv4's recogniser drops some spaces between words: compare without them.
        let (errors, total) = read.iter().zip(&want).fold((0, 0), |(e, t), (got, want)| {
            let (got, want) = (got.replace(' ', ""), want.replace(' ', ""));
            (e + distance(&got, &want), t + want.chars().count())
        });
        assert!(errors * 20 <= total, "{}: {errors} of {total} characters wrong: {read:?} vs {want:?}", labels.file);
        let boxes = answer.get("boxes").and_then(PipelineValue::tensor).unwrap();
        assert_eq!(boxes.shape(), &[read.len(), 4, 2]);
        let tops: Vec<f32> = boxes.as_slice::<f32>().unwrap().chunks(8).map(|quad| quad[1]).collect();
        // Top to bottom; boxes whose tops lie within 10 pixels are one line, read left to right.
        assert!(tops.windows(2).all(|w| w[0] <= w[1] + 10.0), "top to bottom: {tops:?}");
        let stages: Vec<(&str, usize)> = answer.stages.iter().map(|s| (s.task.as_str(), s.items)).collect();
        assert_eq!(stages, [("detect-text", 1), ("text-direction", want.len()), ("recognize-text", want.len())]);
    }
}

#[test]
fn a_blank_page_has_no_lines_and_a_corrupt_one_is_refused_with_its_reason() {
    let runtime = runtime(ReadTextConfig::default());
    let mut blank = Vec::new();
    image::RgbImage::from_pixel(640, 480, image::Rgb([255, 255, 255]))
        .write_to(&mut std::io::Cursor::new(&mut blank), image::ImageFormat::Png)
        .unwrap();
    let answer = runtime.infer_pipeline_blocking("read-text", Inputs::image(blank), Slo::default()).unwrap();
    assert!(texts(&answer).is_empty());
    assert_eq!(answer.stages.iter().map(|s| s.items).collect::<Vec<_>>(), [1, 0, 0], "fan-out 0");
    let (mut bytes, _) = page(1);
    bytes.truncate(bytes.len() / 3);
    match runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes), Slo::default()) {
        Err(Error::InvalidInput { model, reason }) => {
            assert_eq!(model, "read-text");
            assert!(reason.contains("decode"), "{reason}");
        }
        other => panic!("a truncated page: {other:?}"),
    }
}

#[test]
fn a_page_over_the_line_limit_answers_its_first_lines_and_says_so() {
    let runtime = runtime(ReadTextConfig { max_lines: 3, ..ReadTextConfig::default() });
    let (bytes, labels) = page(2);
    let answer = runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes), Slo::default()).unwrap();
    let read = texts(&answer);
    assert_eq!(read.len(), 3);
    assert_eq!(read[0].replace(' ', ""), labels.lines[0].text.replace(' ', ""));
    let truncated = answer.get("truncated").and_then(PipelineValue::tensor).unwrap();
    assert_eq!(truncated.as_slice::<u8>().unwrap(), &[1]);
}

#[test]
fn a_deadline_shorter_than_the_page_is_priced_at_is_refused_before_detection() {
    let runtime = runtime(ReadTextConfig::default());
    let (bytes, _) = page(3);
    // The first page prices detection per pixel: the same page is then known to need
    // several hundred ms of it on a CPU, more than what decoding it leaves of 300 ms.
    runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes.clone()), Slo::default()).unwrap();
    let slo = Slo::default().with_latency(Duration::from_millis(300));
    match runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes), slo) {
        Err(Error::WouldMissDeadline { model, predicted, left, .. }) => {
            assert_eq!(model, "read-text/detect-text");
            assert!(predicted > left, "predicted {predicted:?}, left {left:?}");
        }
        other => panic!("a 300 ms deadline: {other:?}"),
    }
}

#[test]
fn the_two_halves_read_what_the_whole_pipeline_reads() {
    use modelless::ocr::{FindLines, LinePadding, ReadLine};
    // Padded by steps, a line's recognition input does not depend on the page's other
    // lines, which `read-line` does not see.
    let config = ReadTextConfig { padding: LinePadding::Steps, ..ReadTextConfig::default() };
    let runtime = runtime(config.clone());
    let dictionary = std::fs::read_to_string(crate_dir().join("../.modelless/ocr/dictionary.txt")).unwrap();
    let glue = || ReadText::new(config.clone(), Alphabet::from_dictionary(&dictionary));
    runtime.add_pipeline("find-lines", Arc::new(FindLines(glue()))).unwrap();
    runtime.add_pipeline("read-line", Arc::new(ReadLine(glue()))).unwrap();
    let (bytes, _) = page(2);
    let whole =
        texts(&runtime.infer_pipeline_blocking("read-text", Inputs::image(bytes.clone()), Slo::default()).unwrap());
    let found = runtime.infer_pipeline_blocking("find-lines", Inputs::image(bytes), Slo::default()).unwrap();
    let Some(PipelineValue::Bytes(lines)) = found.get("lines") else { panic!("no lines: {found:?}") };
    assert_eq!(found.get("boxes").and_then(PipelineValue::tensor).unwrap().shape(), &[lines.len(), 4, 2]);
    assert_eq!(found.stages.iter().map(|s| s.task.as_str()).collect::<Vec<_>>(), ["detect-text"]);
    let halves: Vec<String> = lines
        .iter()
        .map(|png| {
            let read =
                runtime.infer_pipeline_blocking("read-line", Inputs::image(png.clone()), Slo::default()).unwrap();
            texts(&read).remove(0)
        })
        .filter(|text| !text.is_empty())
        .collect();
    assert_eq!(halves, whole, "each line read alone, from its PNG, as the whole pipeline reads it");
}

#[test]
fn the_recogniser_is_profiled_on_lines_as_wide_as_its_config_says() {
    use modelless::VariantConfig;
    use modelless::backend::Batch;
    use modelless_runtime::{registry::profiling_factory, warmup::zero_batch};

    let config = RuntimeConfig::from_file(crate_dir().join("../examples/read_text.toml")).unwrap();
    let recogniser = config.tasks.iter().flat_map(|t| &t.variants).find(|v| v.name == "rec-v4").unwrap();
    assert_eq!(recogniser.profile_shapes.get("x"), Some(&vec![3, 48, 320]));
    let mut backend = profiling_factory(recogniser, &recogniser.path, &config.onnxruntime)().unwrap();
    let inputs = zero_batch(backend.metadata(), 2).expect("every side of the line has a size");
    let steps = &backend.infer(Batch { inputs }).unwrap().outputs[0];
    assert_eq!(steps.shape()[..2], [2, 320 / 8], "one step per 8 pixels of the line's width");
    let unshaped = VariantConfig { profile_shapes: Default::default(), ..recogniser.clone() };
    let backend = profiling_factory(&unshaped, &unshaped.path, &config.onnxruntime)().unwrap();
    assert!(zero_batch(backend.metadata(), 2).is_none(), "without the shape a line's width is open");
}

#[test]
fn the_detector_is_profiled_on_a_typical_page() {
    use modelless_runtime::{registry::profiling_factory, warmup::zero_batch};

    let config = RuntimeConfig::from_file(crate_dir().join("../examples/read_text.toml")).unwrap();
    let detector = config.tasks.iter().flat_map(|t| &t.variants).find(|v| v.name == "det-736").unwrap();
    let backend = profiling_factory(detector, &detector.path, &config.onnxruntime)().unwrap();
    let pages = zero_batch(backend.metadata(), 1).expect("a page's sides have a size");
    assert_eq!(pages[0].shape(), [1, 3, 1056, 736], "a portrait page, its shorter side 736");
}
