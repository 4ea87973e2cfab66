//! Ranged reading (`kiln_model::source`) against `Parser`:
//!
//! - `verify` over a source, with chunk buffers of 64, 1,000 and 65,536
//!   bytes (and with read merging off), gives exactly `Parser::parse`'s
//!   verdict (code, offset, rule) on every directory golden, regression and
//!   check-order case and on mutated blocks; `Options::embedded` gives
//!   `Parser::parse_at`'s.
//! - `open` rejects only what `Parser` rejects, and accepts only blocks
//!   `Parser` accepts or rejects for a payload-byte rule, which `read_tensor`
//!   then reports exactly.
//! - `open` + `read_tensor`/`read_rows` on the example model give the bytes
//!   `Directory::parse(..).find(name).bytes()` and its slices give.
//! - A counting source shows how little `verify` reads.
//! - The adapters: `std::fs::File` on a temp file, a NOR flash with
//!   READ_SIZE 4, an `embedded_io` reader (behind their features).
//!
//! `KILN_SOURCE_CASES` sets the number of mutated blocks (default 600).

use std::cell::Cell;
#[path = "../../kiln-nostd/tests/cases/mod.rs"]
mod cases;

use cases::{hex, json_cases, mutate, repo_root, templates, Rng};

use kiln_model::source::{self, Options, OutOfBounds, ReadAt, SourceError, TensorId, Window};
use kiln_model::Error;
use kiln_nostd::{DType, Directory, Incremental, Limits, Parser, Rule, TensorSpec};

fn example_model() -> Vec<u8> {
    std::fs::read(repo_root().join("spec/examples/digits-mlp.kiln")).expect("example model")
}

struct Counting<S> {
    inner: S,
    reads: Cell<usize>,
    bytes: Cell<u64>,
    largest: Cell<usize>,
}

impl<S> Counting<S> {
    fn new(inner: S) -> Self {
        Counting { inner, reads: Cell::new(0), bytes: Cell::new(0), largest: Cell::new(0) }
    }
}

impl<S: ReadAt> ReadAt for Counting<S> {
    type Error = S::Error;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), S::Error> {
        self.reads.set(self.reads.get() + 1);
        self.bytes.set(self.bytes.get() + buf.len() as u64);
        self.largest.set(self.largest.get().max(buf.len()));
        self.inner.read_at(offset, buf)
    }
    fn len(&mut self) -> Result<u64, S::Error> {
        self.inner.len()
    }
}

/// A source that checks every read lies inside it (the module promises
/// never to read past `len`) and fails the `fail_at`th read.
struct Strict<'a> {
    bytes: &'a [u8],
    reads: usize,
    fail_at: usize,
}

#[derive(Debug, PartialEq)]
struct Broken;

impl ReadAt for Strict<'_> {
    type Error = Broken;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Broken> {
        self.reads += 1;
        assert!(!buf.is_empty(), "no empty reads");
        let end = offset as usize + buf.len();
        assert!(end <= self.bytes.len(), "read {offset}..{end} past the source's {} bytes", self.bytes.len());
        if self.reads == self.fail_at {
            return Err(Broken);
        }
        buf.copy_from_slice(&self.bytes[offset as usize..end]);
        Ok(())
    }
    fn len(&mut self) -> Result<u64, Broken> {
        Ok(self.bytes.len() as u64)
    }
}

fn prefix_for(buf: &[u8]) -> Vec<u8> {
    // As a careful caller sizes it: from the header, bounded by the source.
    let need = Incremental::prefix_len(buf.get(..64).unwrap_or(&[]), &Limits::DEFAULT).ok().flatten().unwrap_or(64);
    vec![0u8; need.min(buf.len() + 64).max(64)]
}

fn kiln<T>(r: Result<T, SourceError<OutOfBounds>>) -> Result<T, Error> {
    r.map_err(|e| e.kiln().unwrap_or_else(|| panic!("not a format error: {e:?}")))
}

const CHUNKS: [usize; 3] = [64, 1000, 65536];

