//! Ed25519 verification (RFC 8032) sized for a small microcontroller
//! (feature `ed25519`): curve25519-dalek's field and point arithmetic, a
//! streamed SHA-512 (sha2), and the steps of the check written here so that
//! it needs no window tables, no NAF digit arrays and no panic path.
//!
//! The rule (`spec/model-file.md`, "Signed models", the verification rule):
//! the key `A` is the canonical encoding of a point not of small order
//! (checked once, by [`decode_key`], when a trust is made); `S < L`; the
//! signature is valid when the canonical encoding of `[S]B - [k]A`, with
//! `k = SHA-512(R || A || M) mod L`, equals the 32 bytes `R`
//! (cofactorless; `R` is never decoded, so a non-canonical `R` never
//! matches). It is ed25519-dalek's `verify` with the key checks
//! `Trust::new` made, which the tests hold it to.
//!
//! Stack: each step is a function of its own (`inline(never)`) so that
//! their frames follow one another instead of adding up in one frame (LTO
//! would otherwise merge the whole check into one frame of 2-3 KB).
//! Variable time, as every Ed25519 verifier: its inputs are public.

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT as B;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use group::Group;
use sha2::{Digest, Sha512};

/// A public key decoded once, when it is trusted: `-A`, the point the
/// equation adds (negated here, so the check holds no copy of it).
pub(crate) type Point = EdwardsPoint;

/// `-A` for the point `A` that `key` encodes, or `None` unless `key` is the canonical encoding
/// (RFC 8032 section 5.1.3: `y < p`, not `x = 0` with the sign bit set) of a
/// point that is not of small order. curve25519-dalek's `decompress` reduces
/// `y >= p` and takes `x = 0` with the sign bit set: the round trip through
/// `compress` refuses both.
// Negation is a group operation (modular field arithmetic), not integer arithmetic.
#[allow(clippy::arithmetic_side_effects)]
#[inline(never)]
pub(crate) fn decode_key(key: &[u8; 32]) -> Option<Point> {
    let mut p = <EdwardsPoint as Group>::identity();
    (decompress(key, &mut p) && !small_order(&p) && encode(&p) == *key).then(|| -p)
}

/// Writes the point `k` encodes into `out` (no copy of it in between).
#[inline(never)]
fn decompress(k: &[u8; 32], out: &mut EdwardsPoint) -> bool {
    CompressedEdwardsY(*k).decompress().map(|p| *out = p).is_some()
}

#[inline(never)]
fn small_order(p: &EdwardsPoint) -> bool {
    p.is_small_order()
}

#[inline(never)]
fn encode(p: &EdwardsPoint) -> [u8; 32] {
    p.compress().to_bytes()
}

/// The signature `sig` (`R || S`) by the key `A`, given as `minus_a`
/// ([`decode_key`] of the bytes `key`), over the concatenation of
/// `pieces`: `S < L`, then the encoding of `[S]B - [k]A` equals `R`.
#[inline(never)]
pub(crate) fn verify(minus_a: &Point, key: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
    let (Some(r), Some(s)) = (sig.first_chunk::<32>(), sig.last_chunk::<32>()) else { return false };
    if !below_l(s) {
        return false;
    }
    let k = challenge(r, key, pieces);
    equation(minus_a, r, s, &k)
}

/// L, the order of the base point, little-endian.
const L: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

/// `s < L` as little-endian numbers (RFC 8032 section 5.1.7). Not
/// `Scalar::from_canonical_bytes`: its Montgomery reduction is 2.4 KB of
/// code on a Cortex-M3 for the same answer.
fn below_l(s: &[u8; 32]) -> bool {
    // The most significant differing byte decides; equal is not below.
    s.iter().zip(L.iter()).rev().find(|(x, l)| x != l).is_some_and(|(x, l)| x < l)
}

/// `SHA-512(R || A || M) mod L`.
#[inline(never)]
fn challenge(r: &[u8; 32], key: &[u8; 32], pieces: &[&[u8]]) -> [u8; 32] {
    let mut wide = [0u8; 64];
    hash(r, key, pieces, &mut wide);
    reduce(&wide)
}

/// SHA-512(R || A || M) into `out` (`finalize_into_reset`: no copy of the
/// hasher's state on the stack).
#[inline(never)]
fn hash(r: &[u8; 32], key: &[u8; 32], pieces: &[&[u8]], out: &mut [u8; 64]) {
    let mut h = Sha512::new();
    h.update(r);
    h.update(key);
    for p in pieces {
        h.update(p);
    }
    h.finalize_into_reset(out.into());
}

