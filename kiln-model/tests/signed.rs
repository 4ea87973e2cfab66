//! Signed model files (`spec/model-file.md`, "Signed models"): the record,
//! the signature check of `Model::parse_trusted` (step 9s and the key and
//! release checks) and the streaming `UpdateCheck`, which must give the
//! same verdict in every chunking.

use ed25519_dalek::{Signer, SigningKey};
use kiln_model::signed::{self, sign_model, KEY_AT, SIG_AT};
use kiln_model::update::UpdateCheck;
use kiln_model::{Error, Rule};
use kiln_model::{Kind, Model, Trust};
use kiln_nostd::{digest::TensorHasher, ErrorCode, Rule as CoreRule};

const EXAMPLE: &[u8] = include_bytes!("../../spec/examples/digits-mlp.model.kiln");

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn signed(file: &[u8], k: &SigningKey, version: u64, target: &str) -> Vec<u8> {
    let public = k.verifying_key().to_bytes();
    sign_model(file, &public, version, target, |m| k.sign(m).to_bytes()).expect("signs")
}

fn example() -> (Vec<u8>, [u8; 32]) {
    let k = key(1);
    (signed(EXAMPLE, &k, 5, "lm3s6965"), k.verifying_key().to_bytes())
}

/// The streaming verdict, in chunks of `n`: the error, or the summary's payload start.
fn stream(file: &[u8], trust: Trust<'_>, n: usize) -> Result<u64, Error> {
    let mut buf = vec![0u8; 8192];
    let mut hasher = TensorHasher::new();
    let mut scratch = [0u32; 64];
    let mut check = UpdateCheck::new(trust, &mut buf, &mut hasher).scratch(&mut scratch);
    for c in file.chunks(n) {
        check.feed(c)?;
    }
    check.finish().map(|s| s.payload_start)
}

fn whole(file: &[u8], trust: &Trust<'_>) -> Result<u64, Error> {
    Model::parse_trusted(file, trust).map(|m| m.payload_start() as u64)
}

#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn a_signed_model_reads_everywhere_and_verifies_with_its_key() {
    let (file, public) = example();
    let m = Model::parse(&file).unwrap();
    assert_eq!(m.kind(), Kind::Signed);
    let sig = m.signature().unwrap();
    assert_eq!((sig.key, sig.release.version, sig.release.target), (&public, 5, "lm3s6965"));
    // Same metadata, digests and block as the input.
    let input = Model::parse(EXAMPLE).unwrap();
    assert!(m.metadata().iter().eq(input.metadata().iter()));
    assert_eq!(m.digests().unwrap().as_bytes(), input.digests().unwrap().as_bytes());
    assert_eq!(&file[m.directory_offset()..], &EXAMPLE[input.directory_offset()..]);
    let trust = Trust::new(&public).unwrap().target("lm3s6965").newer_than(4);
    Model::parse_trusted(&file, &trust).unwrap();
    assert_eq!(stream(&file, trust, 256), whole(&file, &trust));
}

#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn a_flipped_bit_anywhere_in_the_signed_region_never_verifies() {
    let (file, public) = example();
    let trust = Trust::new(&public).unwrap();
    let payload_start = Model::parse(&file).unwrap().payload_start();
    let mut flipped = file.clone();
    let mut refused = 0;
    for at in 0..payload_start {
        for bit in 0..8 {
            flipped[at] ^= 1 << bit;
            let verdict = Model::parse_trusted(&flipped, &trust);
            assert!(verdict.is_err(), "bit {bit} of byte {at} flipped and the model still verifies");
            refused += 1;
            flipped[at] ^= 1 << bit;
        }
    }
    assert_eq!(refused, payload_start * 8);
    // Inside the signature and past the key and release fields, only the signature check can see it.
    let mut f = file.clone();
    f[SIG_AT + 10] ^= 0x20;
    assert_eq!(Model::parse_trusted(&f, &trust).unwrap_err(), Error::new(Rule::SignatureInvalid, SIG_AT));
}

#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn the_reader_s_policy_is_checked_where_its_fields_are_read() {
    let (file, public) = example();
    let other = key(2).verifying_key().to_bytes();
    let by_other = signed(EXAMPLE, &key(2), 5, "lm3s6965");
    let trust = Trust::new(&public).unwrap();
    let e = Model::parse_trusted(&by_other, &trust).unwrap_err();
    assert_eq!((e.rule(), e.offset(), e.code()), (Rule::SignatureKey.into(), KEY_AT, ErrorCode::Signature));
    assert!(Model::parse_trusted(&by_other, &Trust::new(&other).unwrap()).is_ok());
    // Target and version, at their fields.
    let m = Model::parse(&file).unwrap();
    let release = m.signature().unwrap().release;
    let e = Model::parse_trusted(&file, &trust.target("stm32")).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::ReleaseTarget.into(), release.offset() + 8));
    for running in [5, 6, u64::MAX] {
        let e = Model::parse_trusted(&file, &trust.newer_than(running)).unwrap_err();
        assert_eq!((e.rule(), e.offset()), (Rule::ReleaseVersion.into(), release.offset()));
    }
    assert!(Model::parse_trusted(&file, &trust.newer_than(4).target("lm3s6965")).is_ok());
    // An unsigned model where a signature is required.
    let e = Model::parse_trusted(EXAMPLE, &trust).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::NotSigned.into(), 8));
    // A key of small order is not a key to trust.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert!(Trust::new(&identity).is_none());
}

