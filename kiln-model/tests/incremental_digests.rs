//! Step 9d on a stream: `Incremental::digests` and `source::Options::digests`
//! against the whole-buffer verdict, `digest::check_block_digests` (plus
//! step 12 for a standalone block).
//!
//! - Generated blocks (gaps, bool and odd packed tensors, empty and rank-0
//!   tensors, an empty tensor first) with a flipped payload byte in each
//!   tensor, a changed digest, gap, bool, nibble and quantization faults
//!   before and after a mismatching tensor, a misplaced tensor before and
//!   after one, `payload_bytes` too large, trailing bytes and truncation:
//!   every chunk size from 1 to the block's length + 1, passing over what
//!   `next_needed` allows, whole, embedded.
//! - Mutated blocks (with the table of the block before the change, so
//!   step 3d faults too) in a few chunkings; random chunkings by proptest.
//! - Timing: fed a byte at a time, a DIGEST fault comes with the
//!   mismatching tensor's last byte (an empty tensor: the end of the run
//!   before it), exactly; any other fault with the byte after which it is
//!   certain (a brute-force oracle over continuations, which knows nothing
//!   of the validator), which for a fault of steps 10 to 12 is where it is
//!   certain without digests or where the run ends, whichever is later.
//! - `source::verify` with the table: the same verdicts, and it reads every
//!   byte of the run.
//!
//! `KILN_DIGEST_CASES` sets the number of mutated blocks (default 400).
#![cfg(feature = "sha2")]

#[path = "../../kiln-nostd/tests/cases/mod.rs"]
mod cases;

use cases::{hex, mutate, templates, write, Rng};
use kiln_model::check_block_digests;
use kiln_model::source::{self, OutOfBounds, ReadAt};
use kiln_nostd::digest::{sha256, Digests, TensorHasher};
use kiln_nostd::incremental::Borrowed;
use kiln_nostd::{
    wire::Header,
    writer::{QuantSpec, TensorRef},
    DType, Error, ErrorCode, Incremental, Limits, Parser, Rule, TensorSpec,
};

// ---------------------------------------------------------------------------
// The oracle and the streams

/// One digest per tensor of a valid block.
fn table_of(block: &[u8]) -> Vec<u8> {
    let dir = Parser::new().parse(block).expect("a valid block");
    dir.iter().flat_map(|t| sha256(t.bytes())).collect()
}

fn scratch_for(b: &[u8]) -> Vec<u32> {
    vec![0u32; kiln_nostd::directory::scratch_len(Header::peek_count(b).unwrap_or(0).min(1 << 16))]
}

/// The whole-buffer verdict: `check_block_digests`, then step 12 for a standalone block.
fn oracle(b: &[u8], table: &[u8], standalone: bool) -> Result<(), Error> {
    let d = Digests::from_bytes(table, 0).expect("a multiple of 32");
    let mut s = scratch_for(b);
    match check_block_digests(b, 0, Parser::new().scratch(&mut s), &d) {
        Ok(dir) if standalone && dir.end() < b.len() => Err(Error::new(Rule::TrailingBytes, dir.end())),
        r => r.map(|_| ()),
    }
}

/// The rules of steps 10 to 12, which a digest mismatch comes before.
fn after_step9(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::NonCanonicalOffset
            | Rule::NonCanonicalPayloadBytes
            | Rule::NonzeroGap
            | Rule::BoolByte
            | Rule::PackedHighNibble
            | Rule::UnknownQuantScheme
            | Rule::QuantFieldsOnPlain
            | Rule::QuantAxis
            | Rule::ScaleIndex
            | Rule::QuantChain
            | Rule::ScaleCount
            | Rule::OuterIndex
            | Rule::OuterTensor
            | Rule::TrailingBytes
    )
}

#[derive(Clone, Copy, Debug)]
enum Chunking {
    Fixed(usize),
    Random(u64),
    /// Chunks of this many bytes, passing over whatever `next_needed` allows.
    Skipping(usize),
    Whole,
}

/// What a stream saw: where the first error came (the end of the call that
/// returned it: bytes fed and passed over) and the verdict of `finish`.
struct Outcome {
    first: Option<(usize, Error)>,
    verdict: Result<(), Error>,
    /// Bytes handed to `feed` (not passed over).
    fed: usize,
}

fn stream(b: &[u8], table: Option<&[u8]>, embedded: bool, chunking: Chunking) -> Outcome {
    let mut rng = Rng(match chunking {
        Chunking::Random(seed) => seed | 1,
        _ => 1,
    });
    let skipping = matches!(chunking, Chunking::Skipping(_));
    stream_with(b, table, embedded, skipping, |rest| match chunking {
        Chunking::Fixed(n) | Chunking::Skipping(n) => n,
        Chunking::Random(_) => 1 + rng.below(rest.min(300)),
        Chunking::Whole => rest,
    })
}

