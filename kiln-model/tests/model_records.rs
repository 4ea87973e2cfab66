//! Digests, shard and manifest records (`spec/model-file.md`): every rule
//! of its tables broken once, with the code, rule and offset the spec gives.

use kiln_model::{
    check_all, write_sharded, EntrySpec, Kind, Manifest, ManifestQuant, ManifestWriter, Model, ModelWriter, ShardSpec,
    DIGESTS_HASH, MANIFEST_HASH, SHARD_HASH,
};
use kiln_model::{AnyRule, Rule};
use kiln_nostd::digest::{sha256, DIGEST_LEN};
use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    DType, ErrorCode, Parser, Rule as CoreRule, TensorSpec,
};

const A: [u8; 8] = [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
const B: [u8; 5] = [1, 0, 1, 1, 0];
const C: [u8; 2] = [0x21, 0x03];

fn specs() -> Vec<TensorSpec<'static>> {
    vec![
        TensorSpec::new(DType::F32, &[2], &A).named("a"),
        TensorSpec::new(DType::Bool, &[5], &B).named("b"),
        TensorSpec::new(DType::U4, &[3], &C).named("c"),
        TensorSpec::new(DType::F32, &[0], &[]).named("empty"),
    ]
}

fn write(w: ModelWriter, meta: &[(&str, &str)], specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = vec![0u8; w.encoded_len(meta, specs).unwrap()];
    let n = w.write(meta, specs, &mut out).unwrap();
    assert_eq!(n, out.len());
    out
}

fn digests_file() -> Vec<u8> {
    write(ModelWriter::new().digests(true), &[("author", "kiln")], &specs())
}

fn rule(r: kiln_model::Result<impl Sized>) -> (ErrorCode, AnyRule, usize) {
    let e = r.err().expect("rejected");
    (e.code(), e.rule(), e.offset())
}

/// Offset of the digest table's length word in a digests record.
fn table_word(file: &[u8]) -> usize {
    Model::parse(file).unwrap().digests().unwrap().offset_of(0) - 4
}

#[test]
fn a_digests_record_round_trips_and_verifies() {
    let file = digests_file();
    assert_eq!(Kind::of(&file), Some(Kind::Digests));
    assert_eq!(u64::from_le_bytes(file[8..16].try_into().unwrap()), DIGESTS_HASH);
    let m = Model::parse_verified(&file).unwrap();
    assert_eq!(m.kind(), Kind::Digests);
    assert_eq!(m.metadata().get("author"), Some("kiln"));
    let table = m.digests().unwrap();
    assert_eq!(table.len(), 4);
    for (i, t) in m.directory().iter().enumerate() {
        assert_eq!(table.get(i), Some(&sha256(t.bytes())));
    }
    // The empty tensor's digest is SHA-256 of nothing.
    assert_eq!(hex::encode(table.get(3).unwrap())[..8], *"e3b0c442");
    m.verify_digests().unwrap();
    // parse_any and is_model_file read it as any model file.
    assert!(kiln_model::is_model_file(&file));
    assert_eq!(kiln_model::parse_any(&file).unwrap().1.len(), 4);
}

/// Payloads of 8 MiB or more in all are hashed on threads beside the block's
/// write (with `std`; run with `--features std` for that path): each digest
/// still lands in its tensor's slot.
#[test]
fn many_large_payloads_get_their_own_digests_in_order() {
    let data: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i.wrapping_mul(37); 256 << 10]).collect();
    let names: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
    let shape = [256u64 << 10];
    let specs: Vec<TensorSpec<'_>> =
        data.iter().zip(&names).map(|(d, n)| TensorSpec::new(DType::U8, &shape, d).named(n)).collect();
    let file = write(ModelWriter::new().digests(true).align(4096), &[], &specs);
    let m = Model::parse_verified(&file).unwrap();
    let table = m.digests().unwrap();
    assert_eq!(table.len(), 40);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(table.get(i), Some(&sha256(d)), "digest {i}");
    }
    m.verify_digests().unwrap();
}

#[test]
fn a_plain_record_stays_valid_and_has_nothing_to_verify() {
    let file = write(ModelWriter::new(), &[], &specs());
    assert_eq!(Kind::of(&file), Some(Kind::Plain));
    let m = Model::parse_verified(&file).unwrap();
    assert!(m.digests().is_none());
    m.verify_digests().unwrap();
}

