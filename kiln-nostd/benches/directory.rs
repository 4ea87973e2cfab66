//! Parse + iterate + name lookup of directories with 1, 100 and 10,000
//! tensors, side by side with `safetensors::SafeTensors::deserialize` on the
//! same tensors (names, dtypes, shapes, bytes) in the same run.
//!
//! Run: `cargo bench -p kiln-nostd --bench directory`

// criterion_group! defines an undocumented `pub fn`.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kiln_nostd::{DType, Directory, Incremental, Parser, TensorSpec, Writer};
use safetensors::tensor::{serialize, Dtype, TensorView};

struct Model {
    names: Vec<String>,
    shape: Vec<u64>,
    data: Vec<u8>,
}

fn model(n: usize) -> Model {
    // 4x4 f32 tensors: small payloads keep the comparison about the
    // directory, not memory bandwidth. Names are short because heap offsets
    // are u16: 10,000 names must fit in 64 KiB of heap.
    let names = (0..n).map(|i| format!("t.{i}")).collect();
    let data = (0..64u8).collect();
    Model { names, shape: vec![4, 4], data }
}

fn kiln_bytes(m: &Model) -> Vec<u8> {
    let specs: Vec<_> = m.names.iter().map(|n| TensorSpec::new(DType::F32, &m.shape, &m.data).named(n)).collect();
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(specs.len() as u32)];
    let len = Writer::new().encoded_len(&specs).unwrap();
    let mut out = vec![0u8; len];
    Writer::new().scratch(&mut scratch).write(&specs, &mut out).unwrap();
    out
}

fn safetensors_bytes(m: &Model) -> Vec<u8> {
    let shape: Vec<usize> = m.shape.iter().map(|&d| d as usize).collect();
    let views: Vec<_> =
        m.names.iter().map(|n| (n.clone(), TensorView::new(Dtype::F32, shape.clone(), &m.data).unwrap())).collect();
    serialize(views, &None).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_iterate_lookup");
    for n in [1usize, 100, 10_000] {
        let m = model(n);
        let kiln = kiln_bytes(&m);
        let st = safetensors_bytes(&m);
        group.throughput(Throughput::Elements(n as u64));
        let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(n as u32)];

        group.bench_with_input(BenchmarkId::new("kiln_scratch", n), &kiln, |b, bytes| {
            b.iter(|| {
                let (dir, index) = Parser::new().scratch(&mut scratch).parse_indexed(black_box(bytes)).unwrap();
                let mut acc = 0usize;
                for t in dir.iter() {
                    acc += t.shape().len() + t.bytes().len();
                }
                for name in &m.names {
                    acc += index.get(name).map_or(0, |t| t.bytes().len());
                }
                acc
            })
        });
        group.bench_with_input(BenchmarkId::new("safetensors", n), &st, |b, bytes| {
            b.iter(|| {
                let st = safetensors::SafeTensors::deserialize(black_box(bytes)).unwrap();
                let mut acc = 0usize;
                for (_, t) in st.iter() {
                    acc += t.shape().len() + t.data().len();
                }
                for name in &m.names {
                    acc += st.tensor(name).map_or(0, |t| t.data().len());
                }
                acc
            })
        });
        // Without scratch the unique-name check compares every pair, and a
        // lookup is a scan: the memory-free mode firmware uses for small sets.
        let lookups = m.names.len().min(100);
        group.bench_with_input(BenchmarkId::new("kiln_no_scratch", n), &kiln, |b, bytes| {
            b.iter(|| {
                let dir = Directory::parse(black_box(bytes)).unwrap();
                let mut acc = 0usize;
                for t in dir.iter() {
                    acc += t.shape().len() + t.bytes().len();
                }
                for name in &m.names[..lookups] {
                    acc += dir.find(name).map_or(0, |t| t.bytes().len());
                }
                acc
            })
        });
    }
    group.finish();
}

