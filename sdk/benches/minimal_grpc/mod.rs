//! A minimal gRPC client for `ModelInfer`: HTTP/2 straight from the `h2` crate, driven
//! by the calling thread, as a blocking client in C++ or Go would be.
//!
//! tonic's client hands each call to tasks of its own (a buffer in front of the
//! connection, a task that pipes the request body), so a call wakes several threads;
//! on a machine where a wake is dear, that is a good part of what gRPC appears to add.
//! This client measures the endpoint with as little of the client in the way as a
//! real one can: encode the message around its tensors (which it does not copy),
//! write, read the answer and its trailers.

use std::net::SocketAddr;

use anyhow::{Context, Result, ensure};
use bytes::{BufMut, Bytes, BytesMut};
use modelless_runtime::kserve::proto::{ModelInferRequest, ModelInferResponse};
use prost::Message;

/// gRPC's message prefix: one flag byte (not compressed), four bytes of length.
const PREFIX: usize = 5;
/// The field number of `raw_input_contents` in `ModelInferRequest`.
const RAW_INPUT_CONTENTS: u32 = 7;

/// The request as gRPC frames it, in parts: the tensors' raw contents are not copied
/// into the message but sent as parts of their own, each after its field's key and
/// length (protobuf reads fields in any order).
fn message_parts(request: &ModelInferRequest) -> Result<Vec<Bytes>> {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
    let raw = &request.raw_input_contents;
    let rest = ModelInferRequest { raw_input_contents: Vec::new(), ..request.clone() };
    let raw_len: usize =
        raw.iter().map(|r| key_len(RAW_INPUT_CONTENTS) + encoded_len_varint(r.len() as u64) + r.len()).sum();
    let rest_len = rest.encoded_len();
    let mut head = BytesMut::with_capacity(PREFIX + rest_len + 16);
    head.put_u8(0);
    head.put_u32(u32::try_from(rest_len + raw_len)?);
    rest.encode(&mut head)?;
    let mut parts = Vec::with_capacity(2 * raw.len() + 1);
    for contents in raw {
        encode_key(RAW_INPUT_CONTENTS, WireType::LengthDelimited, &mut head);
        encode_varint(contents.len() as u64, &mut head);
        parts.push(head.split().freeze());
        parts.push(contents.clone());
    }
    parts.push(head.freeze());
    Ok(parts.into_iter().filter(|p| !p.is_empty()).collect())
}

/// One HTTP/2 connection on a single-threaded runtime owned by the caller.
pub struct MinimalClient {
    runtime: tokio::runtime::Runtime,
    send: h2::client::SendRequest<Bytes>,
    uri: String,
}

impl MinimalClient {
    /// Connects with windows and frames as large as HTTP/2 allows, so a request goes
    /// out in one write.
    pub fn connect(address: SocketAddr) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let send = runtime.block_on(async {
            let tcp = tokio::net::TcpStream::connect(address).await?;
            tcp.set_nodelay(true)?;
            let (send, connection) = h2::client::Builder::new()
                .initial_window_size(i32::MAX as u32)
                .initial_connection_window_size(i32::MAX as u32)
                .max_frame_size((1 << 24) - 1)
                .handshake(tcp)
                .await?;
            // Polled on this thread whenever a call waits, as the only other task.
            tokio::spawn(async move { drop(connection.await) });
            anyhow::Ok(send.ready().await?)
        })?;
        Ok(MinimalClient { runtime, send, uri: format!("http://{address}/inference.GRPCInferenceService/ModelInfer") })
    }

    /// Calls `ModelInfer`, blocking this thread until the answer and its status arrive.
    pub fn infer(&mut self, request: &ModelInferRequest) -> Result<ModelInferResponse> {
        let head = http::Request::post(&self.uri)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())?;
        let (answer, mut stream) = self.send.send_request(head, false)?;
        let parts = message_parts(request)?;
        let last = parts.len() - 1;
        for (i, part) in parts.into_iter().enumerate() {
            stream.send_data(part, i == last)?;
        }
        self.runtime.block_on(async {
            let mut body = answer.await?.into_body();
            let mut received = BytesMut::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                body.flow_control().release_capacity(chunk.len())?;
                received.extend_from_slice(&chunk);
            }
            let trailers = body.trailers().await?.context("an answer without trailers")?;
            let status = trailers.get("grpc-status").map(|s| s.to_str().unwrap_or("?").to_owned());
            ensure!(status.as_deref() == Some("0"), "grpc-status {status:?}: {:?}", trailers.get("grpc-message"));
            ensure!(received.len() >= PREFIX, "an answer of {} bytes", received.len());
            Ok(ModelInferResponse::decode(&received[PREFIX..])?)
        })
    }
}
