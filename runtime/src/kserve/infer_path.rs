//! `ModelInfer` beside tonic's generic unary path. Its requests carry the tensors,
//! hundreds of KiB for one image, and tonic copies each message into a buffer of its
//! own before decoding it, then sends the answer through its encoder's stream of
//! frames. Here the message is decoded straight from HTTP/2's data frames, without a
//! copy when one frame carries it (the server allows 1 MiB frames), and the answer
//! leaves as one data frame and the trailers. Every other method, and a `ModelInfer`
//! this path does not take as it is (a compressed one), goes to tonic.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use http_body::{Body, Frame, SizeHint};
use prost::Message;
use prost::bytes::{Buf, BufMut, Bytes, BytesMut};
use tonic::Status;
use tonic::codegen::{BoxFuture, Service, StdError, http};
use tonic::server::NamedService;

use super::grpc::{GrpcEndpoint, call_timeout};
use super::proto::ModelInferRequest;
use super::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use super::status::{Code, ServeError};
use super::trace_context::RemoteParent;
use super::wire_scan::check_infer_request;

/// The method this path serves.
const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";
/// gRPC's message prefix: a compressed flag, then the length (big-endian u32).
const PREFIX: usize = 5;

/// The gRPC service: `ModelInfer` here, the rest through tonic. A call whose handling
/// panics is answered INTERNAL and counted; the connection and the server go on.
#[derive(Clone)]
pub struct InferenceRoutes {
    tonic: GrpcInferenceServiceServer<GrpcEndpoint>,
    endpoint: GrpcEndpoint,
    max_message: usize,
    read_timeout: Duration,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for InferenceRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InferenceRoutes").finish_non_exhaustive()
    }
}

impl InferenceRoutes {
    /// Serves `endpoint`, refusing messages over `max_message` bytes either way, and a
    /// `ModelInfer` whose message has not arrived within `read_timeout`.
    pub fn new(endpoint: GrpcEndpoint, max_message: usize, read_timeout: Duration) -> Self {
        let tonic = GrpcInferenceServiceServer::new(endpoint.clone())
            .max_decoding_message_size(max_message)
            .max_encoding_message_size(max_message);
        InferenceRoutes { tonic, endpoint, max_message, read_timeout }
    }
}

impl NamedService for InferenceRoutes {
    const NAME: &'static str = <GrpcInferenceServiceServer<GrpcEndpoint> as NamedService>::NAME;
}

impl<B> Service<http::Request<B>> for InferenceRoutes
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != MODEL_INFER || is_compressed(request.headers()) {
            return Box::pin(contain_panics(self.tonic.call(request)));
        }
        let (endpoint, max, read_timeout) = (self.endpoint.clone(), self.max_message, self.read_timeout);
        Box::pin(contain_panics(async move {
            let (deadline, parent) = (call_timeout(request.headers()), RemoteParent::from_headers(request.headers()));
            let answer = infer(&endpoint, request.into_body(), deadline, parent, max, read_timeout).await;
            Ok(answer.unwrap_or_else(|status| status.into_http()))
        }))
    }
}

/// Answers INTERNAL where `call` panics.
async fn contain_panics(
    call: impl Future<Output = Result<http::Response<tonic::body::Body>, Infallible>>,
) -> Result<http::Response<tonic::body::Body>, Infallible> {
    match AssertUnwindSafe(call).catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => Ok(Status::from(ServeError::from_panic("grpc", panic.as_ref())).into_http()),
    }
}

/// Whether the request says its messages may be compressed.
fn is_compressed(headers: &http::HeaderMap) -> bool {
    headers.get("grpc-encoding").is_some_and(|e| e != "identity")
}

