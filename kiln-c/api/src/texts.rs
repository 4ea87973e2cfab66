//! Static NUL-terminated texts: code names, dtype names and the rules' ids
//! and descriptions (generated at compile time from kiln-nostd's own
//! `Rule::id()` and `Rule::description()`; see build.rs).

use core::ffi::{c_char, c_int, CStr};

use kiln_nostd::{DType, ErrorCode, Rule};

use crate::*;

/// `s` followed by a NUL, as an array of `N = s.len() + 1` bytes. Evaluated
/// at compile time only (see `cstr!`).
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
pub(crate) const fn nul_terminated<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// A `&'static CStr` of a constant `&str` expression, built at compile time
/// (an interior NUL is a compile error, never a run-time one).
macro_rules! cstr {
    ($s:expr) => {{
        const S: &str = $s;
        const B: [u8; S.len() + 1] = crate::texts::nul_terminated(S);
        const C: &CStr = match CStr::from_bytes_with_nul(&B) {
            Ok(c) => c,
            Err(_) => panic!("a rule text holds a NUL byte"),
        };
        C
    }};
}

/// A rule's description (feature `rule-descriptions`), or `""`: without
/// the feature the descriptions (about 6 KB of flash) are left out.
#[cfg(feature = "rule-descriptions")]
macro_rules! description {
    ($s:expr) => {
        cstr!($s)
    };
}
#[cfg(not(feature = "rule-descriptions"))]
macro_rules! description {
    ($s:expr) => {
        c""
    };
}

include!(concat!(env!("OUT_DIR"), "/rules.rs"));

/// The C code of a format error code.
pub(crate) fn code_of(code: ErrorCode) -> c_int {
    match code {
        ErrorCode::Frame => KILN_FRAME,
        ErrorCode::Limit => KILN_LIMIT,
        ErrorCode::Eof => KILN_EOF,
        ErrorCode::Type => KILN_TYPE,
        ErrorCode::Utf8 => KILN_UTF8,
        ErrorCode::Trailing => KILN_TRAILING,
        ErrorCode::Schema => KILN_SCHEMA,
        ErrorCode::Digest => KILN_DIGEST,
        ErrorCode::Shard => KILN_SHARD,
        ErrorCode::Path => KILN_PATH,
        // A code this build does not know (ErrorCode is non_exhaustive);
        // a test checks that every rule's code maps to 1..=10.
        _ => KILN_ERR_ARGUMENT,
    }
}

fn code_name_c(code: c_int) -> &'static CStr {
    match code {
        KILN_OK => c"OK",
        KILN_FRAME => c"FRAME",
        KILN_LIMIT => c"LIMIT",
        KILN_EOF => c"EOF",
        KILN_TYPE => c"TYPE",
        KILN_UTF8 => c"UTF8",
        KILN_TRAILING => c"TRAILING",
        KILN_SCHEMA => c"SCHEMA",
        KILN_DIGEST => c"DIGEST",
        KILN_SHARD => c"SHARD",
        KILN_PATH => c"PATH",
        KILN_ERR_NULL => c"ERR_NULL",
        KILN_ERR_ARGUMENT => c"ERR_ARGUMENT",
        KILN_ERR_HANDLE => c"ERR_HANDLE",
        KILN_ERR_NOT_FOUND => c"ERR_NOT_FOUND",
        KILN_ERR_ELEMENT_TYPE => c"ERR_ELEMENT_TYPE",
        KILN_ERR_BUFFER_TOO_SMALL => c"ERR_BUFFER_TOO_SMALL",
        KILN_ERR_READ => c"ERR_READ",
        KILN_ERR_NOT_READY => c"ERR_NOT_READY",
        KILN_ERR_ROWS => c"ERR_ROWS",
        _ => c"UNKNOWN",
    }
}

