//! The incremental validator against `Parser`: every golden, regression and
//! check-order case and 100,000 mutated blocks, each fed in chunks of 1, 7
//! and 4,096 bytes, in random splits and whole, must get Parser's verdict
//! exactly (accept, or the same code, offset and rule), with and without
//! name scratch. `KILN_INCR_CASES` and `KILN_INCR_SEED` choose the run.

use std::path::{Path, PathBuf};

use kiln_nostd::{DType, Error, Incremental, Limits, Parser, Progress, Quant, TensorRef, TensorSpec, Writer};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// xorshift64*: the run is reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[derive(Clone, Copy, Debug)]
enum Chunking {
    Whole,
    Fixed(usize),
    Random(u64),
    /// Chunks of this many bytes, passing over whatever `next_needed` allows.
    Skipping(usize),
}

fn parser_verdict(buf: &[u8], limits: Limits, scratch: bool) -> Result<(), Error> {
    let count = kiln_nostd::Header::peek_count(buf).unwrap_or(0).min(1 << 16);
    let mut s = vec![0u32; kiln_nostd::scratch_len(count)];
    let p = Parser::new().limits(limits);
    let p = if scratch { p.scratch(&mut s) } else { p };
    p.parse(buf).map(|_| ())
}

fn incremental_verdict(buf: &[u8], limits: Limits, scratch: bool, chunking: Chunking) -> Result<(), Error> {
    // Prefix memory as a careful caller sizes it: from the header, bounded.
    let need = Incremental::prefix_len(buf.get(..64).unwrap_or(&[]), &limits).ok().flatten().unwrap_or(64);
    let mut prefix = vec![0u8; need.min(buf.len() + 64).max(64)];
    let count = kiln_nostd::Header::peek_count(buf).unwrap_or(0).min(1 << 16);
    let mut s = vec![0u32; kiln_nostd::scratch_len(count)];
    let v = Incremental::new(&mut prefix).limits(limits);
    let mut v = if scratch { v.scratch(&mut s) } else { v };
    let mut rest = buf;
    let mut rng = Rng(match chunking {
        Chunking::Random(seed) => seed | 1,
        _ => 1,
    });
    let mut saw_directory = false;
    while !rest.is_empty() {
        if let Chunking::Skipping(_) = chunking {
            let pos = (buf.len() - rest.len()) as u64;
            let gap = v.next_needed().saturating_sub(pos).min(rest.len() as u64);
            if gap > 0 {
                let skipped = v.skip(gap).map_or(gap, |n| n);
                assert_eq!(skipped, gap, "skip takes what next_needed allows");
                rest = &rest[gap as usize..];
                continue;
            }
        }
        let n = match chunking {
            Chunking::Whole => rest.len(),
            Chunking::Fixed(n) | Chunking::Skipping(n) => n.min(rest.len()),
            Chunking::Random(_) => 1 + rng.below(rest.len().min(300)),
        };
        let (chunk, tail) = rest.split_at(n);
        if let Ok(Progress::Directory) = v.feed(chunk) {
            assert!(!saw_directory, "Directory reported twice");
            saw_directory = true;
            assert!(v.directory().is_some());
        }
        rest = tail;
    }
    let verdict = v.finish().map(|_| ());
    if verdict.is_ok() && parser_verdict(buf, limits, false).is_ok() {
        assert!(saw_directory, "an accepted block reports its directory");
    }
    verdict
}

/// Compares every chunking; returns the number of comparisons.
fn compare(buf: &[u8], limits: Limits, chunkings: &[Chunking], what: &str) -> usize {
    let mut n = 0;
    for scratch in [true, false] {
        let want = parser_verdict(buf, limits, scratch);
        for &c in chunkings {
            let got = incremental_verdict(buf, limits, scratch, c);
            assert_eq!(got, want, "{what}: chunking {c:?}, scratch {scratch}, input {}", hex(buf));
            n += 1;
        }
    }
    n
}

