//! Model files as `js/validate.js` opens them (the head check on a growing
//! window of the file's first bytes, then the block checked by a `Session`
//! placed at the block's offset) give `kiln_model::parse_any`'s
//! verdict: the same code, offset and rule, the same metadata (padding key
//! hidden) and the same table, on the example model file, writer-made files
//! with and without the padding key, plain directories, and mutations and
//! truncations of all of them, with first windows of several sizes.

use kiln_model::{self as model, ModelWriter, PAD_KEY};
use kiln_nostd::{directory::scratch_len, wire::Header, DType, Limits, Parser, TensorSpec};
use kiln_wasm::model::{Head, HeadCore};
use kiln_wasm::table;
use kiln_wasm::validator::{need, Session};
use kiln_wasm::{ErrorInfo, WINDOW};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[derive(Debug, PartialEq, Eq)]
struct Opened {
    /// Metadata entries as absolute byte ranges, padding key left out.
    entries: Vec<u32>,
    padding: u64,
    table: Vec<u32>,
}

fn direct(file: &[u8], limits: Limits, verify: bool) -> Result<Opened, ErrorInfo> {
    let count = Header::peek_count(file).map_or(0, |c| c.min(1 << 16));
    let mut scratch = vec![0u32; scratch_len(count)];
    let parser = Parser::new().limits(limits).scratch(&mut scratch);
    let parsed = if verify && model::is_model_file(file) {
        model::Model::parse_verified_with(file, parser).map(|m| (Some(m.metadata()), m.directory()))
    } else {
        model::parse_any_with(file, parser)
    };
    match parsed {
        Ok((meta, dir)) => {
            let base = file.as_ptr() as usize;
            let at = |s: &str| (s.as_ptr() as usize - base) as u32;
            let mut entries = Vec::new();
            for (k, v) in meta.iter().flat_map(|m| m.iter()) {
                entries.extend_from_slice(&[at(k), k.len() as u32, at(v), v.len() as u32]);
            }
            let mut t = Vec::new();
            table::build(&dir, dir.start() as u64, &mut t);
            Ok(Opened { entries, padding: meta.map_or(0, |m| m.padding() as u64), table: t })
        }
        Err(e) => Err(e.into()),
    }
}

/// The head check the way the package runs it: the first `first` bytes,
/// then as many as it asks for (at least double), up to the whole file.
fn head(file: &[u8], first: usize, limits: Limits) -> (HeadCore, Head, usize) {
    let total = file.len() as u64;
    let mut core = HeadCore::default();
    let mut n = first.min(file.len());
    let mut rounds = 0;
    loop {
        rounds += 1;
        match core.check(&file[..n], total, limits) {
            Head::Need(k) => {
                assert!(k > n as u64 && k <= total, "need {k} with {n} of {total}");
                n = (k as usize).max(2 * n).min(file.len());
            }
            h => return (core, h, rounds),
        }
    }
}

/// js/validate.js `checkWhole` in Rust: the head, then the block at its offset.
/// With `verify`, the Session hashes against the head's digest table (the loader's and parseModel's `verify`).
fn via_js(file: &[u8], first: usize, limits: Limits, verify: bool) -> Result<Opened, ErrorInfo> {
    let (core, h, _) = head(file, first, limits);
    let start = match h {
        Head::Plain => 0,
        Head::Model(s) => s,
        Head::Error(e) => return Err(e),
        Head::Need(_) | Head::Manifest => unreachable!(),
    };
    let block = &file[start as usize..];
    let n = need(&block[..block.len().min(64)], &limits);
    let want = n.prefix.unwrap_or(64);
    let mem = if want <= block.len() as u64 { want } else { 64 };
    let mut s = Session::new(mem, n.count, limits, 0x5eed);
    s.place_at(start);
    if let Some((at, len)) = core.digests().filter(|_| verify) {
        assert!(s.digests(&file[at as usize..(at + len) as usize]));
    }
    let total = block.len() as u64;
    let mut ok = true;
    while ok && s.fed() < total {
        let fed = s.fed();
        if fed < want {
            let k = (want.min(total) - fed).min(WINDOW as u64) as usize;
            ok = s.feed(&block[fed as usize..fed as usize + k]).is_ok();
            continue;
        }
        match s.skip(total - fed) {
            Err(_) => ok = false,
            Ok(k) if k > 0 => {}
            Ok(_) => {
                let k = (64 - fed % 64).min(total - fed) as usize;
                ok = s.feed(&block[fed as usize..fed as usize + k]).is_ok();
            }
        }
    }
    if !ok {
        let _ = s.skip(total - s.fed());
    }
    let t = s.finish()?.to_vec();
    Ok(Opened { entries: core.entries().to_vec(), padding: core.padding(), table: t })
}