#[test]
fn alignment_counts_the_digest_table() {
    let w = ModelWriter::new().digests(true).align(4096);
    let file = write(w, &[("k", "v")], &specs());
    assert_eq!(Model::parse(&file).unwrap().payload_start() % 4096, 0);
    let shard = write(ModelWriter::new().shard([7; 32], 1, 1).align(4096), &[], &specs());
    assert_eq!(Model::parse(&shard).unwrap().payload_start() % 4096, 0);
}

#[test]
fn a_flipped_payload_byte_is_digest_at_the_tensors_first_byte() {
    let good = digests_file();
    let m = Model::parse(&good).unwrap();
    for t in m.directory().iter().filter(|t| t.byte_len() > 0) {
        let mut bad = good.clone();
        // Bit 0 of a bool byte or a u4 low nibble keeps every structural rule.
        bad[t.absolute_offset()] ^= 1;
        Model::parse(&bad).expect("structurally valid");
        assert_eq!(
            rule(Model::parse_verified(&bad)),
            (ErrorCode::Digest, CoreRule::PayloadDigest.into(), t.absolute_offset()),
            "tensor {:?}",
            t.name()
        );
        assert_eq!(rule(Model::parse(&bad).unwrap().verify_digests()).2, t.absolute_offset());
    }
}

#[test]
fn a_changed_digest_is_caught_too() {
    let mut bad = digests_file();
    let at = Model::parse(&bad).unwrap().digests().unwrap().offset_of(1);
    bad[at] ^= 0x80;
    let b = Model::parse(&bad).unwrap().directory().get(1).unwrap().absolute_offset();
    assert_eq!(rule(Model::parse_verified(&bad)), (ErrorCode::Digest, CoreRule::PayloadDigest.into(), b));
}

#[test]
fn digest_comes_before_steps_10_to_12_and_after_step_9() {
    let good = digests_file();
    let m = Model::parse(&good).unwrap();
    let a = m.directory().get(0).unwrap().absolute_offset();
    let b = m.directory().get(1).unwrap();
    // A mismatch in "a" and a bool fault in "b" (step 11): DIGEST.
    let mut bad = good.clone();
    bad[a] ^= 1;
    bad[b.absolute_offset()] = 2;
    assert_eq!(rule(Model::parse_verified(&bad)).1, CoreRule::PayloadDigest);
    assert_eq!(rule(Model::parse(&bad)).1, CoreRule::BoolByte);
    // A nonzero gap byte after "a" (step 10): DIGEST still.
    let mut bad = good.clone();
    bad[a] ^= 1;
    bad[a + 8] = 1;
    assert_eq!(rule(Model::parse(&bad)).1, CoreRule::NonzeroGap);
    assert_eq!(rule(Model::parse_verified(&bad)).1, CoreRule::PayloadDigest);
    // A byte past the end (step 12): DIGEST.
    let mut bad = good.clone();
    bad[a] ^= 1;
    bad.push(0);
    assert_eq!(rule(Model::parse_verified(&bad)).1, CoreRule::PayloadDigest);
    // A step 9 fault (a wrong byte_length on "a") wins over the mismatch.
    let mut bad = good.clone();
    bad[a] ^= 1;
    let desc = m.directory_offset() + 64;
    bad[desc + 40] = 4;
    assert_eq!(rule(Model::parse_verified(&bad)).1, CoreRule::LengthMismatch);
}

#[test]
fn step_9d_stops_at_the_first_misplaced_tensor() {
    // Tensor 1 at a non-canonical offset, tensor 2's payload changed: step 10 reports tensor 1.
    let good = digests_file();
    let m = Model::parse(&good).unwrap();
    let dir = m.directory();
    let desc = |i: usize| dir.start() + 64 + 128 * i;
    let mut bad = good.clone();
    let c = dir.get(2).unwrap().absolute_offset();
    bad[c] ^= 1;
    // Move "b" one 64-byte slot later is out of the payload; instead move "a" off its slot:
    // byte_offset 0 -> 1 keeps the range inside payload_bytes (a then overlaps nothing).
    bad[desc(0) + 32] = 1;
    assert_eq!(rule(Model::parse(&bad)).1, CoreRule::NonCanonicalOffset);
    assert_eq!(rule(Model::parse_verified(&bad)).1, CoreRule::NonCanonicalOffset);
}

