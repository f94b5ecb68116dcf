//! What a request may claim, checked before anything is allocated for it: a tensor's
//! shape against the server's limits and against the model's own inputs (fixed
//! dimensions must match, the batch dimension is bounded by the rows the model takes),
//! so that no size a peer sends reaches an allocator unchecked.

use super::status::ServeError;
use super::tensors::{self, Claim};
use crate::backend::TensorSpec;
use crate::tensor::DType;

/// The server's limits on every request, from its config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Largest message or body, in bytes (`max_message_mib`).
    pub max_message_bytes: usize,
    /// Most elements one tensor may claim (`max_tensor_elements`).
    pub max_tensor_elements: usize,
    /// Most tensors one request may name (`max_request_tensors`).
    pub max_request_tensors: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        super::ServerConfig::default().request_limits()
    }
}

impl RequestLimits {
    /// Refuses a request naming more than `max_request_tensors` tensors of a kind.
    pub fn check_count(&self, what: &str, count: usize) -> Result<(), ServeError> {
        if count > self.max_request_tensors {
            return Err(ServeError::too_large(format!(
                "{count} {what} in one request, over the server's max_request_tensors of {}",
                self.max_request_tensors
            )));
        }
        Ok(())
    }
}

/// Most dimensions a tensor may have.
pub const MAX_RANK: usize = 32;

/// What one model takes, for checking claims before decoding them.
#[derive(Clone, Debug)]
pub struct InputBounds {
    /// Its inputs.
    pub inputs: Vec<TensorSpec>,
    /// Whether dimension 0 is the batch (the model's is open everywhere).
    pub batched: bool,
    /// Most rows one request may hold, where dimension 0 is the batch.
    pub max_rows: usize,
    /// The server's limits.
    pub limits: RequestLimits,
    /// The input that takes images as BYTES (one encoded image per element), if any.
    pub image_input: Option<String>,
}

impl InputBounds {
    /// Checks the claim of BYTES input `name`: the image input, shaped `[N]` or
    /// `[N, 1]` with 1 ≤ N ≤ the rows a request may hold. Returns N.
    pub fn check_images(&self, name: &str, shape: &[i64]) -> Result<usize, ServeError> {
        if self.image_input.as_deref() != Some(name) {
            let takes = match &self.image_input {
                Some(input) => format!("only `{input}` takes BYTES (encoded images)"),
                None => "the model takes no BYTES inputs".to_string(),
            };
            return Err(ServeError::invalid(format!("input `{name}` is BYTES, but {takes}")));
        }
        let images = match *shape {
            [n] | [n, 1] => usize::try_from(n).ok().filter(|&n| n >= 1),
            _ => None,
        };
        let images = images.ok_or_else(|| {
            ServeError::invalid(format!("input `{name}`: shape {shape:?}; images are sent as [N] or [N, 1], N ≥ 1"))
        })?;
        if images > self.max_rows {
            return Err(ServeError::too_large(format!(
                "input `{name}`: {images} images, over the model's max_batch_size of {}",
                self.max_rows
            )));
        }
        Ok(images)
    }

    /// Checks the claim of input `name`: its datatype and shape against the model's
    /// input of that name and the server's limits.
    pub fn check(&self, name: &str, dtype: DType, shape: &[i64]) -> Result<Claim, ServeError> {
        if shape.len() > MAX_RANK {
            return Err(ServeError::invalid(format!("input `{name}`: {} dimensions, over {MAX_RANK}", shape.len())));
        }
        let (dims, elements) = tensors::parse_shape(name, shape)?;
        if elements > self.limits.max_tensor_elements {
            return Err(ServeError::too_large(format!(
                "input `{name}`: shape {shape:?} claims {elements} elements, over the server's \
                 max_tensor_elements of {}",
                self.limits.max_tensor_elements
            )));
        }
        let Some(spec) = self.inputs.iter().find(|s| s.name == name) else {
            let known: Vec<String> = self.inputs.iter().map(|s| format!("`{}`", s.name)).collect();
            return Err(ServeError::invalid(format!("unknown input `{name}`; the model takes {}", known.join(", "))));
        };
        let expected = || format!("expected {} of shape {}", tensors::datatype(spec.dtype), spec.shape_display());
        if dtype != spec.dtype || dims.len() != spec.shape.len() {
            return Err(ServeError::invalid(format!(
                "input `{name}`: {}, got {} of shape {shape:?}",
                expected(),
                tensors::datatype(dtype)
            )));
        }
        if let Some(dim) = spec.shape.iter().zip(&dims).position(|(want, got)| want.is_some_and(|w| w != *got)) {
            return Err(ServeError::invalid(format!(
                "input `{name}`: {}, got shape {shape:?} (dimension {dim} differs)",
                expected()
            )));
        }
        if self.batched && dims.first().is_some_and(|&rows| rows > self.max_rows) {
            return Err(ServeError::too_large(format!(
                "input `{name}`: {} rows, over the model's max_batch_size of {}",
                dims[0], self.max_rows
            )));
        }
        Ok(Claim { dims, elements })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> InputBounds {
        InputBounds {
            inputs: vec![TensorSpec::new("input", DType::F32, [None, Some(3), Some(224), Some(224)])],
            batched: true,
            max_rows: 8,
            limits: RequestLimits::default(),
            image_input: Some("image".into()),
        }
    }

    #[test]
    fn images_are_taken_for_the_image_input_one_per_element() {
        let bounds = bounds();
        assert_eq!(bounds.check_images("image", &[3]).unwrap(), 3);
        assert_eq!(bounds.check_images("image", &[2, 1]).unwrap(), 2);
        for shape in [vec![0], vec![2, 2], vec![-1], vec![]] {
            let refused = bounds.check_images("image", &shape).unwrap_err();
            assert_eq!(refused.code, super::super::Code::InvalidArgument, "{shape:?}");
        }
        assert_eq!(bounds.check_images("image", &[9]).unwrap_err().code, super::super::Code::OutOfRange);
        assert!(bounds.check_images("input", &[1]).unwrap_err().message.contains("only `image`"));
    }

    #[test]
    fn claims_beyond_the_limits_or_the_model_are_refused_before_decoding() {
        let bounds = bounds();
        let ok = bounds.check("input", DType::F32, &[2, 3, 224, 224]).unwrap();
        assert_eq!(ok.elements, 2 * 3 * 224 * 224);
        let huge = bounds.check("input", DType::F32, &[1_000_000_000, 3, 224, 224]).unwrap_err();
        assert_eq!(huge.code, super::super::Code::OutOfRange);
        assert!(huge.message.contains("max_tensor_elements of 16777216"), "{}", huge.message);
        let rows = bounds.check("input", DType::F32, &[9, 3, 224, 224]).unwrap_err();
        assert!(rows.message.contains("max_batch_size of 8"), "{}", rows.message);
        for (name, dtype, shape) in [
            ("input", DType::F32, vec![1, 3, 224, 225]),
            ("input", DType::I64, vec![1, 3, 224, 224]),
            ("input", DType::F32, vec![1, 3, 224]),
            ("other", DType::F32, vec![1, 3, 224, 224]),
            ("input", DType::F32, vec![-1, 3, 224, 224]),
            ("input", DType::F32, vec![1; 40]),
        ] {
            let refused = bounds.check(name, dtype, &shape).unwrap_err();
            assert_eq!(refused.code, super::super::Code::InvalidArgument, "{shape:?}: {}", refused.message);
        }
    }
}
