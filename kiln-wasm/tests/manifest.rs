//! The manifest reader's model id is hashed on first use (a shard's check),
//! not at open: the same id as the core's, none left over from an earlier
//! manifest after a rejected one, and shards still held against it.

use kiln_model::{write_sharded, Manifest};
use kiln_nostd::{DType, Limits, TensorSpec};
use kiln_wasm::manifest::ManifestCore;

fn model(value: u8) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let a = [value; 8];
    let b = [value.wrapping_add(1); 8];
    let s1 = [TensorSpec::new(DType::U8, &[8], &a).named("a")];
    let s2 = [TensorSpec::new(DType::U8, &[8], &b).named("b")];
    let out = write_sharded(&[], &[("m-00001-of-00002.kiln", &s1[..]), ("m-00002-of-00002.kiln", &s2[..])], 64)
        .expect("write_sharded");
    (out.manifest, out.shards)
}

#[test]
fn model_id_on_first_use() {
    let (one, shards) = model(1);
    let (two, _) = model(7);
    let mut core = ManifestCore::default();
    assert!(core.parse(&two, Limits::DEFAULT).is_ok());
    let id_two = core.model_id();
    assert_eq!(id_two, Manifest::parse(&two).expect("manifest").model_id());

    assert!(core.parse(&one, Limits::DEFAULT).is_ok());
    let id_one = Manifest::parse(&one).expect("manifest").model_id();
    assert_ne!(id_one, id_two);
    // A shard of this manifest is held against this manifest's id.
    let (_, shard) = &shards[0];
    assert!(core.check_shard(1, Some(shard), shard.len() as u64, Limits::DEFAULT).is_ok());
    assert_eq!(core.model_id(), id_one);

    // After a rejected manifest no id is left over.
    assert!(core.parse(&one[..one.len() - 1], Limits::DEFAULT).is_err());
    assert_eq!(core.model_id(), [0; 32]);
    assert!(core.check_shard(1, Some(shard), shard.len() as u64, Limits::DEFAULT).is_err());
}

#[test]
fn a_shard_of_another_model_is_refused() {
    let (one, _) = model(1);
    let (_, other) = model(7);
    let mut core = ManifestCore::default();
    assert!(core.parse(&one, Limits::DEFAULT).is_ok());
    let (_, shard) = &other[0];
    let e = core.check_shard(1, Some(shard), shard.len() as u64, Limits::DEFAULT).expect_err("another model's shard");
    assert_eq!(e.rule, "ShardModel");
}

#[test]
fn scale_and_outer_indices_in_the_table() {
    use kiln_nostd::writer::{QuantSpec, TensorRef};
    use kiln_wasm::table::{extra, slot, EXTRA_SLOTS, META, SLOTS};
    let q = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let scale: Vec<u8> = [0.5f32, 0.25, 2.0, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let outer = 3.0f32.to_le_bytes();
    let plain = [9u8; 4];
    let mut qs = TensorSpec::new(DType::I8, &[4, 2], &q).named("q");
    qs.quant = QuantSpec::ScalesOuter {
        axis: 1,
        group_size: 2,
        scale: TensorRef::Name("q.scale"),
        outer: TensorRef::Name("q.outer"),
    };
    // References resolve inside a shard.
    let s1 = [
        TensorSpec::new(DType::U8, &[4], &plain).named("a"),
        TensorSpec::new(DType::F32, &[1], &outer).named("q.outer"),
        qs,
        TensorSpec::new(DType::F32, &[4, 1], &scale).named("q.scale"),
    ];
    let s2 = [TensorSpec::new(DType::U8, &[4], &plain).named("b")];
    let out = write_sharded(&[], &[("m-00001-of-00002.kiln", &s1[..]), ("m-00002-of-00002.kiln", &s2[..])], 64)
        .expect("write_sharded");
    let mut core = ManifestCore::default();
    assert!(core.parse(&out.manifest, Limits::DEFAULT).is_ok());
    let t = core.table();
    let row = |i: usize| &t[META + i * SLOTS..META + (i + 1) * SLOTS];
    // Manifest order: a, q.outer, q, q.scale, b. Only q has an extra record.
    let at = row(2)[slot::EXTRA] as usize;
    let record = &t[at..at + EXTRA_SLOTS];
    assert_eq!((record[extra::SCALE], record[extra::OUTER]), (3, 1));
    assert_eq!((record[extra::SCHEME_AXIS], record[extra::GROUP]), (2 | 1 << 16, 2));
    for i in [0, 1, 3, 4] {
        assert_eq!(row(i)[slot::EXTRA], u32::MAX);
    }
}