fn stream_with(
    b: &[u8],
    table: Option<&[u8]>,
    embedded: bool,
    skipping: bool,
    mut size: impl FnMut(usize) -> usize,
) -> Outcome {
    // Prefix memory as a careful caller sizes it: from the header (when it
    // passes steps 1 to 6; else the input's length), bounded.
    let need = Incremental::prefix_len(b.get(..64).unwrap_or(&[]), &Limits::DEFAULT).ok().flatten();
    let mut prefix = vec![0u8; need.unwrap_or(b.len()).min(b.len() + 64).max(64)];
    let mut s = scratch_for(b);
    // The caller's SHA-256 state: what it held before does not matter.
    let mut hasher = TensorHasher::new();
    hasher.update(b"left over from an earlier stream");
    let mut v = Incremental::new(&mut prefix).scratch(&mut s);
    if let Some(t) = table {
        v = v.digests(t, &mut hasher);
    }
    if embedded {
        v = v.embedded();
    }
    let (mut pos, mut fed, mut first) = (0usize, 0usize, None);
    while pos < b.len() {
        if skipping {
            let gap = v.next_needed().saturating_sub(pos as u64).min((b.len() - pos) as u64) as usize;
            if gap > 0 {
                match v.skip(gap as u64) {
                    Ok(n) if embedded && (n as usize) < gap => break, // the block ended
                    Ok(n) => assert_eq!(n as usize, gap, "skip takes what next_needed allows"),
                    Err(e) => {
                        first.get_or_insert((pos + gap, e));
                    }
                }
                pos += gap;
                continue;
            }
        }
        let n = size(b.len() - pos).clamp(1, b.len() - pos);
        let r = v.feed(&b[pos..pos + n]);
        pos += n;
        fed += n;
        if let Err(e) = r {
            first.get_or_insert((pos, e));
        }
        if embedded && v.consumed() < pos as u64 {
            break; // the block ended
        }
    }
    let verdict = v.finish().map(|_| ());
    if let Some((_, e)) = first {
        // A fault feed reported is the verdict, unless the stream ends before
        // the block does, or the prefix did not fit the memory given.
        let eof = verdict.is_err_and(|v| v.code() == ErrorCode::Eof);
        assert!(verdict == Err(e) || eof || e.rule() == Rule::PrefixBufferTooSmall, "{e:?} then {verdict:?}");
    }
    Outcome { first, verdict, fed }
}

// ---------------------------------------------------------------------------
// Blocks

/// The payload base and the canonical run of `b` (which passed steps 1 to 9):
/// (index, payload-relative start, length).
fn run_of(b: &[u8]) -> (usize, Vec<(usize, u64, u64)>) {
    let h = Header::parse(b).expect("a header");
    let base = Incremental::prefix_len(&b[..64], &Limits::DEFAULT).unwrap().unwrap();
    let mut run = Vec::new();
    let mut running = 0u64;
    for i in 0..h.tensor_count as usize {
        let d = &b[64 + 128 * i..];
        let off = u64::from_le_bytes(d[32..40].try_into().unwrap());
        let len = u64::from_le_bytes(d[40..48].try_into().unwrap());
        if off != running.next_multiple_of(64) {
            break;
        }
        running = off + len;
        run.push((i, off, len));
    }
    (base, run)
}

/// After how many bytes the run is hashed: the end of its last nonempty tensor.
fn run_done_at(b: &[u8]) -> usize {
    let (base, run) = run_of(b);
    base + run.iter().filter(|r| r.2 > 0).map(|r| (r.1 + r.2) as usize).max().unwrap_or(0)
}

/// Where the spec makes the first mismatch certain, and its error: the
/// tensor's last byte; an empty tensor's, the end of the run before it.
fn first_mismatch(b: &[u8], table: &[u8]) -> Option<(usize, Error)> {
    let (base, run) = run_of(b);
    let mut done = base;
    for (i, off, len) in run {
        let (s, e) = (base + off as usize, base + (off + len) as usize);
        if len > 0 {
            done = e;
        }
        if sha256(&b[s..e]) != table[32 * i..32 * i + 32] {
            return Some((done, Error::new(Rule::PayloadDigest, s)));
        }
    }
    None
}

fn le64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Descriptor `i`'s field at `at` (byte_offset 32, byte_length 40).
fn field(i: usize, at: usize) -> usize {
    64 + 128 * i + at
}

struct Set {
    name: &'static str,
    block: Vec<u8>,
}

/// Valid blocks for step 9d: gaps, bool and odd packed tensors, empty
/// tensors (first, in the middle, last), a rank-0 tensor, two tensors of
/// the same length (to swap), quantization.
fn sets() -> Vec<Set> {
    let f24: Vec<u8> = (1..=24u8).collect();
    let g24: Vec<u8> = (101..=124u8).collect();
    let h24: Vec<u8> = (201..=224u8).collect();
    let bools = [1u8, 0, 1, 1, 0];
    let nib = [0x21u8, 0x03];
    let one = 1.5f32.to_le_bytes();
    let mixed = vec![
        TensorSpec::new(DType::F32, &[2, 3], &f24), // 0: @0
        TensorSpec::new(DType::Bool, &[5], &bools), // 1: @64
        TensorSpec::new(DType::U4, &[3], &nib),     // 2: @128, odd packed
        TensorSpec::new(DType::U8, &[0], &[]),      // 3: empty @192
        TensorSpec::new(DType::F32, &[], &one),     // 4: rank 0 @192
        TensorSpec::new(DType::F32, &[6], &g24),    // 5: @256
        TensorSpec::new(DType::U8, &[0], &[]),      // 6: empty @320
        TensorSpec::new(DType::F32, &[6], &h24),    // 7: @320
        TensorSpec::new(DType::U8, &[0], &[]),      // 8: empty, last, @384
    ];
    let empty_first = vec![
        TensorSpec::new(DType::U8, &[0], &[]).named("e"),
        TensorSpec::new(DType::F32, &[6], &f24).named("w"),
        TensorSpec::new(DType::Bool, &[5], &bools).named("b"),
        TensorSpec::new(DType::F32, &[6], &g24).named("v"),
    ];
    let u64s: Vec<u8> = (0..64u8).collect();
    let tight = vec![
        TensorSpec::new(DType::U8, &[64], &u64s),
        TensorSpec::new(DType::U8, &[64], &u64s),
        TensorSpec::new(DType::U8, &[0], &[]),
        TensorSpec::new(DType::I4, &[5], &[0x12, 0x34, 0x05]),
    ];
    let quant = vec![
        TensorSpec::new(DType::E2M1, &[3], &nib).named("q").quantized(QuantSpec::Scales {
            axis: 0,
            group_size: 2,
            scale: TensorRef::Name("s"),
        }),
        TensorSpec::new(DType::E8M0, &[2], &[127, 127]).named("s"),
        TensorSpec::new(DType::F32, &[6], &f24).named("w"),
    ];
    let only_empty = vec![TensorSpec::new(DType::U8, &[0], &[]), TensorSpec::new(DType::F32, &[0, 3], &[])];
    vec![
        Set { name: "mixed", block: write(&mixed) },
        Set { name: "empty first", block: write(&empty_first) },
        Set { name: "tight", block: write(&tight) },
        Set { name: "quant", block: write(&quant) },
        Set { name: "only empty", block: write(&only_empty) },
        Set { name: "no tensors", block: write(&[]) },
    ]
}