#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn the_signed_record_s_own_lengths() {
    let (file, _) = example();
    // key 31 bytes: the length word says so.
    let mut f = file.clone();
    f[16..20].copy_from_slice(&31u32.to_le_bytes());
    let e = Model::parse(&f).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::SignatureKeyLength.into(), 16));
    let mut f = file.clone();
    f[52..56].copy_from_slice(&63u32.to_le_bytes());
    let e = Model::parse(&f).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::SignatureLength.into(), 52));
}

#[test]
fn payload_faults_after_the_signature() {
    let (file, public) = example();
    let trust = Trust::new(&public).unwrap();
    let m = Model::parse(&file).unwrap();
    let t = m.directory().get(1).unwrap();
    let mut f = file.clone();
    f[t.absolute_offset() + 3] ^= 1;
    let e = Model::parse_trusted(&f, &trust).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (CoreRule::PayloadDigest.into(), t.absolute_offset()));
    // Signature (9s) before digests (9d): both broken, the signature is the verdict.
    f[SIG_AT] ^= 1;
    assert_eq!(Model::parse_trusted(&f, &trust).unwrap_err().rule(), Rule::SignatureInvalid);
}

/// Faults of every kind the device meets, in every chunking: the stream's
/// verdict is the whole-buffer one.
#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn the_stream_verdict_is_the_whole_buffer_verdict_in_every_chunking() {
    let (file, public) = example();
    let trust = Trust::new(&public).unwrap().target("lm3s6965").newer_than(4);
    let m = Model::parse(&file).unwrap();
    let dir = m.directory();
    let b = dir.get(1).unwrap();
    // Two tensors whose names have one length.
    let (a, c) = dir
        .iter()
        .flat_map(|x| dir.iter().map(move |y| (x, y)))
        .find(|(x, y)| x.name() != y.name() && x.name().unwrap().len() == y.name().unwrap().len())
        .expect("the example has two names of one length");
    let mut cases: Vec<(&str, Vec<u8>)> = vec![("intact", file.clone())];
    let mut flip = |what, at: usize| {
        let mut f = file.clone();
        f[at] ^= 0x04;
        cases.push((what, f));
    };
    flip("key", KEY_AT + 3);
    flip("sig", SIG_AT + 7);
    flip("metadata", SIG_AT + 70);
    flip("release", m.signature().unwrap().release.offset());
    flip("digest", m.digests().unwrap().offset_of(2));
    flip("header", m.directory_offset() + 4);
    flip("descriptor", m.directory_offset() + 64 + 128 + 40);
    flip("payload", b.absolute_offset() + 1);
    flip("last payload byte", file.len() - 1);
    cases.push(("cut short", file[..file.len() - 100].to_vec()));
    cases.push(("cut in the head", file[..200].to_vec()));
    cases.push(("cut at the block", file[..m.directory_offset()].to_vec()));
    cases.push(("trailing", [file.as_slice(), &[0]].concat()));
    cases.push(("other key", signed(EXAMPLE, &key(3), 5, "lm3s6965")));
    cases.push(("older", signed(EXAMPLE, &key(1), 4, "lm3s6965")));
    cases.push(("other target", signed(EXAMPLE, &key(1), 9, "rv32")));
    // Two names of the same length swapped after signing.
    let mut swapped = file.clone();
    let (na, nb) = (a.name().unwrap(), c.name().unwrap());
    let heap = |f: &[u8], name: &str| f.windows(name.len()).position(|w| w == name.as_bytes()).unwrap();
    let (ia, ib) = (heap(&file, na), heap(&file, nb));
    swapped[ia..ia + na.len()].copy_from_slice(nb.as_bytes());
    swapped[ib..ib + nb.len()].copy_from_slice(na.as_bytes());
    cases.push(("names swapped", swapped));
    for (what, f) in &cases {
        let expected = whole(f, &trust);
        if *what != "intact" {
            assert!(expected.is_err(), "{what}: accepted");
        }
        for n in [1, 3, 64, 100, 256, 4096, f.len().max(1)] {
            let got = stream(f, trust, n);
            // A length past the end of the whole file: the stream, which does
            // not know where the file ends, meets the end of its buffer first.
            let memory = matches!((&got, &expected), (Err(g), Err(e))
                if g.rule() == CoreRule::PrefixBufferTooSmall && e.code() == ErrorCode::Eof && f.len() > 8192);
            assert!(got == expected || memory, "{what} in chunks of {n}: {got:?}, whole: {expected:?}");
        }
    }
    let rule = |f: &[u8]| whole(f, &trust).unwrap_err().rule();
    assert_eq!(rule(&cases.iter().find(|c| c.0 == "names swapped").unwrap().1), Rule::SignatureInvalid);
    assert_eq!(rule(&cases.iter().find(|c| c.0 == "other key").unwrap().1), Rule::SignatureKey);
}

