//! Step 9's updates, made on the host at build time (see src/signed.rs for
//! the device side):
//!
//! - `digits-mlp-v3.signed.kiln`: the factory model file
//!   (`spec/examples/digits-mlp.model.kiln`) signed with the demo key as
//!   version [`UPDATE_VERSION`] for [`TARGET`], payload region unaligned
//!   (`Some(1)`: no padding, the smallest file to send);
//! - the bad updates, each made in full and checked here, then stored as
//!   its differences from the good one (the server's flash is not large
//!   enough for six more 21 KB files; the device receives exactly the bad
//!   file's bytes): signed by another key, a weight byte changed after
//!   signing, two tensor names swapped after signing, an older version
//!   (rollback), another target, and the transfer cut short;
//! - `digits-mlp-v4.delta`: the delta from the good update (what the device
//!   runs once it took it) to NEW, the model with only `fc2` retrained
//!   (one step of gradient descent on the 32 stored samples), signed as
//!   version [`NEW_VERSION`]; NEW's length and SHA-256 go to the device,
//!   which compares them with what it rebuilt;
//! - `signed.rs`: the constants the device is built with (the public key,
//!   its target and versions) and the bad updates' differences.
//!
//! Every file is checked here first, by the same streaming check the
//! device runs (`UpdateCheck`, 256-byte packets), so a build whose updates
//! do not give the verdicts the demo expects fails here.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use ed25519_dalek::{Signer, SigningKey};
use kiln_model::delta;
use kiln_nostd::digest::{sha256, TensorHasher};
use kiln_model::signed::sign_model_aligned;
use kiln_model::{Model, Trust};
use kiln_model::update::UpdateCheck;
use kiln_model::{AnyRule, Error, Rule};
use kiln_nostd::Rule as CoreRule;

/// The model file the updates are made from (the demo's factory image).
pub const FACTORY: &str = "../spec/examples/digits-mlp.model.kiln";

/// DEMO KEY ONLY: the seed of the Ed25519 key that signs the demo's
/// updates. It is in this public repository, so it protects nothing; a
/// product keeps its private key off the build machine (`kiln sign --key`)
/// and builds the device with the public half only, as the demo's firmware
/// is (`PUBKEY` in the generated `signed.rs`).
const DEMO_SEED: [u8; 32] = *b"kiln firmware-demo: demo key !!!";
/// Another signer (the "signed by another key" update).
const OTHER_SEED: [u8; 32] = *b"not the key the device trusts !!";

/// The device's target name; the other target has the same length, so its
/// update differs from the good one in a few bytes only.
const TARGET: &str = "lm3s6965-demo";
const OTHER_TARGET: &str = "lm3s6965-prod";
/// The factory image's version (a digests record carries none: the device
/// keeps it), the update's, the rollback's and NEW's.
const FACTORY_VERSION: u64 = 2;
const UPDATE_VERSION: u64 = 3;
const ROLLBACK_VERSION: u64 = 1;
const NEW_VERSION: u64 = 4;

/// The link's packet size (the device's `ota::PACKET`).
const PACKET: usize = 256;
/// The device's buffer for the signed fields and the block's prefix.
const CHECK_BUF: usize = 2048;

fn sign(file: &[u8], seed: &[u8; 32], version: u64, target: &str) -> Vec<u8> {
    let k = SigningKey::from_bytes(seed);
    let public = k.verifying_key().to_bytes();
    sign_model_aligned(file, &public, version, target, Some(1), |m| k.sign(m).to_bytes()).expect("sign the model")
}

/// The verdict of the device's check, in packets: the packet (1-based) and
/// the error, or the accepted version.
fn stream(file: &[u8], trust: Trust<'_>) -> Result<u64, (usize, Error)> {
    let mut buf = vec![0u8; CHECK_BUF];
    let mut hasher = TensorHasher::new();
    let mut scratch = [0u32; 64];
    let mut check = UpdateCheck::new(trust, &mut buf, &mut hasher).scratch(&mut scratch);
    for (k, packet) in file.chunks(PACKET).enumerate() {
        check.feed(packet).map_err(|e| (k + 1, e))?;
    }
    check.finish().map(|s| s.version).map_err(|e| (file.len().div_ceil(PACKET), e))
}

