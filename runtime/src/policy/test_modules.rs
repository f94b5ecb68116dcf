//! Policy modules in text format, for tests.

/// A policy in text format: one page of memory holding `{"tasks":[]}` at 1024,
/// a bump `alloc` from 4096, a `dealloc` that frees nothing, and `decide` as given
/// (it returns the answer's packed address and length). `extra` adds fields.
pub(crate) fn policy(decide: &str, extra: &str) -> String {
    format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 1024) "{{\"tasks\":[]}}")
            (data (i32.const 1100) "not json")
            (global $next (mut i32) (i32.const 4096))
            (func (export "modelless_policy_abi_v1"))
            (func (export "alloc") (param $len i32) (result i32)
                (local $at i32)
                (local.set $at (global.get $next))
                (global.set $next (i32.add (global.get $next) (local.get $len)))
                (local.get $at))
            (func (export "dealloc") (param i32 i32))
            (func $decide (export "decide") (param $ptr i32) (param $len i32) (result i64) {decide})
            {extra})"#
    )
}

/// `decide` answering the `{"tasks":[]}` at 1024.
#[cfg(test)]
pub(crate) const EMPTY_DECISION: &str = "(i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 12))";

/// A policy whose `decide` always answers `json`.
pub fn answering(json: &str) -> String {
    policy(&answer_at_2048(json), &data_at_2048(json))
}

/// A policy whose first `decide` answers `json` and every later one `{"tasks":[]}`:
/// a decision made once, never repeated.
#[cfg(test)]
pub(crate) fn answering_once(json: &str) -> String {
    let decide = format!(
        "(if (result i64) (i32.eqz (global.get $decided)) \
           (then (global.set $decided (i32.const 1)) {}) \
           (else {EMPTY_DECISION}))",
        answer_at_2048(json)
    );
    policy(&decide, &format!("(global $decided (mut i32) (i32.const 0)) {}", data_at_2048(json)))
}

/// `decide`'s answer: `json` as [`data_at_2048`] writes it.
fn answer_at_2048(json: &str) -> String {
    format!("(i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const {}))", json.len())
}

/// A data segment holding `json` at 2048.
fn data_at_2048(json: &str) -> String {
    let escaped = json.replace('\\', "\\\\").replace('"', "\\\"");
    format!(r#"(data (i32.const 2048) "{escaped}")"#)
}
