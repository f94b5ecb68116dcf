//! WASI preview 1 with nothing behind it, for toolchains whose output imports it
//! whatever the program does (Go's `wasip1`): no arguments, environment, files or
//! directories; a clock that advances a microsecond a reading and randomness from a
//! fixed seed, both counted per instance, so that a policy's decisions depend only on
//! what it was given; what it writes to stdout and stderr becomes its log (stderr as
//! warnings: a Go panic's message shows in the policy's status). Each import is
//! defined with the type the module declares; one this file does not know answers
//! `ENOSYS`.

use wasmtime::{Caller, Extern, FuncType, Linker, Module, Val};

use super::{HostState, PolicyLog, push_log};

/// The import module these functions are linked under.
pub(super) const WASI_MODULE: &str = "wasi_snapshot_preview1";

const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;
const ERRNO_NOSYS: i32 = 52;

/// What WASI state a store keeps: the clock and the random stream.
#[derive(Debug)]
pub(super) struct NoWasi {
    clock_ns: u64,
    random: u64,
}

impl Default for NoWasi {
    fn default() -> Self {
        NoWasi { clock_ns: 0, random: 0x9E37_79B9_7F4A_7C15 }
    }
}

impl NoWasi {
    fn next_random(&mut self) -> u8 {
        // xorshift64: a fixed stream, the same in every instance.
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        self.random as u8
    }
}

/// Links every WASI preview 1 function `module` imports.
pub(super) fn link(linker: &mut Linker<HostState>, module: &Module) -> wasmtime::Result<()> {
    let mut linked = std::collections::BTreeSet::new();
    for import in module.imports().filter(|i| i.module() == WASI_MODULE) {
        let Some(ty) = import.ty().func().cloned() else { continue };
        // A module may import one function more than once.
        if !linked.insert(import.name().to_string()) {
            continue;
        }
        let name = import.name().to_string();
        linker.func_new(WASI_MODULE, &name.clone(), ty.clone(), move |caller, params, results| {
            call(&name, &ty, caller, params, results)
        })?;
    }
    Ok(())
}

fn call(
    name: &str,
    ty: &FuncType,
    mut caller: Caller<'_, HostState>,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let arg = |i: usize| params.get(i).and_then(Val::i32).unwrap_or(0) as u32 as usize;
    let errno = match name {
        "proc_exit" => {
            let code = params.first().and_then(Val::i32).unwrap_or(0);
            return Err(wasmtime::Error::msg(format!("the policy exited (proc_exit({code}))")));
        }
        // No arguments or environment: counts of zero.
        "args_sizes_get" | "environ_sizes_get" => write_all(&mut caller, &[(arg(0), &[0; 4]), (arg(1), &[0; 4])]),
        "args_get" | "environ_get" | "sched_yield" => ERRNO_SUCCESS,
        "clock_time_get" => {
            caller.data_mut().wasi.clock_ns += 1_000;
            let now = caller.data().wasi.clock_ns.to_le_bytes();
            write_all(&mut caller, &[(arg(2), &now)])
        }
        "random_get" => {
            let bytes: Vec<u8> = (0..arg(1)).map(|_| caller.data_mut().wasi.next_random()).collect();
            write_all(&mut caller, &[(arg(0), &bytes)])
        }
        "fd_write" => fd_write(&mut caller, arg(0), arg(1), arg(2), arg(3)),
        // Standard input is empty.
        "fd_read" if arg(0) == 0 => write_all(&mut caller, &[(arg(3), &[0; 4])]),
        // No preopened directories, no files: every descriptor is a bad one.
        "fd_read"
        | "fd_close"
        | "fd_prestat_get"
        | "fd_prestat_dir_name"
        | "fd_fdstat_get"
        | "fd_seek"
        | "fd_fdstat_set_flags"
        | "path_open" => ERRNO_BADF,
        _ => ERRNO_NOSYS,
    };
    // Preview 1's functions answer an errno (or nothing, as proc_exit).
    if let (Some(slot), Some(wasmtime::ValType::I32)) = (results.first_mut(), ty.results().next()) {
        *slot = Val::I32(errno);
    }
    Ok(())
}

/// Writes each (address, bytes) into the caller's memory: `ERRNO_SUCCESS`, or an
/// out-of-bounds trap's errno where an address lies outside it.
fn write_all(caller: &mut Caller<'_, HostState>, writes: &[(usize, &[u8])]) -> i32 {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else { return ERRNO_NOSYS };
    for (at, bytes) in writes {
        if memory.write(&mut *caller, *at, bytes).is_err() {
            return 21; // EFAULT
        }
    }
    ERRNO_SUCCESS
}

/// stdout and stderr become log lines; other descriptors are bad ones.
fn fd_write(caller: &mut Caller<'_, HostState>, fd: usize, iovs: usize, count: usize, written_at: usize) -> i32 {
    let level = match fd {
        1 => 2,
        2 => 1,
        _ => return ERRNO_BADF,
    };
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else { return ERRNO_NOSYS };
    let data = memory.data(&*caller);
    let word = |at: usize| data.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let mut text = Vec::new();
    for i in 0..count.min(1024) {
        let (Some(ptr), Some(len)) = (word(iovs + 8 * i), word(iovs + 8 * i + 4)) else { return 21 };
        let Some(bytes) = data.get(ptr..ptr.saturating_add(len)) else { return 21 };
        text.extend_from_slice(bytes);
    }
    let total = (text.len() as u32).to_le_bytes();
    let message = String::from_utf8_lossy(&text).trim_end().to_string();
    if !message.is_empty() {
        push_log(caller.data_mut(), PolicyLog { level, message });
    }
    write_all(caller, &[(written_at, &total)])
}