/// A faulty (or valid) block with its table, and the rule the whole-buffer
/// verdict must have (a check that the case is the one it says it is).
struct Case {
    name: String,
    block: Vec<u8>,
    table: Vec<u8>,
    want: Option<Rule>,
}

/// The generated cases: each set valid, and each fault and combination the
/// module documentation lists.
fn generated() -> Vec<Case> {
    let mut out = Vec::new();
    for set in sets() {
        let b = &set.block;
        let table = table_of(b);
        let dir = Parser::new().parse(b).unwrap();
        let base = dir.payload_start();
        let spans: Vec<(usize, usize)> =
            dir.iter().map(|t| (t.absolute_offset(), t.absolute_offset() + t.byte_len())).collect();
        let mut push = |name: String, block: Vec<u8>, table: Vec<u8>, want: Option<Rule>| {
            out.push(Case { name: format!("{}: {name}", set.name), block, table, want });
        };
        push("valid".into(), b.clone(), table.clone(), None);
        // Gaps: (start, end) of the zero bytes between payloads.
        let mut gaps = Vec::new();
        let mut prev = base;
        for &(s, e) in &spans {
            if s > prev {
                gaps.push((prev, s));
            }
            prev = prev.max(e);
        }
        let gap_byte = |k: usize| gaps.get(k).map(|&(s, e)| s + (e - s) / 2);
        for (j, &(s, e)) in spans.iter().enumerate() {
            if e > s {
                for at in [s, (s + e) / 2, e - 1] {
                    let mut m = b.clone();
                    m[at] ^= 0x5a;
                    push(format!("byte {at} of tensor {j} flipped"), m, table.clone(), Some(Rule::PayloadDigest));
                }
            }
            let mut t = table.clone();
            t[32 * j + 7] ^= 1;
            push(format!("digest {j} changed"), b.clone(), t, Some(Rule::PayloadDigest));
        }
        // Gap faults before and after a mismatching tensor.
        for (k, &(gs, _)) in gaps.iter().enumerate() {
            let g = gap_byte(k).unwrap();
            let mut m = b.clone();
            m[g] = 7;
            push(format!("gap byte {g}"), m.clone(), table.clone(), Some(Rule::NonzeroGap));
            for (j, &(_, e)) in spans.iter().enumerate().filter(|(_, (s, e))| e > s) {
                let mut mm = m.clone();
                mm[e - 1] ^= 0x81;
                let when = if e <= gs { "before" } else { "after" };
                push(
                    format!("gap byte {g}, tensor {j} flipped ({when})"),
                    mm,
                    table.clone(),
                    Some(Rule::PayloadDigest),
                );
            }
        }
        // Element faults (bool, nibble), alone and with a mismatch elsewhere.
        let dir = Parser::new().parse(b).unwrap();
        let elements: Vec<(usize, usize, Rule, u8)> = dir
            .iter()
            .filter_map(|t| match t.dtype() {
                DType::Bool if t.byte_len() > 0 => Some((t.index(), t.absolute_offset() + 1, Rule::BoolByte, 2)),
                DType::U4 | DType::I4 | DType::E2M1 if t.element_count() % 2 == 1 => {
                    let at = t.absolute_offset() + t.byte_len() - 1;
                    Some((t.index(), at, Rule::PackedHighNibble, b[at] | 0x40))
                }
                _ => None,
            })
            .collect();
        for (i, at, rule, v) in elements {
            let mut m = b.clone();
            m[at] = v;
            // Its own digest changes too: a table for the faulty bytes.
            let mut t = table.clone();
            let (s, e) = spans[i];
            t[32 * i..32 * i + 32].copy_from_slice(&sha256(&m[s..e]));
            push(format!("{rule:?} in tensor {i}"), m.clone(), t.clone(), Some(rule));
            push(format!("{rule:?} in tensor {i}, digest kept"), m.clone(), table.clone(), Some(Rule::PayloadDigest));
            for (j, &(_, e)) in spans.iter().enumerate().filter(|(j, (s, e))| e > s && *j != i) {
                let mut mm = m.clone();
                mm[e - 1] ^= 0x11;
                push(format!("{rule:?} in tensor {i}, tensor {j} flipped"), mm, t.clone(), Some(Rule::PayloadDigest));
            }
            if let Some(g) = gap_byte(gaps.len().saturating_sub(1)) {
                let mut mm = m.clone();
                mm[g] = 1;
                push(format!("{rule:?} in tensor {i}, gap byte {g}"), mm, t.clone(), None);
            }
        }
        // A quantization fault (step 11, known from the descriptors).
        if set.name == "quant" {
            let mut m = b.clone();
            m[field(0, 16)] = 7;
            push("quant scheme 7".into(), m.clone(), table.clone(), Some(Rule::UnknownQuantScheme));
            let mut mm = m.clone();
            mm[spans[2].1 - 1] ^= 1;
            push("quant scheme 7, last tensor flipped".into(), mm, table.clone(), Some(Rule::PayloadDigest));
        }
        // Misplaced: two tensors of one length swap places (step 10 at the first).
        if set.name == "mixed" {
            let mut m = b.clone();
            let (o5, o7) = (get64(&m, field(5, 32)), get64(&m, field(7, 32)));
            le64(&mut m, field(5, 32), o7);
            le64(&mut m, field(7, 32), o5);
            push("5 and 7 swapped".into(), m.clone(), table.clone(), Some(Rule::NonCanonicalOffset));
            let mut mm = m.clone();
            mm[base + o5 as usize + 3] ^= 1; // tensor 7's bytes now: after the run ends
            push("5 and 7 swapped, 7 flipped (after)".into(), mm, table.clone(), Some(Rule::NonCanonicalOffset));
            let mut mm = m.clone();
            mm[spans[1].0] ^= 1; // the bool tensor, in the run
            push("5 and 7 swapped, 1 flipped (before)".into(), mm, table.clone(), Some(Rule::PayloadDigest));
            let mut mm = m.clone();
            mm[spans[4].1 - 1] ^= 1;
            push("5 and 7 swapped, 4 flipped (before)".into(), mm, table.clone(), Some(Rule::PayloadDigest));
            let mut mm = m.clone();
            mm[gap_byte(0).unwrap()] = 1;
            push("5 and 7 swapped, first gap".into(), mm, table.clone(), Some(Rule::NonzeroGap));
            // The last (empty) tensor placed at 0: the run is tensors 0 to 7.
            let mut m = b.clone();
            le64(&mut m, field(8, 32), 0);
            push("8 at 0".into(), m.clone(), table.clone(), Some(Rule::NonCanonicalOffset));
            let mut mm = m.clone();
            mm[spans[7].1 - 1] ^= 1;
            push("8 at 0, 7 flipped".into(), mm, table.clone(), Some(Rule::PayloadDigest));
            let mut t = table.clone();
            t[32 * 8] ^= 1;
            push("8 at 0, its digest changed".into(), m.clone(), t, Some(Rule::NonCanonicalOffset));
        }
        // payload_bytes past the running end (step 10, once every placement passed).
        let mut m = b.clone();
        le64(&mut m, 16, get64(b, 16) + 64);
        m.extend_from_slice(&[0; 64]);
        push("payload_bytes + 64".into(), m.clone(), table.clone(), Some(Rule::NonCanonicalPayloadBytes));
        if let Some(&(_, e)) = spans.iter().rev().find(|(s, e)| e > s) {
            let mut mm = m.clone();
            mm[e - 1] ^= 2;
            push("payload_bytes + 64, last tensor flipped".into(), mm, table.clone(), Some(Rule::PayloadDigest));
        }
        // Trailing bytes (step 12).
        let mut m = b.clone();
        m.extend_from_slice(&[0, 1, 2]);
        push("trailing".into(), m.clone(), table.clone(), Some(Rule::TrailingBytes));
        if let Some(&(s, _)) = spans.iter().find(|(s, e)| e > s) {
            let mut mm = m.clone();
            mm[s] ^= 4;
            push("trailing, first tensor flipped".into(), mm, table.clone(), Some(Rule::PayloadDigest));
        }
        // Truncated: EOF whatever else is wrong.
        for cut in [63, base - 1, base + 1, b.len() - 1] {
            if cut < b.len() {
                let mut m = b[..cut].to_vec();
                if let Some(x) = m.get_mut(base + 2) {
                    *x ^= 1;
                }
                push(format!("truncated at {cut}"), m, table.clone(), Some(Rule::BlockTruncated));
            }
        }
        // Step 3d: a table for another count.
        let short = table[..table.len().saturating_sub(32)].to_vec();
        let want = (!table.is_empty()).then_some(Rule::DigestTableCount);
        push("table one short".into(), b.clone(), short, want);
        let mut longer = table.clone();
        longer.extend_from_slice(&[0; 32]);
        push("table one long".into(), b.clone(), longer, Some(Rule::DigestTableCount));
    }
    out
}

