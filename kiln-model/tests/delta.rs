//! Delta updates (`spec/model-file.md`, "Delta updates"): the delta `make`
//! writes rebuilds the new model byte for byte, sends only what changed,
//! and every fault of the head is its rule; a wrong reuse entry is caught
//! by the rebuilt model's own checks.

mod retrained;

use ed25519_dalek::{Signer, SigningKey};
use kiln_model::delta::{self, DeltaHead, Piece, Plan};
use kiln_model::signed::sign_model_aligned;
use kiln_model::Rule;
use kiln_model::{Model, Trust};
use kiln_nostd::Rule as CoreRule;
use retrained::retrained;

const EXAMPLE: &[u8] = include_bytes!("../../spec/examples/digits-mlp.model.kiln");

fn sign(file: &[u8], version: u64) -> Vec<u8> {
    let k = SigningKey::from_bytes(&[1; 32]);
    let public = k.verifying_key().to_bytes();
    sign_model_aligned(file, &public, version, "lm3s6965", Some(1), |m| k.sign(m).to_bytes()).unwrap()
}

#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn a_delta_rebuilds_the_new_model_byte_for_byte_and_sends_only_what_changed() {
    let old = sign(EXAMPLE, 1);
    let new = sign(&retrained(&["fc2.weight", "fc2.bias"]), 2);
    let d = delta::make(&old, &new).unwrap();
    assert_eq!(delta::apply(&old, &d).unwrap(), new);
    let public = SigningKey::from_bytes(&[1; 32]).verifying_key().to_bytes();
    Model::parse_trusted(&delta::apply(&old, &d).unwrap(), &Trust::new(&public).unwrap()).unwrap();
    let head = DeltaHead::parse(&d).unwrap();
    let n = Model::parse(&new).unwrap();
    let sent: Vec<&str> = n
        .directory()
        .iter()
        .enumerate()
        .filter(|(j, _)| head.reuse(*j) == Some(0))
        .map(|(_, t)| t.name().unwrap())
        .collect();
    assert_eq!(sent, ["fc2.weight", "fc2.bias"]);
    let payload = 1280 + 40;
    assert_eq!(d.len(), head.len() + n.payload_start() + payload);
    println!("full update {} bytes, delta {} bytes (fc2 retrained)", new.len(), d.len());
    assert!(d.len() * 4 < new.len());
    // The plan's pieces add up to the new block's payload region.
    let pieces: Vec<Piece> =
        Plan::new(head, n.directory(), Model::parse(&old).unwrap().directory()).unwrap().map(Result::unwrap).collect();
    let total: u64 = pieces
        .iter()
        .map(|p| match *p {
            Piece::Zeros(k) | Piece::Sent(k) | Piece::Base { len: k, .. } => k,
        })
        .sum();
    assert_eq!(total, n.directory().header().payload_bytes);
    // Nothing in common: every payload is sent.
    let other = sign(
        &retrained(&[
            "fc1.weight",
            "fc1.bias",
            "fc2.weight",
            "fc2.bias",
            "fc1.weight.mxfp4",
            "fc1.weight.mxfp4.scales",
            "samples.x",
            "samples.y",
        ]),
        3,
    );
    let d = delta::make(&old, &other).unwrap();
    assert_eq!(delta::apply(&old, &d).unwrap(), other);
    // Every payload, without the gaps between them (the device writes those zeros).
    let o = Model::parse(&other).unwrap();
    let payloads: usize = o.directory().iter().map(|t| t.byte_len()).sum();
    assert_eq!(d.len(), DeltaHead::parse(&d).unwrap().len() + o.payload_start() + payloads);
}

#[test]
#[cfg_attr(miri, ignore = "Ed25519 signing under Miri: minutes per test")]
fn each_fault_of_a_delta_is_its_rule() {
    let old = sign(EXAMPLE, 1);
    let new = sign(&retrained(&["fc2.weight"]), 2);
    let d = delta::make(&old, &new).unwrap();
    let head = DeltaHead::parse(&d).unwrap();
    // Applied to another model.
    let e = delta::apply(&new, &d).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::DeltaBase.into(), 20));
    // Base id of 31 bytes.
    let mut f = d[..16].to_vec();
    f.extend_from_slice(&31u32.to_le_bytes());
    f.extend_from_slice(&[0; 31]);
    f.extend_from_slice(&0u32.to_le_bytes());
    let e = DeltaHead::parse(&f).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::DeltaBaseLength.into(), 16));
    // Cut short, and one byte more.
    assert_eq!(delta::apply(&old, &d[..d.len() - 1]).unwrap_err().rule(), CoreRule::BlockTruncated);
    let e = delta::apply(&old, &[d.as_slice(), &[0]].concat()).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (CoreRule::TrailingBytes.into(), d.len()));
    // A reuse entry past the base's tensors, and one of another length.
    let entry = |j: usize| 16 + 4 + 32 + 4 + 4 * j;
    let mut f = d.clone();
    f[entry(0)..entry(0) + 4].copy_from_slice(&99u32.to_le_bytes());
    let e = delta::apply(&old, &f).unwrap_err();
    assert_eq!((e.rule(), e.offset()), (Rule::DeltaReuse.into(), entry(0)));
    let mut f = d.clone();
    f[entry(0)..entry(0) + 4].copy_from_slice(&2u32.to_le_bytes()); // fc1.bias for fc1.weight
    assert_eq!(delta::apply(&old, &f).unwrap_err().rule(), Rule::DeltaReuse);
    // A wrong entry of the right length: the rebuilt model fails its digest.
    let mut f = d.clone();
    f[entry(6)..entry(6) + 4].copy_from_slice(&1u32.to_le_bytes()); // samples.x <- fc1.weight (both 8192 bytes)
    let rebuilt = delta::apply(&old, &f).unwrap();
    let public = SigningKey::from_bytes(&[1; 32]).verifying_key().to_bytes();
    let e = Model::parse_trusted(&rebuilt, &Trust::new(&public).unwrap()).unwrap_err();
    assert_eq!(e.rule(), CoreRule::PayloadDigest);
    assert_eq!(head.count(), 8);
}
