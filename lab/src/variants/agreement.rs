//! How often a copy's top-1 class is its original's, over the same images, both
//! served side by side as variants of one task in this process; and how steady the
//! original's own answer is on each image, for what part of the disagreement the
//! images' own fragility explains.

use modelless::{Inputs, Runtime, Slo, Tensor};

use super::MakeError;
use super::photos::{self, MadeImage};

/// Top-1 agreement of two variants.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    /// Images both answered.
    pub images: usize,
    /// Of those, the images both gave the same top-1 class.
    pub agreed: usize,
    /// Images whose top-1 classes differed, by name, with both classes.
    pub differed: Vec<(String, usize, usize)>,
    /// Images on which the original keeps its top-1 class when every pixel value
    /// moves one level ([`photos::nudged_pair`]): those whose answer is not a near-tie
    /// that any change flips.
    pub steady: usize,
    /// Of those, the images both gave the same top-1 class.
    pub agreed_steady: usize,
}

impl Agreement {
    /// The share that agreed, 0 to 1.
    pub fn share(&self) -> f64 {
        share(self.agreed, self.images)
    }

    /// The share of images on which the original's answer is steady, 0 to 1.
    pub fn steady_share(&self) -> f64 {
        share(self.steady, self.images)
    }

    /// The share that agreed among the steady images, 0 to 1.
    pub fn steady_agreement(&self) -> f64 {
        share(self.agreed_steady, self.steady)
    }
}

/// `part` of `whole`, 0 to 1; nothing of nothing is 0.
pub(super) fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

/// Sends every image to `reference` and to `copy` of `task` (both loaded in
/// `runtime`) and compares their top-1 classes, and sends `reference` the image's
/// pixels plain and nudged one level to see whether its answer is steady;
/// `on_image` sees each image done.
pub fn top1_agreement(
    runtime: &Runtime,
    task: &str,
    reference: &str,
    copy: &str,
    images: &[MadeImage],
    on_image: &mut dyn FnMut(usize),
) -> Result<Agreement, MakeError> {
    let mut agreement = Agreement { images: 0, agreed: 0, differed: Vec::new(), steady: 0, agreed_steady: 0 };
    for (done, image) in images.iter().enumerate() {
        let (plain, nudged) = photos::nudged_pair(image)?;
        let class_of = |variant: &str, encoded: Vec<u8>| -> Result<usize, MakeError> {
            let inputs = Inputs::image(encoded);
            let output = runtime.submit_variant(task, variant, inputs, Slo::default())?.wait()?;
            let scores = output.first().ok_or_else(|| MakeError::Config(format!("`{variant}` gave no output")))?;
            top1(scores).ok_or_else(|| MakeError::Config(format!("`{variant}`'s output is not f32 scores")))
        };
        let (want, got) = (class_of(reference, image.jpeg.clone())?, class_of(copy, image.jpeg.clone())?);
        let steady = class_of(reference, plain)? == class_of(reference, nudged)?;
        agreement.images += 1;
        agreement.steady += usize::from(steady);
        if want == got {
            agreement.agreed += 1;
            agreement.agreed_steady += usize::from(steady);
        } else {
            agreement.differed.push((image.name.clone(), want, got));
        }
        on_image(done + 1);
    }
    Ok(agreement)
}

/// The index of the highest score of a one-row output.
pub(super) fn top1(scores: &Tensor) -> Option<usize> {
    let values = scores.as_slice::<f32>()?;
    values.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_class_is_the_highest_score_and_shares_count_agreements() {
        assert_eq!(top1(&Tensor::new([1, 4], vec![0.1f32, 3.0, -1.0, 2.9]).unwrap()), Some(1));
        assert_eq!(top1(&Tensor::full([1, 2], 1i64)), None);
        let agreement =
            Agreement { images: 8, agreed: 7, differed: vec![("x".into(), 1, 2)], steady: 5, agreed_steady: 5 };
        assert!((agreement.share() - 0.875).abs() < 1e-12);
        assert!((agreement.steady_share() - 0.625).abs() < 1e-12);
        assert_eq!(agreement.steady_agreement(), 1.0);
        let none = Agreement { images: 0, agreed: 0, differed: Vec::new(), steady: 0, agreed_steady: 0 };
        assert_eq!((none.share(), none.steady_share(), none.steady_agreement()), (0.0, 0.0, 0.0));
    }
}
