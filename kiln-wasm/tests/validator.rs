//! The validator as `js/validate.js` drives it (header sizing, a 64 KiB
//! window, only the bytes `next_needed` asks for copied in, the rest passed
//! over) gives `Parser::parse`'s verdict and table, on the goldens, the
//! example model, writer-made blocks with every byte rule, and tens of
//! thousands of mutations; `pass_unknown` gives the verdict for the payload
//! taken as zeros; memory follows the directory, not the block.

use kiln_nostd::{
    directory::scratch_len,
    wire::Header,
    writer::{QuantSpec, TensorRef},
    DType, Directory, Limits, Parser, TensorSpec, Writer,
};
use kiln_wasm::table::{self, extra, meta, slot, EXTRA_SLOTS, META, SLOTS};
use kiln_wasm::validator::{need, Session};
use kiln_wasm::{ErrorInfo, WINDOW};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Directory cases of the goldens: (name, bytes, expected code or "accept").
fn goldens() -> Vec<(String, Vec<u8>, String)> {
    let text = std::fs::read_to_string(root().join("spec/kiln-v2-cases.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "tensors" && c["framed"] == false)
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                hex::decode(c["hex"].as_str().unwrap()).unwrap(),
                c["expect"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn direct(bytes: &[u8], limits: Limits) -> Result<Vec<u32>, ErrorInfo> {
    let mut scratch = vec![0u32; Header::peek_count(bytes).map_or(0, |c| scratch_len(c.min(1 << 16)))];
    match Parser::new().limits(limits).scratch(&mut scratch).parse(bytes) {
        Ok(dir) => {
            let mut out = Vec::new();
            table::build(&dir, 0, &mut out);
            Ok(out)
        }
        Err(e) => Err(e.into()),
    }
}

/// A validator sized the way the package sizes it for an input of `total` bytes.
fn session_for(bytes: &[u8], total: u64, limits: Limits) -> Session {
    let n = need(&bytes[..bytes.len().min(64)], &limits);
    let want = n.prefix.unwrap_or(64);
    // Never allocate for a prefix the input cannot hold: the verdict is then EOF anyway.
    let mem = if want <= total { want } else { 64 };
    Session::new(mem, n.count, limits, 0x5eed)
}

/// js/validate.js `pump`: feeds input bytes up to `to` from `src` (which
/// starts at input offset `base`), copying in only what a rule reads: the
/// prefix (up to `prefix_end`) in whole windows, then the runs the
/// validator plans, gathered (`pumpRuns`), then, where there is no plan, payload pieces up to
/// the next 64-byte boundary (where a gap ends), growing while bytes are
/// still needed (a bool tensor), after passing over what no rule reads. Returns false on a rejection; adds the
/// bytes copied to `copied`.
fn pump(s: &mut Session, src: &[u8], base: u64, to: u64, prefix_end: u64, copied: &mut u64) -> bool {
    let mut fed = s.fed();
    let mut run = 0u64;
    while fed < to {
        if fed < prefix_end {
            let n = (prefix_end.min(to) - fed).min(WINDOW as u64);
            let at = (fed - base) as usize;
            *copied += n;
            if s.feed(&src[at..at + n as usize]).is_err() {
                return false;
            }
            fed += n;
            continue;
        }
        // `pumpRuns`: the planned runs (a few at a time here, to take
        // several plans), gathered one after another, taken in one call.
        let mut runs = [[0u64; 2]; 6];
        let n = s.plan(to, 256, &mut runs);
        if n > 0 {
            let mut gathered = Vec::new();
            for &[a, b] in &runs[..n] {
                gathered.extend_from_slice(&src[(a - base) as usize..(b - base) as usize]);
            }
            *copied += gathered.len() as u64;
            if s.feed_runs(&runs[..n], &gathered).is_err() {
                return false;
            }
            fed = s.fed();
            run = 0;
            continue;
        }
        // Pass over everything up to the next byte a rule reads.
        match s.skip(to - fed) {
            Err(_) => return false,
            Ok(k) if k > 0 => {
                fed += k;
                run = 0;
                continue;
            }
            Ok(_) => {}
        }
        let piece = if run == 0 { 64 - fed % 64 } else { (run * 2).min(WINDOW as u64) };
        let n = piece.min(to - fed);
        let at = (fed - base) as usize;
        // The window: a copy, as from JavaScript.
        let window = src[at..at + n as usize].to_vec();
        *copied += n;
        if s.feed(&window).is_err() {
            return false;
        }
        fed += n;
        run = n;
    }
    true
}

/// parseDirectory, in Rust.
fn via_session(bytes: &[u8], limits: Limits, copied: &mut u64) -> Result<Vec<u32>, ErrorInfo> {
    let total = bytes.len() as u64;
    let mut s = session_for(bytes, total, limits);
    let prefix_end = need(&bytes[..bytes.len().min(64)], &limits).prefix.unwrap_or(64);
    if !pump(&mut s, bytes, 0, total, prefix_end, copied) {
        // After a rejection only the length matters (EOF comes first).
        let _ = s.skip(total - s.fed());
    }
    s.finish().map(|t| t.to_vec())
}

fn same(bytes: &[u8], limits: Limits, what: &str) -> Result<Vec<u32>, ErrorInfo> {
    let d = direct(bytes, limits);
    let s = via_session(bytes, limits, &mut 0);
    match (&d, &s) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}: tables differ"),
        _ => assert_eq!(d, s, "{what}: verdicts differ"),
    }
    d
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

fn write(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let len = Writer::new().encoded_len(specs).unwrap();
    let mut out = vec![0u8; len];
    Writer::new().write(specs, &mut out).unwrap();
    out
}

/// A block with every byte rule: bools, odd packed tensors, gaps, a
/// quantized tensor, an opaque layout, a non-ASCII name.
fn rich_block() -> Vec<u8> {
    let f = [0u8, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0x40, 0x40];
    let bools = [1u8, 0, 1, 1, 0];
    let u4 = [0x21u8, 0x03];
    let e2m1 = [0x72u8; 16];
    let scale = [127u8];
    let opaque = [7u8; 18];
    write(&[
        TensorSpec::new(DType::F32, &[3], &f).named("weights"),
        TensorSpec::new(DType::Bool, &[5], &bools).named("mask"),
        TensorSpec::new(DType::U4, &[3], &u4).named("nibbles"),
        TensorSpec::new(DType::E2M1, &[32], &e2m1).named("q").quantized(QuantSpec::Scales {
            axis: 0,
            group_size: 32,
            scale: TensorRef::Name("q.scale"),
        }),
        TensorSpec::new(DType::E8M0, &[1], &scale).named("q.scale"),
        TensorSpec::opaque(4096, "Q4_K", 18, &[1], &opaque).named("blöck·ünïcode"),
        TensorSpec::new(DType::I4, &[1], &[0x07]).named("tail"),
    ])
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = goldens().into_iter().map(|(n, b, _)| (n, b)).collect();
    v.push(("digits-mlp".into(), std::fs::read(root().join("spec/examples/digits-mlp.kiln")).unwrap()));
    v.push(("rich".into(), rich_block()));
    v
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(10) {
            // Byte flips anywhere, biased to the payload where the byte rules live.
            0..=4 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            5 if !b.is_empty() => {
                let i = b.len() - 1 - rng.below(b.len().min(80));
                b[i] ^= 1 << rng.below(8);
            }
            6 => b.truncate(rng.below(b.len() + 1)),
            7 => b.extend((0..1 + rng.below(70)).map(|_| rng.next() as u8 & 3)),
            8 if b.len() >= 64 => {
                // Header length fields.
                let at = [8, 12, 16, 24][rng.below(4)];
                b[at + rng.below(4)] = rng.next() as u8;
            }
            _ if b.len() >= 192 => {
                // Fields of the first descriptor.
                let at = 64 + [0, 2, 4, 6, 8, 10, 12, 16, 18, 20, 24, 28, 32, 40, 48][rng.below(15)];
                b[at] = rng.next() as u8;
            }
            _ => {}
        }
    }
    b
}

#[test]
fn goldens_give_their_expected_codes() {
    let cases = goldens();
    assert_eq!(cases.len(), 39, "directory cases among the 46 goldens");
    for (name, bytes, expect) in cases {
        match same(&bytes, Limits::DEFAULT, &name) {
            Ok(_) => assert_eq!(expect, "accept", "{name}"),
            Err(e) => assert_eq!(e.code, expect, "{name}"),
        }
    }
}

#[test]
fn the_table_of_the_rich_block() {
    let bytes = rich_block();
    let t = same(&bytes, Limits::DEFAULT, "rich").unwrap();
    let dir = Directory::parse(&bytes).unwrap();
    assert_eq!(t[meta::COUNT] as usize, dir.len());
    assert_eq!(t[meta::BLOCK_LEN] as usize, bytes.len());
    assert_eq!(t[meta::PAYLOAD] as usize, dir.payload_start());
    let row = |i: usize| &t[META + i * SLOTS..META + (i + 1) * SLOTS];
    let heap = &bytes[t[meta::HEAP_START] as usize..t[meta::HEAP_END] as usize];
    for (i, tensor) in dir.iter().enumerate() {
        let r = row(i);
        let (at, len) = (r[slot::NAME_AT] as usize, r[slot::NAME_LEN] as usize);
        assert_eq!(std::str::from_utf8(&heap[at..at + len]).unwrap(), tensor.name().unwrap());
        assert_eq!(r[slot::OFFSET] as usize, tensor.absolute_offset());
        assert_eq!((r[slot::OFFSET + 1], r[slot::LENGTH + 1]), (0, 0));
        assert_eq!(r[slot::LENGTH] as usize, tensor.byte_len());
        let shape_at = r[slot::SHAPE_AT] as usize;
        let dims: Vec<u64> = t[shape_at..shape_at + 2 * tensor.rank()]
            .chunks(2)
            .map(|w| u64::from(w[0]) | u64::from(w[1]) << 32)
            .collect();
        assert_eq!(dims, tensor.shape());
        // An extra record exactly for the tensors with a layout or quantization.
        let plain = tensor.layout().is_none() && tensor.quant().is_none();
        assert_eq!(r[slot::EXTRA] == u32::MAX, plain, "tensor {i}");
    }
    let record = |i: usize| {
        let at = row(i)[slot::EXTRA] as usize;
        &t[at..at + EXTRA_SLOTS]
    };
    let (at, len) = (record(5)[extra::LAYOUT_AT] as usize, record(5)[extra::LAYOUT_LEN] as usize);
    assert_eq!(&heap[at..at + len], b"Q4_K");
    assert_eq!(record(5)[extra::BLOCK_SIZE], dir.get(5).unwrap().block_size());
    assert_eq!(record(3)[extra::SCALE], 4);
    assert_eq!(row(0)[slot::DTYPE_RANK], 2 | 1 << 16);
    let shape_at = row(0)[slot::SHAPE_AT] as usize;
    assert_eq!(&t[shape_at..shape_at + 2], &[3, 0]);
    assert_eq!(record(3)[extra::SCHEME_AXIS], 1);
    assert_eq!(record(3)[extra::OUTER], u32::MAX);
    assert_eq!(row(0)[slot::EXTRA], u32::MAX);
}

#[test]
fn mutations_give_the_core_s_verdict() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    let mut seen = std::collections::BTreeMap::new();
    for (name, seed) in seeds() {
        for round in 0..1200 {
            let b = mutate(&mut rng, &seed);
            let limits =
                if round % 7 == 0 { Limits::DEFAULT.with_count_cap(3).with_byte_cap(8) } else { Limits::DEFAULT };
            let rule = match same(&b, limits, &format!("{name} round {round}")) {
                Ok(_) => "accept",
                Err(e) => e.rule,
            };
            *seen.entry(rule).or_insert(0usize) += 1;
            checked += 1;
        }
    }
    assert!(checked > 40_000);
    // The mutations reach the verdicts that depend on payload bytes and lengths.
    for rule in [
        "accept",
        "NonzeroGap",
        "BoolByte",
        "PackedHighNibble",
        "TrailingBytes",
        "BlockTruncated",
        "DirectoryTruncated",
    ] {
        assert!(seen.get(rule).copied().unwrap_or(0) >= 20, "{rule}: {seen:?}");
    }
}

/// DirectoryLoader, in Rust: the block in random chunks, each pumped as it
/// comes (the validator is created once the prefix is in), same verdicts.
#[test]
fn chunked_streams_give_the_core_s_verdict() {
    let mut rng = Rng(0xC0FF_EE00_1234_5678);
    let mut runs = 0;
    for (name, seed) in seeds() {
        for round in 0..200 {
            let b = if round == 0 { seed.clone() } else { mutate(&mut rng, &seed) };
            let want = direct(&b, Limits::DEFAULT);
            let total = b.len() as u64;
            let n = need(&b[..b.len().min(64)], &Limits::DEFAULT);
            let prefix_end = n.prefix.unwrap_or(64);
            let got = if total < prefix_end {
                via_session(&b, Limits::DEFAULT, &mut 0) // the stream ends inside the prefix
            } else {
                let mut s = Session::new(prefix_end, n.count, Limits::DEFAULT, 7);
                let mut at = prefix_end.min(total);
                let mut ok = pump(&mut s, &b, 0, at, prefix_end, &mut 0);
                while ok && at < total {
                    let len = (1 + rng.below(300) as u64).min(total - at);
                    let chunk = &b[at as usize..(at + len) as usize];
                    ok = pump(&mut s, chunk, at, at + len, prefix_end, &mut 0);
                    at += len;
                }
                if !ok {
                    let _ = s.skip(total - s.fed());
                }
                s.finish().map(|t| t.to_vec())
            };
            assert_eq!(got, want, "{name} round {round}");
            runs += 1;
        }
    }
    assert!(runs > 5_000);
}

#[test]
fn payload_faults_are_found_with_their_offsets() {
    let base = rich_block();
    let dir = Directory::parse(&base).unwrap();
    let pos = |name: &str| dir.find(name).unwrap().absolute_offset();
    for (at, value, rule) in [
        (pos("mask") + 3, 2u8, "BoolByte"),
        (pos("nibbles") + 1, 0x13, "PackedHighNibble"),
        (pos("mask") - 1, 9, "NonzeroGap"),
        (pos("tail"), 0x17, "PackedHighNibble"),
    ] {
        let mut b = base.clone();
        b[at] = value;
        let e = same(&b, Limits::DEFAULT, rule).unwrap_err();
        assert_eq!((e.rule, e.offset), (rule, at as u64));
    }
}

/// The payload taken as zeros: what `openRemote` checks before any tensor is
/// fetched. Equal to the core on the block with its payload region zeroed.
#[test]
fn pass_unknown_is_the_verdict_for_a_zero_payload() {
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let mut rejected = 0;
    let mut runs = 0;
    for (name, seed) in seeds() {
        for round in 0..300 {
            let b = if round == 0 { seed.clone() } else { mutate(&mut rng, &seed) };
            let total = b.len() as u64;
            let n = need(&b[..b.len().min(64)], &Limits::DEFAULT);
            let prefix = n.payload_base.unwrap_or(total).min(total) as usize;
            let mut zeroed = b.clone();
            zeroed[prefix..].fill(0);
            let want = direct(&zeroed, Limits::DEFAULT);
            let mut s = session_for(&b, total, Limits::DEFAULT);
            let mut ok = s.feed(&b[..prefix]).is_ok() || prefix == 0;
            ok = ok && s.pass_unknown(total).is_ok();
            if !ok {
                let _ = s.skip(total - s.fed());
            }
            let got = s.finish().map(|t| t.to_vec());
            assert_eq!(got, want, "{name} round {round}");
            rejected += usize::from(got.is_err());
            runs += 1;
        }
    }
    assert!(rejected > runs / 4 && rejected < runs, "{rejected} of {runs}");
}

/// Plain tensors cost nothing to check: only the prefix and the byte-rule
/// ranges are copied in.
#[test]
fn only_the_needed_bytes_are_copied() {
    let big = vec![0u8; 1 << 20];
    let bools = [1u8, 0, 1];
    let bytes = write(&[
        TensorSpec::new(DType::F32, &[(1 << 18) - 3], &big[..(1 << 20) - 12]).named("w"),
        TensorSpec::new(DType::Bool, &[3], &bools).named("b"),
        TensorSpec::new(DType::F32, &[1 << 18], &big).named("v"),
    ]);
    let mut copied = 0;
    via_session(&bytes, Limits::DEFAULT, &mut copied).unwrap();
    let prefix = Directory::parse(&bytes).unwrap().payload_start() as u64;
    assert!(copied <= prefix + 128, "copied {copied} of {} bytes (prefix {prefix})", bytes.len());
}

/// A block declaring 20 GiB: the memory is the prefix's, the table holds
/// 64-bit offsets, passing over the payload costs nothing.
#[test]
fn a_20_gib_block_needs_only_its_prefix() {
    let small = [0u8; 64];
    let huge: u64 = 20 << 30;
    let head = write(&[
        TensorSpec::new(DType::F32, &[16], &small).named("small"),
        TensorSpec::new(DType::U8, &[1], &[0]).named("huge"),
    ]);
    // Patch "huge" to 20 GiB - 448 bytes and payload_bytes to match: the block is exactly 20 GiB.
    let dir = Directory::parse(&head).unwrap();
    let base = dir.payload_start() as u64;
    let huge_len = huge - base - 64;
    let mut b = head[..base as usize + 64].to_vec();
    b[16..24].copy_from_slice(&(64 + huge_len).to_le_bytes());
    let d1 = 64 + 128;
    b[d1 + 40..d1 + 48].copy_from_slice(&huge_len.to_le_bytes());
    b[d1 + 48..d1 + 56].copy_from_slice(&huge_len.to_le_bytes());
    let n = need(&b, &Limits::DEFAULT);
    assert_eq!((n.prefix, n.block_len, n.count), (Some(base), Some(huge), 2));
    let mut s = Session::new(base, 2, Limits::DEFAULT, 1);
    let mut copied = 0;
    assert!(pump(&mut s, &b, 0, base + 64, base, &mut copied));
    assert_eq!(copied, base, "the f32 payload is passed over");
    assert!(s.pass_unknown(huge).is_ok());
    let t = s.finish().unwrap().to_vec();
    let row = |i: usize| &t[META + i * SLOTS..META + (i + 1) * SLOTS];
    let u64_at = |r: &[u32], k: usize| u64::from(r[k]) | u64::from(r[k + 1]) << 32;
    assert_eq!(u64::from(t[meta::BLOCK_LEN]) | u64::from(t[meta::BLOCK_LEN + 1]) << 32, huge);
    assert_eq!(u64_at(row(1), slot::OFFSET), base + 64);
    assert_eq!(u64_at(row(1), slot::LENGTH), huge_len);
    // One byte short of the block: EOF at the end, as the core says.
    let mut s = Session::new(base, 2, Limits::DEFAULT, 1);
    s.feed(&b[..base as usize]).unwrap();
    s.pass_unknown(huge - 1).unwrap();
    let e = s.finish().unwrap_err();
    assert_eq!((e.code, e.rule, e.offset), ("EOF", "BlockTruncated", huge - 1));
    // A byte too many: TRAILING at the block length.
    let mut s = Session::new(base, 2, Limits::DEFAULT, 1);
    s.feed(&b[..base as usize]).unwrap();
    let _ = s.pass_unknown(huge + 1);
    let e = s.finish().unwrap_err();
    assert_eq!((e.code, e.rule, e.offset), ("TRAILING", "TrailingBytes", huge));
}

#[test]
fn a_header_that_fails_early_needs_64_bytes() {
    let mut b = rich_block();
    assert_eq!(need(&b[..63], &Limits::DEFAULT).prefix, None);
    b[0] = b'X';
    assert_eq!(need(&b, &Limits::DEFAULT).prefix, Some(64));
    let mut b = rich_block();
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes()); // step 6 overflows: the heap end is needed
    let n = need(&b, &Limits::DEFAULT);
    let dir_bytes = u64::from_le_bytes(b[24..32].try_into().unwrap());
    assert_eq!((n.prefix, n.block_len), (Some(64 + dir_bytes), None));
    let _ = same(&b, Limits::DEFAULT, "overflow");
}

#[test]
fn memory_that_cannot_be_had_is_limit() {
    let b = rich_block();
    let mut s = Session::new(u64::MAX, 7, Limits::DEFAULT, 1);
    let e = s.feed(&b).unwrap_err();
    assert_eq!((e.code, e.rule), ("LIMIT", "WasmMemory"));
    assert_eq!(s.finish().unwrap_err().rule, "WasmMemory");
}
