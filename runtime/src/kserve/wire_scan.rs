//! A pass over a `ModelInferRequest`'s protobuf encoding before it is decoded. Protobuf
//! decoding allocates for what the bytes hold, not for what they claim: a struct per
//! input (two bytes on the wire, a hundred and more in memory), a map entry per
//! parameter, eight bytes per one-byte varint of `int64_contents`. So the counts are
//! checked here first, against the request limits, the rank bound and each input's own
//! shape; and what the typed contents decode to may not outgrow the largest message.
//! Nothing is allocated: fields are counted and skipped.

use prost::bytes::Buf;

use super::body::MAX_PARAMETERS;
use super::limits::{MAX_RANK, RequestLimits};
use super::status::ServeError;

/// Checks `message` (a whole `ModelInferRequest`, as received) against `limits`.
pub(super) fn check_infer_request(message: impl Buf, limits: &RequestLimits) -> Result<(), ServeError> {
    let end = message.remaining();
    let mut wire = Wire { buf: message, at: 0 };
    let (mut inputs, mut outputs, mut raw, mut parameters) = (0, 0, 0, 0);
    let mut decoded_bytes = 0u64;
    while wire.at < end {
        let (field, kind) = wire.key()?;
        match (field, kind) {
            (4, LEN) => {
                parameters += 1;
                wire.skip_len()?;
            }
            (5, LEN) => {
                inputs += 1;
                limits.check_count("inputs", inputs)?;
                let end = wire.len()? + wire.at;
                decoded_bytes += scan_input(&mut wire, end, inputs - 1)?;
            }
            (6, LEN) => {
                outputs += 1;
                limits.check_count("outputs", outputs)?;
                let end = wire.len()? + wire.at;
                scan_output(&mut wire, end)?;
            }
            (7, LEN) => {
                raw += 1;
                limits.check_count("raw_input_contents", raw)?;
                wire.skip_len()?;
            }
            _ => wire.skip_value(kind)?,
        }
    }
    check_parameters("the request", parameters)?;
    if decoded_bytes > limits.max_message_bytes as u64 {
        return Err(ServeError::too_large(format!(
            "typed contents decode to {decoded_bytes} bytes, over the server's limit of {} bytes (max_message_mib)",
            limits.max_message_bytes
        )));
    }
    Ok(())
}

/// Wire types.
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

/// An input tensor up to `end`: its rank, its parameters, and its typed contents
/// against its shape. Returns the bytes its contents decode to.
fn scan_input<B: Buf>(wire: &mut Wire<B>, end: usize, index: usize) -> Result<u64, ServeError> {
    let (mut rank, mut claim, mut parameters) = (0usize, Some(1u64), 0);
    let mut contents = Contents::default();
    while wire.at < end {
        let mut dim = |value: u64| {
            rank += 1;
            // A negative dimension (a huge u64 here) or an overflow leaves the claim
            // unknown: decoding refuses it later, naming the dimension.
            claim = claim.and_then(|c| i64::try_from(value).ok().and_then(|d| c.checked_mul(d as u64)));
        };
        match wire.key()? {
            (3, LEN) => {
                let len = wire.len()?;
                let stop = wire.at + len;
                while wire.at < stop {
                    dim(wire.varint()?);
                }
            }
            (3, VARINT) => dim(wire.varint()?),
            (4, LEN) => {
                parameters += 1;
                wire.skip_len()?;
            }
            (5, LEN) => {
                let end = wire.len()? + wire.at;
                contents.scan(wire, end)?;
            }
            (_, kind) => wire.skip_value(kind)?,
        }
        if rank > MAX_RANK {
            return Err(ServeError::invalid(format!("input {index}: a shape of more than {MAX_RANK} dimensions")));
        }
    }
    check_parameters(&format!("input {index}"), parameters)?;
    if let Some(claim) = claim.filter(|&claim| contents.elements > claim) {
        return Err(ServeError::invalid(format!(
            "input {index}: its contents hold {} elements, its shape claims {claim}",
            contents.elements
        )));
    }
    Ok(contents.decoded_bytes)
}

