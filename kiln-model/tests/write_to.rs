//! `ModelWriter::write_to`, the streamed writer: the file it writes is the
//! file `write` builds in memory, byte for byte, for every record kind, with
//! and without alignment, digests hashed inline and on threads; a refused
//! model writes nothing and the output's error is passed on.

use std::io::{Cursor, Seek, SeekFrom, Write};

use kiln_model::{Model, ModelWriter, WriteToError};
use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    DType, TensorSpec,
};

fn in_memory(w: ModelWriter, meta: &[(&str, &str)], specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = vec![0u8; w.encoded_len(meta, specs).unwrap()];
    assert_eq!(w.write(meta, specs, &mut out).unwrap(), out.len());
    out
}

/// `write_to` into a cursor that already holds `lead` bytes: the file is what follows them.
fn streamed(w: ModelWriter, meta: &[(&str, &str)], specs: &[TensorSpec<'_>], lead: usize) -> Vec<u8> {
    let mut out = Cursor::new(vec![7u8; lead]);
    out.seek(SeekFrom::End(0)).unwrap();
    let n = w.write_to(meta, specs, &mut out).unwrap();
    assert_eq!(out.position(), (lead + n) as u64, "left at the end of the file");
    let file = out.into_inner().split_off(lead);
    assert_eq!(file.len(), n);
    w.check(&file, None).unwrap();
    file
}

fn writers() -> Vec<ModelWriter> {
    vec![
        ModelWriter::new(),
        ModelWriter::new().digests(true),
        ModelWriter::new().align(4096),
        ModelWriter::new().digests(true).align(4096),
        ModelWriter::new().digests(true).align(64),
        ModelWriter::new().shard([9; 32], 2, 3).align(4096),
    ]
}

#[test]
fn small_models_stream_to_the_bytes_write_builds() {
    let a = [0u8, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
    let b = [1u8, 0, 1, 1, 0];
    let c = [0x21u8, 0x03];
    let scales = [0u8, 0x3c];
    let q = [1u8, 2, 3, 4];
    let sets: Vec<Vec<TensorSpec<'_>>> = vec![
        vec![],
        vec![TensorSpec::new(DType::F32, &[0], &[]).named("empty")],
        vec![
            TensorSpec::new(DType::F32, &[2], &a).named("a"),
            TensorSpec::new(DType::Bool, &[5], &b).named("b"),
            TensorSpec::new(DType::U4, &[3], &c).named("c"),
            TensorSpec::new(DType::F32, &[0], &[]).named("empty"),
            TensorSpec::new(DType::I8, &[4], &q).named("q").quantized(QuantSpec::Scales {
                axis: 0,
                group_size: 4,
                scale: TensorRef::Name("s"),
            }),
            TensorSpec::new(DType::F16, &[1], &scales).named("s"),
        ],
        // Unnamed tensors, in the order given.
        vec![TensorSpec::new(DType::Bool, &[5], &b), TensorSpec::new(DType::F32, &[2], &a)],
    ];
    let metas: [&[(&str, &str)]; 2] = [&[], &[("author", "kiln"), ("zz", "after the padding key")]];
    for w in writers() {
        for specs in &sets {
            for meta in metas {
                let expected = in_memory(w, meta, specs);
                for lead in [0, 3] {
                    assert_eq!(streamed(w, meta, specs, lead), expected, "{w:?}, {} tensors", specs.len());
                }
            }
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "15 MB written and hashed: minutes under Miri")]
fn large_models_hashed_on_threads_stream_to_the_same_bytes() {
    // Over the 8 MiB from which the digests are computed on helper threads;
    // odd lengths, so the payloads need gaps.
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| (0..3_000_001u32).map(|k| (k as u8) ^ i).collect()).collect();
    let shapes: Vec<[u64; 1]> = payloads.iter().map(|p| [p.len() as u64]).collect();
    let names = ["w0", "w1", "w2", "w3", "w4"];
    let specs: Vec<TensorSpec<'_>> =
        payloads.iter().zip(&shapes).zip(names).map(|((p, s), n)| TensorSpec::new(DType::U8, s, p).named(n)).collect();
    for w in [ModelWriter::new().digests(true).align(4096), ModelWriter::new().align(4096)] {
        let file = streamed(w, &[("k", "v")], &specs, 0);
        assert_eq!(file, in_memory(w, &[("k", "v")], &specs));
        if w.kind().has_digests() {
            Model::parse_verified(&file).unwrap();
        }
    }
}

#[test]
fn a_refused_model_writes_nothing() {
    let a = [0u8; 4];
    let specs = [TensorSpec::new(DType::F32, &[1], &a).named("a")];
    let mut out = Cursor::new(Vec::new());
    // Metadata keys out of order.
    let e = ModelWriter::new().digests(true).write_to(&[("b", ""), ("a", "")], &specs, &mut out).unwrap_err();
    assert!(matches!(e, WriteToError::Model(_)), "{e:?}");
    // A tensor of rank 9.
    let shape = [1u64; 9];
    let deep = [TensorSpec::new(DType::F32, &shape, &a).named("a")];
    let e = ModelWriter::new().write_to(&[], &deep, &mut out).unwrap_err();
    assert!(matches!(e, WriteToError::Model(_)), "{e:?}");
    assert!(out.into_inner().is_empty());
}

/// Accepts `room` bytes, then fails.
struct Full {
    inner: Cursor<Vec<u8>>,
    room: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "no room"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        self.inner.write(&buf[..n])
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for Full {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

#[test]
fn the_outputs_error_is_passed_on() {
    let payload = vec![1u8; 20_000_000];
    let specs = [
        TensorSpec::new(DType::U8, &[10_000_000], &payload[..10_000_000]).named("a"),
        TensorSpec::new(DType::U8, &[10_000_000], &payload[10_000_000..]).named("b"),
    ];
    for room in [0, 100, 15_000_000] {
        let mut out = Full { inner: Cursor::new(Vec::new()), room };
        let e = ModelWriter::new().digests(true).write_to(&[], &specs, &mut out).unwrap_err();
        assert!(matches!(&e, WriteToError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull), "{e:?}");
    }
}
