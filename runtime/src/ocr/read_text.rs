//! The `read-text` pipeline's glue: a page in, its lines' text, boxes and scores out.
//!
//! 1. The page is decoded once, within the decode limits, and sent as pixels to the
//!    detection task, whose variants resize it (`shorter_side_multiple32`) and
//!    normalise it their own way: their probability map becomes boxes in the page's
//!    pixels ([`super::detect`]).
//! 2. Each box is cut out upright ([`super::lines`]). With a direction task, each line
//!    (48 × 192) is turned half round where the classifier is sure it is upside down.
//! 3. Each line goes to the recognition task at 48 rows, padded as [`LinePadding`]
//!    says: lines of equal padded width, of this page and of every page in flight,
//!    share batches. Greedy CTC decoding gives the text; lines scored below
//!    `text_score` are left out.
//!
//! A page with more lines than `max_lines` is answered with its first `max_lines` in
//! reading order, and the answer says so (`truncated`): a client gets what fitted its
//! deadline's budget rather than nothing.

use bytes::Bytes;
use image::RgbImage;

use super::ctc::Alphabet;
use super::detect::{DbConfig, boxes};
use super::geometry::Quad;
use super::lines::{LINE_HEIGHT, RgbPixels, cut, line_input, scaled_width};
use crate::backend::TensorSpec;
use crate::error::{BackendError, Cause, Error};
use crate::preprocess::{DecodeLimits, Decoded, decode};
use crate::registry::{PipelineGlue, PipelineOutput, PipelineSignature, PipelineValue, Stages};
use crate::request::{ImageData, Inputs};
use crate::tensor::{DType, ShapeError, Tensor};

/// Recognition inputs are this much wider than needed at most.
pub const WIDTH_STEP: usize = 64;
/// The narrowest recognition input (PP-OCR's 48 × 320).
pub const MIN_LINE_WIDTH: usize = 320;
/// The direction classifier's input width.
pub const DIRECTION_WIDTH: usize = 192;

/// How wide the recogniser's input for a line is. Its columns beyond the line are
/// zeros, and the recogniser reads a line differently at another width (a space more
/// or less, mostly), so the choice is between RapidOCR's text and less padding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinePadding {
    /// As RapidOCR and PaddleOCR pad: a page's lines sorted by aspect ratio, taken
    /// `PAGE_GROUP` at a time, each group as wide as the widest of it (at least
    /// `MIN_LINE_WIDTH`). Lines read as they read them.
    #[default]
    PageGroups,
    /// Each line its own width rounded up to a multiple of `WIDTH_STEP` (at least
    /// `MIN_LINE_WIDTH`): padded by less than a step, and lines of different pages
    /// meet in the same widths more often.
    Steps,
}

/// Lines padded alike under [`LinePadding::PageGroups`] (RapidOCR's `rec_batch_num`).
pub const PAGE_GROUP: usize = 6;

/// The pipeline's stages and settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadTextConfig {
    /// The detection task (page pixels in, probability map `[1, 1, H, W]` out).
    pub detect: String,
    /// The direction task (`[N, 3, 48, 192]` in, `[N, 2]` out: upright, upside down), if any.
    pub direction: Option<String>,
    /// The recognition task (`[N, 3, 48, W]` in, `[N, T, classes]` out).
    pub recognize: String,
    /// How boxes are drawn from the map.
    pub db: DbConfig,
    /// Lines whose recognition scores below this are left out.
    pub text_score: f32,
    /// A line is turned when the classifier says "upside down" above this.
    pub direction_threshold: f32,
    /// Lines answered per page, at most.
    pub max_lines: usize,
    /// How the recogniser's inputs are padded.
    pub padding: LinePadding,
    /// Limits on the pages decoded.
    pub limits: DecodeLimits,
}

impl Default for ReadTextConfig {
    fn default() -> Self {
        ReadTextConfig {
            detect: "detect-text".into(),
            direction: Some("text-direction".into()),
            recognize: "recognize-text".into(),
            db: DbConfig::default(),
            text_score: 0.5,
            direction_threshold: 0.9,
            max_lines: 100,
            padding: LinePadding::default(),
            limits: DecodeLimits::default(),
        }
    }
}

/// The glue, with the recogniser's alphabet.
#[derive(Debug)]
pub struct ReadText {
    config: ReadTextConfig,
    alphabet: Alphabet,
}

/// One line read.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Its text.
    pub text: String,
    /// Its box in the page's pixels: top left, top right, bottom right, bottom left.
    pub quad: [[f32; 2]; 4],
    /// The recogniser's confidence.
    pub score: f32,
}

