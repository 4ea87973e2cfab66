//! Frozen values for JavaScript: the core validates, then this module
//! describes the value's type and its tensor directories in one compact
//! `u32` array; JavaScript walks the caller's own bytes with it.
//!
//! The value is copied into wasm memory whole (Frozen values have no
//! payload to skip: every byte is checked) and [`kiln_nostd::frozen::Reader`]
//! checks it: frame, counts, UTF-8, bool and opt bytes, dict key order,
//! nested directories, trailing bytes. Only when it accepts does
//! [`schema_nodes`] and [`tables`] run; JavaScript then builds objects from the real bytes,
//! which the check has proved well formed, so its walk needs no checks.
//!
//! Output layout (all `u32`):
//!
//! ```text
//! S                      schema node count (0 when the caller has the type cached)
//! S × [kind, name_at, name_len, end]
//!                        the type's nodes in pre-order: KIND_* code, the field
//!                        name as a range of the type text (ASCII, so also UTF-16
//!                        units), the index one past the node's subtree
//! T                      number of tensor directories in the value
//! T × [len, table…]      for each `tensors` value in byte order, the table
//!                        table::build writes (absolute offsets)
//! ```

use kiln_nostd::frozen::{Kind, TypeRef, Value};

use crate::conv::{u32_of, u64_of};
use crate::table;

/// Node capacity of a parsed type: the CLI's (`kiln decode --type`), so both
/// accept the same type texts.
pub const NODES: usize = 2048;

/// Kind codes of the schema nodes (mirrored in `js/frozen.js`).
pub const fn kind_code(kind: Kind) -> u32 {
    match kind {
        Kind::Bool => 0,
        Kind::I8 => 1,
        Kind::I16 => 2,
        Kind::I32 => 3,
        Kind::I64 => 4,
        Kind::U8 => 5,
        Kind::U16 => 6,
        Kind::U32 => 7,
        Kind::U64 => 8,
        Kind::Int => 9,
        Kind::Uint => 10,
        Kind::F32 => 11,
        Kind::F64 => 12,
        Kind::Str => 13,
        Kind::Tensors => 14,
        Kind::List => 15,
        Kind::Opt => 16,
        Kind::Dict => 17,
        Kind::Struct => 18,
    }
}

/// Appends the nodes of `t` (pre-order) to `out`; `text` is the schema's
/// text, which field names borrow from. Returns the node count.
pub fn schema_nodes(t: TypeRef<'_>, text: &str, out: &mut Vec<u32>) -> u32 {
    let base = out.len();
    emit(t, text.as_ptr().addr(), base, out);
    u32_of(out.len().saturating_sub(base) / 4)
}

fn emit(t: TypeRef<'_>, text: usize, base: usize, out: &mut Vec<u32>) {
    let at = out.len();
    let name = t.name();
    // Field names borrow the type text: their offsets in it.
    let name_at = if name.is_empty() { 0 } else { name.as_ptr().addr().wrapping_sub(text) };
    out.extend_from_slice(&[kind_code(t.kind()), u32_of(name_at), u32_of(name.len()), 0]);
    match t.kind() {
        Kind::List | Kind::Opt | Kind::Dict => {
            if let Some(e) = t.elem() {
                emit(e, text, base, out);
            }
        }
        Kind::Struct => {
            for f in t.fields() {
                emit(f, text, base, out);
            }
        }
        _ => {}
    }
    let end = u32_of(out.len().saturating_sub(base) / 4);
    if let Some(slot) = out.get_mut(at.saturating_add(3)) {
        *slot = end;
    }
}

/// True when a value of `t` can hold a tensor directory.
pub fn has_tensors(t: TypeRef<'_>) -> bool {
    match t.kind() {
        Kind::Tensors => true,
        Kind::List | Kind::Opt | Kind::Dict => t.elem().is_some_and(has_tensors),
        Kind::Struct => t.fields().any(has_tensors),
        _ => false,
    }
}

/// Appends `[len, table…]` for every directory in the checked value `v`, in
/// byte order; returns how many. `scratch` holds one table at a time.
pub fn tables(v: Value<'_, '_>, scratch: &mut Vec<u32>, out: &mut Vec<u32>) -> u32 {
    match v.kind() {
        Kind::Tensors => match v.as_tensors() {
            Some(dir) => {
                table::build(&dir, u64_of(dir.start()), scratch);
                out.push(u32_of(scratch.len()));
                out.extend_from_slice(scratch);
                1
            }
            None => 0,
        },
        Kind::List => match v.as_list().filter(|l| has_tensors(l.elem())) {
            Some(list) => list.iter().map(|e| tables(e, scratch, out)).sum(),
            None => 0,
        },
        Kind::Opt => match v.as_opt().flatten() {
            Some(inner) if has_tensors(inner.ty()) => tables(inner, scratch, out),
            _ => 0,
        },
        Kind::Dict => match v.as_dict().filter(|d| has_tensors(d.value_type())) {
            Some(dict) => dict.entries().map(|(_, e)| tables(e, scratch, out)).sum(),
            None => 0,
        },
        Kind::Struct => match v.as_struct() {
            Some(st) => st.fields().filter(|(_, f)| has_tensors(f.ty())).map(|(_, f)| tables(f, scratch, out)).sum(),
            None => 0,
        },
        _ => 0,
    }
}
