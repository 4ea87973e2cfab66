//! # kiln-c-api: the C API of the Kiln v2 decoder
//!
//! `libkiln.a` (crate kiln-c, which wraps this one) and `include/kiln.h`
//! (generated from this crate by cbindgen)
//! bring `kiln-nostd` to C and C++: validate a model file or a tensor
//! directory, read its tensor table, view or copy its tensors, look names up
//! in caller scratch, check a block that arrives in pieces, and read one
//! from storage through a callback.
//!
//! Every function:
//! - allocates nothing and keeps no global state: all memory is the
//!   caller's (handles are plain structs of fixed size);
//! - checks every pointer for NULL and every length for overflow, and
//!   returns an error code, never aborts;
//! - has no panic path on the bare-metal targets (kiln-nopanic links the
//!   entry points with a panic handler that does not exist).
//!
//! Status codes: `KILN_OK` (0), the format's codes (`KILN_FRAME` ..
//! `KILN_SIGNATURE`, 1 to 11) and API errors (`KILN_ERR_*`, negative).
#![no_std]
#![allow(non_camel_case_types)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::as_conversions
    )
)]

#[cfg(test)]
extern crate std;

use core::ffi::{c_char, c_int};

pub(crate) use kiln_nostd::int::{u64_from, usize_from_u32, usize_sat};

mod dir;
mod incremental;
mod slots;
mod source;
mod texts;
mod verify;

pub use dir::*;
pub use incremental::*;
pub use slots::*;
pub use source::*;
pub use texts::*;
pub use verify::*;

// ------------------------------------------------------------------ codes

/// Success.
pub const KILN_OK: c_int = 0;
/// Format error FRAME: magic, version, flags, or a reserved byte.
pub const KILN_FRAME: c_int = 1;
/// Format error LIMIT: a cap, or a size product that overflows.
pub const KILN_LIMIT: c_int = 2;
/// Format error EOF: a checked length does not fit in the buffer.
pub const KILN_EOF: c_int = 3;
/// Format error TYPE: dtype, shape, range, name, quantization, layout or value fault.
pub const KILN_TYPE: c_int = 4;
/// Format error UTF8: a string or name that is not UTF-8.
pub const KILN_UTF8: c_int = 5;
/// Format error TRAILING: the buffer continues past the value.
pub const KILN_TRAILING: c_int = 6;
/// Format error SCHEMA: a frame hash does not match the expected type.
pub const KILN_SCHEMA: c_int = 7;
/// Format error DIGEST: a tensor's payload does not match its SHA-256 digest.
pub const KILN_DIGEST: c_int = 8;
/// Format error SHARD: a shard of a sharded model is missing or does not match its manifest.
pub const KILN_SHARD: c_int = 9;
/// Format error PATH: a shard name that is not a plain file name in the manifest's folder.
pub const KILN_PATH: c_int = 10;
/// Format error SIGNATURE: a signed model whose key, release or signature the reader does not accept.
pub const KILN_SIGNATURE: c_int = 11;