/// Mutated blocks with the table of the block before the change, some with
/// a flipped payload byte or a changed digest as well.
fn mutated(n: usize, seed: u64) -> Vec<(Case, Vec<u8>)> {
    let mut rng = Rng(seed | 1);
    let mut bases: Vec<Vec<u8>> = templates();
    bases.extend(sets().into_iter().map(|s| s.block));
    let mut out = Vec::new();
    for k in 0..n {
        let t = &bases[k % bases.len()];
        let mut table = table_of(t);
        let mut b = t.clone();
        for _ in 0..rng.below(3) {
            mutate(&mut rng, &mut b);
        }
        let payload = Parser::new().parse(t).unwrap().payload_start();
        match rng.below(4) {
            0 if b.len() > payload => {
                let at = payload + rng.below(b.len() - payload);
                b[at] ^= 1 << rng.below(8);
            }
            1 if !table.is_empty() => {
                let at = rng.below(table.len());
                table[at] ^= 0x80;
            }
            _ => {}
        }
        out.push((Case { name: format!("mutated {k}"), block: b, table, want: None }, t.clone()));
    }
    out
}

// ---------------------------------------------------------------------------
// Verdicts

/// Every chunking of `b` (with `sizes`) gets the whole-buffer verdict, standalone and embedded.
fn compare(case: &Case, chunkings: &[Chunking]) -> usize {
    let Case { name, block: b, table, .. } = case;
    let want = oracle(b, table, true);
    let mut n = 0;
    for &c in chunkings {
        let got = stream(b, Some(table), false, c);
        assert_eq!(got.verdict, want, "{name}: {c:?}, input {}", hex(b));
        n += 1;
    }
    // Embedded: the bytes after the block are the next field's.
    let mut ext = b.clone();
    ext.extend_from_slice(&[9, 9, 9]);
    let want = oracle(&ext, table, false);
    for c in [Chunking::Fixed(1), Chunking::Fixed(5), Chunking::Whole, Chunking::Skipping(3)] {
        let got = stream(&ext, Some(table), true, c);
        assert_eq!(got.verdict, want, "{name} (embedded): {c:?}, input {}", hex(b));
        n += 1;
    }
    n
}