/// `verify` in every chunking, standalone and embedded, against `Parser`.
fn compare_verify(buf: &[u8], limits: Limits, what: &str) -> usize {
    let want = Parser::new().limits(limits).parse(buf).map(|d| d.block_len() as u64).map_err(Error::from);
    let want_at = Parser::new().limits(limits).parse_at(buf, 0).map(|d| d.block_len() as u64).map_err(Error::from);
    let mut prefix = prefix_for(buf);
    let mut n = 0;
    for chunk in CHUNKS {
        let mut chunk_buf = vec![0u8; chunk];
        for coalesce in [256, 0] {
            let mut strict = Strict { bytes: buf, reads: 0, fail_at: 0 };
            let got = Options::new().parser(Parser::new().limits(limits)).coalesce(coalesce).verify(
                &mut strict,
                &mut prefix,
                &mut chunk_buf,
            );
            let got = got.map(|s| s.block_len).map_err(|e| e.kiln().unwrap_or_else(|| panic!("{what}: {e:?}")));
            assert_eq!(got, want, "{what}: chunk {chunk}, coalesce {coalesce}, input {}", hex(buf));
            let got = Options::new().parser(Parser::new().limits(limits)).coalesce(coalesce).embedded().verify(
                &mut Strict { bytes: buf, reads: 0, fail_at: 0 },
                &mut prefix,
                &mut chunk_buf,
            );
            let got = got.map(|s| s.block_len).map_err(|e| e.kiln().unwrap_or_else(|| panic!("{what}: {e:?}")));
            assert_eq!(got, want_at, "{what} (embedded): chunk {chunk}, coalesce {coalesce}, input {}", hex(buf));
            n += 2;
        }
    }
    // Name scratch changes nothing.
    let mut names =
        vec![
            0u32;
            kiln_nostd::directory::scratch_len(kiln_nostd::wire::Header::peek_count(buf).unwrap_or(0).min(1 << 16))
        ];
    let got = Options::new().parser(Parser::new().limits(limits).scratch(&mut names)).verify(
        buf,
        &mut prefix,
        &mut [0u8; 1000],
    );
    assert_eq!(got.map(|s| s.block_len).map_err(|e| e.kiln().expect("a format error")), want, "{what}: scratch");
    n + 1
}

/// The rules `open` leaves to `read_tensor` and `verify`.
fn payload_byte_rule(rule: Rule) -> bool {
    matches!(rule, Rule::NonzeroGap | Rule::BoolByte | Rule::PackedHighNibble)
}

/// `open` against `Parser`; on an opened block, every tensor read against
/// the parsed views. Returns true when the block opened.
fn compare_open(buf: &[u8], limits: Limits, what: &str) -> bool {
    let parsed = Parser::new().limits(limits).parse(buf);
    let mut prefix = prefix_for(buf);
    let opened = kiln(Options::new().parser(Parser::new().limits(limits)).open(buf, &mut prefix));
    let model = match (opened, parsed) {
        (Err(e), Err(p)) => {
            assert!(e == p || payload_byte_rule(p.rule()), "{what}: open {e:?}, Parser {p:?}, input {}", hex(buf));
            return false;
        }
        (Err(e), Ok(_)) => panic!("{what}: open refused a valid block: {e:?}"),
        (Ok(m), Err(p)) => {
            assert!(payload_byte_rule(p.rule()), "{what}: open accepted, Parser {p:?}, input {}", hex(buf));
            m
        }
        (Ok(m), Ok(_)) => m,
    };
    assert_eq!(model.block_len(), buf.len() as u64, "{what}: a standalone block fills its source");
    // Reading every tensor in order meets Parser's element fault first.
    let first_read_fault = (0..model.directory().len()).find_map(|i| {
        let mut out = vec![0u8; model.tensor(i).unwrap().byte_len()];
        kiln(source::read_tensor(buf, &model, i, &mut out)).err()
    });
    match parsed {
        Ok(dir) => {
            assert_eq!(first_read_fault, None, "{what}");
            for (t, u) in dir.iter().zip(model.directory().iter()) {
                let mut out = vec![0u8; t.byte_len() + 3];
                let n = kiln(source::read_tensor(buf, &model, u, &mut out)).unwrap();
                assert_eq!(&out[..n], t.bytes(), "{what}: tensor {}", t.index());
                assert_eq!(model.payload_range(t.index()).unwrap().start, t.absolute_offset() as u64);
                assert_eq!((u.name(), u.shape(), u.dtype()), (t.name(), t.shape(), t.dtype()));
            }
        }
        Err(p) if p.rule() != Rule::NonzeroGap => assert_eq!(first_read_fault, Some(p.into()), "{what}"),
        Err(_) => {}
    }
    true
}

#[test]
fn goldens_regressions_and_the_check_order_matrix() {
    let root = repo_root();
    let mut files = vec![root.join("spec/kiln-v2-cases.json"), root.join("spec/check-order-matrix.json")];
    for e in std::fs::read_dir(root.join("spec/regressions")).expect("regressions") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "json") {
            files.push(p);
        }
    }
    let (mut n, mut goldens, mut opened) = (0, 0, 0);
    for f in &files {
        for (name, bytes) in json_cases(f) {
            n += compare_verify(&bytes, Limits::DEFAULT, &name);
            opened += usize::from(compare_open(&bytes, Limits::DEFAULT, &name));
            goldens += usize::from(f.ends_with("kiln-v2-cases.json"));
        }
    }
    assert_eq!(goldens, 39, "directory goldens");
    println!("{n} verify comparisons, {opened} blocks opened");
}