/// API error: a required pointer argument is NULL.
pub const KILN_ERR_NULL: c_int = -1;
/// API error: a length overflows the address space, a pointer is misaligned
/// for its element type, or an argument is out of range.
pub const KILN_ERR_ARGUMENT: c_int = -2;
/// API error: the handle was not filled by a successful call (or its parse
/// failed, or it is of another kind: see each function).
pub const KILN_ERR_HANDLE: c_int = -3;
/// API error: no tensor has that index or name (or no metadata that key).
pub const KILN_ERR_NOT_FOUND: c_int = -4;
/// API error: the element type cannot read this tensor's dtype.
pub const KILN_ERR_ELEMENT_TYPE: c_int = -5;
/// API error: a caller buffer is too short; `kiln_error.needed` (and the
/// count output of the copy functions) says how many bytes or elements it needs.
pub const KILN_ERR_BUFFER_TOO_SMALL: c_int = -6;
/// API error: the read callback returned nonzero (`kiln_error.read_status`).
pub const KILN_ERR_READ: c_int = -7;
/// API error: the incremental validator has not seen the whole directory yet.
pub const KILN_ERR_NOT_READY: c_int = -8;
/// API error: the row range is reversed, past the first dimension, or not
/// on byte or block boundaries.
pub const KILN_ERR_ROWS: c_int = -9;
/// API error: a flash callback returned nonzero (`kiln_error.read_status`).
pub const KILN_ERR_FLASH: c_int = -10;
/// API error: the slots hold no state yet (`kiln_slots_provision` first).
pub const KILN_ERR_NOT_PROVISIONED: c_int = -11;
/// API error: the slots hold a state already (provisioning is once).
pub const KILN_ERR_PROVISIONED: c_int = -12;
/// API error: no booted trial to confirm.
pub const KILN_ERR_NO_TRIAL: c_int = -13;
/// API error: a booted trial is not confirmed (confirm it or reboot first).
pub const KILN_ERR_TRIAL_RUNNING: c_int = -14;
/// API error: the release is not above the release counter.
pub const KILN_ERR_NOT_NEWER: c_int = -15;
/// API error: the keys sector holds no valid list of trusted keys.
pub const KILN_ERR_KEYS: c_int = -16;
/// API error: the image does not fit the slot.
pub const KILN_ERR_TOO_LARGE: c_int = -17;

/// The spec's default cap on counts and byte runs (16,777,216).
pub const KILN_DEFAULT_CAP: u32 = 16_777_216;
/// `kiln_quant.outer_index` (and `scale_index`) when there is none.
pub const KILN_NO_INDEX: u32 = u32::MAX;

// ------------------------------------------------------------------ errors

/// What went wrong. Filled by every function that takes a `kiln_error *`
/// (which may be NULL when only the return code is wanted); on success
/// `code` is `KILN_OK` and the strings are empty.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_error {
    /// `KILN_OK`, a format code (`KILN_FRAME` .. `KILN_SIGNATURE`) or an API
    /// error (`KILN_ERR_*`, negative). Equal to the function's return value.
    pub code: c_int,
    /// Format errors: the absolute byte offset, from the start of the
    /// caller's buffer (or source), of the field or byte that broke the rule.
    pub offset: u64,
    /// Format errors: the rule's stable identifier (e.g. `"NonzeroGap"`), a
    /// static NUL-terminated string; `""` otherwise.
    pub rule: *const c_char,
    /// A one-line description a person understands (of the rule, or of the
    /// API error), a static NUL-terminated string; `""` on success, and for
    /// format errors when libkiln.a was built without the
    /// `rule-descriptions` feature (CMake: `KILN_RULE_DESCRIPTIONS=OFF`).
    pub description: *const c_char,
    /// `KILN_ERR_BUFFER_TOO_SMALL`: how many bytes (or elements) are needed.
    pub needed: u64,
    /// `KILN_ERR_READ`, `KILN_ERR_FLASH`: the nonzero value the callback returned.
    pub read_status: c_int,
}

/// A failure inside the API, before it is written to a `kiln_error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fail {
    // The core's rules and the model crate's, in one form.
    Kiln(kiln_model::Error),
    Api(c_int),
    TooSmall(u64),
    Read(c_int),
    Flash(c_int),
}

impl From<kiln_nostd::Error> for Fail {
    fn from(e: kiln_nostd::Error) -> Self {
        Fail::Kiln(e.into())
    }
}

impl From<kiln_model::Error> for Fail {
    fn from(e: kiln_model::Error) -> Self {
        Fail::Kiln(e)
    }
}

impl Fail {
    pub(crate) fn code(self) -> c_int {
        match self {
            Fail::Kiln(e) => texts::code_of(e.code()),
            Fail::Api(c) => c,
            Fail::TooSmall(_) => KILN_ERR_BUFFER_TOO_SMALL,
            Fail::Read(_) => KILN_ERR_READ,
            Fail::Flash(_) => KILN_ERR_FLASH,
        }
    }

