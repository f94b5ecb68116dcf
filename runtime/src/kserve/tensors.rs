//! Tensors as the protocol carries them: a datatype name, a shape of `i64`, and the
//! elements as little-endian raw bytes, as typed contents (gRPC) or as JSON (HTTP).

use half::f16;
use serde::Deserializer;
use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};

use super::proto::InferTensorContents;
use super::status::ServeError;
use crate::backend::TensorSpec;
use crate::tensor::{DType, Tensor, TensorData};

/// A tensor's shape as a request claims it, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Its dimensions.
    pub dims: Vec<usize>,
    /// Their product.
    pub elements: usize,
}

/// The protocol's name of an element type.
pub fn datatype(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "FP32",
        DType::F16 => "FP16",
        DType::I64 => "INT64",
        DType::I32 => "INT32",
        DType::U8 => "UINT8",
        DType::Bool => "BOOL",
    }
}

/// The element type the protocol calls `name`, if modelless serves it.
pub fn parse_datatype(name: &str) -> Result<DType, ServeError> {
    Ok(match name {
        "FP32" => DType::F32,
        "FP16" => DType::F16,
        "INT64" => DType::I64,
        "INT32" => DType::I32,
        "UINT8" => DType::U8,
        "BOOL" => DType::Bool,
        other => {
            return Err(ServeError::invalid(format!(
                "datatype `{other}` is not served; use FP32, FP16, INT64, INT32, UINT8 or BOOL"
            )));
        }
    })
}

/// The elements of a BYTES tensor in raw contents: each a 4-byte little-endian length
/// and that many bytes. Slices of `raw`, not copies.
pub fn bytes_elements(name: &str, count: usize, raw: &bytes::Bytes) -> Result<Vec<bytes::Bytes>, ServeError> {
    let mut elements = Vec::with_capacity(count.min(raw.len() / 4 + 1));
    let mut at = 0;
    while at < raw.len() {
        let length = raw
            .get(at..at + 4)
            .map(|l| u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize)
            .filter(|&length| length <= raw.len() - at - 4)
            .ok_or_else(|| {
                ServeError::invalid(format!("input `{name}`: BYTES element {} is cut short", elements.len()))
            })?;
        elements.push(raw.slice(at + 4..at + 4 + length));
        at += 4 + length;
        if elements.len() > count {
            break;
        }
    }
    if elements.len() != count {
        let held = if elements.len() > count { format!("more than {count}") } else { elements.len().to_string() };
        return Err(ServeError::invalid(format!(
            "input `{name}`: its shape claims {count} BYTES elements, its contents hold {held}"
        )));
    }
    Ok(elements)
}

/// Bytes one element takes in raw contents.
fn element_size(dtype: DType) -> usize {
    match dtype {
        DType::F32 | DType::I32 => 4,
        DType::F16 => 2,
        DType::I64 => 8,
        DType::U8 | DType::Bool => 1,
    }
}

/// A tensor's shape as the protocol gives it, checked: no negative dimension, and an
/// element count that fits in memory.
pub fn parse_shape(name: &str, shape: &[i64]) -> Result<(Vec<usize>, usize), ServeError> {
    let mut dims = Vec::with_capacity(shape.len());
    let mut elements: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| ServeError::invalid(format!("input `{name}`: shape {shape:?}")))?;
        elements = elements
            .checked_mul(d)
            .ok_or_else(|| ServeError::invalid(format!("input `{name}`: shape {shape:?} is too large")))?;
        dims.push(d);
    }
    Ok((dims, elements))
}

/// The protocol's shape of a model's input or output: -1 where its size is open.
pub fn spec_shape(spec: &TensorSpec) -> Vec<i64> {
    spec.shape.iter().map(|d| d.map_or(-1, |n| n as i64)).collect()
}

/// The protocol's shape of a tensor.
pub fn shape_of(tensor: &Tensor) -> Vec<i64> {
    tensor.shape().iter().map(|&d| d as i64).collect()
}

