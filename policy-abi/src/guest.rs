//! The guest kit: write a policy in Rust as a type with a `decide` method, and
//! [`export_policy!`](crate::export_policy) gives it the ABI's exports.
//!
//! ```ignore
//! use modelless_policy_abi::guest::Policy;
//! use modelless_policy_abi::{Decision, Snapshot};
//!
//! #[derive(Default)]
//! struct KeepEverything;
//!
//! impl Policy for KeepEverything {
//!     fn decide(&mut self, _snapshot: &Snapshot) -> Decision {
//!         Decision::default()
//!     }
//! }
//!
//! modelless_policy_abi::export_policy!(KeepEverything);
//! ```
//!
//! The same type runs natively (call `decide` in tests) and as a module built for
//! `wasm32-unknown-unknown`.

use crate::decision::{Decision, PolicyOutput};
use crate::snapshot::Snapshot;

/// A scheduling policy.
pub trait Policy: Default {
    /// The decision for this tick.
    fn decide(&mut self, snapshot: &Snapshot) -> Decision;

    /// Takes the policy's parameters (JSON), once, before the first tick.
    fn init(&mut self, _parameters: &serde_json::Value) -> Result<(), String> {
        Ok(())
    }

    /// The policy's own state, to carry over to the module that replaces it.
    fn save_state(&self) -> Option<serde_json::Value> {
        None
    }

    /// Takes the state a module it replaces saved.
    fn load_state(&mut self, _state: serde_json::Value) -> Result<(), String> {
        Ok(())
    }
}

/// `decide` on JSON: the snapshot in, the decision (or `{"error": …}`) out.
pub fn decide_json<P: Policy>(policy: &mut P, snapshot: &[u8]) -> Vec<u8> {
    let output = match serde_json::from_slice::<Snapshot>(snapshot) {
        Ok(snapshot) => PolicyOutput::Decision(policy.decide(&snapshot)),
        Err(e) => PolicyOutput::Error { error: format!("invalid snapshot: {e}") },
    };
    to_json(&output)
}

/// `init` on JSON: `{}` when it took the parameters, else `{"error": …}`.
pub fn init_json<P: Policy>(policy: &mut P, parameters: &[u8]) -> Vec<u8> {
    let result = serde_json::from_slice(parameters).map_err(|e| e.to_string()).and_then(|p| policy.init(&p));
    status_json(result)
}

/// `save_state` as JSON (`null` for none).
pub fn save_state_json<P: Policy>(policy: &P) -> Vec<u8> {
    to_json(&policy.save_state())
}

/// `load_state` on JSON: `{}` when it took the state, else `{"error": …}`.
pub fn load_state_json<P: Policy>(policy: &mut P, state: &[u8]) -> Vec<u8> {
    let result = serde_json::from_slice(state).map_err(|e| e.to_string()).and_then(|s| policy.load_state(s));
    status_json(result)
}

fn status_json(result: Result<(), String>) -> Vec<u8> {
    match result {
        Ok(()) => b"{}".to_vec(),
        Err(error) => to_json(&PolicyOutput::Error { error }),
    }
}

fn to_json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| format!(r#"{{"error":"cannot encode: {e}"}}"#).into_bytes())
}

/// How loud a line a policy logs is, as `modelless.log` numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Something failed.
    Error = 0,
    /// The policy cannot do its job as configured (the runtime shows it in the
    /// policy's status and logs).
    Warn = 1,
    /// Of interest.
    Info = 2,
    /// For whoever debugs the policy.
    Debug = 3,
}

/// Logs `message` through the host's `modelless.log` import. Natively (tests), nothing.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    raw::log(level as i32, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Packs an output buffer's address and length as the ABI returns them.
pub fn pack(ptr: u32, len: u32) -> i64 {
    ((u64::from(ptr) << 32) | u64::from(len)) as i64
}

/// Splits what [`pack`] packed.
pub fn unpack(packed: i64) -> (u32, u32) {
    let packed = packed as u64;
    ((packed >> 32) as u32, packed as u32)
}

/// The raw exports, for `wasm32` only: memory is handed over as (address, length).
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code, reason = "the ABI passes buffers as raw addresses into linear memory")]
pub mod raw {
    use super::pack;

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
}