    fn to_c(self) -> kiln_error {
        let code = self.code();
        let mut out = kiln_error {
            code,
            offset: 0,
            rule: c"".as_ptr(),
            description: texts::code_description(code).as_ptr(),
            needed: 0,
            read_status: 0,
        };
        match self {
            Fail::Kiln(e) => {
                let (id, text) = texts::rule_texts(e.rule());
                out.offset = e.offset_u64();
                out.rule = id.as_ptr();
                out.description = text.as_ptr();
            }
            Fail::TooSmall(n) => out.needed = n,
            Fail::Read(s) | Fail::Flash(s) => out.read_status = s,
            Fail::Api(_) => {}
        }
        out
    }
}

/// Writes the outcome to `err` (when not NULL) and returns its code.
pub(crate) fn report(err: *mut kiln_error, r: Result<(), Fail>) -> c_int {
    let (code, value) = match r {
        Ok(()) => (
            KILN_OK,
            kiln_error {
                code: KILN_OK,
                offset: 0,
                rule: c"".as_ptr(),
                description: c"".as_ptr(),
                needed: 0,
                read_status: 0,
            },
        ),
        Err(f) => (f.code(), f.to_c()),
    };
    if !err.is_null() {
        // SAFETY: not NULL; the caller passes a writable kiln_error.
        unsafe { err.write(value) };
    }
    code
}

// ------------------------------------------------------------------ memory

/// The caller's `(ptr, len)` as a slice: `len` 0 is the empty slice
/// whatever `ptr` is; otherwise `ptr` must be non-NULL, aligned for `T`, and
/// the range must fit the address space.
///
/// # Safety
/// A non-empty range must be readable memory that lives for `'a` and that
/// nothing writes while the slice is in use.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> Result<&'a [T], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    check_range(ptr, len)?;
    // SAFETY: checked above; the rest is the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(ptr, len) })
}

/// Like [`slice`], writable.
///
/// # Safety
/// As for [`slice`], and nothing else reads or writes the range meanwhile.
pub(crate) unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize) -> Result<&'a mut [T], Fail> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_range(ptr, len)?;
    // SAFETY: checked above; the rest is the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts_mut(ptr, len) })
}

fn check_range<T>(ptr: *const T, len: usize) -> Result<(), Fail> {
    if ptr.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    let addr = ptr.addr();
    let aligned = addr.checked_rem(core::mem::align_of::<T>()) == Some(0);
    let bytes = len.checked_mul(core::mem::size_of::<T>()).filter(|&b| b <= isize::MAX.unsigned_abs());
    match bytes.and_then(|b| addr.checked_add(b)) {
        Some(_) if aligned => Ok(()),
        _ => Err(Fail::Api(KILN_ERR_ARGUMENT)),
    }
}

/// The bytes of a NUL-terminated string (without the NUL).
///
/// # Safety
/// `ptr` must be NULL or point to a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn c_string<'a>(ptr: *const c_char) -> Result<&'a [u8], Fail> {
    if ptr.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    // A loop of its own rather than CStr::from_ptr, which calls the C
    // library's strlen: kiln-c needs no C library.
    let mut n = 0usize;
    // SAFETY: every byte up to and including the NUL is readable, per the contract.
    while unsafe { ptr.add(n).read() } != 0 {
        n = n.checked_add(1).ok_or(Fail::Api(KILN_ERR_ARGUMENT))?;
    }
    // SAFETY: the `n` bytes before the NUL, as above.
    unsafe { slice(ptr.cast::<u8>(), n) }
}

/// Writes `value` through `out` when it is not NULL.
pub(crate) fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: not NULL; the caller passes a writable T.
        unsafe { out.write(value) };
    }
}
