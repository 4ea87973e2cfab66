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

/// Index of the first byte of `buf` above 1 (a bool element that is not 0
/// or 1), if any. Whole blocks are OR-ed first, which compiles to vector
/// code, and only a block with a bad byte is searched: a byte-by-byte
/// search with early exit does not vectorize and was 12x slower on a
/// 1 GiB bool payload. Bare-metal targets have no vector unit to gain
/// from it and keep the smaller plain search.
pub(crate) fn first_above_one(buf: &[u8]) -> Option<usize> {
    const BLOCK: usize = 64;
    let bad = |b: u8| b & !1 != 0;
    if cfg!(target_os = "none") {
        return buf.iter().position(|&b| bad(b));
    }
    let mut at = 0usize;
    for block in buf.chunks_exact(BLOCK) {
        if bad(block.iter().fold(0, |acc, &b| acc | b)) {
            break;
        }
        at = at.saturating_add(BLOCK);
    }
    // Fallback not taken: at counts whole blocks of buf, so at <= buf.len().
    let rest = buf.get(at..).unwrap_or(&[]);
    rest.iter().position(|&b| bad(b)).map(|k| at.saturating_add(k))
}

// Every supported target has 32- or 64-bit pointers, so a `u32` always fits
// a `usize` and a `usize` always fits a `u64`: the conversions below are lossless.
const _: () = assert!(usize::BITS >= u32::BITS && usize::BITS <= u64::BITS);

/// `u64` to `usize`, `None` when it does not fit (32-bit targets). These
/// conversions are public so the readers outside the core (the CLI's
/// converter) share one set of checked integer conversions.
#[inline]
#[must_use]
pub fn usize_from(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

/// `u64` to `usize`, saturating: a saturated value is past the end of any
/// real buffer, so the bounds check that follows fails as it should.
#[inline]
pub fn usize_sat(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// `u32` to `usize`, lossless (asserted above).
#[inline]
#[allow(clippy::as_conversions)] // widening; `From` is not implemented for it
pub const fn usize_from_u32(v: u32) -> usize {
    v as usize
}

/// `usize` to `u64`, lossless (asserted above).
#[inline]
#[allow(clippy::as_conversions)] // widening; `From` is not implemented for it
pub const fn u64_from(v: usize) -> u64 {
    v as u64
}

#[cfg(test)]
mod tests {
    use super::first_above_one;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    /// The same answer as a byte-by-byte search for a bad byte at every
    /// position of every length around the block size (with a second bad
    /// byte after it), and for none.
    #[test]
    fn first_above_one_agrees_with_a_plain_search() {
        // Miri interprets slowly: there, the lengths around the block edges only.
        let lens: Vec<usize> = if cfg!(miri) { vec![0, 1, 63, 64, 65, 128, 130] } else { (0..200).collect() };
        for len in lens {
            let clean: Vec<u8> = (0..len).map(|i| u8::from(i % 3 == 0)).collect();
            assert_eq!(first_above_one(&clean), None);
            for at in 0..len {
                for bad in [2u8, 0x80, 0xFF] {
                    let mut buf = clean.clone();
                    buf[at] = bad;
                    buf[(at + 70).min(len - 1)] = 3;
                    assert_eq!(first_above_one(&buf), Some(at), "len {len} at {at}");
                }
            }
        }
    }
}
