//! The raw exports, for `wasm32` only: memory is handed over as (address, length).
#![allow(unsafe_code, reason = "the ABI passes buffers as raw addresses into linear memory")]

use crate::buffer::pack;

#[link(wasm_import_module = "modelless")]
unsafe extern "C" {
    /// The host's `modelless.log(level, ptr, len)`.
    #[link_name = "log"]
    fn host_log(level: i32, ptr: i32, len: i32);
}

/// `modelless.log`: `message` at `level` (0 error … 4 trace).
pub fn log(level: i32, message: &str) {
    // SAFETY: the host reads `len` bytes at `ptr` of this module's memory during
    // the call, and `message` lives across it.
    unsafe { host_log(level, message.as_ptr() as i32, message.len() as i32) }
}

/// `alloc`: a buffer of `len` bytes the host writes into.
pub fn alloc(len: i32) -> i32 {
    let mut buffer = vec![0u8; len.max(0) as usize].into_boxed_slice();
    let ptr = buffer.as_mut_ptr();
    std::mem::forget(buffer);
    ptr as i32
}

/// `dealloc`: frees a buffer from [`alloc`] or one an export returned.
///
/// # Safety
///
/// (`ptr`, `len`) must be a buffer that [`alloc`] returned or that an export
/// returned through [`output`], with the same length, not freed before. Any
/// other pair frees memory this module does not own.
pub unsafe fn dealloc(ptr: i32, len: i32) {
    if ptr != 0 && len > 0 {
        // SAFETY: the caller promises `ptr` and `len` are those of a boxed slice
        // this module leaked and has not freed.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr as *mut u8, len as usize)) });
    }
}

/// The bytes the host wrote at (`ptr`, `len`), borrowed for as long as the call
/// that received them.
///
/// # Safety
///
/// (`ptr`, `len`) must lie within a live buffer from [`alloc`] that the host
/// filled, and the buffer must not be freed or written while the returned slice
/// is in use; the lifetime `'a` is the caller's to bound to that call.
pub unsafe fn input<'a>(ptr: i32, len: i32) -> &'a [u8] {
    if ptr == 0 || len <= 0 {
        return &[];
    }
    // SAFETY: the caller promises `len` bytes at `ptr` in a live buffer from
    // `alloc`, unchanged while the slice lives.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) }
}

/// Leaks `bytes` for the host to read and free; their packed address and length.
pub fn output(bytes: Vec<u8>) -> i64 {
    let bytes = bytes.into_boxed_slice();
    let len = bytes.len() as u32;
    let ptr = Box::into_raw(bytes) as *mut u8 as u32;
    pack(ptr, len)
}
