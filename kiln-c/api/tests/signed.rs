//! `kiln_model_verify_signed` against the core's `Model::parse_trusted`: the
//! same verdict (code, rule, offset) for the signed example, for each policy
//! fault (another key, another target, a rollback, an unsigned model), for a
//! flipped bit at every 7th byte of the file and for both names swapped;
//! what `*out` and `*release` say of an accepted model; misuse as API errors.

// Every unsafe block here is a C API call made as C would make it, on the
// buffers built just above it.
#![allow(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr::{null, null_mut};

use ed25519_dalek::{Signer, SigningKey};
use kiln_c_api::*;
use kiln_model::{signed::sign_model, Model, Trust};

const EXAMPLE: &[u8] = include_bytes!("../../../spec/examples/digits-mlp.model.kiln");

fn signed(seed: u8, version: u64, target: &str) -> (Vec<u8>, [u8; 32]) {
    let k = SigningKey::from_bytes(&[seed; 32]);
    let public = k.verifying_key().to_bytes();
    (sign_model(EXAMPLE, &public, version, target, |m| k.sign(m).to_bytes()).unwrap(), public)
}

fn new_err() -> kiln_error {
    kiln_error { code: 99, offset: 99, rule: null(), description: null(), needed: 99, read_status: 99 }
}

/// (status, rule, offset), or (KILN_OK, "", 0) for an accepted input.
type Verdict = (c_int, String, u64);

/// The C status of a core error code, by its name (`kiln_code_name`).
fn status_of(e: &kiln_model::Error) -> c_int {
    (1..=KILN_SIGNATURE)
        .find(|&c| unsafe { CStr::from_ptr(kiln_code_name(c)) }.to_str() == Ok(e.code().as_str()))
        .expect("every code has a status")
}

fn c_verdict(buf: &[u8], key: &[u8; 32], target: Option<&str>, newer_than: Option<u64>) -> (Verdict, kiln_release) {
    let target = target.map(|t| CString::new(t).unwrap());
    let trust = kiln_trust {
        key: *key,
        target: target.as_ref().map_or(null(), |t| t.as_ptr()),
        check_version: newer_than.is_some(),
        newer_than: newer_than.unwrap_or(0),
    };
    let mut e = new_err();
    let mut rel = kiln_release { version: 99, target: kiln_str { ptr: null(), len: 99 }, key: [9; 32] };
    let rc = unsafe { kiln_model_verify_signed(buf.as_ptr(), buf.len(), &trust, null_mut(), &mut rel, &mut e) };
    let rule = unsafe { CStr::from_ptr(e.rule) }.to_str().unwrap().to_owned();
    if rc == KILN_OK {
        assert_eq!((rule.as_str(), e.offset), ("", 0));
    }
    ((rc, rule, e.offset), rel)
}

fn rust_verdict(buf: &[u8], key: &[u8; 32], target: Option<&str>, newer_than: Option<u64>) -> Verdict {
    let mut trust = Trust::new(key).unwrap();
    if let Some(t) = target {
        trust = trust.target(t);
    }
    if let Some(v) = newer_than {
        trust = trust.newer_than(v);
    }
    match Model::parse_trusted(buf, &trust) {
        Ok(_) => (KILN_OK, String::new(), 0),
        Err(e) => (status_of(&e), e.rule().id().to_owned(), e.offset_u64()),
    }
}

fn agree(buf: &[u8], key: &[u8; 32], target: Option<&str>, newer_than: Option<u64>) -> Verdict {
    let want = rust_verdict(buf, key, target, newer_than);
    assert_eq!(c_verdict(buf, key, target, newer_than).0, want);
    want
}

#[test]
fn an_accepted_signed_model_says_its_release_and_key() {
    let (file, public) = signed(1, 5, "board-a");
    let mut out = kiln_verified { record: 99, digests_checked: false, tensor_count: 0, block_offset: 0, block_len: 0 };
    let target = CString::new("board-a").unwrap();
    let trust = kiln_trust { key: public, target: target.as_ptr(), check_version: true, newer_than: 4 };
    let mut rel = kiln_release { version: 0, target: kiln_str { ptr: null(), len: 0 }, key: [0; 32] };
    let mut e = new_err();
    let rc = unsafe { kiln_model_verify_signed(file.as_ptr(), file.len(), &trust, &mut out, &mut rel, &mut e) };
    assert_eq!(rc, KILN_OK);
    assert_eq!((out.record, out.digests_checked, out.tensor_count), (KILN_RECORD_SIGNED, true, 8));
    assert_eq!((rel.version, rel.key), (5, public));
    let t = unsafe { std::slice::from_raw_parts(rel.target.ptr.cast::<u8>(), rel.target.len) };
    assert_eq!(t, b"board-a");
    // kiln_model_verify names the record too (digests checked, signature not).
    let rc = unsafe { kiln_model_verify(file.as_ptr(), file.len(), 0, &mut out, &mut e) };
    assert_eq!((rc, out.record), (KILN_OK, KILN_RECORD_SIGNED));
}

