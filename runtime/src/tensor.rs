//! Tensors as requests carry them: a dtype, a shape and the elements, row-major.

use std::sync::Arc;

use half::f16;
use serde::{Deserialize, Serialize};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit float.
    #[serde(alias = "FP32")]
    F32,
    /// 16-bit IEEE float.
    #[serde(alias = "FP16")]
    F16,
    /// 64-bit signed integer.
    #[serde(alias = "INT64")]
    I64,
    /// 32-bit signed integer.
    #[serde(alias = "INT32")]
    I32,
    /// 8-bit unsigned integer.
    #[serde(alias = "UINT8")]
    U8,
    /// Boolean, one byte per element.
    #[serde(alias = "BOOL")]
    Bool,
}

impl DType {
    /// Short lowercase name, as in configs and error messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The elements of a tensor, typed.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum TensorData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Runs `$body` with `$v` bound to the typed vector inside a [`TensorData`].
macro_rules! with_elements {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::tensor::TensorData::F32($v) => $body,
            $crate::tensor::TensorData::F16($v) => $body,
            $crate::tensor::TensorData::I64($v) => $body,
            $crate::tensor::TensorData::I32($v) => $body,
            $crate::tensor::TensorData::U8($v) => $body,
            $crate::tensor::TensorData::Bool($v) => $body,
        }
    };
}
pub(crate) use with_elements;

impl TensorData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F16(_) => DType::F16,
            TensorData::I64(_) => DType::I64,
            TensorData::I32(_) => DType::I32,
            TensorData::U8(_) => DType::U8,
            TensorData::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_elements!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A Rust type that can be a tensor element.
pub trait Element: Copy + Send + Sync + 'static + private::Sealed {
    /// The matching [`DType`].
    const DTYPE: DType;
    /// Wraps a vector of elements.
    fn into_data(v: Vec<Self>) -> TensorData;
    /// Borrows the elements when `data` holds this type.
    fn slice(data: &TensorData) -> Option<&[Self]>;
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl private::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_data(v: Vec<Self>) -> TensorData {
                TensorData::$variant(v)
            }
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
        impl From<Vec<$t>> for TensorData {
            fn from(v: Vec<$t>) -> Self {
                TensorData::$variant(v)
            }
        }
    };
}
element!(f32, F32);
element!(f16, F16);
element!(i64, I64);
element!(i32, I32);
element!(u8, U8);
element!(bool, Bool);

/// A shape and element count that disagree.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("shape {shape:?} holds {expected} elements, but {actual} were given")]
pub struct ShapeError {
    /// The shape given.
    pub shape: Vec<usize>,
    /// Elements the shape holds.
    pub expected: usize,
    /// Elements given.
    pub actual: usize,
}

/// A dense tensor. A clone shares the elements: a caller that sends the same
/// tensor with many requests copies it once, into each batch it joins.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Arc<TensorData>,
}

impl Tensor {
    /// A tensor of `shape` holding `data`; the element count must match the shape.
    pub fn new(shape: impl Into<Vec<usize>>, data: impl Into<TensorData>) -> Result<Self, ShapeError> {
        Tensor::shaped(shape.into(), Arc::new(data.into()))
    }

    /// `data` in `shape`, which must hold as many elements.
    fn shaped(shape: Vec<usize>, data: Arc<TensorData>) -> Result<Self, ShapeError> {
        let expected = shape.iter().product::<usize>();
        if expected != data.len() {
            return Err(ShapeError { shape, expected, actual: data.len() });
        }
        Ok(Tensor { shape, data })
    }

    /// A tensor of `shape` filled with `value`.
    pub fn full<T: Element>(shape: impl Into<Vec<usize>>, value: T) -> Self {
        let shape = shape.into();
        let data = T::into_data(vec![value; shape.iter().product()]);
        Tensor { shape, data: Arc::new(data) }
    }

    /// A tensor of `shape` and `dtype` filled with zeros.
    pub fn zeros(dtype: DType, shape: impl Into<Vec<usize>>) -> Self {
        let shape = shape.into();
        let n: usize = shape.iter().product();
        let data = match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::U8 => TensorData::U8(vec![0; n]),
            DType::Bool => TensorData::Bool(vec![false; n]),
        };
        Tensor { shape, data: Arc::new(data) }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// Takes the shape and elements apart; the elements are copied only while a
    /// clone still shares them.
    pub fn into_parts(self) -> (Vec<usize>, TensorData) {
        (self.shape, Arc::unwrap_or_clone(self.data))
    }

    /// The same elements in another shape holding as many; nothing is copied.
    pub fn reshape(self, shape: impl Into<Vec<usize>>) -> Result<Tensor, ShapeError> {
        Tensor::shaped(shape.into(), self.data)
    }

