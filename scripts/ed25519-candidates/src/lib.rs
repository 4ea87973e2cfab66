//! Ed25519 backends for Kiln's signed update, behind one signature so that
//! the device harness (src/main.rs, measure.sh) and the host tests
//! (tests/vectors.rs) call each the same way: the check kiln-nostd's
//! `Trust::new` + `Trust::check_pieces` make, a public key (refused when it
//! is not usable) and a signature over a message given in pieces.
//!
//! Each backend module has `key_ok` (the key check made once, when a
//! trust is built) and `verify` (key check, then the signature over the
//! pieces in order). `STREAMS` says whether the backend takes the message
//! in pieces; one that does not is given a single piece (the caller must
//! make the signed bytes contiguous) and refuses more.
#![no_std]

pub mod vectors;

/// ed25519-dalek 2 through its `hazmat` stream verifier, with the key checks
/// kiln-nostd's `Trust::new` adds: not of small order, canonical encoding.
#[cfg(feature = "dalek")]
pub mod dalek {
    use ed25519_dalek::{Signature, VerifyingKey};

    /// The backend takes the message in pieces.
    pub const STREAMS: bool = true;

    fn key(key: &[u8; 32]) -> Option<VerifyingKey> {
        // ed25519-dalek reduces a y >= p and accepts x = 0 with the sign
        // bit set: the round trip refuses both (RFC 8032 section 5.1.3).
        VerifyingKey::from_bytes(key).ok().filter(|k| !k.is_weak() && k.to_edwards().compress().as_bytes() == key)
    }

    /// Whether `key` is usable (a point, canonically encoded, not of small order).
    pub fn key_ok(k: &[u8; 32]) -> bool {
        key(k).is_some()
    }

    /// The signature `sig` by `k` over the concatenation of `pieces`.
    pub fn verify(k: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
        let Some(vk) = key(k) else { return false };
        let Ok(mut v) = vk.verify_stream(&Signature::from_bytes(sig)) else { return false };
        for p in pieces {
            v.update(p);
        }
        v.finalize_and_verify().is_ok()
    }
}

/// ed25519-dalek's checks (as in `dalek`) on curve25519-dalek's point
/// arithmetic, without its window tables: `[s]B - [k]A` by Shamir's trick,
/// one doubling per bit and at most one addition of B, -A or B - A.
/// Variable time, as every verifier here (the inputs are public).
#[cfg(feature = "dalek-small")]
pub mod dalek_small {
    use curve25519_dalek::constants::ED25519_BASEPOINT_POINT as B;
    use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
    use curve25519_dalek::scalar::Scalar;
    use curve25519_dalek::traits::Identity;
    use group::Group;
    use sha2::{Digest, Sha512};

    /// The backend takes the message in pieces.
    pub const STREAMS: bool = true;

    // Each step below is a function of its own (`inline(never)`): their
    // frames follow one another on the stack instead of adding up in one
    // (LTO would otherwise merge the whole check into a 2-3 KB frame).

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

    /// Decodes `k` into `out`: false unless `k` is the canonical encoding
    /// of a point not of small order. The point lives in the caller's frame.
    #[inline(never)]
    fn key_into(k: &[u8; 32], out: &mut EdwardsPoint) -> bool {
        decompress(k, out) && !small_order(out) && encode(out) == *k
    }

    /// Whether `key` is usable (a point, canonically encoded, not of small order).
    pub fn key_ok(k: &[u8; 32]) -> bool {
        key_into(k, &mut <EdwardsPoint as Identity>::identity())
    }