impl ReadText {
    /// The glue for `config`, decoding with `alphabet` (the recognition model's dictionary).
    pub fn new(config: ReadTextConfig, alphabet: Alphabet) -> Self {
        ReadText { config, alphabet }
    }

    /// Its settings.
    pub fn config(&self) -> &ReadTextConfig {
        &self.config
    }

    /// Reads `page`; `truncated` when it held more than `max_lines` lines.
    pub fn read(&self, page: &ImageData, stages: &mut Stages<'_>) -> Result<(Vec<Line>, bool), Error> {
        let (found, lines, truncated) = self.find(page, stages)?;
        let read = self.recognise(lines, stages)?;
        let lines = read
            .into_iter()
            .zip(&found)
            .filter_map(|(read, quad)| {
                let (text, score) = read?;
                Some(Line { text, quad: quad.map(|p| [p.x, p.y]), score })
            })
            .collect();
        Ok((lines, truncated))
    }

    /// The first half: `page`'s text boxes in reading order (at most `max_lines`), each
    /// line cut out upright; `truncated` when there were more.
    pub fn find(&self, page: &ImageData, stages: &mut Stages<'_>) -> Result<(Vec<Quad>, Vec<RgbImage>, bool), Error> {
        let pipeline = stages.pipeline().to_string();
        let invalid = |reason: String| Error::InvalidInput { model: pipeline.clone(), reason };
        // Decoded once; the detection stage and the cuts share the pixels.
        let (width, height, pixels) = decoded(page, &self.config.limits).map_err(invalid)?;
        let page = RgbPixels::from_raw(width, height, &pixels[..])
            .ok_or_else(|| invalid(format!("{width}x{height} pixels do not fill the image")))?;
        let image = ImageData::Rgb { width, height, pixels: pixels.clone() };
        let detected = stages.run(&self.config.detect, vec![Inputs::image(image)])?;
        let map = detected
            .first()
            .and_then(|answer| answer.first())
            .ok_or_else(|| self.stage_fault("detection", "no map"))?;
        let (map_h, map_w) = match map.shape() {
            [_, _, h, w] => (*h, *w),
            other => return Err(self.stage_fault("detection", format!("a map of shape {other:?}, not [1, 1, H, W]"))),
        };
        let values = map.as_slice::<f32>().ok_or_else(|| self.stage_fault("detection", "a map not of f32"))?;
        let mut found = boxes(values, map_w, map_h, (width, height), &self.config.db)
            .map_err(|e| self.stage_error("detection", e))?;
        let truncated = found.len() > self.config.max_lines;
        found.truncate(self.config.max_lines);
        let lines: Vec<RgbImage> = found.iter().map(|b| cut(&page, &b.quad)).collect();
        Ok((found.into_iter().map(|b| b.quad).collect(), lines, truncated))
    }

    /// The second half: each upright line turned where it is upside down, then read;
    /// `None` for a line read with no text or scored below `text_score`.
    pub fn recognise(
        &self,
        mut lines: Vec<RgbImage>,
        stages: &mut Stages<'_>,
    ) -> Result<Vec<Option<(String, f32)>>, Error> {
        if let Some(direction) = &self.config.direction {
            self.turn_upside_down(direction, &mut lines, stages)?;
        }
        let items = recognition_inputs(&lines, self.config.padding)
            .map_err(|e| self.stage_error("recognition", e))?
            .into_iter()
            .map(Inputs::from)
            .collect();
        let recognised = stages.run(&self.config.recognize, items)?;
        let mut read = Vec::with_capacity(recognised.len());
        for answer in &recognised {
            let steps = answer.first().ok_or_else(|| self.stage_fault("recognition", "no output"))?;
            let (t, classes) = match steps.shape() {
                [_, t, c] => (*t, *c),
                other => return Err(self.stage_fault("recognition", format!("an output of shape {other:?}"))),
            };
            if classes != self.alphabet.classes() {
                let why = format!("{classes} classes where the dictionary has {}", self.alphabet.classes());
                return Err(self.stage_fault("recognition", why));
            }
            let probabilities = steps.as_slice::<f32>().ok_or_else(|| self.stage_fault("recognition", "not f32"))?;
            let decoded = self.alphabet.decode(probabilities, t);
            let kept = decoded.score >= self.config.text_score && !decoded.text.is_empty();
            read.push(kept.then_some((decoded.text, decoded.score)));
        }
        Ok(read)
    }