#[test]
fn the_digest_table_is_bound_to_the_directory() {
    let good = digests_file();
    let word = table_word(&good);
    // Not a multiple of 32: the table's length word, before the block.
    let mut bad = good.clone();
    bad[word..word + 4].copy_from_slice(&127u32.to_le_bytes());
    assert_eq!(rule(Model::parse(&bad)), (ErrorCode::Type, CoreRule::DigestTableLength.into(), word));
    // One digest too few (the table shrinks, the block moves up): step 3d.
    let mut bad = good[..word].to_vec();
    bad.extend_from_slice(&96u32.to_le_bytes());
    bad.extend_from_slice(&good[word + 4..word + 4 + 96]);
    bad.extend_from_slice(&good[word + 4 + 128..]);
    assert_eq!(rule(Model::parse(&bad)), (ErrorCode::Type, CoreRule::DigestTableCount.into(), word));
    // Step 3 (the count cap) comes before 3d.
    let caps = kiln_nostd::Limits { count_cap: 2, ..kiln_nostd::Limits::DEFAULT };
    let (code, r, _) = rule(Model::parse_with(&bad, Parser::new().limits(caps)));
    assert_eq!((code, r), (ErrorCode::Limit, CoreRule::TensorCountCap.into()));
    // Steps 1 and 2 of the block come first too: a wrong directory version.
    let mut bad2 = bad.clone();
    let block = word + 4 + 96;
    bad2[block + 4] = 3;
    assert_eq!(rule(Model::parse(&bad2)).1, CoreRule::DirectoryVersion);
    // And step 3d comes before step 4 (directory_bytes).
    let mut bad3 = bad.clone();
    bad3[block + 24] ^= 1;
    assert_eq!(rule(Model::parse(&bad3)).1, CoreRule::DigestTableCount);
}

#[test]
fn a_shard_record_alone() {
    let file = write(ModelWriter::new().shard([9; 32], 2, 3), &[], &specs());
    assert_eq!(u64::from_le_bytes(file[8..16].try_into().unwrap()), SHARD_HASH);
    let m = Model::parse_verified(&file).unwrap();
    let id = m.shard().unwrap();
    assert_eq!((id.model, id.index, id.count), (&[9; 32], 2, 3));
    let model_word = id.model_offset() - 4;
    // The model id is 32 bytes.
    let mut bad = file[..model_word].to_vec();
    bad.extend_from_slice(&31u32.to_le_bytes());
    bad.extend_from_slice(&file[model_word + 5..]);
    assert_eq!(rule(Model::parse(&bad)), (ErrorCode::Type, Rule::ShardModelLength.into(), model_word));
    // Index 0, index above the count, count 0.
    for (index, count, at) in [(0u32, 3u32, id.index_offset()), (4, 3, id.index_offset()), (1, 0, id.count_offset())] {
        let mut bad = file.clone();
        bad[id.index_offset()..][..4].copy_from_slice(&index.to_le_bytes());
        bad[id.count_offset()..][..4].copy_from_slice(&count.to_le_bytes());
        assert_eq!(rule(Model::parse(&bad)), (ErrorCode::Type, Rule::ShardPosition.into(), at), "{index} of {count}");
    }
}

#[test]
fn a_manifest_is_not_a_model_file() {
    let files = sharded();
    assert_eq!(Kind::of(&files.manifest), Some(Kind::Manifest));
    assert!(!kiln_model::is_model_file(&files.manifest));
    assert_eq!(rule(Model::parse(&files.manifest)), (ErrorCode::Schema, CoreRule::SchemaHash.into(), 8));
    assert_eq!(u64::from_le_bytes(files.manifest[8..16].try_into().unwrap()), MANIFEST_HASH);
}

fn quantized() -> (Vec<u8>, Vec<u8>) {
    // w: 4 x 2 i8, scales per row (4 f32), one outer scale.
    (vec![1u8; 8], vec![0u8; 16])
}