#[test]
fn mutated_blocks_get_the_parsers_verdict() {
    let cases: usize = std::env::var("KILN_SOURCE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    let mut rng = Rng(0x50_u64 << 32 | 0xce);
    let templates = templates();
    let (mut rejected, mut opened, mut n) = (0, 0, 0);
    for k in 0..cases {
        let mut b = templates[k % templates.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut b);
        }
        let limits = if k % 17 == 0 { Limits::DEFAULT.with_count_cap(2).with_byte_cap(4) } else { Limits::DEFAULT };
        n += compare_verify(&b, limits, &format!("case {k}"));
        opened += usize::from(compare_open(&b, limits, &format!("case {k}")));
        rejected += usize::from(Parser::new().limits(limits).parse(&b).is_err());
    }
    println!("{cases} mutated blocks, {rejected} rejected, {opened} opened, {n} verify comparisons");
    assert!(cases < 100 || (rejected > cases / 4 && rejected < cases), "{rejected} of {cases} rejected");
}

#[test]
fn the_example_model_reads_as_parsed() {
    let bytes = example_model();
    let dir = Directory::parse(&bytes).expect("valid");
    let mut prefix = [0u8; 2048];
    let mut src = Counting::new(&bytes[..]);
    let model = source::open(&mut src, &mut prefix).expect("opens");
    assert_eq!(src.reads.get(), 2, "header, then the rest of the prefix");
    assert_eq!(src.bytes.get(), model.payload_base());
    assert_eq!(model.payload_base(), dir.payload_start() as u64);
    assert_eq!(model.block_len(), bytes.len() as u64);
    assert_eq!(model.header(), dir.header());
    assert_eq!(model.directory().len(), 8);
    for t in dir.iter() {
        let name = t.name().expect("named");
        let u = model.directory().find(name).expect("listed");
        assert_eq!(
            (u.shape(), u.dtype(), u.byte_len(), u.absolute_offset()),
            (t.shape(), t.dtype(), t.byte_len(), t.absolute_offset())
        );
        assert!(u.bytes().is_empty(), "the opened table holds no payload");
        let mut out = vec![0u8; t.byte_len()];
        let before = src.reads.get();
        assert_eq!(source::read_tensor(&mut src, &model, name, &mut out).unwrap(), t.byte_len());
        assert_eq!(src.reads.get(), before + 1, "one read per tensor");
        assert_eq!(out, t.bytes(), "{name}");
        // Rows: every range of a few shapes, as slices of the payload.
        let rows = t.shape()[0];
        let row = t.byte_len() as u64 / rows.max(1);
        for (a, b) in [(0, rows), (0, 1), (rows / 2, rows), (1, rows.min(3)), (rows, rows), (rows / 3, rows / 3 + 2)] {
            if a > b || b > rows {
                continue;
            }
            let mut out = vec![0u8; t.byte_len()];
            let n = source::read_rows(&bytes[..], &model, name, a..b, &mut out).unwrap();
            assert_eq!(&out[..n], &t.bytes()[(a * row) as usize..(b * row) as usize], "{name} rows {a}..{b}");
        }
    }
    // The MXFP4 copy of fc1: 64 e2m1 per row, 32 bytes a row.
    let mut out = [0u8; 64];
    assert_eq!(source::read_rows(&bytes[..], &model, "fc1.weight.mxfp4", 3..5, &mut out), Ok(64));
    assert_eq!(&out[..], &dir.find("fc1.weight.mxfp4").unwrap().bytes()[96..160]);
    // And the whole block verifies with Parser's verdict, reading little.
    let mut chunk = [0u8; 4096];
    let mut src = Counting::new(&bytes[..]);
    let base = model.payload_base();
    let s = source::verify(&mut src, &mut prefix, &mut chunk).unwrap();
    assert_eq!((s.block_len, s.payload_base), (bytes.len() as u64, base));
    println!(
        "digits-mlp.kiln ({} bytes): verify read {} bytes in {} reads",
        bytes.len(),
        src.bytes.get(),
        src.reads.get()
    );
    assert!(src.bytes.get() < base + 4096);
}

