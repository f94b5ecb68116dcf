//! Character accuracy of a `read-text` pipeline on labelled pages, scored as
//! `scripts/bench/ocr_accuracy.py` scores it: each read line is matched to the labelled line
//! whose box overlaps it most (intersection over union of their bounding rectangles,
//! at least 0.3), each labelled line at most once; a labelled line costs the edit
//! distance to what was read there (all its characters where nothing was), and a read
//! line matching none costs its own length.

use std::path::Path;

use modelless::pipeline::{PipelineAnswer, PipelineValue};
use modelless::{Inputs, Runtime, Slo};
use serde::Deserialize;

use super::MakeError;

/// Overlap below which a read line is not the labelled one.
const LEAST_OVERLAP: f32 = 0.3;

/// A line's box: its four corners in the page's pixels.
pub type Corners = Vec<[f32; 2]>;

/// One labelled page (a line of `labels.jsonl`).
#[derive(Clone, Debug, Deserialize)]
pub struct LabelledPage {
    /// Its file, in the documents folder.
    pub file: String,
    /// Its lines.
    pub lines: Vec<TextLine>,
}

/// A line of text and where it is.
#[derive(Clone, Debug, Deserialize)]
pub struct TextLine {
    /// Its text.
    pub text: String,
    /// Its box.
    #[serde(rename = "box")]
    pub corners: Corners,
}

/// The labelled pages of `documents` (`labels.jsonl`, one page a line).
pub fn labelled_pages(documents: &Path) -> Result<Vec<LabelledPage>, MakeError> {
    let path = documents.join("labels.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| MakeError::Io { path: path.clone(), source })?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(|e| MakeError::Config(format!("{}: {e}", path.display()))))
        .collect()
}

/// What a run read, scored against the labels.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// Pages read.
    pub pages: usize,
    /// Labelled lines on them.
    pub lines: usize,
    /// Of those, lines read exactly.
    pub exact: usize,
    /// Labelled characters.
    pub characters: usize,
    /// Characters wrong, missing or extra.
    pub errors: usize,
}

impl Reading {
    /// Character accuracy, in %.
    pub fn accuracy(&self) -> f64 {
        100.0 * (1.0 - self.errors as f64 / self.characters.max(1) as f64)
    }

    /// Adds one page: `want` labelled, `got` read.
    pub fn add(&mut self, want: &[TextLine], got: &[TextLine]) {
        let matched = matched(want, got);
        for (line, read) in want.iter().zip(&matched) {
            let text = read.map_or("", |j| got[j].text.as_str());
            self.errors += distance(&line.text, text);
            self.characters += line.text.chars().count();
            self.exact += usize::from(line.text == text);
        }
        self.lines += want.len();
        let unmatched = got.iter().enumerate().filter(|(j, _)| !matched.contains(&Some(*j)));
        self.errors += unmatched.map(|(_, line)| line.text.chars().count()).sum::<usize>();
        self.pages += 1;
    }
}

/// Reads each of `pages` (in `documents`) through `pipeline` and scores it;
/// `on_page` sees each page done.
pub fn read_pages(
    runtime: &Runtime,
    pipeline: &str,
    documents: &Path,
    pages: &[LabelledPage],
    on_page: &mut dyn FnMut(usize),
) -> Result<Reading, MakeError> {
    let mut reading = Reading::default();
    for (done, page) in pages.iter().enumerate() {
        let path = documents.join(&page.file);
        let bytes = std::fs::read(&path).map_err(|source| MakeError::Io { path, source })?;
        let answer = runtime.infer_pipeline_blocking(pipeline, Inputs::image(bytes), Slo::default())?;
        reading.add(&page.lines, &read_lines(pipeline, &answer)?);
        on_page(done + 1);
    }
    Ok(reading)
}