#[test]
fn each_policy_fault_is_the_cores_verdict() {
    let (file, public) = signed(1, 5, "board-a");
    let (_, other) = signed(2, 5, "board-a");
    assert_eq!(agree(&file, &public, Some("board-a"), Some(4)).0, KILN_OK);
    type Case<'a> = (&'a [u8], [u8; 32], Option<&'a str>, Option<u64>, &'a str);
    let cases: [Case<'_>; 5] = [
        (&file, other, None, None, "SignatureKey"),
        (&file, public, Some("board-b"), None, "ReleaseTarget"),
        (&file, public, None, Some(5), "ReleaseVersion"),
        (&file, public, Some("board-a"), Some(9), "ReleaseVersion"),
        (EXAMPLE, public, None, None, "NotSigned"),
    ];
    for (buf, key, target, newer, rule) in cases {
        let (code, got, _) = agree(buf, &key, target, newer);
        assert_eq!((code, got.as_str()), (KILN_SIGNATURE, rule));
    }
}

#[test]
fn flipped_bits_and_swapped_names_give_the_cores_verdict() {
    let (file, public) = signed(1, 5, "board-a");
    let mut rejected = 0;
    for at in (0..file.len()).step_by(7) {
        let mut bad = file.clone();
        bad[at] ^= 0x10;
        rejected += usize::from(agree(&bad, &public, Some("board-a"), None).0 != KILN_OK);
    }
    assert_eq!(rejected, file.len().div_ceil(7), "every flipped byte is rejected");
    // Two names of one length swapped in the name heap: the signature fails first.
    let m = Model::parse(&file).unwrap();
    let dir = m.directory();
    let names: Vec<_> = dir.iter().map(|t| t.name().unwrap().to_owned()).map(|n| (n.clone(), n.len())).collect();
    let (a, b) = names
        .iter()
        .enumerate()
        .find_map(|(i, x)| names.iter().skip(i + 1).find(|y| y.1 == x.1).map(|y| (x.0.clone(), y.0.clone())))
        .expect("two names of one length");
    let find = |n: &str| file.windows(n.len()).position(|w| w == n.as_bytes()).unwrap();
    let (pa, pb) = (find(&a), find(&b));
    let mut swapped = file.clone();
    swapped[pa..pa + a.len()].copy_from_slice(b.as_bytes());
    swapped[pb..pb + b.len()].copy_from_slice(a.as_bytes());
    let (code, rule, _) = agree(&swapped, &public, None, None);
    assert_eq!((code, rule.as_str()), (KILN_SIGNATURE, "SignatureInvalid"));
}

#[test]
fn misuse_is_an_api_error() {
    let (file, public) = signed(1, 5, "board-a");
    let mut e = new_err();
    let rc = unsafe { kiln_model_verify_signed(file.as_ptr(), file.len(), null(), null_mut(), null_mut(), &mut e) };
    assert_eq!(rc, KILN_ERR_NULL);
    // The identity point is of small order: it would accept forged signatures.
    let mut weak = [0u8; 32];
    weak[0] = 1;
    let trust = kiln_trust { key: weak, target: null(), check_version: false, newer_than: 0 };
    let rc = unsafe { kiln_model_verify_signed(file.as_ptr(), file.len(), &trust, null_mut(), null_mut(), &mut e) };
    assert_eq!(rc, KILN_ERR_ARGUMENT);
    let bad_utf8: [c_char; 2] = [-1, 0];
    let trust = kiln_trust { key: public, target: bad_utf8.as_ptr(), check_version: false, newer_than: 0 };
    let rc = unsafe { kiln_model_verify_signed(file.as_ptr(), file.len(), &trust, null_mut(), null_mut(), &mut e) };
    assert_eq!(rc, KILN_ERR_ARGUMENT);
    let trust = kiln_trust { key: public, target: null(), check_version: false, newer_than: 0 };
    let rc = unsafe { kiln_model_verify_signed(null(), 5, &trust, null_mut(), null_mut(), &mut e) };
    assert_eq!(rc, KILN_ERR_NULL);
}
