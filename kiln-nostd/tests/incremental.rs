//! The incremental validator against `Parser`: every golden, regression and
//! check-order case and 100,000 mutated blocks, each fed in chunks of 1, 7
//! and 4,096 bytes, in random splits and whole, must get Parser's verdict
//! exactly (accept, or the same code, offset and rule), with and without
//! name scratch. `KILN_INCR_CASES` and `KILN_INCR_SEED` choose the run.

mod cases;

use cases::{hex, json_cases, mutate, templates, Rng};
use kiln_nostd::{incremental::Progress, DType, Error, Incremental, Limits, Parser, TensorSpec, Writer};

#[derive(Clone, Copy, Debug)]
enum Chunking {
    Whole,
    Fixed(usize),
    Random(u64),
    /// Chunks of this many bytes, passing over whatever `next_needed` allows.
    Skipping(usize),
    /// The runs `needed_runs` plans (at most this many bytes a plan, 5 runs),
    /// skipped to and fed one by one; 64-byte chunks where there is no plan.
    Planned(u64),
    /// The same plans, gathered and taken by `feed_runs`.
    Gathered(u64),
    /// Every other plan forged before `feed_runs` takes it (its first run
    /// left out, or a lone run split in two): it must stop before any run
    /// that passes over a needed byte, and the verdict stay the Parser's.
    Forged(u64),
}

fn parser_verdict(buf: &[u8], limits: Limits, scratch: bool) -> Result<(), Error> {
    let count = kiln_nostd::wire::Header::peek_count(buf).unwrap_or(0).min(1 << 16);
    let mut s = vec![0u32; kiln_nostd::directory::scratch_len(count)];
    let p = Parser::new().limits(limits);
    let p = if scratch { p.scratch(&mut s) } else { p };
    p.parse(buf).map(|_| ())
}

