//! Static NUL-terminated texts: status code names and descriptions, rule
//! ids and descriptions, dtype names. The format's codes, the rules and the
//! dtypes are the core's tables (`ErrorCode`, `Rule`, `DType`, in their C
//! form); only the API's own codes are stated here.

use core::ffi::{c_char, c_int, CStr};

use kiln_model::AnyRule;
use kiln_nostd::{DType, ErrorCode};

use crate::*;

/// The constants of the format's codes in the core's order (kiln.h needs
/// them as literals): the build fails when the core gains a code that
/// kiln.h lacks or a number differs.
const FORMAT_CODES: [c_int; ErrorCode::ALL.len()] = [
    KILN_FRAME,
    KILN_LIMIT,
    KILN_EOF,
    KILN_TYPE,
    KILN_UTF8,
    KILN_TRAILING,
    KILN_SCHEMA,
    KILN_DIGEST,
    KILN_SHARD,
    KILN_PATH,
    KILN_SIGNATURE,
];

// Compile time only, so the indexing and the widening cast cannot fail at run time.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::as_conversions)]
const _: () = {
    let mut i = 0;
    while i < FORMAT_CODES.len() {
        assert!(FORMAT_CODES[i] == ErrorCode::ALL[i].number() as c_int, "a KILN_ code differs from the core's number");
        i += 1;
    }
};

/// The API's own codes: constant, name, description.
const API_CODES: [(c_int, &CStr, &CStr); 17] = [
    (KILN_ERR_NULL, c"ERR_NULL", c"a required pointer argument is NULL"),
    (
        KILN_ERR_ARGUMENT,
        c"ERR_ARGUMENT",
        c"a length overflows, a pointer is misaligned, or an argument is out of range",
    ),
    (KILN_ERR_HANDLE, c"ERR_HANDLE", c"the handle was not filled by a successful call"),
    (KILN_ERR_NOT_FOUND, c"ERR_NOT_FOUND", c"no tensor (or metadata entry) has that index or name"),
    (KILN_ERR_ELEMENT_TYPE, c"ERR_ELEMENT_TYPE", c"the element type cannot read this tensor's dtype"),
    (KILN_ERR_BUFFER_TOO_SMALL, c"ERR_BUFFER_TOO_SMALL", c"a caller buffer is too short"),
    (KILN_ERR_READ, c"ERR_READ", c"the read callback failed"),
    (KILN_ERR_NOT_READY, c"ERR_NOT_READY", c"the directory has not arrived yet"),
    (KILN_ERR_ROWS, c"ERR_ROWS", c"the rows are out of range or not on byte or block boundaries"),
    (KILN_ERR_FLASH, c"ERR_FLASH", c"a flash callback failed"),
    (KILN_ERR_NOT_PROVISIONED, c"ERR_NOT_PROVISIONED", c"the slots hold no state yet"),
    (KILN_ERR_PROVISIONED, c"ERR_PROVISIONED", c"the slots are provisioned already"),
    (KILN_ERR_NO_TRIAL, c"ERR_NO_TRIAL", c"no booted trial to confirm"),
    (KILN_ERR_TRIAL_RUNNING, c"ERR_TRIAL_RUNNING", c"a booted trial is not confirmed"),
    (KILN_ERR_NOT_NEWER, c"ERR_NOT_NEWER", c"the release is not above the release counter"),
    (KILN_ERR_KEYS, c"ERR_KEYS", c"no valid list of trusted keys"),
    (KILN_ERR_TOO_LARGE, c"ERR_TOO_LARGE", c"the image does not fit the slot"),
];

fn api_code(code: c_int) -> Option<&'static (c_int, &'static CStr, &'static CStr)> {
    API_CODES.iter().find(|(c, _, _)| *c == code)
}

/// The C code of a format error code.
pub(crate) fn code_of(code: ErrorCode) -> c_int {
    c_int::from(code.number())
}

/// `(Rule::id(), Rule::description())` as static NUL-terminated strings;
/// the description is `""` without the feature `rule-descriptions` (so
/// the descriptions, about 6 KB of flash, are left out).
pub(crate) fn rule_texts(rule: AnyRule) -> (&'static CStr, &'static CStr) {
    #[cfg(feature = "rule-descriptions")]
    let text = rule.description_c_str();
    #[cfg(not(feature = "rule-descriptions"))]
    let text = c"";
    (rule.id_c_str(), text)
}

fn code_name_c(code: c_int) -> &'static CStr {
    if code == KILN_OK {
        return c"OK";
    }
    if let Some(c) = u8::try_from(code).ok().and_then(ErrorCode::from_number) {
        return c.as_c_str();
    }
    api_code(code).map_or(c"UNKNOWN", |&(_, name, _)| name)
}

/// A description of an API error code (format errors carry their rule's).
pub(crate) fn code_description(code: c_int) -> &'static CStr {
    api_code(code).map_or(c"", |&(_, _, text)| text)
}

/// The name of a status code: `"OK"` for 0; `"FRAME"`, `"LIMIT"`, `"EOF"`,
/// `"TYPE"`, `"UTF8"`, `"TRAILING"`, `"SCHEMA"`, ... `"SIGNATURE"` for the format's codes (as in
/// the spec, the golden cases and `kiln validate --json`); `"ERR_NULL"` ...
/// for API errors; `"UNKNOWN"` otherwise. Static, NUL-terminated, never NULL.
#[no_mangle]
pub extern "C" fn kiln_code_name(code: c_int) -> *const c_char {
    code_name_c(code).as_ptr()
}

/// The spec's name of a dtype code (`"f32"`, `"e2m1"`; `"opaque"` for
/// 4096..32767), or NULL for a code that is not defined.
#[no_mangle]
pub extern "C" fn kiln_dtype_name(code: u16) -> *const c_char {
    match DType::from_code(code) {
        Some(d) => dtype_name_ptr(d),
        None => core::ptr::null(),
    }
}

pub(crate) fn dtype_name_ptr(dtype: DType) -> *const c_char {
    dtype.name_c_str().as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule of the core and of the model crate has its texts here,
    /// equal to `id()` and `description()`, and its code maps to one of the
    /// eleven format codes with the spec's name.
    #[test]
    fn every_rule_has_its_texts_and_code() {
        let all: std::vec::Vec<AnyRule> = kiln_nostd::Rule::ALL
            .into_iter()
            .map(AnyRule::from)
            .chain(kiln_model::Rule::ALL.into_iter().map(AnyRule::from))
            .collect();
        assert!(all.len() >= 119, "{}", all.len());
        for rule in all.iter().copied() {
            let (id, text) = rule_texts(rule);
            assert_eq!(id.to_str().unwrap(), rule.id());
            let want = if cfg!(feature = "rule-descriptions") { rule.description() } else { "" };
            assert_eq!(text.to_str().unwrap(), want);
            let code = code_of(rule.code());
            assert!((1..=11).contains(&code), "{rule:?}");
            assert_eq!(code_name_c(code).to_str().unwrap(), rule.code().as_str());
        }
        // Identifiers are unique.
        let mut ids: std::vec::Vec<_> = all.iter().map(|r| r.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
    }

    /// Every status code has one name; the API's codes a description.
    #[test]
    fn code_names_and_descriptions() {
        let mut names = std::vec::Vec::new();
        for code in -20..=20 {
            let name = code_name_c(code).to_str().unwrap();
            if name != "UNKNOWN" {
                names.push(name);
            }
            assert_eq!(code_description(code).is_empty(), !(-17..=-1).contains(&code), "{code}");
        }
        assert_eq!(names.len(), 1 + 11 + 17, "{names:?}");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 29);
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