fn same(file: &[u8], limits: Limits, what: &str) -> Result<Opened, ErrorInfo> {
    let d = direct(file, limits, false);
    for first in [16, 17, 40, 64, 300, 4096, 65536] {
        assert_eq!(via_js(file, first, limits, false), d, "{what}, first window {first}");
    }
    // Step 9d: Model::parse_verified's verdict through the Session (Incremental::digests).
    let v = direct(file, limits, true);
    for first in [16, 64, 65536] {
        assert_eq!(via_js(file, first, limits, true), v, "{what}, verified, first window {first}");
    }
    d
}

fn write_model(meta: &[(&str, &str)], align: u64) -> Vec<u8> {
    write_record(ModelWriter::new(), meta, align)
}

fn write_record(writer: ModelWriter, meta: &[(&str, &str)], align: u64) -> Vec<u8> {
    let w = [0u8, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0x40, 0x40];
    let bools = [1u8, 0, 1];
    let specs = [
        TensorSpec::new(DType::F32, &[3], &w).named("w"),
        TensorSpec::new(DType::Bool, &[3], &bools).named("mask"),
        TensorSpec::new(DType::U4, &[3], &[0x21, 0x03]).named("nib"),
    ];
    let writer = writer.align(align);
    let mut out = vec![0u8; writer.encoded_len(meta, &specs).unwrap()];
    let n = writer.write(meta, &specs, &mut out).unwrap();
    out.truncate(n);
    out
}

