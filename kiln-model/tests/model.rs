//! Model files (`kiln_model`): the record `kiln convert` writes,
//! opened without a type text, with the verdicts of a Frozen reader of
//! `struct{metadata:dict<str,str>,tensors:tensors,}`.

use kiln_model::{self as model, Model, MODEL_HASH, MODEL_TYPE, PAD_KEY};
use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{DType, ErrorCode, Limits, Parser, Rule as CoreRule, TensorSpec, Writer};

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u32).to_le_bytes());
    out.extend(s.as_bytes());
}

/// A model file: frame, metadata (keys in byte order), a directory block.
fn model_file(meta: &[(&str, &str)], specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = frozen::frame_bytes(MODEL_HASH).to_vec();
    out.extend((meta.len() as u32).to_le_bytes());
    for (k, v) in meta {
        string(&mut out, k);
        string(&mut out, v);
    }
    let mut block = vec![0u8; Writer::new().encoded_len(specs).unwrap()];
    Writer::new().write(specs, &mut block).unwrap();
    out.extend(block);
    out
}

fn example() -> Vec<u8> {
    let w = [0u8; 24];
    let flags = [1u8, 0, 1];
    model_file(
        &[("author", "kiln"), (PAD_KEY, "      "), ("license", "MIT")],
        &[
            TensorSpec::new(DType::F32, &[2, 3], &w).named("w"),
            TensorSpec::new(DType::Bool, &[3], &flags).named("flags"),
        ],
    )
}

#[test]
fn the_hash_is_the_record_types() {
    assert_eq!(MODEL_HASH, frozen::hash_text(MODEL_TYPE));
    let s: Schema<'_> = Schema::parse(MODEL_TYPE).unwrap();
    assert_eq!(s.root().hash(), MODEL_HASH);
}

#[test]
fn metadata_hides_the_padding_and_the_directory_is_checked() {
    let f = example();
    let m = Model::parse(&f).unwrap();
    let entries: Vec<_> = m.metadata().iter().collect();
    assert_eq!(entries, [("author", "kiln"), ("license", "MIT")]);
    assert_eq!(m.metadata().get(PAD_KEY), None);
    assert_eq!(m.metadata().padding(), 6);
    assert_eq!(m.metadata().len(), 2);
    assert_eq!(m.directory().find("w").unwrap().shape(), &[2, 3]);
    assert_eq!(m.directory().end(), f.len());
    let (meta, dir) = model::parse_any(&f).unwrap();
    assert_eq!((meta.map(|m| m.len()), dir.len()), (Some(2), 2));
}

#[test]
fn plain_directories_and_other_frames_are_read_as_before() {
    let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln"));
    let (meta, dir) = model::parse_any(&block).unwrap();
    assert!(meta.is_none());
    assert_eq!(dir.len(), 1);
    // A frame of another type is not a model file: the directory magic fails, as before.
    let mut other = frozen::frame_bytes(frozen::hash_text("struct{id:i64,batch:tensors,}")).to_vec();
    other.extend(7i64.to_le_bytes());
    other.extend(block);
    let e = model::parse_any(&other).unwrap_err();
    assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Frame, CoreRule::DirectoryMagic.into(), 0));
    assert!(!model::is_model_file(&other));
}

