//! Adversarial directories: does checking stay linear in the tensor count?
//!
//! Name uniqueness is the only check that compares tensors with each other.
//! With scratch ([`Parser::scratch`]) it is a hash table, so these inputs
//! should cost the same per tensor at 1k and 10k; without scratch it is the
//! documented quadratic fallback (shown for contrast).
//!
//! * `shared_prefix`: names with a long common prefix (as long as the heap
//!   allows: name_off is a u16, so all names but the last start in the first
//!   64 KiB; 1k names of 65 bytes share a 63-byte prefix, 10k names of 6
//!   bytes a 3-byte one); consecutive names differ only in their last byte.
//! * `max_heap`: the heap at its maximum, the last name 65,535 bytes long
//!   starting at offset 65,535 (131,070 bytes of heap).
//! * `collide_seed0`: names chosen (by brute force, with a copy of the
//!   parser's hash) to land in one home slot of the table for hash seed 0:
//!   a linear-probing worst case; `hash_seed` with another seed defeats it.
//! * `unnamed`: 1k, 10k and 100k unnamed, empty tensors (100k named tensors
//!   cannot exist: 100k distinct names need more than 64 KiB of heap).
//!
//! Run: `cargo bench -p kiln-nostd --bench adversarial`
//! Per-tensor times: criterion's `thrpt` is tensors per second.

// criterion_group! defines an undocumented `pub fn`.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kiln_nostd::{DType, Directory, Parser, TensorSpec, Writer};

fn block(names: Option<&[Vec<u8>]>, n: usize) -> Vec<u8> {
    let strs: Vec<&str> =
        names.map(|ns| ns.iter().map(|b| std::str::from_utf8(b).unwrap()).collect()).unwrap_or_default();
    let specs: Vec<TensorSpec<'_>> = (0..n)
        .map(|i| {
            let t = TensorSpec::new(DType::U8, &[0], &[]);
            match strs.get(i) {
                Some(s) => t.named(s),
                None => t,
            }
        })
        .collect();
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(n as u32)];
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().scratch(&mut scratch).write(&specs, &mut out).unwrap();
    out
}

/// `n` distinct names of `len` bytes: a shared prefix, then a base-62 suffix.
fn with_prefix(n: usize, len: usize) -> Vec<Vec<u8>> {
    const A: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let digits = {
        let mut d = 1;
        while 62usize.pow(d as u32) < n {
            d += 1;
        }
        d
    };
    assert!(len >= digits);
    (0..n)
        .map(|mut i| {
            let mut name = vec![b'p'; len - digits];
            let mut suffix = vec![b'0'; digits];
            for s in suffix.iter_mut().rev() {
                *s = A[i % 62];
                i /= 62;
            }
            name.extend(suffix);
            name
        })
        .collect()
}

/// Names for a maximal heap: n - 1 names filling 65,535 bytes, then one of 65,535 bytes.
fn max_heap(n: usize) -> Vec<Vec<u8>> {
    let each = 65_535 / (n - 1);
    let mut names = with_prefix(n - 1, each);
    let used: usize = names.iter().map(Vec::len).sum();
    if let Some(first) = names.first_mut() {
        first.extend(std::iter::repeat_n(b'x', 65_535 - used)); // the last name starts at 65,535
    }
    names.push(vec![b'z'; 65_535]);
    names
}

// A copy of the parser's name hash and slot choice (kiln-nostd/src/names.rs,
// 64-bit targets), used only to find colliding names. If the parser's hash
// changes, these names stop colliding: `scratch` (seed 0) then runs as fast as
// `scratch_seeded`, which is the sign that this copy needs updating.
fn name_hash(bytes: &[u8], seed: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap());
        h = (h ^ w).wrapping_mul(K).rotate_left(31);
    }
    (h ^ tail_word(chunks.remainder())).wrapping_mul(K)
}

fn tail_word(rem: &[u8]) -> u64 {
    let byte = |i: usize| u64::from(rem.get(i).copied().unwrap_or(0));
    let len = rem.len();
    if len >= 4 {
        let lo = u32::from_le_bytes(rem[..4].try_into().unwrap());
        let hi = u32::from_le_bytes(rem[len - 4..].try_into().unwrap());
        u64::from(lo) | (u64::from(hi) << 32)
    } else if len > 0 {
        byte(0) | (byte(len / 2) << 8) | (byte(len - 1) << 16)
    } else {
        0
    }
}

fn slot_of(h: u64, slots: usize) -> usize {
    (h >> (64 - slots.trailing_zeros())) as usize
}

/// `n` 6-byte names that all hash to the same home slot for seed 0.
fn colliding(n: usize) -> Vec<Vec<u8>> {
    let slots = (n + n / 2 + 1).next_power_of_two();
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        // 94 printable ASCII bytes in 5 places: 7.3e9 distinct names, enough
        // for 10k names at 1 in 16,384 landing in slot 0.
        let mut name = *b"c00000";
        let mut k = i;
        for b in name[1..].iter_mut().rev() {
            *b = b'!' + (k % 94) as u8;
            k /= 94;
        }
        if slot_of(name_hash(&name, 0), slots) == 0 {
            out.push(name.to_vec());
        }
        i += 1;
    }
    out
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

fn parse_scratch(bytes: &[u8], scratch: &mut [u32], seed: u64) -> usize {
    Parser::new().scratch(scratch).hash_seed(seed).parse(black_box(bytes)).unwrap().len()
}

fn bench(c: &mut Criterion) {
    let mut cases: Vec<(&str, usize, Vec<u8>)> = Vec::new();
    for n in [1_000usize, 10_000] {
        let prefix_len = 65_000 / n;
        cases.push(("shared_prefix", n, block(Some(&with_prefix(n, prefix_len)), n)));
        cases.push(("collide_seed0", n, block(Some(&colliding(n)), n)));
    }
    cases.push(("max_heap", 1_000, block(Some(&max_heap(1_000)), 1_000)));
    cases.push(("max_heap", 10_000, block(Some(&max_heap(10_000)), 10_000)));
    for n in [1_000usize, 10_000, 100_000] {
        cases.push(("unnamed", n, block(None, n)));
    }

    let mut group = c.benchmark_group("adversarial");
    for (what, n, bytes) in &cases {
        let mut check = vec![0u32; kiln_nostd::directory::scratch_len(*n as u32)];
        assert_eq!(parse_scratch(bytes, &mut check, 0), *n, "{what} {n}");
        group.throughput(Throughput::Elements(*n as u64));
        let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(*n as u32)];
        group.bench_with_input(BenchmarkId::new(format!("{what}/scratch"), n), bytes, |b, bytes| {
            b.iter(|| parse_scratch(bytes, &mut scratch, 0))
        });
        if *what == "collide_seed0" {
            group.bench_with_input(BenchmarkId::new(format!("{what}/scratch_seeded"), n), bytes, |b, bytes| {
                b.iter(|| parse_scratch(bytes, &mut scratch, 0x5EED_1234_ABCD_0001))
            });
        }
        if *what != "unnamed" {
            group.bench_with_input(BenchmarkId::new(format!("{what}/no_scratch"), n), bytes, |b, bytes| {
                b.iter(|| Directory::parse(black_box(bytes)).unwrap().len())
            });
        }
    }
    group.finish();
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
