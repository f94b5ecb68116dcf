//! libtorch's CUDA half, loaded before libtorch is first asked for CUDA devices.
//!
//! PyTorch splits libtorch into a CPU library and a CUDA one that registers itself
//! with the CPU one when it is loaded. A Rust binary links libtorch with
//! `--as-needed`; it calls nothing in `libtorch_cuda.so`, so the linker drops it, and
//! libtorch then finds no CUDA device on a machine that has one. Loading it by name,
//! globally, once, puts it back; where it is missing (a CPU-only PyTorch) or cannot
//! load, libtorch finds no device, as before, and a CUDA variant fails with
//! `DeviceUnavailable`.

use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

/// How many CUDA devices libtorch finds, its CUDA library loaded first.
pub(crate) fn cuda_device_count() -> i64 {
    static LOADED: OnceLock<()> = OnceLock::new();
    LOADED.get_or_init(load_cuda_library);
    tch::Cuda::device_count()
}

// Loading a library has no safe binding.
#[allow(unsafe_code)]
fn load_cuda_library() {
    // SAFETY: loading runs the library's initialisers, which register libtorch's CUDA
    // hooks with the CPU library already loaded: what `import torch` does in Python.
    match unsafe { Library::open(Some("libtorch_cuda.so"), RTLD_NOW | RTLD_GLOBAL) } {
        // Kept for the process's life: libtorch holds pointers into it.
        Ok(library) => std::mem::forget(library),
        Err(error) => tracing::debug!(%error, "libtorch_cuda.so not loaded; libtorch runs on the CPU only"),
    }
}