/// What the caller gets wrong: buffers, names, rows.
#[test]
fn request_errors() {
    let bytes = example_model();
    let src = &bytes[..];
    let dir = Directory::parse(&bytes).unwrap();
    let need = dir.payload_start() as u64;
    let mut small = vec![0u8; need as usize - 1];
    assert_eq!(source::open(src, &mut small).unwrap_err(), SourceError::BufferTooSmall { needed: need });
    let mut chunk = [0u8; 64];
    assert_eq!(source::verify(src, &mut small, &mut chunk).unwrap_err(), SourceError::BufferTooSmall { needed: need });
    assert_eq!(source::verify(src, &mut small, &mut []).unwrap_err(), SourceError::BufferTooSmall { needed: 1 });
    assert_eq!(source::open(src, &mut [0u8; 10]).unwrap_err(), SourceError::BufferTooSmall { needed: 64 });
    // A short source is EOF even with too little memory for its prefix.
    let cut = &bytes[..need as usize - 10];
    assert_eq!(kiln(source::verify(cut, &mut small, &mut chunk)).unwrap_err(), Parser::new().parse(cut).unwrap_err());
    assert_eq!(kiln(source::open(cut, &mut small)).unwrap_err(), Parser::new().parse(cut).unwrap_err());

    let mut prefix = vec![0u8; need as usize];
    let model = source::open(src, &mut prefix).unwrap();
    let mut out = [0u8; 100];
    let bias = dir.find("fc1.bias").unwrap();
    assert_eq!(
        source::read_tensor(src, &model, "fc1.bias", &mut out),
        Err(SourceError::BufferTooSmall { needed: 128 })
    );
    assert_eq!(source::read_tensor(src, &model, "nope", &mut out), Err(SourceError::NoSuchTensor));
    assert_eq!(source::read_tensor(src, &model, 8, &mut out), Err(SourceError::NoSuchTensor));
    assert_eq!(
        source::read_rows(src, &model, bias, std::ops::Range { start: 3, end: 2 }, &mut out),
        Err(SourceError::RowRange)
    );
    assert_eq!(source::read_rows(src, &model, bias, 0..33, &mut out), Err(SourceError::RowRange));
    assert_eq!(source::read_rows(src, &model, TensorId::Index(1), 30..32, &mut out), Ok(8));
    assert_eq!(&out[..8], &bias.bytes()[120..]);
    assert_eq!(model.tensor("fc1.bias").map(|t| t.index()), Some(1));
    let r = model.payload_range("fc1.bias").unwrap();
    assert_eq!((r.start, r.end), (bias.absolute_offset() as u64, (bias.absolute_offset() + 128) as u64));
    // Display names the side that failed.
    assert!(SourceError::<OutOfBounds>::Read(OutOfBounds).to_string().contains("read failed"));
    let e: SourceError<OutOfBounds> = Parser::new().parse(&bytes[..100]).unwrap_err().into();
    assert!(e.to_string().starts_with("EOF at byte 100"), "{e}");
}

/// Rows of packed, bool, scalar and opaque tensors, and their byte rules.
#[test]
fn rows_of_every_width() {
    let nib3x3 = [0x21u8, 0x43, 0x65, 0x87, 0x09];
    let nib2x4 = [0x21u8, 0x43, 0x65, 0x87];
    let bools = [1u8, 0, 1, 1, 0, 0];
    let specs = [
        TensorSpec::new(DType::U4, &[3, 3], &nib3x3).named("odd"),
        TensorSpec::new(DType::I4, &[2, 4], &nib2x4).named("even"),
        TensorSpec::new(DType::Bool, &[3, 2], &bools).named("b"),
        TensorSpec::new(DType::F32, &[], &[0, 0, 0x80, 0x3f]).named("scalar"),
        TensorSpec::opaque(4096, "Q", 4, &[2, 8], &[7; 16]).named("opq"),
        TensorSpec::opaque(4097, "R", 16, &[2, 8], &[7; 16]).named("opq1"),
        TensorSpec::new(DType::U8, &[0, 5], &[]).named("empty"),
    ];
    let mut block = cases::write(&specs);
    let mut prefix = [0u8; 2048];
    let src = block.clone();
    let model = source::open(&src[..], &mut prefix).unwrap();
    let mut out = [0u8; 64];
    let mut rows = |name: &str, r: std::ops::Range<u64>| {
        source::read_rows(&src[..], &model, name, r, &mut out).map(|n| out[..n].to_vec())
    };
    // 3 nibbles a row: row 1 starts mid-byte, row 2 on a byte; 0..3 ends with the tensor.
    assert_eq!(rows("odd", 0..1), Err(SourceError::RowsUnaligned));
    assert_eq!(rows("odd", 1..3), Err(SourceError::RowsUnaligned));
    assert_eq!(rows("odd", 0..2), Ok(nib3x3[..3].to_vec()));
    assert_eq!(rows("odd", 0..3), Ok(nib3x3.to_vec()));
    assert_eq!(rows("odd", 2..2), Ok(vec![])); // 6 nibbles: byte 3
    assert_eq!(rows("even", 1..2), Ok(nib2x4[2..].to_vec()));
    assert_eq!(rows("b", 1..3), Ok(bools[2..].to_vec()));
    assert_eq!(rows("scalar", 0..1), Err(SourceError::RowsUnaligned));
    assert_eq!(rows("opq", 1..2), Ok(vec![7; 8])); // 8 bytes a row, blocks of 4
    assert_eq!(rows("opq1", 0..1), Err(SourceError::RowsUnaligned)); // 8-byte rows of 16-byte blocks
    assert_eq!(rows("opq1", 0..2), Err(SourceError::RowsUnaligned));
    assert_eq!(rows("empty", 0..0), Ok(vec![]));
    assert_eq!(rows("empty", 0..1), Err(SourceError::RowRange));

    // Byte rules on what is read: a bad bool row, and the odd tail's high nibble.
    let dir = Directory::parse(&block).unwrap();
    let (b_at, odd_end) = (dir.find("b").unwrap().absolute_offset(), dir.find("odd").unwrap().absolute_offset() + 4);
    block[b_at + 3] = 2;
    block[odd_end] = 0x19;
    let want = Parser::new().parse(&block).unwrap_err();
    let mut prefix = [0u8; 2048];
    let model = source::open(&block[..], &mut prefix).expect("the prefix is unchanged");
    let read = |name: &str, r: std::ops::Range<u64>| {
        kiln(source::read_rows(&block[..], &model, name, r, &mut [0u8; 64])).map(|_| ())
    };
    assert_eq!(read("odd", 0..3), Err(want.into()), "Parser's first fault: the nibble of tensor 0");
    assert_eq!(read("b", 0..1), Ok(()));
    assert_eq!(read("b", 1..2), Err(Error::new(Rule::BoolByte, b_at + 3)));
    let mut chunk = [0u8; 64];
    assert_eq!(kiln(source::verify(&block[..], &mut prefix, &mut chunk)).unwrap_err(), want);
}

