//! Bounds-checked little-endian field reads. Every read returns `None` past
//! the end instead of panicking, so callers turn a short buffer into EOF.

/// `N` bytes at `at`, or `None` when they are not all there.
#[inline]
pub fn array<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    let end = at.checked_add(N)?;
    buf.get(at..end)?.try_into().ok()
}

// Small cores (Cortex-M0, riscv32imc: the targets without compare-and-swap
// atomics, which are also those without unaligned loads, and M0 has no
// divide or count-leading-zeros instruction) get their own versions of a
// few primitives, chosen for code size:
// - a little-endian field read is there a byte load per byte and a shift
//   and add to join them, 20 to 40 bytes at each of some 60 read sites:
//   one out-of-line copy of each is smaller. `black_box` keeps link-time
//   optimisation from moving the loads back out to the callers (argument
//   promotion of a pointer the function only reads);
// - a 16-byte zero test is sixteen byte loads at each call site: a loop;
// - zeroing a table is a call to the 158-byte memclr routine: a loop.
// Elsewhere each is one wide load or a memset, inlined. Both sets are
// compiled for the tests, which hold them to the same answers.
#[cfg(all(target_os = "none", not(target_has_atomic = "32")))]
pub(crate) use small::{all_zero16, clear, le16, le32, le64};
#[cfg(not(all(target_os = "none", not(target_has_atomic = "32"))))]
pub(crate) use wide::{all_zero16, clear, le16, le32, le64};

#[cfg(any(test, all(target_os = "none", not(target_has_atomic = "32"))))]
mod small {
    /// `u16::from_le_bytes` of a field, out of line.
    #[inline(never)]
    pub(crate) fn le16(b: &[u8; 2]) -> u16 {
        u16::from_le_bytes(*core::hint::black_box(b))
    }

    /// `u32::from_le_bytes` of a field, out of line.
    #[inline(never)]
    pub(crate) fn le32(b: &[u8; 4]) -> u32 {
        u32::from_le_bytes(*core::hint::black_box(b))
    }

    /// `u64::from_le_bytes` of a field, out of line.
    #[inline(never)]
    pub(crate) fn le64(b: &[u8; 8]) -> u64 {
        u64::from_le_bytes(*core::hint::black_box(b))
    }

    /// True when the 16 bytes are all zero, by a byte loop.
    pub(crate) fn all_zero16(b: &[u8; 16]) -> bool {
        super::first_nonzero(b).is_none()
    }

    /// Sets every word to zero by a plain loop (the value hidden from the
    /// optimiser, which would make the loop a memclr call).
    pub(crate) fn clear(words: &mut [u32]) {
        let zero = core::hint::black_box(0);
        for w in words {
            *w = zero;
        }
    }
}

#[cfg(any(test, not(all(target_os = "none", not(target_has_atomic = "32")))))]
mod wide {
    /// `u16::from_le_bytes` of a field.
    #[inline]
    pub(crate) fn le16(b: &[u8; 2]) -> u16 {
        u16::from_le_bytes(*b)
    }

    /// `u32::from_le_bytes` of a field.
    #[inline]
    pub(crate) fn le32(b: &[u8; 4]) -> u32 {
        u32::from_le_bytes(*b)
    }

    /// `u64::from_le_bytes` of a field.
    #[inline]
    pub(crate) fn le64(b: &[u8; 8]) -> u64 {
        u64::from_le_bytes(*b)
    }

    /// True when the 16 bytes are all zero: one 128-bit compare.
    #[inline]
    pub(crate) fn all_zero16(b: &[u8; 16]) -> bool {
        u128::from_ne_bytes(*b) == 0
    }

    /// Sets every word to zero (a memset).
    #[inline]
    pub(crate) fn clear(words: &mut [u32]) {
        words.fill(0);
    }
}

/// `a * b`, `None` on overflow. On wasm32 `checked_mul` is a call to a
/// 128-bit multiply routine (slow before the engine optimizes it: the
/// first parse of a large directory), needless when both fit 32 bits, as
/// dims and widths do.
#[inline]
pub fn mul_u64(a: u64, b: u64) -> Option<u64> {
    if cfg!(target_arch = "wasm32") && (a | b) >> 32 == 0 {
        return Some(a.wrapping_mul(b));
    }
    a.checked_mul(b)
}