    /// Bit `i` of a little-endian scalar.
    fn bit(s: &[u8; 32], i: usize) -> bool {
        s.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1)
    }

    /// SHA-512(R || A || M) into `out`, M the concatenation of `pieces`
    /// (`finalize_into_reset`: no copy of the hasher's state on the stack).
    #[inline(never)]
    fn hash(r: &[u8; 32], k: &[u8; 32], pieces: &[&[u8]], out: &mut [u8; 64]) {
        let mut h = Sha512::new();
        h.update(r);
        h.update(k);
        for p in pieces {
            h.update(p);
        }
        h.finalize_into_reset(out.into());
    }

    #[inline(never)]
    fn reduce(wide: &[u8; 64]) -> [u8; 32] {
        Scalar::from_bytes_mod_order_wide(wide).to_bytes()
    }

    /// H(R || A || M) mod L.
    #[inline(never)]
    fn challenge(r: &[u8; 32], k: &[u8; 32], pieces: &[&[u8]]) -> [u8; 32] {
        let mut wide = [0u8; 64];
        hash(r, k, pieces, &mut wide);
        reduce(&wide)
    }

    /// L, the order of the base point, little-endian.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];

    /// S < L, compared as little-endian numbers (RFC 8032 section 5.1.7's
    /// check; `Scalar::from_canonical_bytes` makes the same one through
    /// Montgomery reduction, 2.4 KB of code on a Cortex-M3).
    fn canonical(s: &[u8; 32]) -> bool {
        // The most significant differing byte decides; equal is not below.
        s.iter().zip(L.iter()).rev().find(|(a, b)| a != b).is_some_and(|(a, b)| a < b)
    }

    /// `[s]B + [h](-A)` (both scalars below L < 2^253). No B - A entry:
    /// one point less on the stack for about 60 more additions.
    // By reference: the by-value `+=` took a 120-byte larger frame.
    #[allow(clippy::op_ref)]
    #[inline(never)]
    fn combine(s: &[u8; 32], h: &[u8; 32], a: &EdwardsPoint) -> EdwardsPoint {
        let minus_a = -a;
        let mut acc = <EdwardsPoint as Identity>::identity();
        for i in (0..253).rev() {
            acc = <EdwardsPoint as Group>::double(&acc);
            if bit(s, i) {
                acc = &acc + &B;
            }
            if bit(h, i) {
                acc = &acc + &minus_a;
            }
        }
        acc
    }

    /// The signature `sig` by `k` over the concatenation of `pieces`:
    /// S < L, then the encoding of `[S]B - [H(R || A || M)]A` equals R's
    /// bytes (cofactorless; a non-canonical R can never match).
    #[inline(never)]
    pub fn verify(k: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
        let mut a = <EdwardsPoint as Identity>::identity();
        key_into(k, &mut a) && verify_with(&a, k, sig, pieces)
    }

    /// [`verify`] with the key decoded (as a trust made once would hold it).
    #[inline(never)]
    fn verify_with(a: &EdwardsPoint, k: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
        let (Some(r), Some(s)) = (sig.first_chunk::<32>(), sig.last_chunk::<32>()) else { return false };
        if !canonical(s) {
            return false;
        }
        let h = challenge(r, k, pieces);
        equation(a, r, s, &h)
    }

    /// The encoding of `[s]B - [h]A` equals `r`. Apart from `verify_with`,
    /// so that its points are not on the stack under the hash.
    #[inline(never)]
    fn equation(a: &EdwardsPoint, r: &[u8; 32], s: &[u8; 32], h: &[u8; 32]) -> bool {
        encode(&combine(s, h, a)) == *r
    }
}

/// ed25519-compact 2: `PublicKey::validate` and the incremental verifier.
#[cfg(feature = "compact")]
pub mod compact {
    use ed25519_compact::{PublicKey, Signature};

    /// The backend takes the message in pieces.
    pub const STREAMS: bool = true;

    /// Whether `key` is usable (ed25519-compact's `validate`: canonical, a
    /// point, not of small order).
    pub fn key_ok(k: &[u8; 32]) -> bool {
        PublicKey::new(*k).validate().is_ok()
    }

    /// The signature `sig` by `k` over the concatenation of `pieces`
    /// (the verifier itself repeats `validate`'s checks).
    pub fn verify(k: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
        let Ok(mut st) = PublicKey::new(*k).verify_incremental(&Signature::new(*sig)) else { return false };
        for p in pieces {
            st.absorb(p);
        }
        st.verify().is_ok()
    }
}

/// salty 0.3: `PublicKey::try_from` and `verify` over one contiguous message.
#[cfg(feature = "salty")]
pub mod salty {
    use salty::{PublicKey, Signature};

    /// The backend takes one contiguous message only.
    pub const STREAMS: bool = false;

    /// Whether salty takes `key` (it only checks that the bytes decode to a point).
    pub fn key_ok(k: &[u8; 32]) -> bool {
        PublicKey::try_from(k).is_ok()
    }

    /// The signature `sig` by `k` over `pieces`, which must be one piece.
    pub fn verify(k: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
        let [msg] = pieces else { return false };
        let Ok(pk) = PublicKey::try_from(k) else { return false };
        pk.verify(msg, &Signature::from(sig)).is_ok()
    }
}