/// A block of large plain tensors: verify reads the prefix and the few
/// bytes around the gaps and the bool tensor, not the payload.
#[test]
fn verify_reads_little_more_than_the_prefix() {
    let big = vec![0u8; (1 << 20) + 12]; // 262,147 f32: a 52-byte gap follows
    let bools = [1u8, 0, 1];
    let specs = [
        TensorSpec::new(DType::F32, &[1 << 18 | 3], &big).named("w"),
        TensorSpec::new(DType::Bool, &[3], &bools).named("b"),
        TensorSpec::new(DType::F32, &[1 << 18], &big[..1 << 20]).named("v"),
        TensorSpec::new(DType::U4, &[5], &[0x21, 0x43, 0x05]).named("n"),
        TensorSpec::new(DType::F32, &[1 << 18], &big[..1 << 20]).named("u"),
    ];
    let mut block = cases::write(&specs);
    let base = Directory::parse(&block).unwrap().payload_start() as u64;
    let mut prefix = [0u8; 4096];
    let mut report = Vec::new();
    for (chunk, coalesce) in [(64usize, 256u64), (1000, 256), (65536, 256), (65536, 0), (65536, 4096)] {
        let mut chunk_buf = vec![0u8; chunk];
        let mut src = Counting::new(&block[..]);
        Options::new().coalesce(coalesce).verify(&mut src, &mut prefix, &mut chunk_buf).unwrap();
        let (reads, bytes) = (src.reads.get(), src.bytes.get());
        report.push(format!("chunk {chunk}, coalesce {coalesce}: {reads} reads, {bytes} bytes"));
        // The prefix, the gap after "w", "b" and its gap, "v"'s tail gap is
        // none, the last byte of "n" and its gap: well under 1 KiB of payload.
        assert!(bytes < base + 512, "{bytes} bytes read of {} ({} prefix)", block.len(), base);
        // The header, the prefix in chunks, then two runs (gap, bool, gap; a nibble, gap).
        let prefix_reads = 1 + (base as usize - 64).div_ceil(chunk);
        assert!(reads <= prefix_reads + 2 + 2 * usize::from(chunk < 128), "{reads} reads");
    }
    println!("{} bytes, prefix {base}: {}", block.len(), report.join("; "));
    // Faults in the bytes it reads are still found, with Parser's verdict.
    let dir = Directory::parse(&block).unwrap();
    let (b, n) = (dir.find("b").unwrap().absolute_offset(), dir.find("n").unwrap().absolute_offset() + 2);
    for (at, value) in [(b + 1, 2u8), (b + 3, 1), (n, 0x15), (n + 1, 9)] {
        let old = block[at];
        block[at] = value;
        let want = Parser::new().parse(&block).unwrap_err();
        let mut chunk = [0u8; 64];
        let mut src = Counting::new(&block[..]);
        assert_eq!(kiln(source::verify(&mut src, &mut prefix, &mut chunk)).unwrap_err(), want);
        assert!(src.bytes.get() < base + 512);
        block[at] = old;
    }
    // A byte past the block (TRAILING) and a short block (EOF) are known
    // from the length alone.
    block.push(0);
    let mut src = Counting::new(&block[..]);
    let mut chunk = [0u8; 1000];
    let want = Parser::new().parse(&block).unwrap_err();
    assert_eq!(kiln(source::verify(&mut src, &mut prefix, &mut chunk)).unwrap_err(), want);
    assert!(src.bytes.get() < base + 512);
    block.truncate(block.len() - 100);
    let want = Parser::new().parse(&block).unwrap_err();
    assert_eq!(kiln(source::verify(&block[..], &mut prefix, &mut chunk)).unwrap_err(), want);
}