fn sharded() -> kiln_model::ShardedFiles {
    let (w, s) = quantized();
    let (w, s) = (&w[..], &s[..]);
    let one = vec![
        TensorSpec::new(DType::F32, &[2], &A).named("a"),
        TensorSpec::new(DType::F32, &[], &A[..4]).named("scalar"),
    ];
    let mut q = TensorSpec::new(DType::I8, &[4, 2], w).named("q");
    q.quant = QuantSpec::ScalesOuter {
        axis: 1,
        group_size: 2,
        scale: TensorRef::Name("q.scale"),
        outer: TensorRef::Name("q.outer"),
    };
    let two = vec![
        q,
        TensorSpec::new(DType::F32, &[4, 1], s).named("q.scale"),
        TensorSpec::new(DType::F32, &[1], &A[..4]).named("q.outer"),
        TensorSpec::opaque(4100, "Q4_K", 4, &[8], &[5; 4]).named("opaque"),
    ];
    let three =
        vec![TensorSpec::new(DType::Bool, &[5], &B).named("b"), TensorSpec::new(DType::F32, &[0], &[]).named("empty")];
    let shards: Vec<(&str, &[TensorSpec<'_>])> =
        vec![("m-00001-of-00003.kiln", &one), ("m-00002-of-00003.kiln", &two), ("m-00003-of-00003.kiln", &three)];
    write_sharded(&[("author", "kiln")], &shards, 64).unwrap()
}

fn check(files: &kiln_model::ShardedFiles, verify: bool) -> Result<(), (u32, ErrorCode, AnyRule, usize)> {
    let m = Manifest::parse(&files.manifest).expect("manifest");
    check_all(&m, |e| files.shards.iter().find(|(n, _)| n == e.name.as_str()).map(|(_, b)| b.clone()), verify, None)
        .map_err(|f| (f.shard, f.error.code(), f.error.rule(), f.error.offset()))
}

#[test]
fn a_sharded_model_round_trips() {
    let files = sharded();
    check(&files, true).unwrap();
    let m = Manifest::parse(&files.manifest).unwrap();
    assert_eq!((m.shard_count(), m.tensor_count()), (3, 8));
    assert_eq!(m.metadata().get("author"), Some("kiln"));
    let (q, within) = m.find("q.outer").unwrap();
    assert_eq!((q.shard, within, q.dims().collect::<Vec<_>>()), (2, 2, vec![1]));
    let (q, _) = m.find("q").unwrap();
    assert_eq!(q.quant.map(|q| (q.scheme, q.scale, q.outer)), Some((2, "q.scale", "q.outer")));
    assert_eq!(m.find("scalar").unwrap().0.rank(), 0);
    assert_eq!(m.shard_tensors(3).map(|t| t.name).collect::<Vec<_>>(), ["b", "empty"]);
    // Each shard entry starts its tensors where the walk from the table's start finds them.
    for e in m.shards() {
        let from_start: Vec<_> = m.shard_tensors(e.index).map(|t| (t.index, t.name)).collect();
        assert!(!from_start.is_empty());
        assert_eq!(m.shard_tensors_of(&e).map(|t| (t.index, t.name)).collect::<Vec<_>>(), from_start);
    }
    let (opaque, _) = m.find("opaque").unwrap();
    assert_eq!((opaque.layout, opaque.block_size), ("Q4_K", 4));
    // Every shard records the model id and its place.
    for (k, (_, bytes)) in files.shards.iter().enumerate() {
        let s = Model::parse_verified(bytes).unwrap();
        let id = s.shard().unwrap();
        assert_eq!((id.model, id.index, id.count), (&m.model_id(), k as u32 + 1, 3));
        assert_eq!(m.shard(id.index).unwrap().prefix_digest, &sha256(&bytes[..s.payload_start()]));
    }
    // The model id is the hash of the table from its count word to the end.
    assert_eq!(m.model_id(), sha256(m.model_id_bytes()));
}

#[test]
fn tampering_is_caught_with_the_shard_named() {
    let good = sharded();
    // One flipped payload byte that passes every structural rule: DIGEST in shard 1.
    let mut bad = good.clone();
    let s = Model::parse(&bad.shards[0].1).unwrap();
    let at = s.directory().get(0).unwrap().absolute_offset();
    bad.shards[0].1[at] ^= 1;
    assert_eq!(check(&bad, true), Err((1, ErrorCode::Digest, CoreRule::PayloadDigest.into(), at)));
    check(&bad, false).expect("without hashing the payload is not read");
    // A missing shard.
    let mut bad = good.clone();
    bad.shards.remove(1);
    assert_eq!(check(&bad, true), Err((2, ErrorCode::Shard, Rule::ShardMissing.into(), 0)));
    // A shard cut by one byte.
    let mut bad = good.clone();
    let n = bad.shards[2].1.len() - 1;
    bad.shards[2].1.truncate(n);
    assert_eq!(check(&bad, true), Err((3, ErrorCode::Shard, Rule::ShardLength.into(), n)));
    // A shard of another model, bit for bit a valid shard: its model id differs.
    let mut bad = good.clone();
    let mut id = Model::parse(&bad.shards[1].1).unwrap().shard().unwrap().model_offset();
    bad.shards[1].1[id] ^= 1;
    assert_eq!(check(&bad, true), Err((2, ErrorCode::Shard, Rule::ShardModel.into(), id)));
    // Its count.
    let mut bad = good.clone();
    id = Model::parse(&bad.shards[1].1).unwrap().shard().unwrap().count_offset();
    bad.shards[1].1[id] = 4;
    assert_eq!(check(&bad, true), Err((2, ErrorCode::Shard, Rule::ShardCount.into(), id)));
    // A changed metadata byte is the prefix digest.
    // (write_sharded aligns payloads to 64 bytes, which needs a padding value of spaces.)
    let mut bad = good.clone();
    let p = find(&bad.shards[0].1, b"kiln.convert.pad").unwrap() + 16 + 4;
    assert_eq!(bad.shards[0].1[p], b' ');
    bad.shards[0].1[p] = b'x';
    assert_eq!(check(&bad, true), Err((1, ErrorCode::Shard, Rule::ShardPrefixDigest.into(), 0)));
    // A changed digest in a shard's table.
    let mut bad = good.clone();
    let d = Model::parse(&bad.shards[2].1).unwrap().digests().unwrap().offset_of(1);
    bad.shards[2].1[d] ^= 1;
    assert_eq!(check(&bad, true), Err((3, ErrorCode::Shard, Rule::ShardTensorDigest.into(), d)));
    // A shard whose tensor differs from its entry (a name byte).
    let mut bad = good.clone();
    let p = find(&bad.shards[2].1, b"bempty").unwrap();
    bad.shards[2].1[p] = b'x';
    let s = Model::parse(&bad.shards[2].1).unwrap();
    assert_eq!(check(&bad, true), Err((3, ErrorCode::Shard, Rule::ShardTensor.into(), s.directory_offset() + 64)));
    // A plain model file in a shard's place: SCHEMA.
    let mut bad = good.clone();
    let plain = write(ModelWriter::new(), &[], &specs());
    bad.shards[0].1 = plain;
    let len = Manifest::parse(&bad.manifest).unwrap().shard(1).unwrap().length as usize;
    bad.shards[0].1.resize(len, 0);
    assert_eq!(check(&bad, true).unwrap_err().2, CoreRule::SchemaHash);
}

/// Two shards of one length, and a second model of the same shape with other values.
fn pair(value: u8) -> kiln_model::ShardedFiles {
    let x = &[value; 8][..];
    let one = [TensorSpec::new(DType::F32, &[2], x).named("x")];
    let two = [TensorSpec::new(DType::F32, &[2], &A).named("y")];
    write_sharded(&[], &[("p-00001-of-00002.kiln", &one), ("p-00002-of-00002.kiln", &two)], 64).unwrap()
}

#[test]
fn swapped_shards_and_shards_of_another_model() {
    let good = pair(1);
    check(&good, true).unwrap();
    assert_eq!(good.shards[0].1.len(), good.shards[1].1.len());
    let mut swapped = good.clone();
    swapped.shards.swap(0, 1);
    for (k, s) in swapped.shards.iter_mut().enumerate() {
        s.0 = good.shards[k].0.clone();
    }
    let at = Model::parse(&swapped.shards[0].1).unwrap().shard().unwrap().index_offset();
    assert_eq!(check(&swapped, true), Err((1, ErrorCode::Shard, Rule::ShardIndex.into(), at)));
    // Shard 1 of a model whose "x" holds other values: the same length, another model id.
    let other = pair(2);
    let mut mixed = good.clone();
    mixed.shards[0].1 = other.shards[0].1.clone();
    let at = Model::parse(&mixed.shards[0].1).unwrap().shard().unwrap().model_offset();
    assert_eq!(check(&mixed, true), Err((1, ErrorCode::Shard, Rule::ShardModel.into(), at)));
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn entry<'a>(name: &'a str, shard: u32, dtype: DType, shape: &'a [u64], len: u64) -> EntrySpec<'a> {
    EntrySpec { name, shard, dtype, shape, byte_length: len, layout: "", block_size: 0, quant: None, digest: [0; 32] }
}

fn shard(name: &str) -> ShardSpec<'_> {
    ShardSpec { name, length: 100, prefix_digest: [1; 32] }
}

/// Encodes without the writer's own check, for manifests that break a rule.
fn raw_manifest(shards: &[ShardSpec<'_>], entries: &[EntrySpec<'_>]) -> Vec<u8> {
    let mut out = vec![0u8; ManifestWriter::encoded_len(&[], shards, entries).unwrap()];
    let mut scratch = vec![0u32; Manifest::scratch_len(entries.len().max(shards.len()))];
    let _ = ManifestWriter::write_with_scratch(&[], shards, entries, &mut out, Some(&mut scratch));
    out
}

fn manifest_rule(shards: &[ShardSpec<'_>], entries: &[EntrySpec<'_>]) -> (ErrorCode, AnyRule) {
    let m = raw_manifest(shards, entries);
    let (code, r, _) = rule(Manifest::parse(&m));
    let mut scratch = vec![0u32; Manifest::scratch_len(entries.len().max(shards.len()))];
    let with = Manifest::parse_with(&m, &kiln_nostd::Limits::DEFAULT, Some(&mut scratch)).err().unwrap();
    assert_eq!((with.rule(), with.offset()), (r, rule(Manifest::parse(&m)).2), "scratch and no scratch agree");
    (code, r)
}

#[test]
fn manifest_rules_m1_to_m5() {
    let ok = [entry("a", 1, DType::F32, &[2], 8)];
    let one = [shard("s.kiln")];
    Manifest::parse(&raw_manifest(&one, &ok)).unwrap();
    assert_eq!(manifest_rule(&[], &[]), (ErrorCode::Type, Rule::ManifestNoShards.into()));
    for bad in ["", "a/b", "a\\b", "..", ".", "a:b", "a\0b", "/abs", "tab\t", "del\u{7f}", &"x".repeat(256)] {
        assert_eq!(manifest_rule(&[shard(bad)], &ok), (ErrorCode::Path, Rule::ShardName.into()), "{bad:?}");
    }
    Manifest::parse(&raw_manifest(&[shard(&"x".repeat(255))], &ok)).unwrap();
    Manifest::parse(&raw_manifest(&[shard("ünï.kiln")], &ok)).unwrap();
    assert_eq!(
        manifest_rule(&[shard("s"), shard("t"), shard("s")], &ok),
        (ErrorCode::Path, Rule::ShardNameRepeated.into())
    );
    assert_eq!(manifest_rule(&one, &[entry("", 1, DType::F32, &[2], 8)]).1, Rule::ManifestNameEmpty);
    let two = [entry("a", 1, DType::F32, &[2], 8), entry("a", 1, DType::F32, &[2], 8)];
    assert_eq!(manifest_rule(&one, &two).1, Rule::ManifestNameRepeated);
    assert_eq!(manifest_rule(&one, &[entry("a", 0, DType::F32, &[2], 8)]).1, Rule::ManifestShard);
    assert_eq!(manifest_rule(&one, &[entry("a", 2, DType::F32, &[2], 8)]).1, Rule::ManifestShard);
    let order = [entry("a", 2, DType::F32, &[2], 8), entry("b", 1, DType::F32, &[2], 8)];
    assert_eq!(manifest_rule(&[shard("s"), shard("t")], &order).1, Rule::ManifestShard);
    assert_eq!(manifest_rule(&one, &[entry("a", 1, DType::Opaque(40000), &[2], 8)]).1, Rule::ManifestDtype);
    assert_eq!(manifest_rule(&one, &[entry("a", 1, DType::F32, &[1; 9], 4)]).1, Rule::ManifestRank);
    let huge = [u64::MAX, 2];
    assert_eq!(
        manifest_rule(&one, &[entry("a", 1, DType::F32, &huge, 8)]),
        (ErrorCode::Limit, Rule::ManifestCountOverflow.into())
    );
    let zero_dim = [u64::MAX, 0, u64::MAX];
    Manifest::parse(&raw_manifest(&one, &[entry("a", 1, DType::F32, &zero_dim, 0)])).unwrap();
    let mut dense_layout = entry("a", 1, DType::F32, &[2], 8);
    dense_layout.layout = "Q4";
    assert_eq!(manifest_rule(&one, &[dense_layout]).1, Rule::ManifestLayout);
    let opaque_bare = entry("a", 1, DType::Opaque(4100), &[2], 8);
    assert_eq!(manifest_rule(&one, &[opaque_bare]).1, Rule::ManifestLayout);
    let big = [u64::MAX / 2];
    assert_eq!(
        manifest_rule(&one, &[entry("a", 1, DType::F32, &big, 8)]),
        (ErrorCode::Limit, Rule::ManifestSizeOverflow.into())
    );
    assert_eq!(manifest_rule(&one, &[entry("a", 1, DType::F32, &[2], 7)]).1, Rule::ManifestLength);
    let mut opaque = entry("a", 1, DType::Opaque(4100), &[2], 9);
    (opaque.layout, opaque.block_size) = ("Q4", 4);
    assert_eq!(manifest_rule(&one, &[opaque]).1, Rule::ManifestLength);
    // M4: the scale must be another tensor of the same shard.
    let q = |scheme, scale, outer| ManifestQuant { scheme, axis: 0, group_size: 1, scale, outer };
    let mut w = entry("w", 1, DType::I8, &[2], 2);
    let s = entry("s", 1, DType::F32, &[2], 8);
    let o = entry("o", 1, DType::F32, &[1], 4);
    let far = entry("far", 2, DType::F32, &[2], 8);
    let two_shards = [shard("s1"), shard("s2")];
    for (quant, fine) in [
        (q(1, "s", ""), true),
        (q(2, "s", "o"), true),
        (q(3, "s", ""), false),
        (q(1, "w", ""), false),
        (q(1, "nope", ""), false),
        (q(1, "far", ""), false),
        (q(1, "s", "o"), false),
        (q(2, "s", "s"), false),
        (q(2, "s", ""), false),
    ] {
        w.quant = Some(quant);
        let m = raw_manifest(&two_shards, &[w, s, o, far]);
        match fine {
            true => drop(Manifest::parse(&m).unwrap()),
            false => assert_eq!(manifest_rule(&two_shards, &[w, s, o, far]).1, Rule::ManifestQuant, "{quant:?}"),
        }
    }
    // M5: the digests are counted against the tensors.
    let mut m = raw_manifest(&one, &ok);
    let word = m.len() - 4 - DIGEST_LEN;
    m[word..word + 4].copy_from_slice(&0u32.to_le_bytes());
    m.truncate(word + 4);
    assert_eq!(rule(Manifest::parse(&m)), (ErrorCode::Type, Rule::ManifestDigestCount.into(), word));
    // Frozen rules first: a truncated manifest is EOF, extra bytes TRAILING.
    let mut m = raw_manifest(&one, &ok);
    m.push(0);
    assert_eq!(rule(Manifest::parse(&m)).1, CoreRule::TrailingBytes);
    let m = raw_manifest(&one, &ok);
    assert_eq!(rule(Manifest::parse(&m[..m.len() - 1])).0, ErrorCode::Eof);
}

#[test]
fn manifest_names_are_checked_in_linear_time_with_scratch() {
    // Fewer under Miri, which interprets every step.
    let n = if cfg!(miri) { 1_000 } else { 50_000 };
    let names: Vec<String> = (0..n).map(|i| format!("layer.{i}.weight")).collect();
    let mut entries: Vec<EntrySpec<'_>> = names.iter().map(|n| entry(n, 1, DType::F32, &[1], 4)).collect();
    let m = raw_manifest(&[shard("s")], &entries);
    let mut scratch = vec![0u32; Manifest::scratch_len(entries.len())];
    Manifest::parse_with(&m, &kiln_nostd::Limits::DEFAULT, Some(&mut scratch)).unwrap();
    entries[n - 1].name = "layer.3.weight";
    let m = raw_manifest(&[shard("s")], &entries);
    let e = Manifest::parse_with(&m, &kiln_nostd::Limits::DEFAULT, Some(&mut scratch)).unwrap_err();
    assert_eq!(e.rule(), Rule::ManifestNameRepeated);
}

/// `check_shard_prefix` on the bytes before the payload region (and the
/// file's length) gives `check_shard`'s verdict wherever that verdict is
/// one of steps 1 to 6; on a shard whose faults are all in its payload it
/// accepts, and the payload's check is the caller's.
#[test]
fn a_shard_checked_from_its_prefix_alone() {
    use kiln_model::{check_shard, check_shard_prefix};
    let verdicts = |files: &kiln_model::ShardedFiles| {
        let m = Manifest::parse(&files.manifest).unwrap();
        let id = m.model_id();
        for entry in m.shards() {
            let file = files.shards.iter().find(|(n, _)| n == entry.name.as_str()).map(|(_, b)| b.as_slice());
            let whole = check_shard(&m, &id, &entry, file, false, Parser::new());
            // The prefix: up to the payload region when the file parses that far, else all of it.
            let cut = file.map(|f| Model::parse(f).map_or(f.len(), |s| s.payload_start()));
            let prefix = file.zip(cut).map(|(f, n)| &f[..n]);
            let len = file.map_or(0, |f| f.len() as u64);
            let part = check_shard_prefix(&m, &id, &entry, prefix, len, Parser::new());
            match (&whole, &part) {
                (Err(a), Err(b)) => assert_eq!(a, b, "shard {}", entry.index),
                (Ok(()), Ok(s)) => assert_eq!(s.directory().len(), m.shard_tensors(entry.index).count()),
                _ => panic!("shard {}: {whole:?} vs {:?}", entry.index, part.map(|_| ())),
            }
        }
    };
    let good = sharded();
    verdicts(&good);
    let mut cases = Vec::new();
    let mut bad = good.clone();
    bad.shards.remove(1);
    cases.push(bad);
    let mut bad = good.clone();
    let n = bad.shards[2].1.len() - 1;
    bad.shards[2].1.truncate(n);
    cases.push(bad);
    for field in [0usize, 1, 2] {
        let mut bad = good.clone();
        let id = Model::parse(&bad.shards[1].1).unwrap().shard().unwrap();
        let at = [id.model_offset(), id.index_offset(), id.count_offset()][field];
        bad.shards[1].1[at] ^= 1;
        cases.push(bad);
    }
    let mut bad = good.clone();
    let p = find(&bad.shards[0].1, b"kiln.convert.pad").unwrap() + 20;
    bad.shards[0].1[p] = b'x';
    cases.push(bad);
    let mut bad = good.clone();
    let d = Model::parse(&bad.shards[2].1).unwrap().digests().unwrap().offset_of(1);
    bad.shards[2].1[d] ^= 1;
    cases.push(bad);
    let mut bad = good.clone();
    let p = find(&bad.shards[2].1, b"bempty").unwrap();
    bad.shards[2].1[p] = b'x';
    cases.push(bad);
    let mut swapped = pair(1);
    swapped.shards.swap(0, 1);
    let names: Vec<String> = pair(1).shards.iter().map(|s| s.0.clone()).collect();
    for (k, s) in swapped.shards.iter_mut().enumerate() {
        s.0 = names[k].clone();
    }
    cases.push(swapped);
    // A flipped payload byte: not a prefix fault (the caller's digest check finds it).
    let mut bad = good.clone();
    let at = Model::parse(&bad.shards[0].1).unwrap().directory().get(0).unwrap().absolute_offset();
    bad.shards[0].1[at] ^= 1;
    cases.push(bad);
    for c in &cases {
        verdicts(c);
    }
    // A prefix cut before the payload region is EOF at its end.
    let m = Manifest::parse(&good.manifest).unwrap();
    let f = &good.shards[0].1;
    let cut = Model::parse(f).unwrap().payload_start() - 1;
    let e = check_shard_prefix(&m, &m.model_id(), &m.shard(1).unwrap(), Some(&f[..cut]), f.len() as u64, Parser::new());
    assert_eq!(e.err().map(|e| (e.code(), e.offset())), Some((ErrorCode::Eof, cut)));
}

/// The frame's profile, flag and reserved bytes are checked for every
/// model-file kind (FRAME), as for any Frozen frame.
#[test]
fn a_model_files_frame_bytes_are_checked() {
    for file in [write(ModelWriter::new(), &[], &specs()), digests_file(), sharded().shards[0].1.clone()] {
        Model::parse(&file).unwrap();
        for i in 4..8 {
            let mut bad = file.clone();
            bad[i] = 1;
            let e = Model::parse(&bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Frame, "byte {i}");
        }
    }
}