async fn infer<B>(
    endpoint: &GrpcEndpoint,
    body: B,
    deadline: Option<Duration>,
    parent: RemoteParent,
    max: usize,
    read_timeout: Duration,
) -> Result<http::Response<tonic::body::Body>, Status>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<StdError>,
{
    let message = tokio::time::timeout(read_timeout, read_message(body, max)).await.map_err(|_| {
        let refused = ServeError::new(
            Code::DeadlineExceeded,
            format!("request message not received within {} ms", read_timeout.as_millis()),
        );
        Status::from(refused.counted_by("grpc"))
    })?;
    let message = message.inspect_err(count_refusal)?;
    check_infer_request(message.clone(), &endpoint.limits())
        .map_err(|refused| Status::from(refused.counted_by("grpc")))?;
    let request = ModelInferRequest::decode(message)
        .map_err(|e| Status::internal(format!("failed to decode Protobuf message: {e}")))
        .inspect_err(count_refusal)?;
    let answer = endpoint.infer(request, deadline, parent).await?;
    let length = answer.encoded_len();
    if length > max {
        return Err(too_large("answer", length, max));
    }
    let mut framed = BytesMut::with_capacity(PREFIX + length);
    framed.put_u8(0);
    framed.put_u32(length as u32);
    answer.encode(&mut framed).map_err(|e| Status::internal(format!("encoding the answer: {e}")))?;
    let body = OneMessage { message: Some(framed.freeze()), trailers: Some(ok_trailers()) };
    let mut response = http::Response::new(tonic::body::Body::new(body));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
    Ok(response)
}

/// Counts a message refused before it was decoded.
fn count_refusal(status: &Status) {
    let code = if status.code() == tonic::Code::OutOfRange { "out_of_range" } else { "invalid_message" };
    crate::metrics::serving_metrics().endpoint_refused("grpc", code);
}

/// Refused as tonic refuses a message too large on the other methods.
fn too_large(what: &str, length: usize, max: usize) -> Status {
    Status::out_of_range(format!("{what} of {length} bytes is over the server's limit of {max} bytes"))
}

fn ok_trailers() -> http::HeaderMap {
    let mut trailers = http::HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    trailers
}

/// The request's one message, without its prefix, in the frames that carried it.
async fn read_message<B>(body: B, max: usize) -> Result<Frames, Status>
where
    B: Body<Data = Bytes>,
    B::Error: Into<StdError>,
{
    let mut body = std::pin::pin!(body);
    let mut frames = Frames::default();
    let mut expected = None;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| Status::from_error(e.into()))?;
        let Ok(data) = frame.into_data() else { continue };
        frames.push(data);
        if expected.is_none() && frames.remaining() >= PREFIX {
            expected = Some(PREFIX + message_length(&frames, max)?);
        }
        if expected.is_some_and(|e| frames.remaining() > e) {
            return Err(Status::internal("a unary call with more than one message"));
        }
    }
    match expected {
        Some(e) if e == frames.remaining() => {
            frames.advance(PREFIX);
            Ok(frames)
        }
        None if frames.remaining() == 0 => Err(Status::internal("missing request message")),
        _ => Err(Status::internal("the request ends inside its message")),
    }
}

/// The length the prefix gives, checked.
fn message_length(frames: &Frames, max: usize) -> Result<usize, Status> {
    let mut prefix = [0u8; PREFIX];
    let mut bytes = frames.frames.iter().flat_map(|f| f.iter().copied());
    prefix.iter_mut().for_each(|b| *b = bytes.next().unwrap_or(0));
    if prefix[0] != 0 {
        return Err(Status::internal("a compressed message without a grpc-encoding"));
    }
    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if length > max {
        return Err(too_large("message", length, max));
    }
    Ok(length)
}

/// Data frames read as one buffer. A `bytes` field that lies within one frame (a
/// tensor sent in a frame of its own, or any field of a message sent in one frame)
/// is decoded as a slice of it, not copied.
#[derive(Clone, Default)]
struct Frames {
    frames: VecDeque<Bytes>,
    remaining: usize,
}

impl Frames {
    fn push(&mut self, frame: Bytes) {
        if !frame.is_empty() {
            self.remaining += frame.len();
            self.frames.push_back(frame);
        }
    }
}