fn hex(b: &[u8]) -> String {
    if b.len() > 2048 {
        return format!("({} bytes)", b.len());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const ALL: [Chunking; 7] = [
    Chunking::Fixed(1),
    Chunking::Fixed(7),
    Chunking::Fixed(4096),
    Chunking::Random(0x5eed),
    Chunking::Whole,
    Chunking::Skipping(1),
    Chunking::Skipping(4096),
];

/// Directory cases from a JSON file shaped like the goldens.
fn json_cases(path: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| c["type"] == "tensors" && c["framed"] != true)
        .map(|c| {
            let hx = c["hex"].as_str().expect("hex");
            let bytes = (0..hx.len()).step_by(2).map(|i| u8::from_str_radix(&hx[i..i + 2], 16).expect("hex")).collect();
            (c["name"].as_str().unwrap_or("?").to_string(), bytes)
        })
        .collect()
}

#[test]
fn goldens_regressions_and_the_check_order_matrix() {
    let root = repo_root();
    let mut files = vec![root.join("spec/kiln-v2-cases.json"), root.join("spec/check-order-matrix.json")];
    // Interpreted under Miri: the goldens only, in two chunkings.
    let chunkings: &[Chunking] = if cfg!(miri) { &[Chunking::Fixed(7), Chunking::Whole] } else { &ALL };
    if cfg!(miri) {
        files.truncate(1);
    }
    for e in std::fs::read_dir(root.join("spec/regressions")).expect("regressions").filter(|_| !cfg!(miri)) {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "json") {
            files.push(p);
        }
    }
    let mut n = 0;
    for f in &files {
        for (name, bytes) in json_cases(f) {
            n += compare(&bytes, Limits::DEFAULT, chunkings, &name);
        }
    }
    assert!(n > 40 * 2 * chunkings.len(), "{n} comparisons");
}

/// Valid blocks that exercise every payload check: gaps, bool bytes, odd
/// packed tails, zero-length and quantized tensors, names and layouts.
fn templates() -> Vec<Vec<u8>> {
    let f32s: Vec<u8> = (0..24u8).collect();
    let bools = [1u8, 0, 1, 1, 0];
    let nib = [0x21u8, 0x03];
    let sets: Vec<Vec<TensorSpec<'_>>> = vec![
        vec![
            TensorSpec::new(DType::F32, &[2, 3], &f32s).named("a"),
            TensorSpec::new(DType::Bool, &[5], &bools).named("b"),
        ],
        vec![
            TensorSpec::new(DType::Bool, &[5], &bools),
            TensorSpec::new(DType::U4, &[3], &nib),
            TensorSpec::new(DType::U8, &[0], &[]),
            TensorSpec::new(DType::F32, &[6], &f32s),
        ],
        vec![
            TensorSpec::new(DType::E2M1, &[3], &nib).named("q").quantized(Quant::Scales {
                axis: 0,
                group_size: 2,
                scale: TensorRef::Name("s"),
            }),
            TensorSpec::new(DType::E8M0, &[2], &[127, 127]).named("s"),
            TensorSpec::opaque(4096, "Q4_K", 4, &[8], &[0; 8]).named("o"),
            TensorSpec::new(DType::Bool, &[5], &bools).named("flags"),
        ],
        vec![],
    ];
    sets.iter()
        .map(|specs| {
            let mut out = vec![0u8; Writer::new().encoded_len(specs).expect("len")];
            Writer::new().write(specs, &mut out).expect("write");
            out
        })
        .collect()
}