fn incremental_verdict(buf: &[u8], limits: Limits, scratch: bool, chunking: Chunking) -> Result<(), Error> {
    // Prefix memory as a careful caller sizes it: from the header, bounded.
    let need = Incremental::prefix_len(buf.get(..64).unwrap_or(&[]), &limits).ok().flatten().unwrap_or(64);
    let mut prefix = vec![0u8; need.min(buf.len() + 64).max(64)];
    let count = kiln_nostd::wire::Header::peek_count(buf).unwrap_or(0).min(1 << 16);
    let mut s = vec![0u32; kiln_nostd::directory::scratch_len(count)];
    let v = Incremental::new(&mut prefix).limits(limits);
    let mut v = if scratch { v.scratch(&mut s) } else { v };
    let mut rest = buf;
    let mut rng = Rng(match chunking {
        Chunking::Random(seed) => seed | 1,
        _ => 1,
    });
    let mut saw_directory = false;
    let valid = matches!(chunking, Chunking::Planned(_)) && parser_verdict(buf, limits, false).is_ok();
    let mut forge = false;
    while !rest.is_empty() {
        if let Chunking::Forged(budget) = chunking {
            let mut runs = [[0u64; 2]; 5];
            let n = v.needed_runs(buf.len() as u64, budget, &mut runs).unwrap_or(0);
            if n > 0 {
                forge = !forge;
                let plan = if forge { forged(&runs[..n]) } else { runs[..n].to_vec() };
                let _ = v.feed_runs(&plan, &gather(buf, &plan));
                rest = &buf[v.consumed() as usize..];
                continue;
            }
        }
        if let Chunking::Planned(budget) | Chunking::Gathered(budget) = chunking {
            let pos = (buf.len() - rest.len()) as u64;
            let mut runs = [[0u64; 2]; 5];
            let n = v.needed_runs(buf.len() as u64, budget, &mut runs).unwrap_or(0);
            if n > 0 {
                if let Chunking::Planned(_) = chunking {
                    take_runs(&mut v, buf, pos, &runs[..n], valid);
                    rest = &buf[runs[n - 1][1] as usize..];
                } else {
                    // A fault stops the plan at the run that holds it; the rest is counted on.
                    if v.feed_runs(&runs[..n], &gather(buf, &runs[..n])).is_ok() {
                        assert_eq!(v.consumed(), runs[n - 1][1], "a fresh plan is taken whole");
                    }
                    rest = &buf[v.consumed() as usize..];
                }
                continue;
            }
        }
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
            Chunking::Planned(_) | Chunking::Gathered(_) | Chunking::Forged(_) => 64.min(rest.len()),
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

/// A plan that is not the one made: without its first run, or a lone
/// run of two bytes or more split in two (adjacent runs the plan joins).
fn forged(runs: &[[u64; 2]]) -> Vec<[u64; 2]> {
    match *runs {
        [[a, b]] if b - a >= 2 => vec![[a, a + 1], [a + 1, b]],
        _ => runs[1..].to_vec(),
    }
}

/// The bytes of `runs`, one after another.
fn gather(buf: &[u8], runs: &[[u64; 2]]) -> Vec<u8> {
    runs.iter().flat_map(|&[a, b]| buf[a as usize..b as usize].iter().copied()).collect()
}

/// Takes a plan from `pos` on: no run starts past the next needed byte
/// (in a valid block, each starts exactly there: a fault met on the way may
/// leave bytes of the plan unneeded), the bytes before it are skipped, it is fed.
fn take_runs<M: kiln_nostd::incremental::Memory>(
    v: &mut Incremental<M>,
    buf: &[u8],
    pos: u64,
    runs: &[[u64; 2]],
    valid: bool,
) {
    let mut at = pos;
    for &[a, b] in runs {
        assert!(at <= a && a < b && b <= buf.len() as u64, "run {a}..{b} from {at}");
        let needed = v.next_needed();
        assert!(needed >= a, "a planned run starts at {a}, after the next needed byte {needed}");
        if valid {
            assert_eq!(needed, a, "a planned run of a valid block starts at the next needed byte");
        }
        if a > at {
            let skipped = v.skip(a - at).unwrap_or(a - at);
            assert_eq!(skipped, a - at, "skip passes over what lies before a planned run");
        }
        let _ = v.feed(&buf[a as usize..b as usize]);
        at = b;
    }
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

const ALL: [Chunking; 13] = [
    Chunking::Fixed(1),
    Chunking::Fixed(7),
    Chunking::Fixed(4096),
    Chunking::Random(0x5eed),
    Chunking::Whole,
    Chunking::Skipping(1),
    Chunking::Skipping(4096),
    Chunking::Planned(100),
    Chunking::Planned(1 << 20),
    Chunking::Gathered(100),
    Chunking::Gathered(1 << 20),
    Chunking::Forged(100),
    Chunking::Forged(1 << 20),
];

#[test]
fn goldens_regressions_and_the_check_order_matrix() {
    let mut files = cases::case_files();
    // Interpreted under Miri: the goldens only, in random splits and whole.
    let chunkings: &[Chunking] = if cfg!(miri) { &[Chunking::Random(7), Chunking::Whole] } else { &ALL };
    if cfg!(miri) {
        files.truncate(1);
    }
    let mut n = 0;
    for f in &files {
        for (name, bytes) in json_cases(f) {
            n += compare(&bytes, Limits::DEFAULT, chunkings, &name);
        }
    }
    assert!(n >= 35 * 2 * chunkings.len(), "{n} comparisons"); // 39 directory goldens alone
}

/// The directory fuzz target's seeds (raw blocks, many of them faulty).
#[test]
fn fuzz_seeds() {
    let dir = cases::repo_root().join("fuzz/seeds/directory");
    let chunkings: &[Chunking] = if cfg!(miri) { &[Chunking::Whole] } else { &ALL };
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("fuzz seeds").take(if cfg!(miri) { 5 } else { usize::MAX }) {
        let path = e.expect("entry").path();
        let bytes = std::fs::read(&path).expect("seed");
        n += compare(&bytes, Limits::DEFAULT, chunkings, &path.display().to_string());
    }
    assert!(n >= 5 * 2 * chunkings.len(), "{n} comparisons");
}

#[test]
fn mutated_blocks_get_the_parsers_verdict() {
    let cases: usize = std::env::var("KILN_INCR_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed: u64 = std::env::var("KILN_INCR_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x1ce_b10c);
    let cases = if cfg!(miri) { 8 } else { cases };
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
        // Interpreted under Miri: no one-byte chunks.
        let chunkings: &[Chunking] = if k % 16 == 0 && !cfg!(miri) {
            &ALL
        } else {
            &[Chunking::Fixed(7), Chunking::Random(k as u64), Chunking::Whole, Chunking::Skipping(3)]
        };
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
    // A bad bool byte: once the last gap passed (a gap fault would come
    // first), at payload byte 128, before the last tensor's 24 bytes.
    let mut m = b.clone();
    m[base] = 2;
    let mut v = Incremental::new(&mut prefix);
    assert!(v.feed(&m[..base + 127]).is_ok());
    assert_eq!(v.feed(&m[base + 127..base + 128]).unwrap_err().rule(), kiln_nostd::Rule::BoolByte);
    // A bad quantization field, with no gap or element byte before the
    // tensor to come: once the prefix is in, not at the block's end.
    let w = [0u8; 64];
    let q = cases::write(&[TensorSpec::new(DType::F32, &[16], &w), TensorSpec::new(DType::F32, &[16], &w)]);
    let q_base = Parser::new().parse(&q).unwrap().payload_start();
    let mut m = q.clone();
    m[64 + 16] = 7; // descriptor 0's quant_scheme
    let mut v = Incremental::new(&mut prefix);
    assert!(v.feed(&m[..q_base - 1]).is_ok());
    let e = v.feed(&m[q_base - 1..q_base]).unwrap_err();
    assert_eq!((e.rule(), e), (kiln_nostd::Rule::UnknownQuantScheme, Parser::new().parse(&m).unwrap_err()));
    // Truncated after a certain fault: EOF, as Parser says for those bytes.
    let mut v = Incremental::new(&mut prefix);
    let _ = v.feed(&m[..m.len() - 1]);
    assert_eq!(v.finish().unwrap_err(), Parser::new().parse(&m[..m.len() - 1]).unwrap_err());
}

/// Parser's verdict `want` on all of `b` is certain after its first `k` bytes
/// (`cases::certain`).
fn certain(b: &[u8], template: Option<&[u8]>, k: usize, want: Error) -> bool {
    let overflow = want.rule() == kiln_nostd::Rule::PayloadSizeOverflow;
    cases::certain(b, template, k, overflow, |c| parser_verdict(c, Limits::DEFAULT, true) != Err(want))
}

/// Where the first error comes, feeding `b` in `chunking`: the end of the
/// call that returned it (bytes fed and passed over), and the error.
fn first_error(b: &[u8], chunking: Chunking, scratch: bool) -> Option<(usize, Error)> {
    let mut prefix = vec![0u8; b.len().max(64)];
    let count = kiln_nostd::wire::Header::peek_count(b).unwrap_or(0).min(1 << 16);
    let mut s = vec![0u32; kiln_nostd::directory::scratch_len(count)];
    let v = Incremental::new(&mut prefix);
    let mut v = if scratch { v.scratch(&mut s) } else { v };
    let mut rng = Rng(match chunking {
        Chunking::Random(seed) => seed | 1,
        _ => 1,
    });
    let mut pos = 0;
    while pos < b.len() {
        if let Chunking::Gathered(budget) = chunking {
            let mut runs = [[0u64; 2]; 5];
            let n = v.needed_runs(b.len() as u64, budget, &mut runs).unwrap_or(0);
            if n > 0 {
                let taken = v.feed_runs(&runs[..n], &gather(b, &runs[..n]));
                pos = v.consumed() as usize;
                match taken {
                    Err(e) => return Some((pos, e)),
                    Ok(k) => assert_eq!(k, n, "a fresh plan is taken whole"),
                }
                continue;
            }
        }
        if let Chunking::Planned(budget) = chunking {
            let mut runs = [[0u64; 2]; 5];
            let n = v.needed_runs(b.len() as u64, budget, &mut runs).unwrap_or(0);
            if n > 0 {
                for &[a, e] in &runs[..n] {
                    let (a, e) = (a as usize, e as usize);
                    if a > pos {
                        if let Err(err) = v.skip((a - pos) as u64) {
                            return Some((a, err));
                        }
                    }
                    pos = e;
                    if let Err(err) = v.feed(&b[a..e]) {
                        return Some((pos, err));
                    }
                }
                continue;
            }
        }
        if let Chunking::Skipping(_) = chunking {
            let gap = (v.next_needed().saturating_sub(pos as u64)).min((b.len() - pos) as u64) as usize;
            if gap > 0 {
                pos += gap;
                if let Err(e) = v.skip(gap as u64) {
                    return Some((pos, e));
                }
                continue;
            }
        }
        let n = match chunking {
            Chunking::Whole => b.len() - pos,
            Chunking::Fixed(n) | Chunking::Skipping(n) => n.min(b.len() - pos),
            Chunking::Random(_) => 1 + rng.below((b.len() - pos).min(300)),
            Chunking::Planned(_) | Chunking::Gathered(_) | Chunking::Forged(_) => 64.min(b.len() - pos),
        };
        pos += n;
        if let Err(e) = v.feed(&b[pos - n..pos]) {
            return Some((pos, e));
        }
    }
    None
}

/// A fault is reported with the byte after which it is certain, exactly:
/// fed one byte at a time, the first error comes with byte `k` where the
/// verdict is certain after `k` bytes and not after `k - 1` (the oracle
/// above, which knows nothing of the validator). In every other chunking it
/// comes with the chunk that holds byte `k`. Goldens, check-order and
/// regression cases, and mutated blocks; `KILN_EARLY_CASES` sets how many.
#[test]
fn faults_come_with_the_byte_that_makes_them_certain() {
    let cases: usize = std::env::var("KILN_EARLY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    let mut inputs: Vec<(String, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    if !cfg!(miri) {
        for f in cases::case_files() {
            inputs.extend(json_cases(&f).into_iter().map(|(name, b)| (name, b, None)));
        }
    }
    let mut rng = Rng(0x0ea5_1e57);
    let templates = templates();
    for k in 0..if cfg!(miri) { 6 } else { cases } {
        let t = &templates[k % templates.len()];
        let mut b = t.clone();
        for _ in 0..1 + rng.below(2) {
            mutate(&mut rng, &mut b);
        }
        inputs.push((format!("mutated {k}"), b, Some(t.clone())));
    }
    let (mut checked, mut in_prefix) = (0, 0);
    for (name, b, template) in &inputs {
        let Err(want) = parser_verdict(b, Limits::DEFAULT, true) else { continue };
        if want.code() == kiln_nostd::ErrorCode::Eof {
            continue; // a truncated block: nothing is certain before `finish`
        }
        let template = template.as_deref().filter(|t| t.len() == b.len());
        let (k, got) = first_error(b, Chunking::Fixed(1), true)
            .unwrap_or_else(|| panic!("{name}: a fault of the complete block is reported by feed: {want}"));
        assert_eq!(got, want, "{name}: {}", hex(b));
        // Interpreted under Miri: the validator's paths only, not the oracle's thousands of parses.
        let oracle = |k| certain(b, template, k, want);
        assert!(cfg!(miri) || oracle(k), "{name}: reported after byte {k}, before it is certain: {want}, {}", hex(b));
        assert!(
            cfg!(miri) || !oracle(k - 1),
            "{name}: certain after byte {}, reported after {k}: {want}, {}",
            k - 1,
            hex(b)
        );
        let chunkings = [
            Chunking::Fixed(7),
            Chunking::Fixed(4096),
            Chunking::Random(k as u64),
            Chunking::Skipping(5),
            Chunking::Planned(100),
        ];
        for c in chunkings {
            for scratch in [true, false] {
                let (end, e) = first_error(b, c, scratch).expect("reported");
                assert_eq!(e, want, "{name}: {c:?}");
                assert!(end >= k, "{name}: {c:?} reported at {end}, before byte {k}");
                if let Chunking::Fixed(n) = c {
                    assert!(end < k + n, "{name}: {c:?} reported at {end}, after the chunk with byte {k}");
                }
            }
        }
        checked += 1;
        in_prefix += usize::from(
            kiln_nostd::wire::Header::parse(b).is_ok_and(|h| (k as u64) < h.directory_bytes.saturating_add(64)),
        );
    }
    println!("{checked} faulty blocks, {in_prefix} of them certain inside the directory");
    assert!(cfg!(miri) || checked > cases / 3, "{checked} checked");
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
    // 1 MiB tensors (1 KiB when interpreted under Miri).
    let elements: u64 = if cfg!(miri) { 1 << 8 } else { 1 << 18 };
    let big = vec![0u8; elements as usize * 4];
    let (bools, shape) = ([1u8, 0, 1], [elements]);
    let specs = [
        TensorSpec::new(DType::F32, &shape, &big).named("w"),
        TensorSpec::new(DType::Bool, &[3], &bools).named("b"),
        TensorSpec::new(DType::F32, &shape, &big).named("v"),
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
    // chunks of 64, not the f32 payload.
    assert!(fed < 1024, "fed {fed} of {} bytes", block.len());
    // A bad bool byte is still found by the skipping caller.
    let at = Parser::new().parse(&block).unwrap().find("b").unwrap().absolute_offset();
    block[at] = 2;
    let mut v = Incremental::new(&mut prefix);
    let mut pos = 0usize;
    let verdict = loop {
        let need = v.next_needed().min(block.len() as u64) as usize;
        let r = if need > pos {
            v.skip((need - pos) as u64).map(|n| pos += n as usize)
        } else {
            let end = (pos + 64).min(block.len());
            let r = v.feed(&block[pos..end]).map(|_| ());
            pos = end;
            r
        };
        if let Err(e) = r {
            break e;
        }
    };
    assert_eq!(verdict, Parser::new().parse(&block).unwrap_err());
    // Certain once the gap after "b" passed: where "v" starts, not at the end.
    let v_at = Parser::new().parse(&block).unwrap_err().offset(); // the bool byte
    assert_eq!(pos, v_at + 64, "reported with the chunk that ends the last gap");
}

/// The tensor table a prefix directory hands out: every descriptor field, and
/// an empty payload (the prefix does not hold it).
#[test]
fn the_prefix_directory_has_the_tensor_table_without_payload() {
    let data = [0u8, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
    let specs =
        [TensorSpec::new(DType::F32, &[2], &data).named("w"), TensorSpec::new(DType::U8, &[3], &[1, 2, 3]).named("b")];
    let mut buf = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut buf).unwrap();
    let whole = Parser::new().parse(&buf).unwrap();
    let payload_at = whole.payload_start();

    let mut prefix = vec![0u8; buf.len()];
    let mut v = Incremental::new(&mut prefix);
    assert_eq!(v.feed(&buf[..payload_at]), Ok(Progress::Directory));
    let dir = v.directory().unwrap();
    assert_eq!((dir.len(), dir.iter().count()), (2, 2), "every tensor is handed out");
    assert!(dir.block().is_empty(), "the prefix does not hold the whole block");
    for (t, w) in dir.iter().zip(whole.iter()) {
        assert_eq!((t.name(), t.dtype(), t.shape(), t.byte_len()), (w.name(), w.dtype(), w.shape(), w.byte_len()));
        assert_eq!(t.byte_offset(), w.byte_offset());
        assert!(t.bytes().is_empty() && !w.bytes().is_empty());
    }
}

/// A block larger than a 32-bit address space, fed by a caller that skips
/// what no rule reads: its faults come out at their exact `u64` offsets
/// (the i686 and wasm32 builds would saturate a `usize` offset at 4 GiB - 1).
#[test]
fn faults_past_4_gib_have_exact_offsets() {
    use kiln_nostd::wire::descriptor::Descriptor;
    use kiln_nostd::wire::layout;
    const GIB: u64 = 1 << 30;
    // u8[5 GiB + 3], a 61-byte gap, then bool[3]: no names.
    let huge = 5 * GIB + 3;
    let mut place = layout::Placement::new();
    let tensor = |dtype: DType, len: u64, place: &mut layout::Placement| {
        let mut shape = [0u64; 8];
        shape[0] = len;
        let byte_offset = place.place(len).unwrap();
        use kiln_nostd::wire::descriptor::{NO_AXIS, NO_INDEX, NO_NAME};
        Descriptor {
            dtype: dtype.code(),
            rank: 1,
            name_off: NO_NAME,
            layout_off: NO_NAME,
            quant_axis: NO_AXIS,
            scale_index: NO_INDEX,
            outer_index: NO_INDEX,
            byte_offset,
            byte_length: len,
            shape,
            ..Descriptor::default()
        }
    };
    let descs = [tensor(DType::U8, huge, &mut place), tensor(DType::Bool, 3, &mut place)];
    let header = kiln_nostd::wire::Header::canonical(2, 0, place.payload_bytes(), false);
    let base = layout::payload_base(2, 0).unwrap();
    let block_len = header.block_len().unwrap();
    let mut prefix = vec![0u8; base as usize];
    prefix[..64].copy_from_slice(&header.encode());
    for (i, d) in descs.iter().enumerate() {
        prefix[64 + 128 * i..][..128].copy_from_slice(&d.encode());
    }
    let gap_at = base + huge; // the first gap byte
    let bools_at = base + descs[1].byte_offset;
    assert!(gap_at > u64::from(u32::MAX));

    // Feeds the prefix, then skips to each needed byte and feeds it from `byte_at`.
    let run = |byte_at: &dyn Fn(u64) -> u8, end: u64| -> Result<(), Error> {
        let mut mem = vec![0u8; base as usize];
        let mut v = Incremental::new(&mut mem);
        v.feed(&prefix)?;
        let mut pos = base;
        while pos < end {
            let need = v.next_needed().min(end);
            if need > pos {
                pos += v.skip(need - pos)?;
            } else {
                v.feed(&[byte_at(pos)])?;
                pos += 1;
            }
        }
        v.finish().map(|_| ())
    };
    let clean = |at: u64| u8::from(at >= bools_at);
    assert_eq!(run(&clean, block_len), Ok(()));
    let e = run(&|at| if at == gap_at + 10 { 7 } else { clean(at) }, block_len).unwrap_err();
    assert_eq!((e.rule(), e.offset_u64()), (kiln_nostd::Rule::NonzeroGap, gap_at + 10));
    let e = run(&|at| if at == bools_at + 2 { 2 } else { clean(at) }, block_len).unwrap_err();
    assert_eq!((e.rule(), e.offset_u64()), (kiln_nostd::Rule::BoolByte, bools_at + 2));
    let e = run(&clean, block_len - 1).unwrap_err();
    assert_eq!((e.rule(), e.offset_u64()), (kiln_nostd::Rule::BlockTruncated, block_len - 1));
    let e = run(&clean, block_len + 5).unwrap_err();
    assert_eq!((e.rule(), e.offset_u64()), (kiln_nostd::Rule::TrailingBytes, block_len));
    assert_eq!(e.offset(), usize::try_from(block_len).unwrap_or(usize::MAX), "offset() saturates only where it must");
}

/// Memory the validator owns (`incremental::Owned`, what a binding keeps
/// across calls) gives the borrowed memory's verdicts, and comes back to be
/// reused: one memory goes from case to case, so each block starts with the
/// last one's bytes in it, which must not matter.
#[cfg(feature = "alloc")]
#[test]
fn owned_memory_gets_the_same_verdicts_and_is_reused() {
    use kiln_nostd::incremental::{Memory, Owned};
    let files = cases::case_files();
    let take = if cfg!(miri) { 1 } else { files.len() };
    let mut mem = Owned { prefix: vec![0u8; 1 << 16].into_boxed_slice(), scratch: None, ..Owned::default() };
    let mut n = 0;
    for f in files.iter().take(take) {
        for (name, bytes) in json_cases(f) {
            let count = kiln_nostd::wire::Header::peek_count(&bytes).unwrap_or(0).min(1 << 12);
            for scratch in [false, true] {
                mem.scratch =
                    scratch.then(|| vec![u32::MAX; kiln_nostd::directory::scratch_len(count)].into_boxed_slice());
                let want = parser_verdict(&bytes, Limits::DEFAULT, scratch);
                let mut v = Incremental::with_memory(mem);
                for chunk in bytes.chunks(7) {
                    let _ = v.feed(chunk); // the verdict is finish's (a truncated block is EOF)
                }
                let (verdict, back) = v.finish_with_memory();
                assert_eq!(verdict.map(|_| ()), want, "{name}, scratch {scratch}");
                assert_eq!(back.prefix().len(), 1 << 16, "the same memory comes back");
                mem = back;
                n += 1;
            }
        }
    }
    assert!(n >= 2, "{n} cases");
}

/// `feed_runs` passes a plan of zero bytes in one walk: only when the runs
/// are the plan's own. A plan with any run left out, shortened or moved is
/// taken run by run up to the first that would pass over a needed byte,
/// so a nonzero byte in the run left out is still found, at its offset.
#[test]
fn a_plan_of_zero_bytes_is_passed_only_when_it_is_the_plans_own() {
    let data = [0u8; 12];
    let specs: Vec<_> = (0..6).map(|_| TensorSpec::new(DType::F32, &[3], &data)).collect();
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut block).unwrap();
    let base = Parser::new().parse(&block).unwrap().payload_start() as u64;
    let plan_of = |block: &[u8], prefix: &mut [u8]| {
        let mut v = Incremental::new(prefix);
        v.feed(&block[..base as usize]).unwrap();
        let mut runs = [[0u64; 2]; 8];
        let n = v.needed_runs(block.len() as u64, u64::MAX, &mut runs).unwrap();
        runs[..n].to_vec()
    };
    let mut prefix = vec![0u8; base as usize];
    let plan = plan_of(&block, &mut prefix);
    assert_eq!(plan.len(), 5, "the five gaps between six tensors: {plan:?}");
    // Each forgery, and how many runs the slow path takes of it in a valid block.
    let forgeries = |plan: &[[u64; 2]]| {
        let mut out = Vec::new();
        for j in 0..plan.len() {
            let mut p = plan.to_vec();
            p.remove(j);
            out.push((p, j));
            let mut p = plan.to_vec();
            p[j][1] -= 1; // its last byte left out: the next run comes too late
            out.push((p, (j + 1).min(plan.len())));
            let mut p = plan.to_vec();
            p[j][0] += 1; // its first byte left out
            out.push((p, j));
        }
        out
    };
    for run in 0..plan.len() {
        // Under Miri (slow to interpret), each run's first and last bytes only.
        let (first, last) = (plan[run][0], plan[run][1] - 1);
        let bytes: Vec<u64> = if cfg!(miri) { vec![first, last] } else { (first..=last).collect() };
        for at in bytes {
            let mut bad = block.clone();
            bad[at as usize] = 1;
            let want = Parser::new().parse(&bad).unwrap_err();
            assert_eq!(want.offset(), at as usize);
            for (forged, _) in forgeries(&plan) {
                let mut v = Incremental::new(&mut prefix);
                v.feed(&bad[..base as usize]).unwrap();
                let got = match v.feed_runs(&forged, &gather(&bad, &forged)) {
                    Err(e) => e,
                    Ok(_) => {
                        let from = v.consumed() as usize;
                        let _ = v.feed(&bad[from..]);
                        v.finish().expect_err(&format!("byte {at} set, plan {forged:?}, from {from}"))
                    }
                };
                assert_eq!(got, want, "byte {at} set, plan {forged:?}");
            }
        }
    }
    // The valid block: a forged plan is taken up to the run that passes over a needed byte.
    for (forged, takes) in forgeries(&plan) {
        let mut v = Incremental::new(&mut prefix);
        v.feed(&block[..base as usize]).unwrap();
        assert_eq!(v.feed_runs(&forged, &gather(&block, &forged)), Ok(takes), "{forged:?}");
        let from = v.consumed() as usize;
        v.feed(&block[from..]).unwrap();
        v.finish().unwrap();
    }
    let mut v = Incremental::new(&mut prefix);
    v.feed(&block[..base as usize]).unwrap();
    assert_eq!(v.feed_runs(&plan, &gather(&block, &plan)), Ok(plan.len()));
    assert_eq!(v.consumed(), plan[plan.len() - 1][1]);
}
