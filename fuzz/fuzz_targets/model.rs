//! Model files and manifests (spec/model-file.md): `Model::parse` and
//! `parse_verified`, `Manifest::parse_with` with and without scratch, and a
//! sharded model whose shard files are cut from the same input.
//!
//! Oracles: an error offset lies inside the buffer (or at its end for EOF);
//! the parse with verification agrees with the parse plus `verify_digests`
//! (step 9d after steps 1 to 12 on a valid file); a manifest's verdict is the
//! same with and without scratch; an accepted manifest's iterators yield what
//! it counts, every name is found in its shard, and its model id is the hash
//! of its tail; checking shards never panics and reports offsets inside the
//! shard's file.
#![no_main]

use kiln_fuzz::{check_offset, check_views};
use kiln_nostd::digest::sha256;
use kiln_model::{check_all, Kind, Manifest, Model};
use kiln_nostd::{ErrorCode, Limits};
use libfuzzer_sys::fuzz_target;

fn model_file(data: &[u8]) {
    let plain = Model::parse(data);
    let verified = Model::parse_verified(data);
    match (&plain, &verified) {
        (Ok(m), Ok(v)) => {
            m.verify_digests().expect("parse_verified accepted it");
            check_views(data, &m.directory());
            assert_eq!((m.kind(), m.digests(), m.shard()), (v.kind(), v.digests(), v.shard()));
            if let Some(d) = m.digests() {
                assert_eq!(d.len(), m.directory().len());
            }
        }
        (Ok(m), Err(e)) => {
            // Only the digests can fail once every structural rule holds.
            assert_eq!(e.code(), ErrorCode::Digest);
            assert_eq!(m.verify_digests().unwrap_err(), *e);
        }
        (Err(e), Err(v)) => {
            check_model_error(e, data.len());
            check_model_error(v, data.len());
            // Either the same structural fault, or a digest fault that step 9d puts first.
            assert!(e == v || v.code() == ErrorCode::Digest, "{e} / {v}");
        }
        (Err(e), Ok(_)) => panic!("parse_verified accepted what parse refused: {e}"),
    }
}

/// `kiln_fuzz::check_error` for the model crate's errors (a rule of either crate).
fn check_model_error(e: &kiln_model::Error, len: usize) {
    check_offset(e.offset(), e.code(), len, e);
}

fn manifest(data: &[u8], shards: &[u8]) {
    let alone = Manifest::parse(data);
    let mut scratch = vec![0u32; Manifest::scratch_len(data.len() / 16)];
    let with = Manifest::parse_with(data, &Limits::DEFAULT, Some(&mut scratch));
    assert_eq!(alone.as_ref().err(), with.as_ref().err(), "scratch changes the verdict");
    let m = match alone {
        Err(e) => return check_model_error(&e, data.len()),
        Ok(m) => m,
    };
    assert_eq!(m.shards().count(), m.shard_count());
    assert_eq!(m.tensors().count(), m.tensor_count());
    assert_eq!(m.model_id(), sha256(m.model_id_bytes()));
    for t in m.tensors() {
        let (found, within) = m.find(t.name).expect("every name is found");
        assert_eq!((found.index, found.shard), (t.index, t.shard));
        assert_eq!(m.shard_tensors(t.shard).nth(within).map(|x| x.index), Some(t.index));
    }
    // Every shard's file is the rest of the input.
    let r = check_all(&m, |_| Some(shards), true, None);
    if let Err(f) = r {
        assert!(f.shard >= 1 && f.shard as usize <= m.shard_count());
        check_model_error(&f.error, shards.len());
    }
}

fuzz_target!(|data: &[u8]| {
    match Kind::of(data) {
        Some(Kind::Manifest) => {
            // A u32 at the end (when there is one) says where the manifest stops and the shard starts.
            let split = data
                .len()
                .checked_sub(4)
                .and_then(|at| Some((at, u32::from_le_bytes(data.get(at..)?.try_into().ok()?) as usize)))
                .filter(|&(at, n)| n <= at);
            match split {
                Some((at, n)) => manifest(&data[..n], &data[n..at]),
                None => manifest(data, &[]),
            }
        }
        _ => model_file(data),
    }
});