/// Exports a [`Policy`] type as a policy module: the ABI marker, `alloc`, `dealloc`,
/// `decide`, `init`, `save_state` and `load_state`. One instance of the type lives
/// as long as the module instance.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        type __ModellessExportedPolicy = $policy;

        // The exports that take addresses are `unsafe`: only the host, which keeps the
        // ABI's contract on the buffers it passes, may call them.
        #[cfg(target_arch = "wasm32")]
        mod __modelless_policy_exports {
            use super::__ModellessExportedPolicy as Exported;
            use $crate::guest::raw;

            ::std::thread_local! {
                static POLICY: ::std::cell::RefCell<Exported> = ::std::cell::RefCell::new(Exported::default());
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn modelless_policy_abi_v1() {}

            #[unsafe(no_mangle)]
            pub extern "C" fn alloc(len: i32) -> i32 {
                raw::alloc(len)
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn dealloc(ptr: i32, len: i32) {
                // SAFETY: the host frees only what `alloc` or an export handed it,
                // with the length it was handed (the ABI's contract).
                unsafe { raw::dealloc(ptr, len) }
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn decide(ptr: i32, len: i32) -> i64 {
                // SAFETY: the host wrote `len` bytes at `ptr` into a buffer from
                // `alloc` and frees it only after this call returns.
                let input = unsafe { raw::input(ptr, len) };
                let out = POLICY.with(|p| $crate::guest::decide_json(&mut *p.borrow_mut(), input));
                raw::output(out)
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn init(ptr: i32, len: i32) -> i64 {
                // SAFETY: the host wrote `len` bytes at `ptr` into a buffer from
                // `alloc` and frees it only after this call returns.
                let input = unsafe { raw::input(ptr, len) };
                let out = POLICY.with(|p| $crate::guest::init_json(&mut *p.borrow_mut(), input));
                raw::output(out)
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn save_state() -> i64 {
                raw::output(POLICY.with(|p| $crate::guest::save_state_json(&*p.borrow())))
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn load_state(ptr: i32, len: i32) -> i64 {
                // SAFETY: the host wrote `len` bytes at `ptr` into a buffer from
                // `alloc` and frees it only after this call returns.
                let input = unsafe { raw::input(ptr, len) };
                let out = POLICY.with(|p| $crate::guest::load_state_json(&mut *p.borrow_mut(), input));
                raw::output(out)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::TaskDecision;

    /// Switches every task to the variant named in its parameters, and counts ticks.
    #[derive(Default)]
    struct Fixed {
        variant: String,
        ticks: u64,
    }

    impl Policy for Fixed {
        fn decide(&mut self, snapshot: &Snapshot) -> Decision {
            self.ticks += 1;
            let tasks = snapshot
                .tasks
                .iter()
                .map(|t| TaskDecision { variant: Some(self.variant.clone()), ..TaskDecision::keep(&t.name) })
                .collect();
            Decision { tasks }
        }

        fn init(&mut self, parameters: &serde_json::Value) -> Result<(), String> {
            self.variant = parameters["variant"].as_str().ok_or("no variant")?.to_string();
            Ok(())
        }

        fn save_state(&self) -> Option<serde_json::Value> {
            Some(serde_json::json!(self.ticks))
        }

        fn load_state(&mut self, state: serde_json::Value) -> Result<(), String> {
            self.ticks = state.as_u64().ok_or("not a count")?;
            Ok(())
        }
    }

    fn snapshot() -> Vec<u8> {
        let snapshot = Snapshot {
            tasks: vec![crate::snapshot::TaskSnapshot { name: "classify".into(), ..Default::default() }],
            ..Snapshot::default()
        };
        serde_json::to_vec(&snapshot).unwrap()
    }

    #[test]
    fn json_in_json_out() {
        let mut policy = Fixed::default();
        assert_eq!(init_json(&mut policy, br#"{"variant": "small"}"#), b"{}");
        let out: PolicyOutput = serde_json::from_slice(&decide_json(&mut policy, &snapshot())).unwrap();
        let PolicyOutput::Decision(decision) = out else { panic!("{out:?}") };
        assert_eq!(decision.tasks[0].variant.as_deref(), Some("small"));
        assert_eq!(decision.tasks[0].max_batch_size, None);
    }

    #[test]
    fn bad_input_is_answered_with_an_error() {
        let mut policy = Fixed::default();
        let out: PolicyOutput = serde_json::from_slice(&decide_json(&mut policy, b"not json")).unwrap();
        assert!(matches!(out, PolicyOutput::Error { error } if error.contains("invalid snapshot")));
        let out: PolicyOutput = serde_json::from_slice(&init_json(&mut policy, b"{}")).unwrap();
        assert!(matches!(out, PolicyOutput::Error { error } if error == "no variant"));
    }

    #[test]
    fn state_survives_a_save_and_a_load() {
        let mut old = Fixed::default();
        decide_json(&mut old, &snapshot());
        decide_json(&mut old, &snapshot());
        let mut new = Fixed::default();
        assert_eq!(load_state_json(&mut new, &save_state_json(&old)), b"{}");
        assert_eq!(new.ticks, 2);
    }

    #[test]
    fn packing_keeps_address_and_length() {
        assert_eq!(unpack(pack(0x0010_2000, 51_200)), (0x0010_2000, 51_200));
        assert_eq!(unpack(pack(u32::MAX, u32::MAX)), (u32::MAX, u32::MAX));
    }
}