/// The three phases of the 10,000-tensor case on their own, to show where
/// the time goes.
fn phases(c: &mut Criterion) {
    let n = 10_000;
    let m = model(n);
    let kiln = kiln_bytes(&m);
    let mut group = c.benchmark_group("phases");
    group.throughput(Throughput::Elements(n as u64));
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(n as u32)];
    group.bench_function("parse_indexed", |b| {
        b.iter(|| Parser::new().scratch(&mut scratch).parse_indexed(black_box(&kiln)).map(|(d, _)| d.len()).unwrap())
    });
    let (dir, index) = Parser::new().scratch(&mut scratch).parse_indexed(&kiln).unwrap();
    group.bench_function("iterate", |b| {
        b.iter(|| black_box(dir).iter().map(|t| t.shape().len() + t.bytes().len()).sum::<usize>())
    });
    group.bench_function("lookup", |b| {
        b.iter(|| m.names.iter().map(|name| index.get(name).map_or(0, |t| t.bytes().len())).sum::<usize>())
    });
    group.finish();
}

/// The incremental validator against `Parser` on the whole buffer, in one
/// run: the 10,000-tensor directory (whole, and in 64 KiB chunks), a 1 GiB
/// block of 1,024 f32 tensors in 64 KiB chunks (and passed over with
/// `skip`, as a caller that can seek does), and a 1 GiB block of 1,024 bool
/// tensors in 64 KiB chunks (every payload byte is checked on both sides).
/// `chunk_loop_only` is the cost of handing the f32 block's 16,384 chunks to
/// a function that does nothing: the floor under any chunked validator.
fn incremental(c: &mut Criterion) {
    let mut group = c.benchmark_group("incremental");
    let n = 10_000;
    let small = kiln_bytes(&model(n));
    let big = gib_block(DType::F32, 1);
    let bools = gib_block(DType::Bool, 1);
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(n as u32)];
    let mut prefix = vec![0u8; 4 << 20];
    for (what, block) in [("10000_tensors", &small), ("1GiB", &big), ("1GiB_bool", &bools)] {
        group.bench_function(BenchmarkId::new("parser_whole", what), |b| {
            b.iter(|| Parser::new().scratch(&mut scratch).parse(black_box(block)).map(|d| d.len()).unwrap())
        });
        let whole = (what == "10000_tensors").then_some(("incremental_whole", block.len()));
        for (how, chunk) in whole.into_iter().chain([("incremental_64KiB", 64 << 10)]) {
            group.bench_function(BenchmarkId::new(how, what), |b| {
                b.iter(|| {
                    let mut v = Incremental::new(&mut prefix).scratch(&mut scratch);
                    for c in black_box(block).chunks(chunk) {
                        v.feed(c).unwrap();
                    }
                    v.finish().unwrap().block_len
                })
            });
        }
        if what == "1GiB" {
            // The floor of any chunked interface: walking the 16,384 chunks
            // and handing each one over, with no validator at all.
            group.bench_function(BenchmarkId::new("chunk_loop_only", what), |b| {
                b.iter(|| {
                    let mut n = 0usize;
                    for c in black_box(block).chunks(64 << 10) {
                        n += black_box(c).len();
                    }
                    n
                })
            });
            group.bench_function(BenchmarkId::new("incremental_skip", what), |b| {
                b.iter(|| {
                    let mut v = Incremental::new(&mut prefix).scratch(&mut scratch);
                    let block = black_box(block);
                    let mut at = 0u64;
                    while at < block.len() as u64 {
                        let needed = v.next_needed().min(block.len() as u64);
                        if needed > at {
                            at += v.skip(needed - at).unwrap();
                        } else {
                            let end = block.len().min(at as usize + (64 << 10));
                            v.feed(&block[at as usize..end]).unwrap();
                            at = end as u64;
                        }
                    }
                    v.finish().unwrap().block_len
                })
            });
        }
    }
    group.finish();
}

/// A block of 1,024 tensors of 1 MiB each: f32 zeros, or bool ones.
fn gib_block(dtype: DType, value: u8) -> Vec<u8> {
    let data = vec![if dtype == DType::Bool { value } else { 0 }; 1 << 20];
    let shape = [(1u64 << 20) / dtype.byte_length(1).unwrap()];
    let specs: Vec<_> = (0..1024).map(|_| TensorSpec::new(dtype, &shape, &data)).collect();
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut block).unwrap();
    block
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench, phases, incremental
}
criterion_main!(benches);