impl Buf for Frames {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.frames.front().map_or(&[], |f| f.as_ref())
    }

    fn advance(&mut self, mut count: usize) {
        while count > 0 {
            let Some(front) = self.frames.front_mut() else { return };
            let step = count.min(front.len());
            front.advance(step);
            self.remaining -= step;
            count -= step;
            if front.is_empty() {
                self.frames.pop_front();
            }
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        match self.frames.front_mut() {
            Some(front) if front.len() >= len => {
                let bytes = front.split_to(len);
                self.remaining -= len;
                if front.is_empty() {
                    self.frames.pop_front();
                }
                bytes
            }
            _ => {
                let mut joined = BytesMut::with_capacity(len);
                joined.put((&mut *self).take(len));
                joined.freeze()
            }
        }
    }
}

/// A body of one data frame, then the trailers.
struct OneMessage {
    message: Option<Bytes>,
    trailers: Option<http::HeaderMap>,
}

impl Body for OneMessage {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = match self.message.take() {
            Some(message) => Some(Frame::data(message)),
            None => self.trailers.take().map(Frame::trailers),
        };
        Poll::Ready(frame.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.message.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.message.as_ref().map_or(0, |m| m.remaining() as u64))
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;
    use crate::kserve::limits::RequestLimits;
    use crate::kserve::proto::model_infer_request::InferInputTensor;

    /// A request body of the given data frames.
    struct DataFrames(VecDeque<Bytes>);