/// The stream rejects at the chunk that makes the fault certain: the key
/// with the signature field, the signature with the prefix's last byte,
/// before any payload byte.
#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn the_stream_rejects_as_early_as_the_fault_is_certain() {
    let (file, public) = example();
    let trust = Trust::new(&public).unwrap();
    let payload_start = Model::parse(&file).unwrap().payload_start();
    let first_fault = |f: &[u8]| {
        let mut buf = vec![0u8; 8192];
        let mut hasher = TensorHasher::new();
        let mut check = UpdateCheck::new(trust, &mut buf, &mut hasher);
        f.iter().position(|b| check.feed(std::slice::from_ref(b)).is_err())
    };
    let other = signed(EXAMPLE, &key(3), 5, "lm3s6965");
    // The key is checked with its field (which ends with the signature's last byte).
    assert_eq!(first_fault(&other), Some(SIG_AT + 63));
    let mut bad_sig = file.clone();
    bad_sig[SIG_AT] ^= 1;
    assert_eq!(first_fault(&bad_sig), Some(payload_start - 1));
    let (_, parts) = (0, signed::signed_message(&file, payload_start));
    assert_eq!(parts[0].len() + parts[1].len() + 64, payload_start);
}

/// A sharded model is signed through its manifest: the signed manifest keeps
/// the model id, so the shards check against it as they are.
#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn a_signed_manifest_covers_the_sharded_model() {
    use kiln_model::sign_manifest;
    use kiln_model::{check_all, write_sharded, Manifest};
    use kiln_nostd::{DType, Limits, TensorSpec};
    let x = [1u8; 8];
    let y = [2u8; 16];
    let one = [TensorSpec::new(DType::F32, &[2], &x).named("x")];
    let two = [TensorSpec::new(DType::F32, &[4], &y).named("y")];
    let files = write_sharded(&[("author", "kiln")], &[("m-1.kiln", &one), ("m-2.kiln", &two)], 64).unwrap();
    let k = key(4);
    let public = k.verifying_key().to_bytes();
    let signed = sign_manifest(&files.manifest, &public, 7, "edge", |m| k.sign(m).to_bytes()).unwrap();
    assert_eq!(Kind::of(&signed), Some(Kind::Manifest));
    let m = Manifest::parse(&signed).unwrap();
    let plain = Manifest::parse(&files.manifest).unwrap();
    assert_eq!(m.model_id(), plain.model_id());
    assert!(m.metadata().iter().eq(plain.metadata().iter()));
    assert_eq!(m.signature().unwrap().release.target, "edge");
    assert!(plain.signature().is_none());
    let trust = Trust::new(&public).unwrap().newer_than(6);
    let m = Manifest::parse_trusted(&signed, &Limits::DEFAULT, None, &trust).unwrap();
    let open =
        |e: &kiln_model::ShardEntry<'_>| files.shards.iter().find(|s| s.0 == e.name.as_str()).map(|s| s.1.clone());
    check_all(&m, open, true, None).unwrap();
    // Unsigned, another key, and every flipped bit of the signed manifest.
    let e = Manifest::parse_trusted(&files.manifest, &Limits::DEFAULT, None, &trust).unwrap_err();
    assert_eq!(e.rule(), Rule::NotSigned);
    let other_key = key(5).verifying_key().to_bytes();
    let other = Trust::new(&other_key).unwrap();
    assert_eq!(
        Manifest::parse_trusted(&signed, &Limits::DEFAULT, None, &other).unwrap_err().rule(),
        Rule::SignatureKey
    );
    let mut f = signed.clone();
    for at in 0..f.len() {
        for bit in 0..8 {
            f[at] ^= 1 << bit;
            assert!(Manifest::parse_trusted(&f, &Limits::DEFAULT, None, &trust).is_err(), "bit {bit} of byte {at}");
            f[at] ^= 1 << bit;
        }
    }
}