/// One random change: a byte, a descriptor or header field set to a
/// boundary value, an out-of-order offset, a truncation or appended bytes.
fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
    let fields = [2usize, 8, 16, 24, 32, 40, 48, 56];
    match rng.below(8) {
        0 | 1 if !b.is_empty() => {
            let i = rng.below(b.len());
            b[i] = [0u8, 1, 2, 0x10, 0x7f, 0x80, 0xff][rng.below(7)];
        }
        2 if b.len() > 64 + 128 => {
            let count = (b.len() - 64) / 128;
            let at = 64 + 128 * rng.below(count.min(4)) + fields[rng.below(fields.len())];
            let v = [0u64, 1, 63, 64, 128, u64::MAX, u64::MAX - 3, 1 << 62][rng.below(8)];
            if at + 8 <= b.len() {
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        3 if b.len() >= 64 => {
            let at = [8usize, 12, 16, 24][rng.below(4)];
            let v = [0u64, 1, 2, 64, 200, u64::MAX][rng.below(6)];
            let w = if at < 16 { 4 } else { 8 };
            b[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
        }
        4 => {
            let keep = rng.below(b.len() + 1);
            b.truncate(keep);
        }
        5 => {
            for _ in 0..1 + rng.below(3) {
                b.push([0u8, 1, 0xff][rng.below(3)]);
            }
        }
        6 if b.len() > 64 + 2 * 128 => {
            // Swap two descriptors' offsets: ranges out of order.
            let (i, j) = (rng.below(2), 2 + rng.below(((b.len() - 64) / 128).saturating_sub(2).clamp(1, 2)));
            let (ai, aj) = (64 + 128 * i + 32, 64 + 128 * j + 32);
            if aj + 8 <= b.len() {
                let (x, y) = (b[ai..ai + 8].to_vec(), b[aj..aj + 8].to_vec());
                b[ai..ai + 8].copy_from_slice(&y);
                b[aj..aj + 8].copy_from_slice(&x);
            }
        }
        _ => {
            // A payload byte (gap, bool, nibble) near the end.
            if !b.is_empty() {
                let i = b.len() - 1 - rng.below(b.len().min(96));
                b[i] = [2u8, 0x30, 0xff][rng.below(3)];
            }
        }
    }
}

#[test]
fn mutated_blocks_get_the_parsers_verdict() {
    let cases: usize = std::env::var("KILN_INCR_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed: u64 = std::env::var("KILN_INCR_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x1ce_b10c);
    let cases = if cfg!(miri) { 20 } else { cases };
    let mut rng = Rng(seed | 1);
    let templates = templates();
    let (mut rejected, mut n) = (0, 0);
    for k in 0..cases {
        let mut b = templates[k % templates.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut b);
        }
        let limits = if k % 17 == 0 { Limits::DEFAULT.with_count_cap(2).with_byte_cap(4) } else { Limits::DEFAULT };
        // One-byte chunks for a sample (they cost a call per byte); the rest always.
        let chunkings: &[Chunking] =
            if k % 16 == 0 { &ALL } else { &[Chunking::Fixed(7), Chunking::Random(k as u64), Chunking::Whole] };
        n += compare(&b, limits, chunkings, &format!("case {k}"));
        rejected += usize::from(parser_verdict(&b, limits, true).is_err());
    }
    println!("{cases} mutated blocks, {rejected} rejected, {n} comparisons");
    assert!(cases < 100 || (rejected > cases / 4 && rejected < cases), "{rejected} of {cases} rejected");
}

/// A fault is reported at the first chunk after which it is certain.
#[test]
fn faults_are_reported_where_they_become_certain() {
    let t = templates();
    let b = &t[1]; // bool, u4, zero-length u8, f32; unnamed
    let base = 64 + 4 * 128;
    // A bad descriptor: known once the prefix is in, before any payload byte.
    let mut m = b.clone();
    m[64 + 128 + 2] = 9; // rank 9
    let mut prefix = [0u8; 1024];
    let mut v = Incremental::new(&mut prefix);
    assert!(v.feed(&m[..base - 1]).is_ok());
    assert_eq!(v.feed(&m[base - 1..base]).unwrap_err().rule(), kiln_nostd::Rule::RankTooLarge);
    // A nonzero gap byte: at that byte.
    let mut m = b.clone();
    m[base + 10] = 1; // inside the gap after the 5 bool bytes
    let mut v = Incremental::new(&mut prefix);
    assert!(v.feed(&m[..base + 10]).is_ok());
    assert_eq!(v.feed(&m[base + 10..base + 11]).unwrap_err().rule(), kiln_nostd::Rule::NonzeroGap);
    // A bad bool byte: only once every later gap passed (step 10 comes first).
    let mut m = b.clone();
    m[base] = 2;
    let mut v = Incremental::new(&mut prefix);
    assert!(v.feed(&m[..m.len() - 1]).is_ok());
    assert_eq!(v.feed(&m[m.len() - 1..]).unwrap_err().rule(), kiln_nostd::Rule::BoolByte);
    // Truncated after a certain fault: EOF, as Parser says for those bytes.
    let mut v = Incremental::new(&mut prefix);
    let _ = v.feed(&m[..m.len() - 1]);
    assert_eq!(v.finish().unwrap_err(), Parser::new().parse(&m[..m.len() - 1]).unwrap_err());
}

/// Prefix memory: the table needs only the prefix, and too little memory is
/// a clear LIMIT (or EOF when the stream ends inside the directory anyway).
#[test]
fn prefix_memory() {
    let t = templates();
    let b = &t[0];
    let need = Incremental::prefix_len(&b[..64], &Limits::DEFAULT).unwrap().unwrap();
    assert_eq!(need, 64 + 2 * 128 + 64); // header, two descriptors, "ab" padded
    let mut small = vec![0u8; need - 1];
    let mut v = Incremental::new(&mut small);
    assert_eq!(v.feed(b).unwrap_err().rule(), kiln_nostd::Rule::PrefixBufferTooSmall);
    let mut small = vec![0u8; need - 1];
    let mut v = Incremental::new(&mut small);
    let _ = v.feed(&b[..100]);
    assert_eq!(v.finish().unwrap_err(), Parser::new().parse(&b[..100]).unwrap_err());
    let mut exact = vec![0u8; need];
    let mut v = Incremental::new(&mut exact);
    v.feed(b).unwrap();
    assert_eq!(v.finish().unwrap().block_len, b.len() as u64);
}

/// An embedded block (a `tensors` field) stops at its end and leaves the
/// next field's bytes alone.
#[test]
fn embedded_blocks_stop_at_their_end() {
    let t = templates();
    let mut rec = t[0].clone();
    rec.extend_from_slice(&[9, 9, 9]);
    for step in [1usize, 5, 4096] {
        let mut prefix = [0u8; 1024];
        let mut v = Incremental::new(&mut prefix).embedded();
        for c in rec.chunks(step) {
            v.feed(c).unwrap();
        }
        assert_eq!(v.consumed(), t[0].len() as u64);
        let s = v.finish().unwrap();
        assert_eq!(s.block_len, t[0].len() as u64);
        assert_eq!(Parser::new().parse_at(&rec, 0).unwrap().end(), t[0].len());
    }
}

/// A caller that skips what `next_needed` allows reads, of a block of large
/// plain tensors, only the directory prefix and the bytes with rules.
#[test]
fn skipping_reads_only_the_bytes_that_decide() {
    let big = vec![0u8; 1 << 20];
    let bools = [1u8, 0, 1];
    let specs = [
        TensorSpec::new(DType::F32, &[1 << 18], &big).named("w"),
        TensorSpec::new(DType::Bool, &[3], &bools).named("b"),
        TensorSpec::new(DType::F32, &[1 << 18], &big).named("v"),
    ];
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut block).unwrap();
    let mut prefix = [0u8; 4096];
    let mut v = Incremental::new(&mut prefix);
    let (mut pos, mut fed) = (0usize, 0usize);
    while pos < block.len() {
        let need = v.next_needed().min(block.len() as u64) as usize;
        if need > pos {
            pos += v.skip((need - pos) as u64).unwrap() as usize;
        } else {
            let end = (pos + 64).min(block.len());
            v.feed(&block[pos..end]).unwrap();
            fed += end - pos;
            pos = end;
        }
    }
    v.finish().unwrap();
    // The prefix (448 bytes) and the gap and bool bytes around "b": a few
    // chunks of 64, not the 2 MiB of f32 payload.
    assert!(fed < 1024, "fed {fed} of {} bytes", block.len());
    // A bad bool byte is still found by the skipping caller.
    let at = Parser::new().parse(&block).unwrap().find("b").unwrap().absolute_offset();
    block[at] = 2;
    let mut v = Incremental::new(&mut prefix);
    let mut pos = 0usize;
    let mut verdict = Ok(Progress::Header);
    while pos < block.len() && verdict.is_ok() {
        let need = v.next_needed().min(block.len() as u64) as usize;
        if need > pos {
            // Passing the last gap makes the bool fault certain.
            verdict = v.skip((need - pos) as u64).map(|n| {
                pos += n as usize;
                Progress::Payload
            });
        } else {
            let end = (pos + 64).min(block.len());
            verdict = v.feed(&block[pos..end]);
            pos = end;
        }
    }
    assert_eq!(v.finish().unwrap_err(), Parser::new().parse(&block).unwrap_err());
}
