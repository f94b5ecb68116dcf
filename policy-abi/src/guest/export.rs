//! The macro that makes a [`Policy`](crate::guest::Policy) type a policy module.

/// Exports a [`Policy`](crate::guest::Policy) type as a policy module: the ABI marker,
/// `alloc`, `dealloc`, `decide`, `init`, `save_state`, `load_state` and
/// `parameters_schema`. One instance of the type, made at `init` (or from the default
/// parameters at the first call), lives as long as the module instance.
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
                static POLICY: ::std::cell::RefCell<$crate::guest::Hosted<Exported>> =
                    ::std::cell::RefCell::new($crate::guest::Hosted::default());
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
                let out = POLICY.with(|p| p.borrow_mut().decide_json(input));
                raw::output(out)
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn init(ptr: i32, len: i32) -> i64 {
                // SAFETY: the host wrote `len` bytes at `ptr` into a buffer from
                // `alloc` and frees it only after this call returns.
                let input = unsafe { raw::input(ptr, len) };
                let out = POLICY.with(|p| p.borrow_mut().init_json(input));
                raw::output(out)
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn save_state() -> i64 {
                raw::output(POLICY.with(|p| p.borrow_mut().save_state_json()))
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn load_state(ptr: i32, len: i32) -> i64 {
                // SAFETY: the host wrote `len` bytes at `ptr` into a buffer from
                // `alloc` and frees it only after this call returns.
                let input = unsafe { raw::input(ptr, len) };
                let out = POLICY.with(|p| p.borrow_mut().load_state_json(input));
                raw::output(out)
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn parameters_schema() -> i64 {
                raw::output($crate::guest::Hosted::<Exported>::parameters_schema_json())
            }
        }
    };
}
