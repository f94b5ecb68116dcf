//! `read-text` cut in two, for stages that run in different servers (a broker carries
//! the lines between them): `find-lines` answers a page's lines as upright cuts,
//! PNG-encoded, with their boxes; `read-line` reads one such cut (direction, then
//! recognition). Together they answer what `read-text` answers.

use std::io::Cursor;

use image::{ImageFormat, RgbImage};

use super::read_text::{ReadText, decoded, the_image};
use crate::backend::TensorSpec;
use crate::error::Error;
use crate::registry::{PipelineGlue, PipelineOutput, PipelineSignature, PipelineValue, Stages};
use crate::request::Inputs;
use crate::tensor::{DType, Tensor};

/// The first half: a page in; `lines` (BYTES `[N]`, each line's upright cut as PNG),
/// `boxes` (FP32 `[N, 4, 2]`) and `truncated` (UINT8 `[1]`) out. Runs the detection
/// task only.
#[derive(Debug)]
pub struct FindLines(pub ReadText);

/// The second half: one line's upright cut in; `text` (BYTES `[1]`, empty where
/// nothing was read) and `scores` (FP32 `[1]`) out. Runs the direction and
/// recognition tasks.
#[derive(Debug)]
pub struct ReadLine(pub ReadText);

impl PipelineGlue for FindLines {
    fn stages(&self) -> Vec<String> {
        vec![self.0.config().detect.clone()]
    }

    fn signature(&self) -> PipelineSignature {
        PipelineSignature {
            image_input: "image".into(),
            outputs: vec![
                PipelineOutput::Texts("lines".into()),
                PipelineOutput::Tensor(TensorSpec::new("boxes", DType::F32, [None, Some(4), Some(2)])),
                PipelineOutput::Tensor(TensorSpec::new("truncated", DType::U8, [Some(1)])),
            ],
        }
    }

    fn answer(&self, request: Inputs, stages: &mut Stages<'_>) -> Result<Vec<(String, PipelineValue)>, Error> {
        let page = the_image(request, stages, "a page image")?;
        let (quads, lines, truncated) = self.0.find(&page, stages)?;
        let mut encoded = Vec::with_capacity(lines.len());
        for line in &lines {
            let mut png = Vec::new();
            line.write_to(&mut Cursor::new(&mut png), ImageFormat::Png).map_err(|e| self.0.join_fault(e))?;
            encoded.push(png);
        }
        let n = quads.len();
        let corners: Vec<f32> = quads.iter().flat_map(|q| q.iter().flat_map(|p| [p.x, p.y])).collect();
        Ok(vec![
            ("lines".into(), PipelineValue::Bytes(encoded)),
            ("boxes".into(), PipelineValue::Tensor(Tensor::new([n, 4, 2], corners).map_err(|e| self.0.join_fault(e))?)),
            (
                "truncated".into(),
                PipelineValue::Tensor(Tensor::new([1], vec![u8::from(truncated)]).map_err(|e| self.0.join_fault(e))?),
            ),
        ])
    }
}

impl PipelineGlue for ReadLine {
    fn stages(&self) -> Vec<String> {
        let config = self.0.config();
        config.direction.iter().cloned().chain([config.recognize.clone()]).collect()
    }

    fn signature(&self) -> PipelineSignature {
        PipelineSignature {
            image_input: "image".into(),
            outputs: vec![
                PipelineOutput::Texts("text".into()),
                PipelineOutput::Tensor(TensorSpec::new("scores", DType::F32, [Some(1)])),
            ],
        }
    }

    fn answer(&self, request: Inputs, stages: &mut Stages<'_>) -> Result<Vec<(String, PipelineValue)>, Error> {
        let line = the_image(request, stages, "a line image")?;
        let pipeline = stages.pipeline().to_string();
        let invalid = |reason: String| Error::InvalidInput { model: pipeline.clone(), reason };
        let (width, height, pixels) = decoded(&line, &self.0.config().limits).map_err(invalid)?;
        let line = RgbImage::from_raw(width, height, pixels.to_vec())
            .ok_or_else(|| invalid(format!("{width}x{height} pixels do not fill the image")))?;
        let read = self.0.recognise(vec![line], stages)?.pop().flatten();
        let (text, score) = read.unwrap_or_default();
        Ok(vec![
            ("text".into(), PipelineValue::Texts(vec![text])),
            ("scores".into(), PipelineValue::Tensor(Tensor::new([1], vec![score]).map_err(|e| self.0.join_fault(e))?)),
        ])
    }
}
