// The AssemblyScript kit for modelless policies: the core ABI v1's buffers and
// packing. A policy's entry file re-exports `alloc`, `dealloc` and the marker from
// here, and exports `decide` (and `init`) as functions of (ptr, len) that hand the
// JSON to `respond`:
//
//   export { alloc, dealloc, modelless_policy_abi_v1 } from "../kit/policy";
//   export function decide(ptr: i32, len: i32): i64 {
//     return respond(ptr, len, (json: string): string => JSON.stringify(policy.decide(JSON.parse<Snapshot>(json))));
//   }
//
// JSON goes through json-as (`@json` classes, `--transform json-as/transform`); the
// snapshot's fields a policy reads are declared in its own classes, the rest skipped.
// A call that fails answers `{"error": ...}` through `fail`.

/** The marker whose presence is the ABI's version check. */
export function modelless_policy_abi_v1(): void {}

/** A buffer of `len` bytes the host writes into, outside the garbage collector. */
export function alloc(len: i32): i32 {
  return <i32>heap.alloc(<usize>max(len, 1));
}

/** Frees a buffer from `alloc`, or one an export returned. */
export function dealloc(ptr: i32, len: i32): void {
  heap.free(<usize>ptr);
}

/** `text` in a fresh buffer, packed as `(ptr << 32) | len` for the host to read and free. */
export function output(text: string): i64 {
  const bytes = String.UTF8.encode(text);
  const len = bytes.byteLength;
  const ptr = heap.alloc(<usize>max(len, 1));
  memory.copy(ptr, changetype<usize>(bytes), <usize>len);
  return (<i64>ptr << 32) | <i64>len;
}

/** The error answer `{"error": message}`. */
export function fail(message: string): i64 {
  return output('{"error":' + quote(message) + "}");
}

/** The JSON string literal of `text`. */
export function quote(text: string): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c == 34 || c == 92) out += "\\" + String.fromCharCode(c);
    else if (c < 32) out += " ";
    else out += String.fromCharCode(c);
  }
  return out + '"';
}

/** The UTF-8 text the host wrote at (`ptr`, `len`). */
export function input(ptr: i32, len: i32): string {
  return String.UTF8.decodeUnsafe(<usize>ptr, <usize>len);
}

@external("modelless", "log")
declare function hostLog(level: i32, ptr: i32, len: i32): void;

/** Logs a line through the host (0 error, 1 warn: shown in the policy's status). */
export function log(level: i32, message: string): void {
  const bytes = String.UTF8.encode(message);
  hostLog(level, <i32>changetype<usize>(bytes), bytes.byteLength);
}