/// The bytes where `bad` differs from `good` (same length), as runs: runs
/// less than 8 bytes apart are merged.
fn runs(good: &[u8], bad: &[u8]) -> Vec<(usize, Vec<u8>)> {
    assert_eq!(good.len(), bad.len(), "a bad update differs from the good one in bytes, not length");
    let mut out = Vec::new();
    let mut i = 0;
    while i < good.len() {
        if good[i] == bad[i] {
            i += 1;
            continue;
        }
        let (start, mut end, mut j) = (i, i, i);
        while j < good.len() && j < end + 8 {
            if good[j] != bad[j] {
                end = j;
            }
            j += 1;
        }
        out.push((start, bad[start..=end].to_vec()));
        i = end + 1;
    }
    out
}

/// The offset of tensor `name`'s name bytes in `file`.
fn name_at(file: &[u8], name: &str) -> usize {
    let m = Model::parse(file).expect("parse");
    let t = m.directory().find(name).unwrap_or_else(|| panic!("{name} missing"));
    t.name().expect("named").as_ptr() as usize - file.as_ptr() as usize
}

/// The factory file with fc2 (weight and bias) retrained: one step of
/// gradient descent on the softmax cross-entropy of the 32 stored samples,
/// fc1 frozen, learning rate 0.5; the digests of the two tensors updated.
/// Deterministic (f64 on the host, rounded to f32). Returns the file and
/// the number of samples the new fc2 classifies correctly.
fn retrain_fc2(factory: &[u8]) -> (Vec<u8>, usize, f64) {
    let m = Model::parse(factory).expect("factory parses");
    let dir = m.directory();
    let net = super::Mlp::of(&dir);
    let (h, c, n) = (net.hidden, net.classes, net.n);
    let hid: Vec<Vec<f64>> = (0..n).map(|s| net.hidden_of(s)).collect();
    let (mut gw, mut gb) = (vec![0f64; c * h], vec![0f64; c]);
    for (s, hs) in hid.iter().enumerate() {
        let z = net.logits_of(&net.w2, &net.b2, hs);
        let top = z.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = z.iter().map(|v| (v - top).exp()).collect();
        let sum: f64 = e.iter().sum();
        for k in 0..c {
            let d = e[k] / sum - f64::from(u8::from(usize::from(net.y[s]) == k));
            gb[k] += d / n as f64;
            for j in 0..h {
                gw[k * h + j] += d * hs[j] / n as f64;
            }
        }
    }
    let lr = 0.5;
    let w2: Vec<f32> = net.w2.iter().zip(&gw).map(|(w, g)| (w - lr * g) as f32).collect();
    let b2: Vec<f32> = net.b2.iter().zip(&gb).map(|(b, g)| (b - lr * g) as f32).collect();
    // The new fc2, read back as the device will (f32), on the 32 samples.
    let (w2d, b2d): (Vec<f64>, Vec<f64>) =
        (w2.iter().map(|&v| v.into()).collect(), b2.iter().map(|&v| v.into()).collect());
    let (mut correct, mut min_gap) = (0, f64::MAX);
    for (s, hs) in hid.iter().enumerate() {
        let z = net.logits_of(&w2d, &b2d, hs);
        let best = (0..c).fold(0, |b, k| if z[k] > z[b] { k } else { b });
        let second = z.iter().enumerate().filter(|&(k, _)| k != best).map(|(_, v)| *v).fold(f64::MIN, f64::max);
        min_gap = min_gap.min(z[best] - second);
        correct += usize::from(best == usize::from(net.y[s]));
    }
    let mut f = factory.to_vec();
    let table = m.digests().expect("the factory is a digests record");
    for (name, vals) in [("fc2.weight", &w2), ("fc2.bias", &b2)] {
        let t = dir.find(name).expect("fc2");
        let i = t.index();
        let at = t.absolute_offset();
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(bytes.len(), t.byte_len());
        assert_ne!(&f[at..at + bytes.len()], &bytes[..], "{name} changed");
        f[at..at + bytes.len()].copy_from_slice(&bytes);
        let d = sha256(&bytes);
        f[table.offset_of(i)..table.offset_of(i) + 32].copy_from_slice(&d);
    }
    Model::parse_verified(&f).expect("the retrained file is valid, digests included");
    (f, correct, min_gap)
}