/// Read errors come back as `Read`, never as a format verdict, and no read
/// goes past the source.
#[test]
fn read_errors_are_the_sources() {
    let bytes = example_model();
    let mut prefix = [0u8; 2048];
    let mut chunk = [0u8; 100];
    for fail_at in 1..3 {
        let mut s = Strict { bytes: &bytes, reads: 0, fail_at };
        assert_eq!(source::open(&mut s, &mut prefix).unwrap_err(), SourceError::Read(Broken));
    }
    for fail_at in 1..6 {
        let mut s = Strict { bytes: &bytes, reads: 0, fail_at };
        assert_eq!(source::verify(&mut s, &mut prefix, &mut chunk).unwrap_err(), SourceError::Read(Broken));
    }
    let model = source::open(&bytes[..], &mut prefix).unwrap();
    let mut s = Strict { bytes: &bytes, reads: 0, fail_at: 1 };
    let mut out = vec![0u8; 8192];
    assert_eq!(source::read_tensor(&mut s, &model, 0, &mut out), Err(SourceError::Read(Broken)));
    assert_eq!(source::read_tensor(&mut s, &model, 0, &mut out), Ok(8192));
}

/// A window: a block inside a larger source, standalone or embedded.
#[test]
fn windows() {
    let bytes = example_model();
    let mut image = vec![0xffu8; 64 * 1024];
    image[4096..4096 + bytes.len()].copy_from_slice(&bytes);
    let mut prefix = [0u8; 2048];
    let mut chunk = [0u8; 512];
    // Exactly the block: standalone.
    let exact = Window::new(&image[..], 4096, bytes.len() as u64);
    assert!(source::verify(exact, &mut prefix, &mut chunk).is_ok());
    // To the end of the image: embedded, or TRAILING.
    let rest = Window::new(&image[..], 4096, (image.len() - 4096) as u64);
    let s = Options::new().embedded().verify(rest, &mut prefix, &mut chunk).unwrap();
    assert_eq!(s.block_len, bytes.len() as u64);
    let e = source::verify(rest, &mut prefix, &mut chunk).unwrap_err();
    assert_eq!(e, SourceError::Kiln(Error::new(Rule::TrailingBytes, bytes.len())));
    let model = Options::new().embedded().open(rest, &mut prefix).unwrap();
    let mut out = vec![0u8; 8192];
    assert_eq!(source::read_tensor(rest, &model, "fc1.weight", &mut out), Ok(8192));
    assert_eq!(&out[..], Directory::parse(&bytes).unwrap().find("fc1.weight").unwrap().bytes());
    assert_eq!(
        source::open(rest, &mut prefix).unwrap_err(),
        SourceError::Kiln(Error::new(Rule::TrailingBytes, bytes.len()))
    );
    // A window past its own end refuses the read.
    let mut w = Window::new(&image[..], 0, 10);
    assert_eq!(w.read_at(5, &mut [0u8; 6]), Err(source::ReadError::OutOfBounds));
    assert_eq!(w.read_at(4, &mut [0u8; 6]), Ok(()));
}