/// (n / d, n % d) by shift and subtract, `None` for `d` 0. The two rules
/// that divide (an opaque length by its block size, a quantized axis by its
/// group) are rare, and this keeps 32-bit targets from linking a general
/// 64-bit division routine (about 870 bytes on Cortex-M) or, on cores
/// without a divide instruction, the 400-byte 32-bit one. Out of line: one
/// copy serves both rules.
#[inline(never)]
pub(crate) fn div_rem_u32(n: u64, d: u32) -> Option<(u64, u64)> {
    if d == 0 {
        return None;
    }
    let d = u64::from(d);
    let (mut q, mut r) = (0u64, 0u64);
    for bit in (0..64u32).rev() {
        // r < d <= 2^32 before the shift, so it cannot overflow.
        r = (r << 1) | (n.checked_shr(bit).unwrap_or(0) & 1);
        if r >= d {
            r = r.wrapping_sub(d);
            // Fallback not taken: bit is below 64.
            q |= 1u64.checked_shl(bit).unwrap_or(0);
        }
    }
    Some((q, r))
}

#[inline]
pub fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    array(buf, at).map(u32::from_le_bytes)
}

#[inline]
pub fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    array(buf, at).map(u64::from_le_bytes)
}

/// Index of the first nonzero byte of `buf`, if any.
#[inline]
pub(crate) fn first_nonzero(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b != 0)
}

/// True when every byte of `buf` is zero: eight bytes at a time, OR-ed
/// without an early exit (which a byte search cannot vectorize or unroll;
/// a window of gaps took 5x the time that way in wasm).
pub(crate) fn all_zero(buf: &[u8]) -> bool {
    let mut words = buf.chunks_exact(8);
    let mut acc = u64::from(words.remainder().iter().fold(0u8, |acc, &b| acc | b));
    // Fallback not taken: every chunk of chunks_exact(8) is 8 bytes.
    for w in &mut words {
        acc |= w.try_into().map_or(u64::MAX, u64::from_ne_bytes);
    }
    acc == 0
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
    #[test]
    fn the_small_core_primitives_agree_with_the_wide_ones() {
        use super::{small, wide};
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let b = state.to_le_bytes();
            let mut sixteen = [0u8; 16];
            // Mostly zero, sometimes one byte set: both answers of the zero test.
            if state >> 60 == 0 {
                sixteen[usize::try_from(state >> 56 & 15).unwrap()] = b[0] | 1;
            }
            assert_eq!(small::le16(&[b[0], b[1]]), wide::le16(&[b[0], b[1]]));
            assert_eq!(small::le32(&[b[0], b[1], b[2], b[3]]), wide::le32(&[b[0], b[1], b[2], b[3]]));
            assert_eq!(small::le64(&b), wide::le64(&b));
            assert_eq!(small::all_zero16(&sixteen), wide::all_zero16(&sixteen));
        }
        let (mut a, mut w) = ([7u32; 33], [7u32; 33]);
        small::clear(&mut a[1..]);
        wide::clear(&mut w[1..]);
        assert_eq!(a, w);
        assert_eq!((a[0], a[1..].iter().all(|&x| x == 0)), (7, true));
    }

    #[test]
    fn division_by_shift_and_subtract_matches_native() {
        let ns = [0u64, 1, 2, 31, 32, 33, 1 << 32, (1 << 32) + 1, u64::MAX - 1, u64::MAX, 0x1234_5678_9abc_def0];
        for &n in &ns {
            for d in [1u32, 2, 3, 7, 32, 1000, u32::MAX - 1, u32::MAX] {
                let d64 = u64::from(d);
                assert_eq!(super::div_rem_u32(n, d), Some((n / d64, n % d64)), "{n} / {d}");
            }
            assert_eq!(super::div_rem_u32(n, 0), None);
        }
    }

    use super::first_above_one;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    /// True exactly when no byte is set, for one byte set at every position
    /// of every length across a few words, and at every offset of a buffer.
    #[test]
    fn all_zero_finds_any_set_byte() {
        let buf = [0u8; 40];
        // Under Miri (slow to interpret), two alignments.
        for start in 0..if cfg!(miri) { 2 } else { 8 } {
            for len in 0..buf.len() - start {
                assert!(super::all_zero(&buf[start..start + len]));
                for at in 0..len {
                    let mut b = buf;
                    b[start + at] = 0x80 >> (at % 8);
                    assert!(!super::all_zero(&b[start..start + len]), "{start} {len} {at}");
                }
            }
        }
    }

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