    /// The elements as a slice of `T`, or `None` when the dtype differs.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }

    /// Size of the first dimension (the batch), 1 for a scalar.
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Joins tensors along dimension 0; `None` when dtypes or trailing dimensions differ
    /// (admission prevents that, so callers treat it as an internal error).
    pub(crate) fn concat_rows(mut parts: Vec<Tensor>) -> Option<Tensor> {
        if parts.len() == 1 {
            return parts.pop();
        }
        Tensor::concat_rows_into(&parts, 0, None)
    }

    /// Joins tensors along dimension 0, then `pad_rows` rows of zeros, into the memory
    /// of `reuse` where nothing else shares it any more (a batch no larger than the
    /// last then allocates nothing), else into fresh memory. `None` when dtypes or
    /// trailing dimensions differ.
    ///
    /// Fresh memory is what makes a large batch cost more than its rows: above glibc's
    /// mmap threshold (32 MiB at most) every allocation is mapped anew, and the kernel
    /// faults in and zeroes each page again (a [64, 3, 224, 224] f32 batch is 38 MB).
    pub(crate) fn concat_rows_into(parts: &[Tensor], pad_rows: usize, reuse: Option<Tensor>) -> Option<Tensor> {
        let (dtype, shape) = Tensor::joined_shape(parts, pad_rows)?;
        let pad_elements = pad_rows * shape[1..].iter().product::<usize>();
        let mut data = reuse
            .and_then(|t| Arc::try_unwrap(t.data).ok())
            .filter(|d| d.dtype() == dtype)
            .unwrap_or_else(|| Tensor::zeros(dtype, [0]).into_parts().1);
        with_elements!(&mut data, v => fill_rows(v, parts, pad_elements))?;
        Some(Tensor { shape, data: Arc::new(data) })
    }

    /// The dtype and shape of `parts` joined along dimension 0, then `pad_rows` rows of
    /// zeros; `None` when there are none, or they disagree on dtype or trailing
    /// dimensions.
    pub(crate) fn joined_shape(parts: &[Tensor], pad_rows: usize) -> Option<(DType, Vec<usize>)> {
        let first = parts.first()?;
        let trailing = first.shape.get(1..)?;
        if parts.iter().any(|p| p.shape.get(1..) != Some(trailing) || p.dtype() != first.dtype()) {
            return None;
        }
        let rows = parts.iter().map(Tensor::rows).sum::<usize>() + pad_rows;
        Some((first.dtype(), std::iter::once(rows).chain(trailing.iter().copied()).collect()))
    }

    /// Splits along dimension 0 into pieces of the given row counts, which must add up
    /// to this tensor's rows; `None` otherwise.
    pub(crate) fn split_rows(self, rows: &[usize]) -> Option<Vec<Tensor>> {
        if rows.iter().sum::<usize>() != self.rows() || self.shape.is_empty() {
            return None;
        }
        if rows.len() == 1 {
            return Some(vec![self]);
        }
        let row_len: usize = self.shape[1..].iter().product();
        let pieces = with_elements!(&*self.data, v => split_elements(v, rows, row_len));
        Some(
            pieces
                .into_iter()
                .zip(rows)
                .map(|(data, &n)| {
                    let mut shape = self.shape.clone();
                    shape[0] = n;
                    Tensor { shape, data: Arc::new(data) }
                })
                .collect(),
        )
    }
}

/// Below this many bytes a batch is joined on the calling thread.
const PARALLEL_JOIN_BYTES: usize = 4 << 20;
/// The most threads that join one batch: one core copies at a fraction of the
/// memory's bandwidth (a [64, 3, 224, 224] f32 batch from 64 requests took 3.9 ms on
/// one core here), and a batch on a GPU waits for its join before its transfer.
const MAX_JOIN_THREADS: usize = 4;

/// `parts`' elements, then `pad` zeros, in `out`, whose capacity is kept.
fn fill_rows<T: Element + Default>(out: &mut Vec<T>, parts: &[Tensor], pad: usize) -> Option<()> {
    let slices: Vec<&[T]> = parts.iter().map(|p| T::slice(&p.data)).collect::<Option<_>>()?;
    let total: usize = slices.iter().map(|s| s.len()).sum();
    if join_threads(total * std::mem::size_of::<T>()) <= 1 {
        out.clear();
        out.reserve(total + pad);
        for slice in &slices {
            out.extend_from_slice(slice);
        }
        out.resize(total + pad, T::default());
        return Some(());
    }
    // Memory a batch as large left behind is written over in place; only what the
    // rows do not reach is zeroed.
    out.resize(total + pad, T::default());
    copy_joined(&slices, out)
}