/// The lines of a `read-text` answer.
fn read_lines(pipeline: &str, answer: &PipelineAnswer) -> Result<Vec<TextLine>, MakeError> {
    let get = |name: &str| answer.get(name);
    let missing = |what: &str| MakeError::Config(format!("pipeline `{pipeline}` answered no {what}"));
    let texts = get("text").and_then(PipelineValue::texts).ok_or_else(|| missing("text"))?;
    let boxes = get("boxes")
        .and_then(PipelineValue::tensor)
        .and_then(|t| t.as_slice::<f32>())
        .ok_or_else(|| missing("boxes"))?;
    Ok(texts
        .iter()
        .zip(boxes.chunks(8))
        .map(|(text, quad)| TextLine { text: text.clone(), corners: quad.chunks(2).map(|p| [p[0], p[1]]).collect() })
        .collect())
}

/// For each wanted line, the index of the read line matched to it: pairs taken in
/// order of overlap, each line at most once.
fn matched(want: &[TextLine], got: &[TextLine]) -> Vec<Option<usize>> {
    let mut pairs: Vec<(f32, usize, usize)> = want
        .iter()
        .enumerate()
        .flat_map(|(i, w)| got.iter().enumerate().map(move |(j, g)| (overlap(&w.corners, &g.corners), i, j)))
        .filter(|(share, _, _)| *share >= LEAST_OVERLAP)
        .collect();
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    let mut matched = vec![None; want.len()];
    let mut taken = vec![false; got.len()];
    for (_, i, j) in pairs {
        if matched[i].is_none() && !taken[j] {
            (matched[i], taken[j]) = (Some(j), true);
        }
    }
    matched
}

/// Intersection over union of two boxes' bounding rectangles.
fn overlap(a: &Corners, b: &Corners) -> f32 {
    let rect = |c: &Corners| {
        let xs = c.iter().map(|p| p[0]);
        let ys = c.iter().map(|p| p[1]);
        (
            xs.clone().fold(f32::MAX, f32::min),
            ys.clone().fold(f32::MAX, f32::min),
            xs.fold(f32::MIN, f32::max),
            ys.fold(f32::MIN, f32::max),
        )
    };
    let ((ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1)) = (rect(a), rect(b));
    let (w, h) = (ax1.min(bx1) - ax0.max(bx0), ay1.min(by1) - ay0.max(by0));
    if w <= 0.0 || h <= 0.0 {
        return 0.0;
    }
    let inter = w * h;
    inter / ((ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter)
}

/// Edit distance (insertions, deletions, substitutions) between two texts, by
/// character.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substituted.min(row[j + 1] + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, x: f32, y: f32) -> TextLine {
        TextLine { text: text.into(), corners: vec![[x, y], [x + 100.0, y], [x + 100.0, y + 20.0], [x, y + 20.0]] }
    }

    #[test]
    fn edits_are_counted_by_character() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("é2", "e2"), 1, "a character, not a byte");
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn lines_are_matched_by_overlap_and_strays_count_as_errors() {
        let want = [line("first line", 0.0, 0.0), line("second", 0.0, 100.0), line("missed", 0.0, 200.0)];
        // Read: the second a little off and misspelt, the first exact, and a stray.
        let got = [line("secnd", 5.0, 102.0), line("first line", 0.0, 1.0), line("xy", 400.0, 400.0)];
        assert_eq!(matched(&want, &got), [Some(1), Some(0), None]);
        let mut reading = Reading::default();
        reading.add(&want, &got);
        let characters = "first line".len() + "second".len() + "missed".len();
        assert_eq!((reading.lines, reading.exact, reading.characters), (3, 1, characters));
        assert_eq!(reading.errors, 1 + 6 + 2, "one edit, a missed line, a stray line");
        assert!((reading.accuracy() - 100.0 * (1.0 - 9.0 / characters as f64)).abs() < 1e-9);
    }

    #[test]
    fn boxes_that_barely_touch_are_not_matched() {
        assert_eq!(
            overlap(&line("", 0.0, 0.0).corners, &line("", 90.0, 0.0).corners),
            10.0 * 20.0 / (2.0 * 2000.0 - 200.0)
        );
        assert_eq!(matched(&[line("a", 0.0, 0.0)], &[line("a", 90.0, 0.0)]), [None]);
        assert_eq!(overlap(&line("", 0.0, 0.0).corners, &line("", 0.0, 50.0).corners), 0.0);
    }
}