/// Decodes raw little-endian contents.
pub fn from_raw(name: &str, dtype: DType, shape: &[i64], bytes: &[u8]) -> Result<Tensor, ServeError> {
    let (dims, elements) = parse_shape(name, shape)?;
    let expected = elements.saturating_mul(element_size(dtype));
    if bytes.len() != expected {
        return Err(ServeError::invalid(format!(
            "input `{name}`: {} bytes of raw contents for {} elements of {}, expected {expected}",
            bytes.len(),
            elements,
            datatype(dtype)
        )));
    }
    let data = match dtype {
        DType::F32 => TensorData::F32(from_le(bytes, f32::from_le_bytes)),
        DType::F16 => TensorData::F16(from_le(bytes, f16::from_le_bytes)),
        DType::I64 => TensorData::I64(from_le(bytes, i64::from_le_bytes)),
        DType::I32 => TensorData::I32(from_le(bytes, i32::from_le_bytes)),
        DType::U8 => TensorData::U8(bytes.to_vec()),
        DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
    };
    build(name, dims, data)
}

/// Decodes typed contents: each type in its own repeated field, as the protocol says.
pub fn from_contents(
    name: &str,
    dtype: DType,
    claim: Claim,
    contents: InferTensorContents,
) -> Result<Tensor, ServeError> {
    let data = match dtype {
        DType::F32 => TensorData::F32(contents.fp32_contents),
        DType::I64 => TensorData::I64(contents.int64_contents),
        DType::I32 => TensorData::I32(contents.int_contents),
        DType::Bool => TensorData::Bool(contents.bool_contents),
        DType::U8 => TensorData::U8(
            contents
                .uint_contents
                .iter()
                .map(|&v| u8::try_from(v))
                .collect::<Result<_, _>>()
                .map_err(|_| ServeError::invalid(format!("input `{name}`: UINT8 contents above 255")))?,
        ),
        DType::F16 => {
            return Err(ServeError::invalid(format!(
                "input `{name}`: FP16 has no typed contents; send it in raw_input_contents"
            )));
        }
    };
    build(name, claim.dims, data)
}

/// Elements from little-endian bytes (whose length is a multiple of the element's):
/// one copy where the machine is little-endian too, whatever the bytes' alignment.
fn from_le<T: bytemuck::Pod, const N: usize>(bytes: &[u8], decode: fn([u8; N]) -> T) -> Vec<T> {
    if cfg!(target_endian = "little") {
        bytemuck::pod_collect_to_vec(bytes)
    } else {
        bytes.chunks_exact(N).map(|c| decode(c.try_into().unwrap_or([0; N]))).collect()
    }
}

/// Elements as little-endian bytes.
fn to_le<T: bytemuck::Pod, const N: usize>(values: &[T], encode: fn(T) -> [u8; N]) -> Vec<u8> {
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice(values).to_vec()
    } else {
        values.iter().flat_map(|&v| encode(v)).collect()
    }
}

/// Encodes a tensor as raw little-endian bytes.
pub fn to_raw(tensor: &Tensor) -> Vec<u8> {
    match tensor.data() {
        TensorData::F32(v) => to_le(v, f32::to_le_bytes),
        TensorData::F16(v) => to_le(v, f16::to_le_bytes),
        TensorData::I64(v) => to_le(v, i64::to_le_bytes),
        TensorData::I32(v) => to_le(v, i32::to_le_bytes),
        TensorData::U8(v) => v.clone(),
        TensorData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    }
}

/// Decodes the `data` of an HTTP/JSON input, given as its JSON text: a flat or nested
/// array of numbers (of booleans for BOOL), row-major. Elements are read one at a
/// time into a tensor of the checked `claim`, never past it: no size in the text is
/// trusted, and no tree of JSON values is built.
pub fn from_json(name: &str, dtype: DType, claim: Claim, text: &str) -> Result<Tensor, ServeError> {
    // Every element but the last takes at least two characters ("1,").
    if claim.elements > text.len().div_ceil(2) {
        return Err(ServeError::invalid(format!(
            "input `{name}`: {} bytes of data cannot hold the {} elements its shape claims",
            text.len(),
            claim.elements
        )));
    }
    let data = match dtype {
        DType::F32 => TensorData::F32(read_json(name, dtype, claim.elements, text)?),
        DType::F16 => TensorData::F16(read_json(name, dtype, claim.elements, text)?),
        DType::I64 => TensorData::I64(read_json(name, dtype, claim.elements, text)?),
        DType::I32 => TensorData::I32(read_json(name, dtype, claim.elements, text)?),
        DType::U8 => TensorData::U8(read_json(name, dtype, claim.elements, text)?),
        DType::Bool => TensorData::Bool(read_json(name, dtype, claim.elements, text)?),
    };
    build(name, claim.dims, data)
}

