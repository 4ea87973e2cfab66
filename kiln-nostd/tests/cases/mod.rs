//! Inputs shared by the tests that hold a validator to `Parser`'s verdicts
//! (`incremental.rs`, `source.rs`): the golden, regression and check-order
//! cases, valid blocks exercising every payload rule, and one random
//! mutation of a block. Each test file that declares `mod cases;` compiles
//! its own copy; not every file uses every item.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    DType, TensorSpec, Writer,
};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The directory-case files: goldens, the check-order matrix and every regression file.
pub fn case_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("spec/kiln-v2-cases.json"), root.join("spec/check-order-matrix.json")];
    for e in std::fs::read_dir(root.join("spec/regressions")).expect("regressions") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "json") {
            files.push(p);
        }
    }
    files
}

/// xorshift64*: the run is reproducible from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub fn hex(b: &[u8]) -> String {
    if b.len() > 2048 {
        return format!("({} bytes)", b.len());
    }
    hex::encode(b)
}

/// Directory cases from a JSON file shaped like the goldens.
pub fn json_cases(path: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| c["type"] == "tensors" && c["framed"] != true)
        .map(|c| {
            let bytes = hex::decode(c["hex"].as_str().expect("hex")).expect("hex");
            (c["name"].as_str().unwrap_or("?").to_string(), bytes)
        })
        .collect()
}

/// Valid blocks that exercise every payload check: gaps, bool bytes, odd
/// packed tails, zero-length and quantized tensors, names and layouts.
pub fn templates() -> Vec<Vec<u8>> {
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
            TensorSpec::new(DType::E2M1, &[3], &nib).named("q").quantized(QuantSpec::Scales {
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
    let mut blocks: Vec<Vec<u8>> = sets.iter().map(|specs| write(specs)).collect();
    blocks.push(no_padding());
    blocks
}

/// A named block whose heap (names, a two-byte character, a layout name)
/// ends on a 64-byte boundary: no padding, so the descriptor and name rules
/// decide a fault before the prefix is complete (the incremental validator
/// reports it there). Gaps, bool bytes and an odd packed tail as above.
pub fn no_padding() -> Vec<u8> {
    let f32s: Vec<u8> = (0..24u8).collect();
    let nib = [0x21u8, 0x03];
    let fixed = ["alpha", "βeta.flags", "gamma.q", "o"];
    let layout = "Q4_K";
    let used: usize = fixed.iter().map(|n| n.len()).sum::<usize>() + layout.len();
    let last = format!("delta{}", "x".repeat(64 - used - 5));
    let specs = vec![
        TensorSpec::new(DType::F32, &[2, 3], &f32s).named(fixed[0]),
        TensorSpec::new(DType::Bool, &[5], &[1, 0, 1, 1, 0]).named(fixed[1]),
        TensorSpec::new(DType::U4, &[3], &nib).named(fixed[2]),
        TensorSpec::opaque(4096, layout, 4, &[8], &[0; 8]).named(fixed[3]),
        TensorSpec::new(DType::F32, &[6], &f32s).named(&last),
    ];
    let b = write(&specs);
    let heap_end = 64 + 5 * 128 + 64;
    assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 64, "a 64-byte heap");
    assert_eq!(b[heap_end..heap_end + 24], f32s[..], "no padding: the payload starts at the heap's end");
    b
}

/// The canonical block of `specs`.
pub fn write(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = vec![0u8; Writer::new().encoded_len(specs).expect("len")];
    Writer::new().write(specs, &mut out).expect("write");
    out
}

/// One random change: a byte, a descriptor or header field set to a
/// boundary value, an out-of-order offset, a truncation or appended bytes.
pub fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
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

/// Byte values the oracle below tries where a byte may still change: the
/// boundaries the rules look at, and the byte flipped.
const PROBES: [u8; 7] = [0x00, 0x01, 0x02, 0x7f, 0x80, 0xc0, 0xff];

/// A validator's verdict on all of `b` (`differs`: another verdict than the
/// one wanted; `payload_overflow`: the wanted one is PayloadSizeOverflow) (a complete block, with or without
/// trailing bytes) is certain after its first `k` bytes: no bytes after them
/// give another verdict, whether the stream ends with the block or goes on
/// as `b` does (ending earlier is truncation: EOF, from `finish`). In the
/// payload every rule is "this byte is zero" or "at most 1" or "its high
/// nibble is zero", so all zeros and all 0xFF bound every continuation.
/// Before the payload the fields decide, and single-byte changes are the
/// witnesses: each probe value, the template's byte and the magic's.
pub fn certain(
    b: &[u8],
    template: Option<&[u8]>,
    k: usize,
    payload_overflow: bool,
    differs: impl Fn(&[u8]) -> bool,
) -> bool {
    let h = kiln_nostd::wire::Header::parse(b).ok();
    let heap_end = h.map_or(64, |h| (h.directory_bytes as usize).saturating_add(64));
    let base = heap_end.checked_next_multiple_of(64).unwrap_or(usize::MAX);
    if payload_overflow {
        // No block is ever complete: LIMIT once the directory is in, EOF before.
        return k >= heap_end;
    }
    let block_len = h.map_or(b.len(), |h| base.saturating_add(h.payload_bytes as usize));
    let mut lens = vec![b.len()];
    if k <= block_len && block_len < b.len() {
        lens.push(block_len);
    }
    for len in lens {
        let mut c = b[..len].to_vec();
        for fill in [0x00u8, 0xff] {
            c[k..].fill(fill);
            if differs(&c) {
                return false;
            }
        }
        // The rest of the magic, and the rest as the template has it.
        for (i, &m) in b"KLNT".iter().enumerate().skip(k) {
            c[i] = m;
        }
        if k < 4 && differs(&c) {
            return false;
        }
        if let Some(t) = template {
            c[k..].copy_from_slice(&t[k..len]);
            if differs(&c) {
                return false;
            }
        }
        c[k..].copy_from_slice(&b[k..len]);
        if differs(&c) {
            return false;
        }
        for p in k..len.min(base) {
            let extra = [template.and_then(|t| t.get(p).copied()), b"KLNT".get(p).copied()];
            for v in PROBES.into_iter().chain(extra.into_iter().flatten()).chain([b[p] ^ 1]) {
                c[p] = v;
                if differs(&c) {
                    return false;
                }
            }
            c[p] = b[p];
        }
    }
    true
}
