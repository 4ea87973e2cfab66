//! Total number conversions. JavaScript numbers are `f64` and wasm32's
//! `usize` is 32 bits, so offsets and lengths cross between `usize`, `u64`,
//! `u32` and `f64`; these say what happens at the edges (saturation), where
//! `as` would say nothing.

/// `usize` as `u64`: exact on every target this crate builds for.
pub fn u64_of(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `u64` as `usize`, saturating (wasm32: above 4 GiB - 1).
pub fn usize_sat(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// `u64` as `u32`, saturating.
pub fn u32_sat(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `usize` as `u32`, saturating (a wasm32 address or length always fits).
pub fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `usize` as `i32` for JavaScript's small signed results, saturating.
pub fn i32_of(v: usize) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// A count or offset as a JavaScript number: exact up to 2^53 (8 PiB),
/// beyond any length or offset the package meets.
#[allow(clippy::as_conversions)] // no lossless `From<u64> for f64` exists; rounding starts at 2^53
pub fn f64_of(v: u64) -> f64 {
    v as f64
}

/// A JavaScript number as a count or offset: fractions dropped, NaN and
/// negatives 0, above `u64::MAX` (and +Infinity) `u64::MAX`.
#[allow(clippy::as_conversions)] // float-to-int `as` saturates and maps NaN to 0: the rule wanted
pub fn u64_of_f64(v: f64) -> u64 {
    v as u64
}

/// The address of `p` in wasm memory, for JavaScript to copy to or from.
pub fn addr<T>(p: *const T) -> u32 {
    u32_of(p.addr())
}