/// A description of an API error code (format errors carry their rule's).
pub(crate) fn code_description(code: c_int) -> &'static CStr {
    match code {
        KILN_ERR_NULL => c"a required pointer argument is NULL",
        KILN_ERR_ARGUMENT => c"a length overflows, a pointer is misaligned, or an argument is out of range",
        KILN_ERR_HANDLE => c"the handle was not filled by a successful call",
        KILN_ERR_NOT_FOUND => c"no tensor (or metadata entry) has that index or name",
        KILN_ERR_ELEMENT_TYPE => c"the element type cannot read this tensor's dtype",
        KILN_ERR_BUFFER_TOO_SMALL => c"a caller buffer is too short",
        KILN_ERR_READ => c"the read callback failed",
        KILN_ERR_NOT_READY => c"the directory has not arrived yet",
        KILN_ERR_ROWS => c"the rows are out of range or not on byte or block boundaries",
        _ => c"",
    }
}

/// The name of a status code: `"OK"` for 0; `"FRAME"`, `"LIMIT"`, `"EOF"`,
/// `"TYPE"`, `"UTF8"`, `"TRAILING"`, `"SCHEMA"` for the format's codes (as in
/// the spec, the golden cases and `kiln validate --json`); `"ERR_NULL"` ...
/// for API errors; `"UNKNOWN"` otherwise. Static, NUL-terminated, never NULL.
#[no_mangle]
pub extern "C" fn kiln_code_name(code: c_int) -> *const c_char {
    code_name_c(code).as_ptr()
}

fn dtype_name_c(dtype: DType) -> &'static CStr {
    match dtype {
        DType::F64 => c"f64",
        DType::F32 => c"f32",
        DType::F16 => c"f16",
        DType::BF16 => c"bf16",
        DType::F8E4M3 => c"f8e4m3",
        DType::F8E5M2 => c"f8e5m2",
        DType::Bool => c"bool",
        DType::I8 => c"i8",
        DType::U8 => c"u8",
        DType::I16 => c"i16",
        DType::U16 => c"u16",
        DType::I32 => c"i32",
        DType::U32 => c"u32",
        DType::I64 => c"i64",
        DType::U64 => c"u64",
        DType::I4 => c"i4",
        DType::U4 => c"u4",
        DType::E2M1 => c"e2m1",
        DType::E8M0 => c"e8m0",
        DType::Opaque(_) => c"opaque",
    }
}

/// The spec's name of a dtype code (`"f32"`, `"e2m1"`; `"opaque"` for
/// 4096..32767), or NULL for a code that is not defined.
#[no_mangle]
pub extern "C" fn kiln_dtype_name(code: u16) -> *const c_char {
    match DType::from_code(code) {
        Some(d) => dtype_name_c(d).as_ptr(),
        None => core::ptr::null(),
    }
}

pub(crate) fn dtype_name_ptr(dtype: DType) -> *const c_char {
    dtype_name_c(dtype).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule of the core has its texts here, equal to `id()` and
    /// `description()`, and its code maps to one of the ten format codes
    /// with the spec's name.
    #[test]
    fn every_rule_has_its_texts_and_code() {
        assert!(ALL_RULES.len() >= 119, "{}", ALL_RULES.len());
        for rule in ALL_RULES {
            let (id, text) = rule_texts(rule);
            assert_eq!(id.to_str().unwrap(), rule.id());
            let want = if cfg!(feature = "rule-descriptions") { rule.description() } else { "" };
            assert_eq!(text.to_str().unwrap(), want);
            let code = code_of(rule.code());
            assert!((1..=10).contains(&code), "{rule:?}");
            assert_eq!(code_name_c(code).to_str().unwrap(), rule.code().as_str());
        }
        // Identifiers are unique.
        let mut ids: std::vec::Vec<_> = ALL_RULES.iter().map(|r| r.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL_RULES.len());
    }

    #[test]
    fn dtype_names_are_the_cores() {
        for code in 0..=u16::MAX {
            let p = kiln_dtype_name(code);
            match DType::from_code(code) {
                Some(d) => {
                    // SAFETY: for a known code the name is a static NUL-terminated string.
                    let name = unsafe { CStr::from_ptr(p) };
                    assert_eq!(name.to_str().unwrap(), d.name());
                }
                None => assert!(p.is_null()),
            }
        }
    }
}