    fn turn_upside_down(&self, task: &str, lines: &mut [RgbImage], stages: &mut Stages<'_>) -> Result<(), Error> {
        let items = lines
            .iter()
            .map(|line| {
                Tensor::new([1, 3, LINE_HEIGHT, DIRECTION_WIDTH], line_input(line, DIRECTION_WIDTH)).map(Inputs::from)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.stage_error("direction", e))?;
        for (line, answer) in lines.iter_mut().zip(stages.run(task, items)?) {
            let probabilities = answer.first().and_then(|t| t.as_slice::<f32>()).unwrap_or_default();
            if let [upright, upside_down] = probabilities
                && upside_down > upright
                && *upside_down > self.config.direction_threshold
            {
                image::imageops::rotate180_in_place(line);
            }
        }
        Ok(())
    }

    /// A stage answered with something the glue cannot read: its model is not what
    /// the pipeline's configuration says it is. A server fault, not the caller's.
    fn stage_fault(&self, stage: &'static str, what: impl Into<String>) -> Error {
        self.fault(BackendError::StageAnswer { stage, what: what.into(), source: None })
    }

    /// A stage's answer met `error` while the glue read it.
    fn stage_error(&self, stage: &'static str, error: impl std::error::Error + Send + Sync + 'static) -> Error {
        let what = "what could not be read".to_string();
        self.fault(BackendError::StageAnswer { stage, what, source: Some(Cause::new(error)) })
    }

    /// The answer could not be put together from what the stages gave.
    pub(super) fn join_fault(&self, error: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.stage_error("join", error)
    }

    /// `error` as the failure of the stage's task (of the glue itself for `join`).
    fn fault(&self, error: BackendError) -> Error {
        let model = match &error {
            BackendError::StageAnswer { stage: "detection", .. } => self.config.detect.clone(),
            BackendError::StageAnswer { stage: "recognition", .. } => self.config.recognize.clone(),
            BackendError::StageAnswer { stage: "direction", .. } => self.config.direction.clone().unwrap_or_default(),
            _ => "read-text".into(),
        };
        Error::Backend { model, source: std::sync::Arc::new(error) }
    }
}

/// The request's one image, or why there is none (`what` names it).
pub(super) fn the_image(request: Inputs, stages: &Stages<'_>, what: &str) -> Result<ImageData, Error> {
    request.images.into_iter().flat_map(|(_, images)| images).next().ok_or_else(|| Error::InvalidInput {
        model: stages.pipeline().to_string(),
        reason: format!("{what} is needed (BYTES, JPEG or PNG)"),
    })
}

/// An image's pixels: decoded within `limits`, or as given.
pub(super) fn decoded(image: &ImageData, limits: &DecodeLimits) -> Result<(u32, u32, Bytes), String> {
    match image {
        ImageData::Encoded(bytes) => {
            let Decoded { width, height, rgb, .. } = decode(bytes, limits, None).map_err(|e| e.to_string())?;
            Ok((width, height, Bytes::from(rgb)))
        }
        ImageData::Rgb { width, height, pixels } => Ok((*width, *height, pixels.clone())),
    }
}

/// The recognition input width for a line `width` wide at 48 rows under
/// [`LinePadding::Steps`].
pub fn batch_width(width: usize) -> usize {
    (width.div_ceil(WIDTH_STEP).max(1) * WIDTH_STEP).max(MIN_LINE_WIDTH)
}

/// The recogniser's input for each of a page's upright `lines` (`[1, 3, 48, width]`),
/// padded under `padding` as the glue sends them.
pub fn recognition_inputs(lines: &[RgbImage], padding: LinePadding) -> Result<Vec<Tensor>, ShapeError> {
    lines
        .iter()
        .zip(padded_widths(lines, padding))
        .map(|(line, width)| Tensor::new([1, 3, LINE_HEIGHT, width], line_input(line, width)))
        .collect()
}

/// Each of `lines`' recognition input width under `padding`.
pub fn padded_widths(lines: &[RgbImage], padding: LinePadding) -> Vec<usize> {
    match padding {
        LinePadding::Steps => lines.iter().map(|line| batch_width(scaled_width(line))).collect(),
        LinePadding::PageGroups => {
            let ratio = |line: &RgbImage| f64::from(line.width()) / f64::from(line.height().max(1));
            let mut by_ratio: Vec<usize> = (0..lines.len()).collect();
            by_ratio.sort_by(|&a, &b| ratio(&lines[a]).total_cmp(&ratio(&lines[b])));
            let mut widths = vec![0; lines.len()];
            for group in by_ratio.chunks(PAGE_GROUP) {
                let widest =
                    group.iter().map(|&i| ratio(&lines[i])).fold(MIN_LINE_WIDTH as f64 / LINE_HEIGHT as f64, f64::max);
                let width = (LINE_HEIGHT as f64 * widest) as usize;
                group.iter().for_each(|&i| widths[i] = width);
            }
            widths
        }
    }
}

impl PipelineGlue for ReadText {
    fn stages(&self) -> Vec<String> {
        let mut stages = vec![self.config.detect.clone()];
        stages.extend(self.config.direction.clone());
        stages.push(self.config.recognize.clone());
        stages
    }