/// `std::fs::File` through positioned reads, owned and borrowed.
#[cfg(feature = "std")]
#[test]
fn std_file() {
    let bytes = example_model();
    let path = std::env::temp_dir().join(format!("kiln-source-{}.kiln", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    let mut prefix = [0u8; 2048];
    let mut chunk = [0u8; 1000];
    let s = source::verify(&mut file, &mut prefix, &mut chunk).unwrap();
    assert_eq!(s.block_len, bytes.len() as u64);
    let model = source::open(&file, &mut prefix).unwrap();
    let dir = Directory::parse(&bytes).unwrap();
    for t in dir.iter() {
        let mut out = vec![0u8; t.byte_len()];
        source::read_tensor(&file, &model, t, &mut out).unwrap();
        assert_eq!(out, t.bytes());
    }
    let mut out = [0u8; 4];
    let e = (&file).read_at(bytes.len() as u64 - 2, &mut out).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    drop(file);
    // A file one byte longer is TRAILING.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &[0]))
        .unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let e = source::verify(&file, &mut prefix, &mut chunk).unwrap_err();
    assert_eq!(e.kiln().map(|e| e.rule()), Some(Rule::TrailingBytes.into()));
    assert!(e.to_string().starts_with("TRAILING"), "{e}");
    std::fs::remove_file(&path).unwrap();
}

/// A NOR flash that enforces READ_SIZE alignment, as real parts do.
#[cfg(feature = "embedded-storage")]
mod flash {
    use super::*;
    use embedded_storage::nor_flash::{check_read, ErrorType, NorFlashErrorKind, ReadNorFlash};

    pub struct Mock<'a> {
        pub data: &'a [u8],
        pub reads: usize,
    }

    impl ErrorType for Mock<'_> {
        type Error = NorFlashErrorKind;
    }

    impl ReadNorFlash for Mock<'_> {
        const READ_SIZE: usize = 4;
        fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), NorFlashErrorKind> {
            check_read(&*self, offset, bytes.len())?;
            self.reads += 1;
            bytes.copy_from_slice(&self.data[offset as usize..offset as usize + bytes.len()]);
            Ok(())
        }
        fn capacity(&self) -> usize {
            self.data.len()
        }
    }

    #[test]
    fn unaligned_reads_through_the_bounce() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 256) as u8).collect();
        let mut rng = Rng(7);
        let mut f = source::Flash::<_>::new(Mock { data: &data, reads: 0 });
        let mut small = source::Flash::<_, 4>::new(Mock { data: &data, reads: 0 });
        assert_eq!(f.len(), Ok(4096));
        for _ in 0..2000 {
            let at = rng.below(4096);
            let n = rng.below((4096 - at).min(300) + 1);
            let mut out = vec![0u8; n];
            f.read_at(at as u64, &mut out).unwrap();
            assert_eq!(out, &data[at..at + n], "{at}+{n}");
            out.fill(0);
            small.read_at(at as u64, &mut out).unwrap();
            assert_eq!(out, &data[at..at + n], "{at}+{n} via a 4-byte bounce");
        }
        // An unaligned read costs at most a head, an aligned middle and a tail.
        let before = f.inner().reads;
        f.read_at(5, &mut [0u8; 1001]).unwrap();
        assert_eq!(f.inner().reads - before, 3);
        assert_eq!(f.read_at(4094, &mut [0u8; 4]), Err(source::ReadError::Source(NorFlashErrorKind::OutOfBounds)));
    }

    #[test]
    fn a_model_in_flash() {
        let bytes = example_model();
        // The model at an unaligned address of a larger flash.
        let mut image = vec![0xffu8; 32 * 1024];
        image[1030..1030 + bytes.len()].copy_from_slice(&bytes);
        let mut flash = source::Flash::<_>::new(Mock { data: &image, reads: 0 });
        let mut prefix = [0u8; 2048];
        let mut chunk = [0u8; 64];
        let part = Window::new(&mut flash, 1030, (image.len() - 1030) as u64);
        let s = Options::new().embedded().verify(part, &mut prefix, &mut chunk).unwrap();
        assert_eq!(s.block_len, bytes.len() as u64);
        let mut part = Window::new(&mut flash, 1030, bytes.len() as u64);
        source::verify(&mut part, &mut prefix, &mut chunk).unwrap();
        let model = source::open(&mut part, &mut prefix).unwrap();
        let dir = Directory::parse(&bytes).unwrap();
        for t in dir.iter() {
            let mut out = vec![0u8; t.byte_len()];
            source::read_tensor(&mut part, &model, t, &mut out).unwrap();
            assert_eq!(out, t.bytes());
            let mut row = vec![0u8; t.byte_len() / t.shape()[0] as usize];
            source::read_rows(&mut part, &model, t, 1..2, &mut row).unwrap();
            assert_eq!(row, &t.bytes()[row.len()..2 * row.len()]);
        }
        // A corrupted copy gets Parser's verdict, offsets relative to the window.
        image[1030 + 70] = 1; // a reserved byte of descriptor 0
        let mut flash = source::Flash::<_>::new(Mock { data: &image, reads: 0 });
        let part = Window::new(&mut flash, 1030, bytes.len() as u64);
        let mut bad = bytes.clone();
        bad[70] = 1;
        let e = source::verify(part, &mut prefix, &mut chunk).unwrap_err();
        assert_eq!(e.kiln(), Parser::new().parse(&bad).err().map(Into::into));
    }
}

/// An `embedded_io` reader that can seek.
#[cfg(feature = "embedded-io")]
mod io {
    use super::*;
    use embedded_io::{ErrorType, Read, ReadExactError, Seek, SeekFrom};

