//! What a pipeline's stages cost, learnt from their answers: seconds of work per unit
//! of an item's size (pixels of an image, elements of a tensor), so that a page is
//! priced by its pixels before detection and its lines by their crops before
//! recognition, and a request that cannot make its deadline is refused before the
//! stage runs rather than failing late.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::request::{ImageData, Inputs, Output};

/// How much a new answer moves a stage's price.
const WEIGHT: f64 = 0.2;

/// The size of one item: the pixels of its images (the bytes of one still encoded)
/// and the elements of its tensors.
pub fn units(item: &Inputs) -> f64 {
    let images: u64 = item
        .images
        .iter()
        .flat_map(|(_, images)| images)
        .map(|image| match image {
            ImageData::Encoded(bytes) => bytes.len() as u64,
            ImageData::Rgb { width, height, .. } => u64::from(*width) * u64::from(*height),
        })
        .sum();
    let elements: u64 = item.tensors.iter().map(|(_, t)| t.data().len() as u64).sum();
    (images + elements).max(1) as f64
}

/// The work an answer stood for: its preprocessing and its share of its batch's run.
fn work(answer: &Output) -> Duration {
    let t = &answer.timings;
    t.preprocess + (t.compute_input + t.compute + t.postprocess) / answer.batch_size.max(1) as u32
}

/// Each stage's seconds per unit, by task.
#[derive(Debug, Default)]
pub struct StagePrices {
    per_unit_s: Mutex<HashMap<String, f64>>,
}

impl StagePrices {
    /// The predicted work of `units` units through `task`; `None` before it answered.
    pub fn predict(&self, task: &str, units: f64) -> Option<Duration> {
        let prices = self.per_unit_s.lock().unwrap_or_else(PoisonError::into_inner);
        prices.get(task).map(|s| Duration::from_secs_f64((s * units).max(0.0)))
    }

    /// Learns from the answers to items of `units` units each.
    pub fn learn(&self, task: &str, units: &[f64], answers: &[Output]) {
        let mut prices = self.per_unit_s.lock().unwrap_or_else(PoisonError::into_inner);
        for (units, answer) in units.iter().zip(answers) {
            let sample = work(answer).as_secs_f64() / units.max(1.0);
            prices.entry(task.to_string()).and_modify(|s| *s += WEIGHT * (sample - *s)).or_insert(sample);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::request::Timings;
    use crate::tensor::Tensor;

    fn answer(compute_ms: u64, batch_size: usize) -> Output {
        Output {
            names: Arc::from(vec!["y".to_string()]),
            tensors: vec![],
            model: Arc::from("v"),
            version: 1,
            task: None,
            labels: None,
            batch_size,
            timings: Timings { compute: Duration::from_millis(compute_ms), ..Timings::default() },
        }
    }

    #[test]
    fn an_item_is_as_large_as_its_pixels_and_elements() {
        let page = ImageData::Rgb { width: 20, height: 10, pixels: bytes::Bytes::from(vec![0; 600]) };
        assert_eq!(units(&Inputs::image(page)), 200.0);
        assert_eq!(units(&Inputs::from(Tensor::new([1, 3, 4], vec![0f32; 12]).unwrap())), 12.0);
    }

    #[test]
    fn a_stage_is_priced_by_its_share_of_each_batch_per_unit() {
        let prices = StagePrices::default();
        assert_eq!(prices.predict("rec", 100.0), None, "nothing known before an answer");
        // Four items of 100 units in one batch that ran 40 ms: 10 ms each, 0.1 ms a unit.
        let batch: Vec<Output> = (0..4).map(|_| answer(40, 4)).collect();
        prices.learn("rec", &[100.0; 4], &batch);
        let predicted = prices.predict("rec", 300.0).unwrap();
        assert!((predicted.as_secs_f64() - 0.030).abs() < 1e-6, "{predicted:?}");
        assert_eq!(prices.predict("det", 1.0), None, "each stage is priced on its own");
    }
}