    /// A page in (`image`); `text` (BYTES `[N]`), `boxes` (FP32 `[N, 4, 2]`: top left,
    /// top right, bottom right, bottom left, in the page's pixels), `scores` (FP32
    /// `[N]`) and `truncated` (UINT8 `[1]`) out.
    fn signature(&self) -> PipelineSignature {
        PipelineSignature {
            image_input: "image".into(),
            outputs: vec![
                PipelineOutput::Texts("text".into()),
                PipelineOutput::Tensor(TensorSpec::new("boxes", DType::F32, [None, Some(4), Some(2)])),
                PipelineOutput::Tensor(TensorSpec::new("scores", DType::F32, [None])),
                PipelineOutput::Tensor(TensorSpec::new("truncated", DType::U8, [Some(1)])),
            ],
        }
    }

    fn answer(&self, request: Inputs, stages: &mut Stages<'_>) -> Result<Vec<(String, PipelineValue)>, Error> {
        let page = the_image(request, stages, "a page image")?;
        let (lines, truncated) = self.read(&page, stages)?;
        let n = lines.len();
        let quads: Vec<f32> = lines.iter().flat_map(|l| l.quad.iter().flatten().copied()).collect();
        let scores: Vec<f32> = lines.iter().map(|l| l.score).collect();
        let tensor = |shape: Vec<usize>, values: Vec<f32>| {
            Tensor::new(shape, values).map(PipelineValue::Tensor).map_err(|e| self.join_fault(e))
        };
        let flag =
            Tensor::new([1], vec![u8::from(truncated)]).map(PipelineValue::Tensor).map_err(|e| self.join_fault(e))?;
        Ok(vec![
            ("text".into(), PipelineValue::Texts(lines.into_iter().map(|l| l.text).collect())),
            ("boxes".into(), tensor(vec![n, 4, 2], quads)?),
            ("scores".into(), tensor(vec![n], scores)?),
            ("truncated".into(), flag),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_answer_the_glue_cannot_read_is_the_stage_models_fault_with_its_cause() {
        let glue = ReadText::new(ReadTextConfig::default(), Alphabet::from_dictionary("a\nb"));
        let shapeless = Tensor::new([2, 2], vec![0.0f32; 3]).unwrap_err();
        let fault = glue.stage_error("recognition", shapeless.clone());
        assert_eq!(fault.kind(), crate::ErrorKind::Backend, "a server fault, never the caller's: {fault}");
        let Error::Backend { model, source } = &fault else { panic!("{fault:?}") };
        assert_eq!(model, &glue.config().recognize);
        let cause = std::error::Error::source(source.as_ref()).and_then(|s| s.downcast_ref::<Cause>());
        assert_eq!(cause.and_then(|c| c.downcast_ref::<crate::tensor::ShapeError>()), Some(&shapeless));
        let described = glue.stage_fault("detection", "no map");
        assert!(matches!(&described, Error::Backend { model, .. } if *model == glue.config().detect), "{described}");
    }

    #[test]
    fn lines_are_padded_to_the_next_step_and_never_below_the_narrowest_input() {
        assert_eq!(batch_width(10), MIN_LINE_WIDTH);
        assert_eq!(batch_width(321), 384);
        assert_eq!(batch_width(384), 384);
        assert_eq!(batch_width(1000), 1024);
    }

    #[test]
    fn page_groups_pad_six_lines_of_like_aspect_to_the_widest_of_them() {
        // Eight lines 30 rows high; at 48 rows they are 1.6 × as wide.
        let widths = [100, 400, 250, 600, 150, 500, 300, 700];
        let lines: Vec<RgbImage> = widths.iter().map(|&w| RgbImage::new(w, 30)).collect();
        let padded = padded_widths(&lines, LinePadding::PageGroups);
        // By aspect: 100, 150, 250, 300, 400, 500 pad to 500 · 1.6 = 800; then 600 and
        // 700 to 700 · 1.6 = 1120.
        assert_eq!(padded, vec![800, 800, 800, 1120, 800, 800, 800, 1120]);
        // A group of narrow lines still takes the narrowest input.
        let narrow = [RgbImage::new(40, 30), RgbImage::new(60, 30)];
        assert_eq!(padded_widths(&narrow, LinePadding::PageGroups), vec![MIN_LINE_WIDTH; 2]);
        // Steps pad each line on its own.
        assert_eq!(padded_widths(&lines[..2], LinePadding::Steps), vec![MIN_LINE_WIDTH, 640]);
    }
}