fn example_model() -> Vec<u8> {
    std::fs::read(root().join("spec/examples/digits-mlp.model.kiln")).unwrap()
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let long = "x".repeat(70_000);
    vec![
        ("example model file".into(), example_model()),
        ("example plain".into(), std::fs::read(root().join("spec/examples/digits-mlp.kiln")).unwrap()),
        ("no metadata".into(), write_model(&[], 1)),
        ("aligned, padding key".into(), write_model(&[("author", "kiln"), ("ünï", "cödé")], 4096)),
        ("many entries".into(), {
            let keys: Vec<String> = (0..300).map(|i| format!("key{i:04}")).collect();
            let meta: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
            write_model(&meta, 64)
        }),
        ("a 70,000-byte value".into(), write_model(&[("big", &long)], 1)),
        ("digests record".into(), write_record(ModelWriter::new().digests(true), &[("author", "kiln")], 64)),
        ("shard record".into(), write_record(ModelWriter::new().shard([7; 32], 2, 3), &[], 64)),
    ]
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Offsets of the head's words: the frame, the count, every length word.
fn words(file: &[u8]) -> Vec<usize> {
    let mut v = vec![0, 4, 5, 6, 8, 15];
    if !model::is_model_file(file) || file.len() < 20 {
        return v;
    }
    let count = u32::from_le_bytes(file[16..20].try_into().unwrap()) as usize;
    v.push(16);
    let mut at = 20;
    for _ in 0..count.min(400) * 2 {
        let Some(w) = file.get(at..at + 4) else { break };
        v.push(at);
        at += 4 + u32::from_le_bytes(w.try_into().unwrap()) as usize;
    }
    v.push(at); // the block's header
    v
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    let w = words(seed);
    for _ in 0..1 + rng.below(2) {
        match rng.below(9) {
            0 | 1 => {
                // A word of the head: a byte of it.
                let at = w[rng.below(w.len())] + rng.below(4);
                if at < b.len() {
                    b[at] = [0, 1, 0xff, rng.next() as u8][rng.below(4)];
                }
            }
            2 => {
                // A byte of a key or value (order, UTF-8).
                let at = 20 + rng.below(seed.len().min(3000));
                if at < b.len() {
                    b[at] = [0xc3, 0x80, b'a', b'z', 0][rng.below(5)];
                }
            }
            3 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            4 | 5 => b.truncate(rng.below(b.len() + 1)),
            6 => b.truncate(rng.below(b.len().min(3200) + 1)),
            7 => b.extend((0..1 + rng.below(70)).map(|_| rng.next() as u8 & 3)),
            _ => {
                // The block's header and first descriptor.
                let at = *w.last().unwrap() + [8, 12, 16, 24, 64, 96, 104][rng.below(7)] + rng.below(4);
                if at < b.len() {
                    b[at] = rng.next() as u8;
                }
            }
        }
    }
    b
}

#[test]
fn the_example_model_file_opens_with_its_metadata() {
    let file = example_model();
    let opened = same(&file, Limits::DEFAULT, "example").unwrap();
    let m = model::Model::parse(&file).unwrap();
    assert_eq!(opened.entries.len() / 4, m.metadata().len());
    assert_eq!(opened.entries.len() / 4, 3, "description, license, source");
    assert!(opened.padding > 0, "the converter's padding key is there, and hidden");
    let text = |at: u32, len: u32| std::str::from_utf8(&file[at as usize..(at + len) as usize]).unwrap();
    let keys: Vec<&str> = opened.entries.chunks(4).map(|e| text(e[0], e[1])).collect();
    assert_eq!(keys, ["description", "license", "source"]);
    assert!(!keys.contains(&PAD_KEY));
    // The table's offsets are absolute in the file.
    assert_eq!(opened.table[table::meta::START] as usize, m.directory_offset());
    let (_, h, rounds) = head(&file, 65536, Limits::DEFAULT);
    assert_eq!((h, rounds), (Head::Model(m.directory_offset() as u64), 1));
}

#[test]
fn a_long_value_asks_for_its_length_at_once() {
    let long = "y".repeat(2 << 20);
    let file = write_model(&[("a", "1"), ("kiln.convert.z", &long)], 1);
    // 64 KiB show the length word of the 2 MiB value: one more round, for all of it.
    let (_, h, rounds) = head(&file, 65536, Limits::DEFAULT);
    assert!(matches!(h, Head::Model(_)));
    assert_eq!(rounds, 2);
    let mut core = HeadCore::default();
    match core.check(&file[..65536], file.len() as u64, Limits::DEFAULT) {
        Head::Need(n) => assert!(n >= 16 + 4 + 5 + 1 + 4 + 14 + 4 + (2 << 20), "{n}"),
        h => panic!("{h:?}"),
    }
}

#[test]
fn seeds_and_caps() {
    for (name, seed) in seeds() {
        same(&seed, Limits::DEFAULT, &name).unwrap();
        // Low caps reach the metadata's count and length checks first.
        let low = Limits::DEFAULT.with_count_cap(2).with_byte_cap(5);
        let _ = same(&seed, low, &format!("{name}, low caps"));
    }
}

#[test]
fn mutations_give_parse_any_s_verdict() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut seen = std::collections::BTreeMap::new();
    let mut checked = 0;
    for (name, seed) in seeds() {
        let rounds = if seed.len() > 50_000 { 150 } else { 700 };
        for round in 0..rounds {
            let b = mutate(&mut rng, &seed);
            let limits =
                if round % 7 == 0 { Limits::DEFAULT.with_count_cap(9).with_byte_cap(40) } else { Limits::DEFAULT };
            let r = same(&b, limits, &format!("{name} mutation {round}"));
            *seen.entry(r.err().map_or("accept", |e| e.rule)).or_insert(0) += 1;
            checked += 1;
        }
    }
    // The head's own rules are among the verdicts (a changed schema hash is
    // not a model file: a plain directory, DirectoryMagic).
    for rule in [
        "FrameProfile",
        "DirectoryMagic",
        "CountPastEnd",
        "ByteLengthPastEnd",
        "DictKeyOrder",
        "StrUtf8",
        "TrailingBytes",
    ] {
        assert!(seen.contains_key(rule), "{rule} not reached: {seen:?}");
    }
    eprintln!("{checked} files: {seen:?}");
}

/// A flipped payload byte of a digests or shard record: DIGEST with verify,
/// accepted without (no rule reads that byte), in every first window.
#[test]
fn a_flipped_payload_byte_is_digest_when_verified() {
    for writer in [ModelWriter::new().digests(true), ModelWriter::new().shard([7; 32], 1, 1)] {
        let good = write_record(writer, &[("a", "b")], 64);
        let m = model::Model::parse(&good).unwrap();
        let at = m.directory().get(0).unwrap().absolute_offset();
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        for first in [16, 64, 65536] {
            let e = via_js(&bad, first, Limits::DEFAULT, true).unwrap_err();
            assert_eq!((e.code, e.rule, e.offset), ("DIGEST", "PayloadDigest", at as u64));
            assert!(via_js(&bad, first, Limits::DEFAULT, false).is_ok());
        }
        same(&bad, Limits::DEFAULT, "flipped").unwrap();
    }
}
