//! The least any network endpoint adds on this machine: the same input over plain TCP
//! on loopback, with no protocol around it, served by a thread that blocks on its
//! socket and makes the in-process call itself.
//!
//! What this adds is the machine's share: loopback copies, waking threads on idle
//! cores, code and data that inference evicted from the caches. What gRPC adds beyond
//! it is the protocol stack's (HTTP/2, protobuf, the async runtime, the endpoint).
//!
//! Framing: an 8-byte little-endian length, then the raw FP32 elements, both ways.

use std::io::{IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use modelless::{DType, Runtime};
use modelless_runtime::kserve::tensors;

/// Starts a server for `model` with inputs of `shape` on a loopback port, for one
/// connection, on a thread of its own; calls go through `tokio`'s runtime.
pub fn serve(tokio: tokio::runtime::Handle, runtime: Arc<Runtime>, model: &str, shape: &[i64]) -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let (model, shape) = (model.to_owned(), shape.to_vec());
    let serve = move || -> Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut input = Vec::new();
        while read_frame(&mut stream, &mut input)? {
            // One copy into the tensor, as the gRPC endpoint makes.
            let tensor = tensors::from_raw("input", DType::F32, &shape, &input)?;
            let output = tokio.block_on(runtime.infer(&model, tensor))?;
            write_frame(&mut stream, &tensors::to_raw(output.first().context("no output")?))?;
        }
        Ok(())
    };
    // Its client sees the connection close; the reason goes to stderr.
    std::thread::spawn(move || serve().unwrap_or_else(|e| eprintln!("raw TCP server: {e:#}")));
    Ok(address)
}

/// A blocking client of [`serve`].
pub struct RawClient {
    stream: TcpStream,
    answer: Vec<u8>,
}

impl RawClient {
    pub fn connect(address: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        Ok(RawClient { stream, answer: Vec::new() })
    }

    /// Sends `input` and returns the answer's bytes.
    pub fn infer(&mut self, input: &[u8]) -> Result<&[u8]> {
        write_frame(&mut self.stream, input)?;
        ensure!(read_frame(&mut self.stream, &mut self.answer)?, "the server closed the connection");
        Ok(&self.answer)
    }
}

fn write_frame(stream: &mut TcpStream, bytes: &[u8]) -> Result<()> {
    let length = (bytes.len() as u64).to_le_bytes();
    // Both in one write: the length alone would wait for an acknowledgement.
    let mut parts = [IoSlice::new(&length), IoSlice::new(bytes)];
    let mut unsent = &mut parts[..];
    while !unsent.is_empty() {
        let written = stream.write_vectored(unsent)?;
        ensure!(written > 0, "the connection took no more bytes");
        IoSlice::advance_slices(&mut unsent, written);
    }
    Ok(())
}

/// Reads the next frame into `bytes` (reused, so its pages stay mapped); false when
/// the peer closed the connection between frames.
fn read_frame(stream: &mut TcpStream, bytes: &mut Vec<u8>) -> Result<bool> {
    let mut length = [0u8; 8];
    match stream.read_exact(&mut length) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        other => other?,
    }
    let length = usize::try_from(u64::from_le_bytes(length))?;
    ensure!(length <= 64 << 20, "a frame of {length} bytes");
    bytes.resize(length, 0);
    stream.read_exact(bytes)?;
    Ok(true)
}