/// A requested output up to `end`: only its parameters are counted.
fn scan_output<B: Buf>(wire: &mut Wire<B>, end: usize) -> Result<(), ServeError> {
    let mut parameters = 0;
    while wire.at < end {
        match wire.key()? {
            (2, LEN) => {
                parameters += 1;
                wire.skip_len()?;
            }
            (_, kind) => wire.skip_value(kind)?,
        }
    }
    check_parameters("an output", parameters)
}

fn check_parameters(of: &str, count: usize) -> Result<(), ServeError> {
    if count > MAX_PARAMETERS {
        return Err(ServeError::invalid(format!("{of} has {count} parameters; at most {MAX_PARAMETERS}")));
    }
    Ok(())
}

/// The elements of an `InferTensorContents` and the bytes they decode to.
#[derive(Default)]
struct Contents {
    elements: u64,
    decoded_bytes: u64,
}

impl Contents {
    fn scan<B: Buf>(&mut self, wire: &mut Wire<B>, end: usize) -> Result<(), ServeError> {
        while wire.at < end {
            let (field, kind) = wire.key()?;
            // What one element takes in memory once decoded.
            let size = match field {
                1 => 1,         // bool
                2 | 4 | 6 => 4, // int32, uint32, fp32
                3 | 5 | 7 => 8, // int64, uint64, fp64
                8 => 32,        // bytes: a buffer of its own
                _ => {
                    wire.skip_value(kind)?;
                    continue;
                }
            };
            let elements = match (field, kind) {
                (8, LEN) => {
                    wire.skip_len()?;
                    1
                }
                (6, LEN) => wire.skip_len()? as u64 / 4,
                (7, LEN) => wire.skip_len()? as u64 / 8,
                (_, LEN) => {
                    let len = wire.len()?;
                    wire.count_varints(len)?
                }
                (_, kind) => {
                    wire.skip_value(kind)?;
                    1
                }
            };
            self.elements += elements;
            self.decoded_bytes += elements * size;
        }
        Ok(())
    }
}

/// A reader of protobuf's wire format that only counts and skips.
struct Wire<B> {
    buf: B,
    /// Bytes read so far.
    at: usize,
}

impl<B: Buf> Wire<B> {
    fn truncated() -> ServeError {
        ServeError::invalid("the request message is not valid protobuf: truncated")
    }