/// Reads exactly `elements` scalars of `T` from nested JSON arrays.
fn read_json<T: JsonScalar>(name: &str, dtype: DType, elements: usize, text: &str) -> Result<Vec<T>, ServeError> {
    let mut values = Vec::with_capacity(elements);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let read =
        Elements { into: &mut values, cap: elements }.deserialize(&mut deserializer).and_then(|()| deserializer.end());
    match read {
        Ok(()) if values.len() == elements => Ok(values),
        Ok(()) => Err(ServeError::invalid(format!(
            "input `{name}`: data holds {} elements, its shape claims {elements}",
            values.len()
        ))),
        Err(e) => Err(ServeError::invalid(format!("input `{name}`: data of {}: {e}", datatype(dtype)))),
    }
}

/// An element type read from a JSON scalar.
trait JsonScalar: Sized {
    /// What the type takes, for messages.
    const EXPECTED: &'static str;
    fn from_f64(_: f64) -> Option<Self> {
        None
    }
    fn from_i64(v: i64) -> Option<Self> {
        Self::from_f64(v as f64)
    }
    fn from_u64(v: u64) -> Option<Self> {
        Self::from_f64(v as f64)
    }
    fn from_bool(_: bool) -> Option<Self> {
        None
    }
}

impl JsonScalar for f32 {
    const EXPECTED: &'static str = "a number";
    fn from_f64(v: f64) -> Option<Self> {
        Some(v as f32)
    }
}

impl JsonScalar for f16 {
    const EXPECTED: &'static str = "a number";
    fn from_f64(v: f64) -> Option<Self> {
        Some(f16::from_f64(v))
    }
}

impl JsonScalar for i64 {
    const EXPECTED: &'static str = "an integer of 64 bits";
    fn from_i64(v: i64) -> Option<Self> {
        Some(v)
    }
    fn from_u64(v: u64) -> Option<Self> {
        i64::try_from(v).ok()
    }
}

impl JsonScalar for i32 {
    const EXPECTED: &'static str = "an integer of 32 bits";
    fn from_i64(v: i64) -> Option<Self> {
        i32::try_from(v).ok()
    }
    fn from_u64(v: u64) -> Option<Self> {
        i32::try_from(v).ok()
    }
}

impl JsonScalar for u8 {
    const EXPECTED: &'static str = "an integer from 0 to 255";
    fn from_i64(v: i64) -> Option<Self> {
        u8::try_from(v).ok()
    }
    fn from_u64(v: u64) -> Option<Self> {
        u8::try_from(v).ok()
    }
}

impl JsonScalar for bool {
    const EXPECTED: &'static str = "a boolean";
    fn from_bool(v: bool) -> Option<Self> {
        Some(v)
    }
}

/// Appends the scalars of a (nested) JSON array to `into`, refusing more than `cap`.
struct Elements<'a, T> {
    into: &'a mut Vec<T>,
    cap: usize,
}

impl<'de, T: JsonScalar> DeserializeSeed<'de> for Elements<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<T: JsonScalar> Elements<'_, T> {
    fn push<E: de::Error>(self, value: Option<T>, got: &dyn std::fmt::Display) -> Result<(), E> {
        let value = value.ok_or_else(|| E::custom(format_args!("{got} where {} was expected", T::EXPECTED)))?;
        if self.into.len() == self.cap {
            return Err(E::custom(format_args!("more elements than the {} its shape claims", self.cap)));
        }
        self.into.push(value);
        Ok(())
    }
}