    struct Cursor<'a> {
        data: &'a [u8],
        pos: u64,
    }

    impl ErrorType for Cursor<'_> {
        type Error = embedded_io::ErrorKind;
    }

    impl Read for Cursor<'_> {
        fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
            // Short reads, as a real device may give.
            let at = (self.pos as usize).min(self.data.len());
            let n = buf.len().min(self.data.len() - at).min(100);
            buf[..n].copy_from_slice(&self.data[at..at + n]);
            self.pos += n as u64;
            Ok(n)
        }
    }

    impl Seek for Cursor<'_> {
        fn seek(&mut self, pos: SeekFrom) -> Result<u64, Self::Error> {
            self.pos = match pos {
                SeekFrom::Start(p) => p,
                SeekFrom::End(d) => (self.data.len() as i64 + d) as u64,
                SeekFrom::Current(d) => (self.pos as i64 + d) as u64,
            };
            Ok(self.pos)
        }
    }

    #[test]
    fn a_seekable_reader() {
        let bytes = example_model();
        let mut src = source::Io::new(Cursor { data: &bytes, pos: 0 });
        let mut prefix = [0u8; 2048];
        let mut chunk = [0u8; 300];
        assert!(source::verify(&mut src, &mut prefix, &mut chunk).is_ok());
        let model = source::open(&mut src, &mut prefix).unwrap();
        let t = Directory::parse(&bytes).unwrap().find("samples.x").unwrap();
        let mut out = vec![0u8; t.byte_len()];
        source::read_tensor(&mut src, &model, "samples.x", &mut out).unwrap();
        assert_eq!(out, t.bytes());
        assert_eq!(src.read_at(bytes.len() as u64 - 1, &mut [0u8; 2]), Err(ReadExactError::UnexpectedEof));
    }
}

/// The README's example, as written there.
#[cfg(feature = "std")]
#[test]
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::fs::File::open(repo_root().join("spec/examples/digits-mlp.kiln"))?;
    let mut prefix = [0u8; 4096]; // at least Opened::payload_base() bytes
    let mut chunk = [0u8; 4096]; // any size
    source::verify(&file, &mut prefix, &mut chunk)?; // Parser's verdict, without reading the payload
    let model = source::open(&file, &mut prefix)?; // the tensor table, checked; no payload bytes
    let mut w = vec![0u8; model.tensor("fc1.weight").expect("present").byte_len()];
    source::read_tensor(&file, &model, "fc1.weight", &mut w)?; // little-endian wire bytes
    let mut rows = [0u8; 2 * 64 * 4];
    source::read_rows(&file, &model, "fc1.weight", 3..5, &mut rows)?; // hidden units 3 and 4
    assert_eq!(&rows[..], &w[3 * 256..5 * 256]);
    Ok(())
}

/// Many small tensors: reads merge across the tensors between gaps, and
/// the read planning stays linear in the tensor count.
#[test]
fn many_small_tensors() {
    let (one, shape) = ([7u8], [1u64]);
    let specs: Vec<_> = (0..20_000).map(|_| TensorSpec::new(DType::U8, &shape, &one)).collect();
    let block = cases::write(&specs);
    let base = Directory::parse(&block).unwrap().payload_start();
    let mut prefix = vec![0u8; base];
    let mut chunk = vec![0u8; 65536];
    let mut report = Vec::new();
    for coalesce in [256u64, 0] {
        let mut src = Counting::new(&block[..]);
        let t = std::time::Instant::now();
        Options::new().coalesce(coalesce).verify(&mut src, &mut prefix, &mut chunk).unwrap();
        let (reads, bytes) = (src.reads.get(), src.bytes.get());
        report.push(format!("coalesce {coalesce}: {reads} reads, {bytes} bytes, {:?}", t.elapsed()));
        // Every gap is read (63 of every 64 payload bytes); merged, in whole chunks.
        let payload = (block.len() - base) as u64;
        let want = if coalesce == 0 { 20_000 } else { payload.div_ceil(65536) as usize + 1 };
        let prefix_reads = 1 + (base - 64).div_ceil(65536);
        assert!(reads <= prefix_reads + want, "{reads} reads");
        assert!(bytes <= block.len() as u64 && bytes >= base as u64 + payload * 63 / 64);
    }
    println!("20,000 one-byte tensors ({} bytes): {}", block.len(), report.join("; "));

    // A big bool tensor read in small chunks, then many plain tensors no rule reads.
    let bools = vec![1u8; 1 << 20];
    let f32s = [0u8; 64];
    let (b_shape, f_shape) = ([1u64 << 20], [16u64]);
    let mut specs = vec![TensorSpec::new(DType::Bool, &b_shape, &bools)];
    specs.extend((0..20_000).map(|_| TensorSpec::new(DType::F32, &f_shape, &f32s)));
    let block = cases::write(&specs);
    let base = Directory::parse(&block).unwrap().payload_start() as u64;
    let mut prefix = vec![0u8; base as usize];
    let mut src = Counting::new(&block[..]);
    let t = std::time::Instant::now();
    source::verify(&mut src, &mut prefix, &mut [0u8; 4096]).unwrap();
    println!(
        "a 1 MiB bool tensor and 20,000 f32 tensors: {} reads, {} bytes, {:?}",
        src.reads.get(),
        src.bytes.get(),
        t.elapsed()
    );
    assert_eq!(src.bytes.get(), base + (1 << 20), "the prefix and the bool bytes, nothing else");
}
