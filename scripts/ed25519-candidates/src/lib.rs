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