/// `Model::parse` gives the Frozen reader's verdict (code, offset, rule)
/// on every single-byte change and truncation of a model file.
#[test]
fn same_verdicts_as_the_frozen_reader() {
    let f = example();
    let s: Schema<'_> = Schema::parse(MODEL_TYPE).unwrap();
    let frozen_verdict = |b: &[u8]| frozen::validate(b, &s, &Limits::DEFAULT, true).map_err(kiln_model::Error::from);
    let model_verdict = |b: &[u8]| Model::parse(b).map(|_| ());
    let mut scratch = vec![0u32; 64];
    let mut n = 0;
    // Interpreted under Miri: a sample (every 13th byte).
    let stride = if cfg!(miri) { 13 } else { 1 };
    for at in (0..f.len()).step_by(stride) {
        for v in [0u8, 1, 2, 0x41, 0x7f, 0x80, 0xff] {
            let mut m = f.clone();
            m[at] = v;
            let want = frozen_verdict(&m);
            assert_eq!(model_verdict(&m), want, "byte {at} = {v:#x}");
            let scratched = Model::parse_with(&m, Parser::new().scratch(&mut scratch)).map(|_| ());
            assert_eq!(scratched, want, "byte {at} = {v:#x}, with scratch");
            n += 1;
        }
    }
    for len in (0..f.len()).step_by(stride) {
        assert_eq!(model_verdict(&f[..len]), frozen_verdict(&f[..len]), "length {len}");
    }
    let mut longer = f.clone();
    longer.push(0);
    assert_eq!(model_verdict(&longer).unwrap_err().rule(), CoreRule::TrailingBytes);
    assert!(n > 1000 / stride);
}

#[test]
fn the_writer_aligns_the_payload_region_and_hides_its_padding() {
    use kiln_model::ModelWriter;
    let w = [7u8; 40];
    let specs =
        [TensorSpec::new(DType::U8, &[40], &w).named("w"), TensorSpec::new(DType::U8, &[3], &w[..3]).named("x")];
    // Keys before and after "kiln.convert.pad" in byte order.
    for meta in [&[][..], &[("a", "1")][..], &[("a", "1"), ("zz", "2")][..], &[("kiln.z", "v")][..]] {
        // Interpreted under Miri: no 2 MiB of padding.
        let aligns: &[u64] = if cfg!(miri) { &[0, 1, 64, 4096] } else { &[0, 1, 64, 4096, 2 << 20] };
        for &align in aligns {
            let writer = ModelWriter::new().align(align);
            let n = writer.encoded_len(meta, &specs).unwrap();
            let mut out = vec![0u8; n];
            assert_eq!(writer.write(meta, &specs, &mut out).unwrap(), n);
            let m = Model::parse(&out).unwrap();
            let shown: Vec<_> = m.metadata().iter().collect();
            assert_eq!(shown, meta);
            if align > 1 {
                assert_eq!(m.directory().payload_start() as u64 % align, 0, "align {align}, {meta:?}");
            } else {
                assert_eq!(m.metadata().padding(), 0);
            }
            assert_eq!(m.directory().find("w").unwrap().bytes(), &w);
        }
    }
    // Keys out of order, repeated, or the reserved padding key: refused.
    for meta in [&[("b", ""), ("a", "")][..], &[("a", ""), ("a", "")][..], &[(PAD_KEY, "")][..]] {
        assert_eq!(ModelWriter::new().encoded_len(meta, &specs).unwrap_err().rule(), CoreRule::DictKeyOrder);
    }
}

#[test]
fn block_start_and_the_writer_with_scratch() {
    use kiln_model::{block_start, ModelWriter};
    let f = example();
    let at = block_start(&f, &Limits::DEFAULT).unwrap();
    assert_eq!(at, Model::parse(&f).unwrap().directory_offset());
    assert_eq!(kiln_nostd::wire::Header::peek_count(&f[at..]), Some(2));
    assert_eq!(block_start(&f[..20], &Limits::DEFAULT).unwrap_err().code(), ErrorCode::Eof);
    // Many names: the same file with and without scratch.
    let data = [1u8; 4];
    let n_names = if cfg!(miri) { 24 } else { 300 }; // interpreted under Miri: fewer
    let names: Vec<String> = (0..n_names).map(|i| format!("t{i:03}")).collect();
    let specs: Vec<_> = names.iter().map(|n| TensorSpec::new(DType::U8, &[4], &data).named(n)).collect();
    let w = ModelWriter::new().align(64);
    let n = w.encoded_len(&[("k", "v")], &specs).unwrap();
    let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
    w.write(&[("k", "v")], &specs, &mut a).unwrap();
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(n_names as u32)];
    w.write_with_scratch(&[("k", "v")], &specs, &mut b, Some(&mut scratch)).unwrap();
    assert_eq!(a, b);
}