/// `bytes` as the elements of a Rust array literal (`0x1f, 0x8b, `), for the generated source.
fn byte_literals(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:#04x}, ")).collect()
}

pub fn signed_updates(out: &Path) {
    let factory = fs::read(FACTORY).expect("read the factory model file");
    let public = SigningKey::from_bytes(&DEMO_SEED).verifying_key().to_bytes();
    let trust = || Trust::new(&public).expect("a usable key").target(TARGET);
    let expect = |what: &str, file: &[u8], running: u64, rule: AnyRule| match stream(file, trust().newer_than(running)) {
        Err((_, e)) if e.rule() == rule => {}
        v => panic!("{what}: expected {rule:?}, the device's check gives {v:?}"),
    };

    // The good update, and the bad ones.
    let good = sign(&factory, &DEMO_SEED, UPDATE_VERSION, TARGET);
    assert_eq!(stream(&good, trust().newer_than(FACTORY_VERSION)), Ok(UPDATE_VERSION), "the good update passes");
    let payload_start = Model::parse(&good).expect("parse").payload_start();
    assert!(payload_start <= CHECK_BUF, "the device's check buffer holds the signed prefix");

    let other_key = sign(&factory, &OTHER_SEED, UPDATE_VERSION, TARGET);
    expect("another key", &other_key, FACTORY_VERSION, Rule::SignatureKey.into());

    let mut weight = good.clone();
    let w = Model::parse(&good).expect("parse").directory().find("fc1.weight").expect("fc1.weight").absolute_offset();
    let at = w + 4 * (20 * 64 + 17); // fc1.weight[20][17], its low mantissa byte
    weight[at] ^= 0x01;
    expect("a weight byte", &weight, FACTORY_VERSION, CoreRule::PayloadDigest.into());

    let mut swapped = good.clone();
    let (a, b) = (name_at(&good, "fc1.bias"), name_at(&good, "fc2.bias"));
    let len = "fc1.bias".len();
    swapped[a..a + len].copy_from_slice(&good[b..b + len]);
    swapped[b..b + len].copy_from_slice(&good[a..a + len]);
    expect("names swapped", &swapped, FACTORY_VERSION, Rule::SignatureInvalid.into());
    // Without the signature the swap is a valid model: digests and all.
    Model::parse_verified(&swapped).expect("the swapped model is valid but for its signature");

    let rollback = sign(&factory, &DEMO_SEED, ROLLBACK_VERSION, TARGET);
    expect("rollback", &rollback, FACTORY_VERSION, Rule::ReleaseVersion.into());

    let other_target = sign(&factory, &DEMO_SEED, UPDATE_VERSION, OTHER_TARGET);
    expect("another target", &other_target, FACTORY_VERSION, Rule::ReleaseTarget.into());

    let cut = (good.len() / PACKET) * 3 / 5 * PACKET;
    expect("cut short", &good[..cut], FACTORY_VERSION, CoreRule::BlockTruncated.into());

    // NEW (fc2 retrained) and the delta from the good update.
    let (retrained, correct, gap) = retrain_fc2(&factory);
    assert!(correct == 32 && gap > 0.05, "NEW classifies the 32 samples ({correct}, gap {gap})");
    let new = sign(&retrained, &DEMO_SEED, NEW_VERSION, TARGET);
    assert_eq!(stream(&new, trust().newer_than(UPDATE_VERSION)), Ok(NEW_VERSION), "NEW passes");
    let d = delta::make(&good, &new).expect("make the delta");
    assert_eq!(delta::apply(&good, &d).expect("apply the delta"), new, "the delta rebuilds NEW");

    let mut src = String::from(
        "// @generated by build.rs (build/signing.rs): what the device is built with for step 9.\n\n\
         /// The demo signing key's public half: the only key the device trusts (the seed, a demo key\n\
         /// only, is in build/signing.rs; a product's device gets its own public key).\n",
    );
    writeln!(src, "pub const PUBKEY: [u8; 32] = [{}];", byte_literals(&public)).unwrap();
    writeln!(src, "/// The device's target name: a release for another is refused.").unwrap();
    writeln!(src, "pub const TARGET: &str = {TARGET:?};").unwrap();
    writeln!(src, "/// The factory image's version (kept by the device: the image is a digests record).").unwrap();
    writeln!(src, "pub const FACTORY_VERSION: u64 = {FACTORY_VERSION};").unwrap();
    writeln!(src, "/// The good update's version, and NEW's (the delta's).").unwrap();
    writeln!(src, "pub const UPDATE_VERSION: u64 = {UPDATE_VERSION};").unwrap();
    writeln!(src, "pub const NEW_VERSION: u64 = {NEW_VERSION};").unwrap();
    writeln!(src, "/// NEW's length and SHA-256 (of the whole file): the rebuilt slot must equal them.").unwrap();
    writeln!(src, "pub const NEW_LEN: usize = {};", new.len()).unwrap();
    writeln!(src, "pub const NEW_SHA256: [u8; 32] = [{}];", byte_literals(&sha256(&new))).unwrap();
    writeln!(src, "/// The bad updates, as their differences from the good one.").unwrap();
    writeln!(src, "pub static BAD: [Bad; 6] = [").unwrap();
    let cases: [(&str, Fault, &[u8]); 6] = [
        ("(a) signed by another key", Fault::OtherKey, &other_key),
        ("(b) a weight byte changed after signing (fc1.weight[20][17])", Fault::Payload, &weight),
        ("(c) two tensor names swapped after signing (fc1.bias, fc2.bias)", Fault::Signature, &swapped),
        ("(d) an older version, signed by the right key (rollback)", Fault::Rollback, &rollback),
        ("(e) a release for another target", Fault::OtherTarget, &other_target),
        ("(f) the transfer cut short", Fault::Truncated, &good[..cut]),
    ];
    for (what, fault, bad) in cases {
        let diff = if bad.len() == good.len() { runs(&good, bad) } else { Vec::new() };
        let mut patched = good[..bad.len()].to_vec();
        for (at, bytes) in &diff {
            patched[*at..at + bytes.len()].copy_from_slice(bytes);
        }
        assert_eq!(patched, bad, "{what}: the differences give the bad file");
        let diff: String = diff.iter().map(|(at, b)| format!("({at}, &[{}]), ", byte_literals(b))).collect();
        writeln!(src, "    Bad {{ what: {what:?}, fault: Fault::{fault:?}, len: {}, runs: &[{diff}] }},", bad.len())
            .unwrap();
    }
    writeln!(src, "];").unwrap();

    fs::write(out.join("digits-mlp-v3.signed.kiln"), &good).expect("write the signed update");
    fs::write(out.join("digits-mlp-v4.delta"), &d).expect("write the delta");
    fs::write(out.join("signed.rs"), src).expect("write signed.rs");
}

/// Which check a bad update must fail (the device's `Fault`, same names).
#[derive(Debug, Clone, Copy)]
enum Fault {
    OtherKey,
    Payload,
    Signature,
    Rollback,
    OtherTarget,
    Truncated,
}