    impl Body for DataFrames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(|data| Ok(Frame::data(data))))
        }
    }

    /// Reads a body whose frames are all there (one poll), scans it and decodes it, as
    /// `infer` does.
    fn read(frames: Vec<Bytes>, max: usize) -> Result<ModelInferRequest, Status> {
        let read = std::pin::pin!(read_message(DataFrames(frames.into()), max));
        let limits = RequestLimits { max_message_bytes: max, ..RequestLimits::default() };
        match read.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(message) => {
                let message = message?;
                check_infer_request(message.clone(), &limits).map_err(Status::from)?;
                ModelInferRequest::decode(message).map_err(|e| Status::internal(e.to_string()))
            }
            Poll::Pending => panic!("a body of ready frames left the read pending"),
        }
    }

    fn request(tensor_bytes: usize) -> ModelInferRequest {
        ModelInferRequest {
            model_name: "m".into(),
            inputs: vec![InferInputTensor {
                name: "x".into(),
                datatype: "UINT8".into(),
                shape: vec![tensor_bytes as i64],
                ..Default::default()
            }],
            raw_input_contents: vec![(0..tensor_bytes).map(|i| (i % 251) as u8).collect::<Vec<_>>().into()],
            ..Default::default()
        }
    }

    /// The request as one framed message.
    fn framed(request: &ModelInferRequest) -> Bytes {
        let mut framed = BytesMut::new();
        framed.put_u8(0);
        framed.put_u32(request.encoded_len() as u32);
        request.encode(&mut framed).unwrap();
        framed.freeze()
    }

    fn lies_within(part: &[u8], whole: &[u8]) -> bool {
        let (start, end) = (whole.as_ptr() as usize, whole.as_ptr() as usize + whole.len());
        part.as_ptr() as usize >= start && part.as_ptr() as usize + part.len() <= end
    }

    #[test]
    fn a_message_in_one_frame_is_decoded_without_copying_its_tensor() {
        let sent = request(600_000);
        let frame = framed(&sent);
        let received = read(vec![frame.clone()], 1 << 20).unwrap();
        assert_eq!(received, sent);
        assert!(lies_within(&received.raw_input_contents[0], &frame), "the tensor was copied");
    }

    #[test]
    fn a_tensor_in_a_frame_of_its_own_is_not_copied() {
        let sent = request(100_000);
        let frame = framed(&sent);
        let tensor_at = frame.len() - sent.raw_input_contents[0].len();
        let (head, tensor) = (frame.slice(..tensor_at), frame.slice(tensor_at..));
        let received = read(vec![head, tensor.clone()], 1 << 20).unwrap();
        assert_eq!(received, sent);
        assert_eq!(received.raw_input_contents[0].as_ptr(), tensor.as_ptr(), "the tensor was copied");
    }

    #[test]
    fn a_message_split_anywhere_decodes_the_same() {
        let sent = request(40_000);
        let frame = framed(&sent);
        for size in [1, 3, 5, 7, 1000, 16_384] {
            let frames = frame.chunks(size).map(|c| frame.slice_ref(c)).collect();
            assert_eq!(read(frames, 1 << 20).unwrap(), sent, "frames of {size} bytes");
        }
    }

    #[test]
    fn messages_over_the_limit_are_refused_from_their_prefix() {
        let sent = request(2000);
        let frame = framed(&sent);
        // Only the prefix has come: the refusal does not wait for the rest.
        let refused = read(vec![frame.slice(..PREFIX)], 1000).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::OutOfRange);
        assert!(refused.message().contains("limit of 1000 bytes"), "{}", refused.message());
    }

    #[test]
    fn compressed_truncated_doubled_and_missing_messages_are_refused() {
        let frame = framed(&request(100));
        let mut compressed = BytesMut::from(&frame[..]);
        compressed[0] = 1;
        let doubled = [frame.clone(), frame.clone()].concat();
        for (what, frames) in [
            ("compressed", vec![compressed.freeze()]),
            ("truncated", vec![frame.slice(..frame.len() - 1)]),
            ("doubled", vec![Bytes::from(doubled)]),
            ("missing", vec![]),
            ("prefix cut", vec![frame.slice(..3)]),
        ] {
            let refused = read(frames, 1 << 20).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::Internal, "{what}: {refused:?}");
        }
    }

    #[test]
    fn compressed_calls_are_left_to_tonic() {
        let mut headers = http::HeaderMap::new();
        assert!(!is_compressed(&headers));
        headers.insert("grpc-encoding", http::HeaderValue::from_static("identity"));
        assert!(!is_compressed(&headers));
        headers.insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
        assert!(is_compressed(&headers));
    }

    mod fuzz {
        use proptest::collection::vec;
        use proptest::prelude::*;

        use super::*;
        use crate::backend::TensorSpec;
        use crate::fuzzing::{PeakAllocator, fuzz, hostile};
        use crate::kserve::grpc::decode_infer;
        use crate::kserve::limits::{InputBounds, RequestLimits};
        use crate::kserve::proto::InferTensorContents;
        use crate::kserve::status::Code;
        use crate::tensor::DType;

        fn bounds() -> InputBounds {
            InputBounds {
                image_input: None,
                inputs: vec![TensorSpec::new("input", DType::F32, [None, Some(3), Some(2), Some(2)])],
                batched: true,
                max_rows: 8,
                limits: RequestLimits::default(),
            }
        }

        /// An input, its contents typed, raw (of the right length or not), or missing.
        fn input() -> impl Strategy<Value = (InferInputTensor, Option<Vec<u8>>)> {
            let fitting = (1i64..11).prop_map(|rows| ("input", "FP32", vec![rows, 3, 2, 2]));
            let name = prop_oneof![Just("input"), Just("other")];
            let datatype = prop_oneof![Just("FP32"), Just("INT32"), Just("FP16"), Just("UINT8"), Just("BYTES")];
            let hostile = (name, datatype, hostile::shape());
            prop_oneof![3 => fitting, 1 => hostile].prop_flat_map(|(name, datatype, shape)| {
                let elements = shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d)).unwrap_or(-1);
                let n = usize::try_from(elements).unwrap_or(3).min(200);
                let raw = prop_oneof![3 => Just(n * 4), 1 => 0usize..64].prop_map(|len| vec![7u8; len]);
                let typed = prop_oneof![
                    vec(any::<f32>(), n..=n)
                        .prop_map(|v| InferTensorContents { fp32_contents: v, ..Default::default() }),
                    vec(any::<u32>(), 0..n + 2)
                        .prop_map(|v| InferTensorContents { uint_contents: v, ..Default::default() }),
                ];
                let contents = prop_oneof![
                    3 => raw.prop_map(|raw| (None, Some(raw))),
                    2 => typed.prop_map(|typed| (Some(typed), None)),
                    1 => Just((None, None)),
                ];
                contents.prop_map(move |(contents, raw)| {
                    let tensor = InferInputTensor {
                        name: name.into(),
                        datatype: datatype.into(),
                        shape: shape.clone(),
                        contents,
                        ..Default::default()
                    };
                    (tensor, raw)
                })
            })
        }

        /// A request, framed, then perhaps corrupted, and cut into frames anywhere.
        fn frames() -> impl Strategy<Value = Vec<Bytes>> {
            let request = vec(input(), 0..3).prop_map(|inputs| {
                let (inputs, raw): (Vec<_>, Vec<_>) = inputs.into_iter().unzip();
                let raw = if raw.iter().all(Option::is_some) {
                    raw.into_iter().flatten().map(Bytes::from).collect()
                } else {
                    Vec::new()
                };
                framed(&ModelInferRequest {
                    model_name: "m".into(),
                    inputs,
                    raw_input_contents: raw,
                    ..Default::default()
                })
            });
            let message = prop_oneof![4 => request, 1 => vec(any::<u8>(), 0..256).prop_map(Bytes::from)];
            let corruption =
                prop_oneof![4 => Just(None), 1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(Some)];
            (message, corruption, vec(1usize..600, 0..4)).prop_map(|(message, corruption, cuts)| {
                let mut bytes = message.to_vec();
                if let (Some((at, value)), false) = (corruption, bytes.is_empty()) {
                    let at = at.index(bytes.len());
                    bytes[at] = value;
                }
                let bytes = Bytes::from(bytes);
                let mut frames = Vec::new();
                let mut start = 0;
                for cut in cuts {
                    let end = (start + cut).min(bytes.len());
                    frames.push(bytes.slice(start..end));
                    start = end;
                }
                frames.push(bytes.slice(start..));
                frames
            })
        }

        #[test]
        fn fuzz_grpc_model_infer_messages() {
            let bounds = bounds();
            let accepted = std::cell::Cell::new(0);
            fuzz("grpc-model-infer", frames(), |frames| {
                let length: usize = frames.iter().map(Bytes::len).sum();
                PeakAllocator::reset();
                let decoded = read(frames, 1 << 20).map_err(|s| s.code()).and_then(|request| {
                    decode_infer(request, &bounds).map_err(|e| match e.code {
                        Code::InvalidArgument => tonic::Code::InvalidArgument,
                        Code::OutOfRange => tonic::Code::OutOfRange,
                        other => panic!("refused as {other:?}: {}", e.message),
                    })
                });
                let largest = PeakAllocator::largest();
                // Protobuf decodes a repeated 64-bit integer of one byte into eight.
                prop_assert!(largest <= 8 * length + (64 << 10), "{length} bytes allocated {largest} at once");
                match decoded {
                    Ok(call) => {
                        accepted.set(accepted.get() + call.inputs.len());
                        for (name, tensor) in &call.inputs {
                            let shape = crate::kserve::tensors::shape_of(tensor);
                            prop_assert!(bounds.check(name, tensor.dtype(), &shape).is_ok(), "{name}: {shape:?}");
                        }
                    }
                    Err(code) => prop_assert!(
                        matches!(code, tonic::Code::InvalidArgument | tonic::Code::OutOfRange | tonic::Code::Internal),
                        "refused as {code:?}"
                    ),
                }
                Ok(())
            });
            assert!(accepted.get() > 0, "no generated input reached the tensor decoders");
        }
    }
}