/// Copies `parts` one after another into the head of `out` and zeroes the rest, on up
/// to [`MAX_JOIN_THREADS`] threads where they are [`PARALLEL_JOIN_BYTES`] or more;
/// `None` (nothing copied) where `out` is too short for them.
pub(crate) fn copy_joined<T: Element + Default>(parts: &[&[T]], out: &mut [T]) -> Option<()> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let (rows, padding) = out.split_at_mut_checked(total)?;
    padding.fill(T::default());
    let threads = join_threads(std::mem::size_of_val(rows));
    if threads <= 1 {
        // A small batch, as most are: no pieces, shares or threads to set up.
        let mut at = 0;
        for part in parts {
            rows[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        return Some(());
    }
    // Pieces no longer than a thread's share, so that a few large parts (or one) are
    // copied on every thread too.
    let share = total.div_ceil(threads).max(1);
    let pieces: Vec<&[T]> = parts.iter().flat_map(|p| p.chunks(share)).collect();
    copy_in_parallel(&pieces, rows, threads);
    Some(())
}

/// Threads to copy `bytes`: one below [`PARALLEL_JOIN_BYTES`], else as many as the
/// machine has cores for, up to [`MAX_JOIN_THREADS`].
fn join_threads(bytes: usize) -> usize {
    if bytes < PARALLEL_JOIN_BYTES {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.min(MAX_JOIN_THREADS)
}

/// Copies `slices` one after another into `out` (exactly as long as they are together),
/// on up to `threads` threads, each share a run of whole slices of about equal length.
/// The calling thread takes shares too, so where no thread can be started it copies
/// them all.
fn copy_in_parallel<T: Element>(slices: &[&[T]], out: &mut [T], threads: usize) {
    let share = out.len().div_ceil(threads);
    let mut shares: Vec<(&[&[T]], &mut [T])> = Vec::with_capacity(threads);
    let (mut rest, mut start, mut len) = (out, 0, 0);
    for (i, slice) in slices.iter().enumerate() {
        len += slice.len();
        if len >= share || i + 1 == slices.len() {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            shares.push((&slices[start..=i], head));
            (rest, start, len) = (tail, i + 1, 0);
        }
    }
    let shares = std::sync::Mutex::new(shares);
    let work = || {
        loop {
            // Taken in a statement of its own, so that the lock is not held while copying.
            let next = shares.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
            let Some((sources, out)) = next else { break };
            let mut at = 0;
            for source in sources {
                out[at..at + source.len()].copy_from_slice(source);
                at += source.len();
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new().name("modelless-join".into()).spawn_scoped(scope, work).is_err() {
                break;
            }
        }
        work();
    });
}

fn split_elements<T: Element>(v: &[T], rows: &[usize], row_len: usize) -> Vec<TensorData> {
    let mut start = 0;
    rows.iter()
        .map(|&n| {
            let end = start + n * row_len;
            let piece = T::into_data(v[start..end].to_vec());
            start = end;
            piece
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_rejects_wrong_element_count() {
        let err = Tensor::new([2, 3], vec![0f32; 5]).unwrap_err();
        assert_eq!((err.expected, err.actual), (6, 5));
    }

    #[test]
    fn a_clone_shares_the_elements_until_they_are_taken_apart() {
        let sent = Tensor::new([2, 2], vec![1f32, 2., 3., 4.]).unwrap();
        let copy = sent.clone();
        let at = |t: &Tensor| t.as_slice::<f32>().unwrap().as_ptr();
        assert_eq!(at(&sent), at(&copy), "a clone copies nothing");
        let reshaped = copy.reshape([4]).unwrap();
        assert_eq!(at(&sent), at(&reshaped), "nor does a reshape");
        assert!(reshaped.clone().reshape([3]).is_err());
        let (shape, data) = reshaped.into_parts();
        assert_eq!((shape, data), (vec![4], TensorData::F32(vec![1., 2., 3., 4.])));
        assert_eq!(sent.as_slice::<f32>().unwrap(), &[1., 2., 3., 4.], "the original keeps its elements");
    }

    #[test]
    fn concat_then_split_round_trips() {
        let a = Tensor::new([1, 2], vec![1i64, 2]).unwrap();
        let b = Tensor::new([2, 2], vec![3i64, 4, 5, 6]).unwrap();
        let joined = Tensor::concat_rows(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(joined.shape(), &[3, 2]);
        assert_eq!(joined.as_slice::<i64>().unwrap(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(joined.split_rows(&[1, 2]).unwrap(), vec![a, b]);
    }

    #[test]
    fn concat_refuses_mixed_dtypes_and_shapes() {
        let a = Tensor::full([1, 2], 1f32);
        assert!(Tensor::concat_rows(vec![a.clone(), Tensor::full([1, 2], 1i32)]).is_none());
        assert!(Tensor::concat_rows(vec![a, Tensor::full([1, 3], 1f32)]).is_none());
    }

    #[test]
    fn a_batch_reuses_the_memory_of_the_last_once_nothing_shares_it() {
        let row = |v: f32| Tensor::full([1, 3], v);
        let last = Tensor::concat_rows_into(&[row(1.), row(2.)], 0, None).unwrap();
        let at = |t: &Tensor| t.as_slice::<f32>().unwrap().as_ptr();
        let memory = at(&last);
        let next = Tensor::concat_rows_into(&[row(3.)], 1, Some(last)).unwrap();
        assert_eq!(at(&next), memory, "the same memory, padded with a row of zeros");
        assert_eq!((next.shape(), next.as_slice::<f32>().unwrap()), (&[2, 3][..], &[3., 3., 3., 0., 0., 0.][..]));
        let shared = next.clone();
        let again = Tensor::concat_rows_into(&[row(4.)], 0, Some(next)).unwrap();
        assert_ne!(at(&again), memory, "still shared: fresh memory");
        assert_eq!(shared.as_slice::<f32>().unwrap()[0], 3., "and the sharer keeps its elements");
        let ints = Tensor::concat_rows_into(&[Tensor::full([1, 3], 7i64)], 2, Some(again)).unwrap();
        assert_eq!(ints.as_slice::<i64>().unwrap(), &[7, 7, 7, 0, 0, 0, 0, 0, 0], "another dtype: fresh memory");
    }

    #[test]
    fn split_refuses_wrong_row_counts() {
        assert!(Tensor::full([3, 2], 0u8).split_rows(&[1, 1]).is_none());
    }

    #[test]
    fn a_large_batch_joined_on_several_threads_holds_every_row_in_order() {
        // 24 requests of 50 000 f32 (4.8 MB in all), each row its request's index.
        let parts: Vec<Tensor> = (0..24).map(|i| Tensor::full([1, 50_000], i as f32)).collect();
        let check = |t: &Tensor, pad: usize| {
            assert_eq!(t.shape(), &[24 + pad, 50_000]);
            let v = t.as_slice::<f32>().unwrap();
            for (row, chunk) in v.chunks(50_000).enumerate() {
                let want = if row < 24 { row as f32 } else { 0.0 };
                assert!(chunk.iter().all(|&x| x == want), "row {row}");
            }
        };
        let fresh = Tensor::concat_rows_into(&parts, 2, None).unwrap();
        check(&fresh, 2);
        // Into memory a larger batch of other values left behind: its padding is zeroed
        // again, and nothing of it shows past the rows.
        let larger = Tensor::full([40, 50_000], 9f32);
        let reused = Tensor::concat_rows_into(&parts, 3, Some(larger)).unwrap();
        check(&reused, 3);
        let smaller = Tensor::full([2, 50_000], 9f32);
        check(&Tensor::concat_rows_into(&parts, 0, Some(smaller)).unwrap(), 0);
    }

    #[test]
    fn small_batches_are_joined_on_the_calling_thread() {
        assert_eq!(join_threads(PARALLEL_JOIN_BYTES - 1), 1);
        let many = join_threads(64 * PARALLEL_JOIN_BYTES);
        assert!((1..=MAX_JOIN_THREADS).contains(&many), "{many}");
        // Whatever the threads, shares cover the output exactly once, in order.
        let slices: Vec<Vec<u8>> = (0..7u8).map(|i| vec![i; 3 + i as usize]).collect();
        let sources: Vec<&[u8]> = slices.iter().map(Vec::as_slice).collect();
        let total: usize = sources.iter().map(|s| s.len()).sum();
        for threads in 1..=9 {
            let mut out = vec![255u8; total];
            copy_in_parallel(&sources, &mut out, threads);
            assert_eq!(out, sources.concat(), "{threads} threads");
        }
    }

    #[test]
    fn a_large_copy_on_several_threads_is_the_plain_copy_then_zeros() {
        // One part or three, large enough for several threads; a tail of zeros after.
        let from: Vec<i32> = (1..=(PARALLEL_JOIN_BYTES / 4 + 7) as i32).collect();
        let third = from.len() / 3;
        for parts in [vec![&from[..]], vec![&from[..third], &from[third..2 * third], &from[2 * third..]]] {
            let mut into = vec![-1i32; from.len() + 5];
            copy_joined(&parts, &mut into).unwrap();
            assert_eq!(&into[..from.len()], &from[..], "{} parts", parts.len());
            assert_eq!(&into[from.len()..], &[0; 5], "{} parts", parts.len());
        }
        let mut small = [9u8; 6];
        copy_joined(&[&[1, 2], &[3, 4, 5]], &mut small).unwrap();
        assert_eq!(small, [1, 2, 3, 4, 5, 0]);
        assert!(copy_joined(&[&[1u8, 2, 3]], &mut [0u8; 2]).is_none(), "too short: refused");
    }
}
