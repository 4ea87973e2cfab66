//! Bounds-checked little-endian field reads. Every read returns `None` past
//! the end instead of panicking, so callers turn a short buffer into EOF.

/// `N` bytes at `at`, or `None` when they are not all there.
#[inline]
pub(crate) fn array<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    let end = at.checked_add(N)?;
    buf.get(at..end)?.try_into().ok()
}

#[inline]
pub(crate) fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    array(buf, at).map(u32::from_le_bytes)
}

#[inline]
pub(crate) fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    array(buf, at).map(u64::from_le_bytes)
}

/// Index of the first nonzero byte of `buf`, if any.
#[inline]
pub(crate) fn first_nonzero(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b != 0)
}

/// `u64` to `usize`, `None` when it does not fit (32-bit targets).
#[inline]
pub(crate) fn usize_from(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

/// `usize` to `u64`; lossless on every supported target (usize is at most 64 bits).
#[inline]
pub(crate) fn u64_from(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}