impl<'de, T: JsonScalar> Visitor<'de> for Elements<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "an array of {}", T::EXPECTED)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Elements { into: &mut *self.into, cap: self.cap })?.is_some() {}
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.push(T::from_f64(v), &v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.push(T::from_i64(v), &v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.push(T::from_u64(v), &v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.push(T::from_bool(v), &v)
    }
}

/// The elements of a tensor as a flat JSON array.
pub fn to_json(tensor: &Tensor) -> serde_json::Value {
    let values = |v: &mut dyn Iterator<Item = serde_json::Value>| serde_json::Value::Array(v.collect());
    match tensor.data() {
        TensorData::F32(v) => values(&mut v.iter().map(|x| serde_json::json!(x))),
        TensorData::F16(v) => values(&mut v.iter().map(|x| serde_json::json!(x.to_f32()))),
        TensorData::I64(v) => values(&mut v.iter().map(|x| serde_json::json!(x))),
        TensorData::I32(v) => values(&mut v.iter().map(|x| serde_json::json!(x))),
        TensorData::U8(v) => values(&mut v.iter().map(|x| serde_json::json!(x))),
        TensorData::Bool(v) => values(&mut v.iter().map(|x| serde_json::json!(x))),
    }
}

fn build(name: &str, dims: Vec<usize>, data: TensorData) -> Result<Tensor, ServeError> {
    Tensor::new(dims, data).map_err(|e| ServeError::invalid(format!("input `{name}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(shape: &[i64]) -> Claim {
        let (dims, elements) = parse_shape("x", shape).unwrap();
        Claim { dims, elements }
    }

    fn json(dtype: DType, shape: &[i64], data: serde_json::Value) -> Result<Tensor, ServeError> {
        from_json("x", dtype, claim(shape), &data.to_string())
    }

    fn all_types() -> Vec<Tensor> {
        vec![
            Tensor::new([2, 2], vec![1.5f32, -2.0, 0.25, 3.0]).unwrap(),
            Tensor::new([1, 3], vec![f16::from_f32(0.5), f16::from_f32(-1.0), f16::from_f32(2.0)]).unwrap(),
            Tensor::new([2], vec![i64::MIN, 7]).unwrap(),
            Tensor::new([2], vec![-3i32, 9]).unwrap(),
            Tensor::new([3], vec![0u8, 128, 255]).unwrap(),
            Tensor::new([2], vec![true, false]).unwrap(),
        ]
    }

    #[test]
    fn raw_and_json_contents_round_trip_every_type() {
        for tensor in all_types() {
            let (dtype, shape) = (tensor.dtype(), shape_of(&tensor));
            assert_eq!(parse_datatype(datatype(dtype)).unwrap(), dtype);
            assert_eq!(from_raw("x", dtype, &shape, &to_raw(&tensor)).unwrap(), tensor);
            assert_eq!(json(dtype, &shape, to_json(&tensor)).unwrap(), tensor);
        }
    }

    #[test]
    fn typed_contents_fill_the_field_of_their_type() {
        let contents =
            InferTensorContents { uint_contents: vec![1, 2, 255], int_contents: vec![-1, 5], ..Default::default() };
        let u8s = from_contents("x", DType::U8, claim(&[3]), contents.clone()).unwrap();
        assert_eq!(u8s.as_slice::<u8>(), Some(&[1u8, 2, 255][..]));
        let i32s = from_contents("x", DType::I32, claim(&[1, 2]), contents.clone()).unwrap();
        assert_eq!(i32s.as_slice::<i32>(), Some(&[-1, 5][..]));
        let too_big = InferTensorContents { uint_contents: vec![256], ..Default::default() };
        assert!(from_contents("x", DType::U8, claim(&[1]), too_big).is_err());
        assert!(from_contents("x", DType::F16, claim(&[1]), contents).is_err());
    }

    #[test]
    fn bad_sizes_shapes_and_datatypes_are_refused() {
        assert!(from_raw("x", DType::F32, &[2], &[0; 7]).is_err());
        assert!(from_raw("x", DType::F32, &[-1], &[]).is_err());
        assert!(from_raw("x", DType::F32, &[i64::MAX, i64::MAX], &[]).is_err());
        assert!(json(DType::F32, &[3], serde_json::json!([1.0, 2.0])).is_err());
        assert!(json(DType::F32, &[1], serde_json::json!([1.0, 2.0])).is_err());
        assert!(json(DType::Bool, &[1], serde_json::json!([1])).is_err());
        assert!(json(DType::F32, &[1], serde_json::json!(["1"])).is_err());
        assert!(json(DType::U8, &[1], serde_json::json!([256])).is_err());
        assert!(json(DType::F32, &[1], serde_json::json!([{"a": 1}])).is_err());
        let nested = json(DType::I64, &[2, 2], serde_json::json!([[1, 2], [3, 4]])).unwrap();
        assert_eq!(nested.as_slice::<i64>(), Some(&[1, 2, 3, 4][..]));
        let scalar = json(DType::F32, &[1], serde_json::json!(2.5)).unwrap();
        assert_eq!(scalar.as_slice::<f32>(), Some(&[2.5f32][..]));
        // A claim the text cannot hold is refused before anything is reserved for it.
        let huge = from_json("x", DType::F32, Claim { dims: vec![1 << 40], elements: 1 << 40 }, "[1]").unwrap_err();
        assert!(huge.message.contains("cannot hold"), "{}", huge.message);
        assert!(parse_datatype("BYTES").unwrap_err().message.contains("BYTES"));
    }
}