/// `wide mod L`, a 512-bit little-endian number reduced below `L`
/// (TweetNaCl's `modL`, in signed 64-bit limbs of 8 bits). Not
/// `Scalar::from_bytes_mod_order_wide`: its Montgomery multiplication is
/// 3.3 KB of code on a Cortex-M0 (no 32x32->64 multiply), this about 0.4 KB.
/// The tests hold it to curve25519-dalek's reduction.
// Limb arithmetic on values far from i64's bounds (TweetNaCl's, whose
// limbs are the same), so the wrapping operations never wrap.
#[inline(never)]
fn reduce(wide: &[u8; 64]) -> [u8; 32] {
    let mut x = [0i64; 64];
    for (x, &b) in x.iter_mut().zip(wide) {
        *x = i64::from(b);
    }
    // 2^256 = 16 * 2^252 = -16 * (L - 2^252) mod L: each limb from the top
    // down is folded into the 20 limbs 32 places below it (the low part of
    // L is 16 bytes, plus room for the carries).
    for k in (0..32usize).rev() {
        let Some(top) = x.get_mut(k.wrapping_add(32)).map(core::mem::take) else { continue };
        let Some((last, body)) = x.get_mut(k..k.wrapping_add(21)).and_then(<[i64]>::split_last_mut) else { continue };
        let mut carry = 0i64;
        for (xj, &l) in body.iter_mut().zip(&L) {
            let v = xj.wrapping_add(carry).wrapping_sub(top.wrapping_mul(16).wrapping_mul(i64::from(l)));
            carry = v.wrapping_add(128).wrapping_shr(8);
            *xj = v.wrapping_sub(carry.wrapping_shl(8));
        }
        *last = last.wrapping_add(carry);
    }
    // What is left above 2^252 (the top limb's high nibble), subtracted as
    // a multiple of L; then the borrow, once more.
    let top = x.get(31).map_or(0, |t| t.wrapping_shr(4));
    let mut carry = 0i64;
    for (xj, &l) in x.iter_mut().zip(&L) {
        let v = xj.wrapping_add(carry).wrapping_sub(top.wrapping_mul(i64::from(l)));
        carry = v.wrapping_shr(8);
        *xj = v & 0xff;
    }
    for (xj, &l) in x.iter_mut().zip(&L) {
        *xj = xj.wrapping_sub(carry.wrapping_mul(i64::from(l)));
    }
    let mut out = [0u8; 32];
    let mut carry = 0i64;
    for (o, xj) in out.iter_mut().zip(&x) {
        let v = xj.wrapping_add(carry);
        carry = v.wrapping_shr(8);
        // Fallback not taken: `v & 0xff` is a byte.
        *o = u8::try_from(v & 0xff).unwrap_or(0);
    }
    out
}

/// The encoding of `[s]B - [k]A` equals `r`. Apart from [`verify`], so that
/// its points are not on the stack under the hash.
#[inline(never)]
fn equation(minus_a: &EdwardsPoint, r: &[u8; 32], s: &[u8; 32], k: &[u8; 32]) -> bool {
    encode(&combine(s, k, minus_a)) == *r
}

/// Bit `i` of a little-endian scalar.
fn bit(s: &[u8; 32], i: usize) -> bool {
    s.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1)
}

/// `[s]B + [k](-A)` by Shamir's trick, both scalars below `L < 2^253`: one
/// doubling per bit and at most two additions; no table of `B - A` (one
/// point less on the stack for about 60 more additions), and `-A` the
/// trust's own (a copy here would be 160 more bytes of this frame).
// By reference: the by-value `+` took a 120-byte larger frame. Point
// addition and negation are group operations (modular field arithmetic),
// not integer arithmetic that could overflow.
#[allow(clippy::op_ref, clippy::arithmetic_side_effects)]
#[inline(never)]
fn combine(s: &[u8; 32], k: &[u8; 32], minus_a: &EdwardsPoint) -> EdwardsPoint {
    let mut acc = <EdwardsPoint as Group>::identity();
    for i in (0..253).rev() {
        acc = <EdwardsPoint as Group>::double(&acc);
        if bit(s, i) {
            acc = &acc + &B;
        }
        if bit(k, i) {
            acc = &acc + minus_a;
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reduction agrees with curve25519-dalek's on the edges (zero, L
    /// and its neighbours, multiples of 2^252, all ones) and on 50,000
    /// seeded random 512-bit numbers.
    #[test]
    fn reduce_is_curve25519_dalek_s() {
        use curve25519_dalek::scalar::Scalar;
        let dalek = |w: &[u8; 64]| Scalar::from_bytes_mod_order_wide(w).to_bytes();
        let mut edges = alloc::vec![[0u8; 64], [0xff; 64]];
        for low in [L, [0; 32], [0xff; 32]] {
            for d in [0u8, 1, 0xff] {
                for high in [[0u8; 32], L, [0xff; 32]] {
                    let mut w = [0u8; 64];
                    w[..32].copy_from_slice(&low);
                    w[0] = w[0].wrapping_add(d);
                    w[32..].copy_from_slice(&high);
                    edges.push(w);
                }
            }
        }
        for byte in 0..64 {
            let mut w = [0u8; 64];
            w[byte] = 0x10;
            edges.push(w);
        }
        for w in &edges {
            assert_eq!(reduce(w), dalek(w), "{w:02x?}");
        }
        // xorshift64*: seeded, no dependency.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        // Interpreted under Miri: a sample (the lib tests are in its seeded draw).
        for _ in 0..if cfg!(miri) { 20 } else { 50_000 } {
            let mut w = [0u8; 64];
            for c in w.chunks_mut(8) {
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                c.copy_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
            }
            assert_eq!(reduce(&w), dalek(&w), "{w:02x?}");
        }
    }

    #[test]
    fn l_is_the_base_point_s_order() {
        // L - 1 is below L; L and L + 1 are not; 0 is.
        let mut l_minus_1 = L;
        l_minus_1[0] -= 1;
        let mut l_plus_1 = L;
        l_plus_1[0] += 1;
        assert!(below_l(&l_minus_1) && below_l(&[0; 32]));
        assert!(!below_l(&L) && !below_l(&l_plus_1) && !below_l(&[0xff; 32]));
        // [L]B is the identity, [L - 1]B is not: L is B's order.
        assert_eq!(combine(&L, &[0; 32], &B), <EdwardsPoint as Group>::identity());
        assert_ne!(combine(&l_minus_1, &[0; 32], &B), <EdwardsPoint as Group>::identity());
        // A most significant byte that differs decides before a lower one.
        let mut high = [0u8; 32];
        high[31] = 0x0f;
        high[0] = 0xff;
        assert!(below_l(&high));
    }
}