#[test]
fn every_chunk_size_gets_the_whole_buffer_verdict() {
    let cases = generated();
    let mut n = 0;
    for case in &cases {
        let verdict = oracle(&case.block, &case.table, true);
        match case.want {
            Some(Rule::BlockTruncated) => {
                assert_eq!(verdict.map_err(|e| e.code()), Err(ErrorCode::Eof), "{}", case.name)
            }
            Some(rule) => assert_eq!(verdict.map_err(|e| e.rule()), Err(rule), "{}", case.name),
            None => {}
        }
        let len = case.block.len();
        let mut chunkings: Vec<Chunking> = (1..=len + 1).map(Chunking::Fixed).collect();
        chunkings.extend([1, 3, 64, 4096].map(Chunking::Skipping));
        chunkings.extend([Chunking::Whole, Chunking::Random(len as u64)]);
        n += compare(case, &chunkings);
    }
    let digest = cases.iter().filter(|c| c.want == Some(Rule::PayloadDigest)).count();
    println!("{} generated cases ({digest} DIGEST), {n} comparisons", cases.len());
    assert!(digest > 100, "{digest}");
}

#[test]
fn mutated_blocks_get_the_whole_buffer_verdict() {
    let n: usize = std::env::var("KILN_DIGEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let (mut tally, mut rules) = (0, std::collections::BTreeMap::new());
    for (k, (case, _)) in mutated(n * 4, 0x00d1_6e57).iter().enumerate() {
        let chunkings: &[Chunking] = if k % 8 == 0 {
            &[
                Chunking::Fixed(1),
                Chunking::Fixed(7),
                Chunking::Random(k as u64),
                Chunking::Whole,
                Chunking::Skipping(1),
            ]
        } else {
            &[Chunking::Fixed(7), Chunking::Random(k as u64), Chunking::Whole, Chunking::Skipping(3)]
        };
        tally += compare(case, chunkings);
        let r = oracle(&case.block, &case.table, true).err().map(|e| e.rule());
        *rules.entry(format!("{r:?}")).or_insert(0) += 1;
    }
    println!("{} mutated blocks, {tally} comparisons: {rules:?}", n * 4);
    assert!(rules.contains_key("Some(PayloadDigest)") && rules.contains_key("Some(DigestTableCount)"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Random chunkings (sizes cycled from a random list, passing over what
    /// `next_needed` allows or not) of the generated cases.
    #[test]
    fn random_chunkings(pick in 0usize..10_000, sizes in proptest::collection::vec(1usize..200, 1..24), skipping: bool) {
        thread_local! { static CASES: Vec<Case> = generated(); }
        CASES.with(|cases| {
            let case = &cases[pick % cases.len()];
            let want = oracle(&case.block, &case.table, true);
            let mut k = 0;
            let got = stream_with(&case.block, Some(&case.table), false, skipping, |_| {
                k += 1;
                sizes[k % sizes.len()]
            });
            assert_eq!(got.verdict, want, "{}: sizes {sizes:?}, skipping {skipping}", case.name);
        });
    }
}

/// Without a table the verdict is Parser's, whatever the payload holds.
#[test]
fn without_a_table_nothing_is_hashed() {
    for case in generated() {
        let want = Parser::new().parse(&case.block).map(|_| ());
        for c in [Chunking::Fixed(1), Chunking::Fixed(64), Chunking::Skipping(7), Chunking::Whole] {
            assert_eq!(stream(&case.block, None, false, c).verdict, want, "{}: {c:?}", case.name);
        }
    }
}

// ---------------------------------------------------------------------------
// Timing

/// The whole-buffer verdict `want` on `b` is certain after its first `k`
/// bytes (`cases::certain`; here with the table, so changing a byte of a
/// tensor of the run not yet complete gives DIGEST: all zeros and all 0xFF
/// cannot both keep its bytes).
fn certain(b: &[u8], template: Option<&[u8]>, table: &[u8], k: usize, want: Error) -> bool {
    let overflow = want.rule() == Rule::PayloadSizeOverflow;
    cases::certain(b, template, k, overflow, |c| oracle(c, table, true) != Err(want))
}

/// Checks when `case`'s fault comes; returns its rule (`None`: nothing to time).
fn check_timing(case: &Case, template: Option<&[u8]>, oracle_checks: bool) -> Option<Rule> {
    let Case { name, block: b, table, .. } = case;
    let want = match oracle(b, table, true) {
        Err(e) if e.code() != ErrorCode::Eof => e,
        _ => return None, // accepted, or truncated: nothing is certain before `finish`
    };
    let template = template.filter(|t| t.len() == b.len());
    let (k, got) = stream(b, Some(table), false, Chunking::Fixed(1))
        .first
        .unwrap_or_else(|| panic!("{name}: a fault of the complete block is reported by feed: {want}"));
    assert_eq!(got, want, "{name}: {}", hex(b));
    if want.rule() == Rule::PayloadDigest {
        // The spec's point: the end of the tensor's bytes, exactly.
        let (at, e) = first_mismatch(b, table).expect("a mismatch");
        assert_eq!((k, got), (at, e), "{name}: DIGEST with byte {k}, not with the tensor's last byte {at}");
        assert!(!oracle_checks || certain(b, template, table, k, want), "{name}: not certain at {k}");
    } else {
        if oracle_checks {
            assert!(
                certain(b, template, table, k, want),
                "{name}: reported after byte {k}, before it is certain: {want}"
            );
            assert!(
                !certain(b, template, table, k - 1, want),
                "{name}: certain after byte {}, reported after {k}",
                k - 1
            );
        }
        if after_step9(want.rule()) {
            // Held: where it is certain without digests, or where the run ends.
            let (k0, e0) = stream(b, None, false, Chunking::Fixed(1)).first.expect("reported without digests");
            assert_eq!(e0, want, "{name}");
            assert_eq!(
                k,
                k0.max(run_done_at(b)),
                "{name}: {want} without digests at {k0}, the run ends at {}",
                run_done_at(b)
            );
        }
    }
    for c in [
        Chunking::Fixed(7),
        Chunking::Fixed(64),
        Chunking::Fixed(4096),
        Chunking::Random(k as u64),
        Chunking::Skipping(5),
    ] {
        let (end, e) = stream(b, Some(table), false, c).first.expect("reported");
        assert_eq!(e, want, "{name}: {c:?}");
        assert!(end >= k, "{name}: {c:?} reported at {end}, before byte {k}");
        if let Chunking::Fixed(n) = c {
            assert!(end < k + n, "{name}: {c:?} reported at {end}, after the chunk with byte {k}");
        }
    }
    Some(want.rule())
}

#[test]
fn faults_come_with_the_byte_that_makes_them_certain() {
    let mut rules = std::collections::BTreeMap::new();
    for case in generated() {
        if let Some(r) = check_timing(&case, None, true) {
            *rules.entry(format!("{r:?}")).or_insert(0) += 1;
        }
    }
    let n: usize = std::env::var("KILN_DIGEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    for (case, template) in mutated(n, 0x0071_31e5) {
        if let Some(r) = check_timing(&case, Some(&template), true) {
            *rules.entry(format!("{r:?}")).or_insert(0) += 1;
        }
    }
    println!("timed: {rules:?}");
    for r in ["PayloadDigest", "NonzeroGap", "BoolByte", "PackedHighNibble", "NonCanonicalOffset", "TrailingBytes"] {
        assert!(rules.contains_key(r), "no {r} timed");
    }
}

/// The timing on one block, spelled out: f32 @0, bool @64, u4 @128,
/// empty @192, f32 rank 0 @192, f32 @256, empty @320, f32 @320, empty @384.
#[test]
fn a_mismatch_waits_for_its_tensors_last_byte_and_holds_back_later_steps() {
    let mixed = &sets()[0].block;
    let table = table_of(mixed);
    let base = Parser::new().parse(mixed).unwrap().payload_start();
    let first = |b: &[u8], t: &[u8]| stream(b, Some(t), false, Chunking::Fixed(1)).first.unwrap();
    // A flipped first byte of tensor 5 (24 bytes at 256): at its last byte.
    let mut m = mixed.clone();
    m[base + 256] ^= 1;
    assert_eq!(first(&m, &table), (base + 280, Error::new(Rule::PayloadDigest, base + 256)));
    // The empty tensor 6's digest: once tensor 5 is done (not at 320, where it sits).
    let mut t = table.clone();
    t[32 * 6] ^= 1;
    assert_eq!(first(mixed, &t), (base + 280, Error::new(Rule::PayloadDigest, base + 320)));
    // The empty tensor 3's: once the u4 tensor is done (130).
    let mut t = table.clone();
    t[32 * 3] ^= 1;
    assert_eq!(first(mixed, &t), (base + 130, Error::new(Rule::PayloadDigest, base + 192)));
    // A nonzero gap byte at 30: without digests at that byte; with them,
    // once the run is hashed (the last nonempty tensor ends at 344).
    let mut g = mixed.clone();
    g[base + 30] = 1;
    assert_eq!(stream(&g, None, false, Chunking::Fixed(1)).first.unwrap().0, base + 31);
    assert_eq!(first(&g, &table), (base + 344, Error::new(Rule::NonzeroGap, base + 30)));
    // ... and a mismatch after it wins.
    let mut gm = g.clone();
    gm[base + 343] ^= 1;
    assert_eq!(first(&gm, &table), (base + 344, Error::new(Rule::PayloadDigest, base + 320)));
    // A bad bool byte (its digest matching): certain once the last gap
    // (344..384, before the empty tensor 8) passed, with digests or without.
    let mut bb = mixed.clone();
    bb[base + 64] = 2;
    let mut t = table.clone();
    t[32..64].copy_from_slice(&sha256(&bb[base + 64..base + 69]));
    assert_eq!(stream(&bb, None, false, Chunking::Fixed(1)).first.unwrap().0, base + 384);
    assert_eq!(first(&bb, &t), (base + 384, Error::new(Rule::BoolByte, base + 64)));
    // A quantization fault: certain without digests once the packed
    // tensor's last byte and the gaps passed (128); held to the run's end (the
    // last tensor, at 128, ends at 152).
    let q = &sets()[3].block;
    let mut qm = q.clone();
    qm[64 + 16] = 7; // descriptor 0's quant_scheme
    let q_base = Parser::new().parse(q).unwrap().payload_start();
    assert_eq!(stream(&qm, None, false, Chunking::Fixed(1)).first.unwrap().0, q_base + 128);
    assert_eq!(run_done_at(&qm), q_base + 152);
    assert_eq!(first(&qm, &table_of(q)), (q_base + 152, Parser::new().parse(&qm).unwrap_err()));
    // The first empty tensor of "empty first": with the prefix's last byte.
    let ef = &sets()[1].block;
    let mut t = table_of(ef);
    t[0] ^= 1;
    let ef_base = Parser::new().parse(ef).unwrap().payload_start();
    assert_eq!(first(ef, &t), (ef_base, Error::new(Rule::PayloadDigest, ef_base)));
    // Truncated after the mismatch: EOF, as for any block that ends early.
    let cut = &m[..m.len() - 1];
    let out = stream(cut, Some(&table), false, Chunking::Fixed(1));
    assert_eq!(out.first.unwrap().1.rule(), Rule::PayloadDigest);
    assert_eq!(out.verdict, Parser::new().parse(cut).map(|_| ()));
    assert_eq!(out.verdict.unwrap_err().code(), ErrorCode::Eof);
}

/// A table of another length: the caller's error, at the block's first
/// byte, once the header passed steps 1 to 3; `check_block_digests` says the same.
#[test]
fn a_table_of_another_count_is_the_callers_error() {
    let mixed = &sets()[0].block;
    let table = table_of(mixed);
    let short = &table[..table.len() - 32];
    let out = stream(mixed, Some(short), false, Chunking::Fixed(1));
    assert_eq!(out.first, Some((64, Error::new(Rule::DigestTableCount, 0))));
    assert_eq!(out.verdict, Err(Error::new(Rule::DigestTableCount, 0)));
    // A step-3 fault comes first; a step-4 fault after.
    let mut capped = mixed.clone();
    capped[12..16].copy_from_slice(&u32::MAX.to_le_bytes()); // name_bytes above the cap
    assert_eq!(stream(&capped, Some(short), false, Chunking::Whole).verdict.unwrap_err().rule(), Rule::NameBytesCap);
    let mut sized = mixed.clone();
    sized[24] ^= 1; // directory_bytes
    assert_eq!(stream(&sized, Some(short), false, Chunking::Whole).verdict, Err(Error::new(Rule::DigestTableCount, 0)));
    // Absolute at the block in a longer buffer.
    let mut rec = vec![7u8; 10];
    rec.extend_from_slice(mixed);
    let d = Digests::from_bytes(short, 0).unwrap();
    assert_eq!(check_block_digests(&rec, 10, Parser::new(), &d).unwrap_err(), Error::new(Rule::DigestTableCount, 10));
    let d = Digests::from_bytes(&table, 0).unwrap();
    assert_eq!(check_block_digests(&rec, 10, Parser::new(), &d).unwrap().end(), rec.len());
    assert!(Digests::from_bytes(&table[..31], 0).is_none());
}

/// Large chunks that the count-only path would pass over still get hashed,
/// and a caller that skips what `next_needed` allows is given every byte of the run.
#[test]
fn large_payloads_are_hashed_in_every_chunk() {
    let big: Vec<u8> = (0..1 << 16).map(|i: u32| (i % 251) as u8).collect();
    let specs = [
        TensorSpec::new(DType::Bool, &[3], &[1, 0, 1]).named("b"),
        TensorSpec::new(DType::U8, &[1 << 16], &big).named("w"),
        TensorSpec::new(DType::U8, &[1 << 16], &big).named("v"),
    ];
    // Plain tensors with no gap between them: without digests every payload
    // chunk short of the block's end is only counted (`feed`'s fast path).
    let tight = [
        TensorSpec::new(DType::U8, &[1 << 16], &big).named("w"),
        TensorSpec::new(DType::U8, &[1 << 16], &big).named("v"),
    ];
    for block in [write(&specs), write(&tight)] {
        large_payloads(&block);
    }
}

fn large_payloads(block: &[u8]) {
    let block = block.to_vec();
    let table = table_of(&block);
    let w_at = Parser::new().parse(&block).unwrap().find("w").unwrap().absolute_offset();
    for c in [Chunking::Fixed(4096), Chunking::Fixed(100_000), Chunking::Whole, Chunking::Skipping(4096)] {
        let out = stream(&block, Some(&table), false, c);
        assert_eq!(out.verdict, Ok(()), "{c:?}");
        if let Chunking::Skipping(_) = c {
            assert!(out.fed >= 2 << 16, "{c:?}: fed {} bytes", out.fed);
            let fed = stream(&block, None, false, c).fed;
            assert!(fed < block.len() / 8, "without a table the payload is passed over: fed {fed}");
        }
        let mut m = block.clone();
        m[w_at + 40_000] ^= 1;
        let out = stream(&m, Some(&table), false, c);
        assert_eq!(out.verdict, Err(Error::new(Rule::PayloadDigest, w_at)), "{c:?}");
        assert_eq!(stream(&m, None, false, c).verdict, Ok(()));
    }
}

// ---------------------------------------------------------------------------
// source::verify

/// A source that counts the bytes read.
struct Counting<'a> {
    bytes: &'a [u8],
    read: std::cell::Cell<u64>,
}

impl ReadAt for &Counting<'_> {
    type Error = OutOfBounds;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        self.read.set(self.read.get() + buf.len() as u64);
        let mut s = self.bytes;
        s.read_at(offset, buf)
    }
    fn len(&mut self) -> Result<u64, OutOfBounds> {
        Ok(self.bytes.len() as u64)
    }
}

fn verify(b: &[u8], table: &[u8], embedded: bool, chunk: usize, coalesce: u64) -> (Result<(), Error>, u64) {
    let need = Incremental::prefix_len(b.get(..64).unwrap_or(&[]), &Limits::DEFAULT).ok().flatten().unwrap_or(64);
    let mut prefix = vec![0u8; need.min(b.len() + 64).max(64)];
    let mut chunk_buf = vec![0u8; chunk];
    let src = Counting { bytes: b, read: std::cell::Cell::new(0) };
    let o = source::Options::new().coalesce(coalesce).digests(table);
    let o = if embedded { o.embedded() } else { o };
    // Every verdict here is one of the core's rules (steps 1 to 12 and 9d).
    let got = o.verify(&src, &mut prefix, &mut chunk_buf).map(|_| ()).map_err(|e| match e.kiln() {
        Some(k) => k.core_error().unwrap_or_else(|| panic!("not a core rule: {k:?}")),
        None => panic!("not a format error: {e:?}"),
    });
    (got, src.read.get())
}

#[test]
fn verify_with_a_table_gets_the_whole_buffer_verdict() {
    let n: usize = std::env::var("KILN_DIGEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let mut cases = generated();
    cases.extend(mutated(n, 0x0050_07ce).into_iter().map(|(c, _)| c));
    let mut count = 0;
    for case in &cases {
        let b = &case.block;
        let want = oracle(b, &case.table, true);
        let mut ext = b.clone();
        ext.extend_from_slice(&[9, 9, 9]);
        let want_at = oracle(&ext, &case.table, false);
        for chunk in [1, 7, 64, 1000] {
            for coalesce in [0, 256] {
                let (got, _) = verify(b, &case.table, false, chunk, coalesce);
                assert_eq!(got, want, "{}: chunk {chunk}, coalesce {coalesce}, {}", case.name, hex(b));
                let (got, _) = verify(&ext, &case.table, true, chunk, coalesce);
                assert_eq!(got, want_at, "{} (embedded): chunk {chunk}, coalesce {coalesce}", case.name);
                count += 2;
            }
        }
    }
    println!("{} blocks, {count} verify comparisons", cases.len());
}

/// `verify` with a table reads the whole canonical run, in whole chunks;
/// without one, only the bytes a rule reads.
#[test]
fn verify_reads_every_byte_of_the_run() {
    let big: Vec<u8> = (0..1 << 16).map(|i: u32| (i % 253) as u8).collect();
    let specs = [
        TensorSpec::new(DType::U8, &[1 << 16], &big).named("w"),
        TensorSpec::new(DType::Bool, &[3], &[1, 0, 1]).named("b"),
        TensorSpec::new(DType::U8, &[1 << 16], &big).named("v"),
    ];
    let block = write(&specs);
    let table = table_of(&block);
    let (got, read) = verify(&block, &table, false, 4096, 256);
    assert_eq!(got, Ok(()));
    assert!(read >= (2 << 16) + 3 && read <= block.len() as u64, "read {read} of {}", block.len());
    let mut prefix = vec![0u8; 4096];
    let src = Counting { bytes: &block, read: std::cell::Cell::new(0) };
    source::verify(&src, &mut prefix, &mut [0u8; 4096]).unwrap();
    assert!(src.read.get() < 2048, "without a table: {} bytes", src.read.get());
    let mut m = block.clone();
    let v_at = Parser::new().parse(&block).unwrap().find("v").unwrap().absolute_offset();
    m[v_at + 65_000] ^= 1;
    assert_eq!(verify(&m, &table, false, 4096, 0).0, Err(Error::new(Rule::PayloadDigest, v_at)));
}

/// The validator's own state stays small with the feature: the C API keeps
/// it in a `kiln_incremental` of 40 words (with its 4-byte tag, 8-aligned),
/// whatever features a workspace build turns on.
#[test]
fn the_state_fits_the_c_api() {
    let size = std::mem::size_of::<Incremental<Borrowed<'static, 'static>>>();
    assert!(size + 8 <= 40 * 8, "{size} bytes");
    if cfg!(target_pointer_width = "64") {
        assert_eq!(size, 304, "the figure in Incremental's documentation");
    }
}

/// `TensorHasher::finish` is the SHA-256 of what was added, in any split, and
/// starts over (a second finish is the empty input's digest).
#[test]
fn hasher_finish_is_the_sha256_of_the_bytes_added() {
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    for split in [0, 1, 63, 64, 500, 1000] {
        let mut h = TensorHasher::new();
        h.update(&data[..split]);
        h.update(&data[split..]);
        assert_eq!(h.finish(), sha256(&data), "split at {split}");
        assert_eq!(h.finish(), sha256(&[]));
    }
    let mut h = TensorHasher::new();
    h.update(b"abc");
    let d = h.finish();
    assert_eq!(d[..4], [0xba, 0x78, 0x16, 0xbf]);
    h.update(b"abc");
    assert!(h.matches(&d));
}