    fn varint(&mut self) -> Result<u64, ServeError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            if !self.buf.has_remaining() {
                return Err(Self::truncated());
            }
            let byte = self.buf.get_u8();
            self.at += 1;
            value |= u64::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ServeError::invalid("the request message is not valid protobuf: a varint over ten bytes"))
    }

    /// A field's number and wire type.
    fn key(&mut self) -> Result<(u64, u8), ServeError> {
        let key = self.varint()?;
        Ok((key >> 3, (key & 7) as u8))
    }

    /// A length prefix, checked against what is left.
    fn len(&mut self) -> Result<usize, ServeError> {
        let len = self.varint()?;
        usize::try_from(len).ok().filter(|&len| len <= self.buf.remaining()).ok_or_else(Self::truncated)
    }

    fn skip(&mut self, count: usize) -> Result<(), ServeError> {
        if self.buf.remaining() < count {
            return Err(Self::truncated());
        }
        self.buf.advance(count);
        self.at += count;
        Ok(())
    }

    /// Skips a length-delimited field; returns its length.
    fn skip_len(&mut self) -> Result<usize, ServeError> {
        let len = self.len()?;
        self.skip(len)?;
        Ok(len)
    }

    fn skip_value(&mut self, kind: u8) -> Result<(), ServeError> {
        match kind {
            VARINT => self.varint().map(drop),
            I64 => self.skip(8),
            LEN => self.skip_len().map(drop),
            I32 => self.skip(4),
            other => Err(ServeError::invalid(format!("the request message is not valid protobuf: wire type {other}"))),
        }
    }

    /// The varints in the next `len` bytes (those whose last byte has the high bit clear).
    fn count_varints(&mut self, mut len: usize) -> Result<u64, ServeError> {
        let mut count = 0u64;
        while len > 0 {
            let chunk = self.buf.chunk();
            let step = chunk.len().min(len);
            if step == 0 {
                return Err(Self::truncated());
            }
            count += chunk[..step].iter().filter(|&&b| b & 0x80 == 0).count() as u64;
            self.buf.advance(step);
            self.at += step;
            len -= step;
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::kserve::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
    use crate::kserve::proto::{InferParameter, InferTensorContents, ModelInferRequest};

    fn limits() -> RequestLimits {
        RequestLimits { max_message_bytes: 1 << 20, ..RequestLimits::default() }
    }

    fn input(shape: Vec<i64>, contents: InferTensorContents) -> InferInputTensor {
        InferInputTensor {
            name: "x".into(),
            datatype: "INT64".into(),
            shape,
            contents: Some(contents),
            ..Default::default()
        }
    }

    fn scan(request: &ModelInferRequest) -> Result<(), ServeError> {
        check_infer_request(request.encode_to_vec().as_slice(), &limits())
    }

    #[test]
    fn a_well_formed_request_passes() {
        let contents = InferTensorContents { int64_contents: vec![1, -2, 300, i64::MAX], ..Default::default() };
        let request = ModelInferRequest {
            inputs: vec![input(vec![2, 2], contents)],
            outputs: vec![InferRequestedOutputTensor { name: "y".into(), ..Default::default() }],
            ..Default::default()
        };
        scan(&request).unwrap();
    }

    #[test]
    fn counts_that_would_allocate_far_more_than_they_take_are_refused() {
        let many_inputs = ModelInferRequest { inputs: vec![InferInputTensor::default(); 1000], ..Default::default() };
        assert!(scan(&many_inputs).unwrap_err().message.contains("max_request_tensors"));
        let many_outputs =
            ModelInferRequest { outputs: vec![InferRequestedOutputTensor::default(); 1000], ..Default::default() };
        assert!(scan(&many_outputs).unwrap_err().message.contains("outputs"));
        let parameters = (0..1000).map(|i| (i.to_string(), InferParameter::default())).collect();
        let many_parameters = ModelInferRequest { parameters, ..Default::default() };
        assert!(scan(&many_parameters).unwrap_err().message.contains("at most 256"));
        let deep = ModelInferRequest { inputs: vec![input(vec![1; 40], Default::default())], ..Default::default() };
        assert!(scan(&deep).unwrap_err().message.contains("more than 32 dimensions"));
    }

    #[test]
    fn contents_beyond_their_shape_or_the_message_limit_are_refused() {
        let over_claim = InferTensorContents { int64_contents: vec![0; 5], ..Default::default() };
        let request = ModelInferRequest { inputs: vec![input(vec![2, 2], over_claim)], ..Default::default() };
        assert!(scan(&request).unwrap_err().message.contains("hold 5 elements, its shape claims 4"));
        // 200 000 one-byte varints decode to 1.6 MB: over a 1 MiB limit.
        let small_values = InferTensorContents { int64_contents: vec![1; 200_000], ..Default::default() };
        let request = ModelInferRequest { inputs: vec![input(vec![200_000], small_values)], ..Default::default() };
        let refused = scan(&request).unwrap_err();
        assert!(refused.message.contains("decode to 1600000 bytes"), "{refused}");
        let empty_strings = InferTensorContents { bytes_contents: vec![Vec::new(); 50_000], ..Default::default() };
        let request = ModelInferRequest { inputs: vec![input(vec![50_000], empty_strings)], ..Default::default() };
        assert!(scan(&request).unwrap_err().message.contains("max_message_mib"));
    }

    #[test]
    fn truncated_and_malformed_encodings_are_refused() {
        let request = ModelInferRequest { inputs: vec![input(vec![4], Default::default())], ..Default::default() };
        let bytes = request.encode_to_vec();
        for cut in 1..bytes.len() {
            assert!(check_infer_request(&bytes[..cut], &limits()).is_err(), "cut at {cut}");
        }
        assert!(check_infer_request(&[0x0b_u8][..], &limits()).unwrap_err().message.contains("wire type 3"));
        assert!(
            check_infer_request(
                &[0x08_u8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..],
                &limits()
            )
            .is_err()
        );
    }
}
