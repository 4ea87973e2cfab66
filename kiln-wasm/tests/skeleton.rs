//! The skeleton claim, checked: the core over the skeleton (real prefix,
//! zeros, probe bytes) gives the same verdict as the core over the real
//! buffer, for the goldens, the example model, writer-made blocks with every
//! probe kind, and many thousands of mutations of them.

use kiln_nostd::{scratch_len, DType, Directory, Header, Limits, Parser, Quant, TensorRef, TensorSpec, Writer};
use kiln_wasm::skeleton::{self, probe_hit, SLOTS};
use kiln_wasm::{Core, ErrorInfo};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

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
                hex(c["hex"].as_str().unwrap()),
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
            skeleton::table(&dir, &mut Default::default(), &mut out);
            Ok(out)
        }
        Err(e) => Err(e.into()),
    }
}

/// What the JavaScript side does, in Rust.
fn via_skeleton(core: &mut Core, bytes: &[u8], limits: Limits) -> Result<Vec<u32>, ErrorInfo> {
    let head = &bytes[..bytes.len().min(64)];
    let prefix = core.begin(head, bytes.len() as u64)?;
    core.skeleton()[..prefix].copy_from_slice(&bytes[..prefix]);
    let probes = core.probes().to_vec();
    let mut writes = Vec::new();
    for p in probes.chunks_exact(3) {
        let (s, e) = (p[0] as usize, p[1] as usize);
        assert!(s >= prefix && e <= core.plan().len as usize && s < e, "probe {p:?} outside the payload");
        if let Some((at, b)) = probe_hit(&bytes[s..e], p[2]) {
            core.skeleton()[s + at] = b;
            writes.push(s + at);
        }
    }
    let out = core.check(limits).map(|t| t.to_vec());
    for w in writes {
        core.skeleton()[w] = 0;
    }
    assert!(core.skeleton().iter().all(|&b| b == 0), "the arena must be all zero between checks");
    out
}

fn same(core: &mut Core, bytes: &[u8], limits: Limits, what: &str) -> Result<Vec<u32>, ErrorInfo> {
    let d = direct(bytes, limits);
    let s = via_skeleton(core, bytes, limits);
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

/// A block with every probe kind: bools, odd packed tensors, gaps, a
/// quantized tensor, an opaque layout, a non-ASCII name.
fn rich_block() -> Vec<u8> {
    let f = [0u8, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0x40, 0x40];
    let bools = [1u8, 0, 1, 1, 0];
    let u4 = [0x21u8, 0x03];
    let e2m1 = [0x72u8; 16];
    let scale = [127u8];
    let opaque = [7u8; 18];
    let specs = [
        TensorSpec::new(DType::F32, &[3], &f).named("weights"),
        TensorSpec::new(DType::Bool, &[5], &bools).named("mask"),
        TensorSpec::new(DType::U4, &[3], &u4).named("nibbles"),
        TensorSpec::new(DType::E2M1, &[32], &e2m1).named("q").quantized(Quant::Scales {
            axis: 0,
            group_size: 32,
            scale: TensorRef::Name("q.scale"),
        }),
        TensorSpec::new(DType::E8M0, &[1], &scale).named("q.scale"),
        TensorSpec::opaque(4096, "Q4_K", 18, &[1], &opaque).named("blöck·ünïcode"),
        TensorSpec::new(DType::I4, &[1], &[0x07]).named("tail"),
    ];
    let len = Writer::new().encoded_len(&specs).unwrap();
    let mut out = vec![0u8; len];
    Writer::new().write(&specs, &mut out).unwrap();
    out
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = goldens().into_iter().map(|(n, b, _)| (n, b)).collect();
    v.push(("digits-mlp".into(), std::fs::read(root().join("spec/examples/digits-mlp.kiln")).unwrap()));
    v.push(("rich".into(), rich_block()));
    v
}

#[test]
fn goldens_match_their_expected_codes_through_the_skeleton() {
    let mut core = Core::default();
    let cases = goldens();
    assert_eq!(cases.len(), 39, "directory cases among the 46 goldens");
    for (name, bytes, expect) in cases {
        let got = same(&mut core, &bytes, Limits::DEFAULT, &name);
        match got {
            Ok(_) => assert_eq!(expect, "accept", "{name}"),
            Err(e) => assert_eq!(e.code, expect, "{name}"),
        }
    }
}

#[test]
fn rich_block_parses_and_its_table_is_right() {
    let bytes = rich_block();
    let mut core = Core::default();
    let t = same(&mut core, &bytes, Limits::DEFAULT, "rich").unwrap();
    let dir = Directory::parse(&bytes).unwrap();
    assert_eq!(t[0] as usize, dir.len());
    // The non-ASCII heap is flagged and the last name's UTF-16 position is right.
    assert_eq!(t[6], 1);
    let names: String = dir.iter().map(|t| t.name().unwrap()).collect();
    let row = |i: usize| &t[skeleton::META + i * SLOTS..skeleton::META + (i + 1) * SLOTS];
    let at = row(5)[skeleton::slot::NAME_AT] as usize;
    let len = row(5)[skeleton::slot::NAME_LEN] as usize;
    let utf16: Vec<u16> = names.encode_utf16().collect();
    assert_eq!(String::from_utf16(&utf16[at..at + len]).unwrap(), "blöck·ünïcode");
    assert_eq!(row(3)[skeleton::slot::SCALE], 4);
    assert_eq!(row(5)[skeleton::slot::LAYOUT_LEN], 4);
    assert_eq!(row(0)[skeleton::slot::DTYPE_RANK], 2 | 1 << 16);
    let shape_at = row(0)[skeleton::slot::SHAPE_AT] as usize;
    assert_eq!(&t[shape_at..shape_at + 2], &[3, 0]);
    assert_eq!(row(3)[skeleton::slot::SCHEME_AXIS], 1);
    assert_eq!(row(0)[skeleton::slot::SCHEME_AXIS], 0xFFFF << 16);
}

#[test]
fn mutations_give_the_same_verdict_through_the_skeleton() {
    let mut core = Core::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    let mut seen = std::collections::BTreeMap::new();
    for (name, seed) in seeds() {
        for round in 0..1500 {
            let mut b = seed.clone();
            let edits = 1 + rng.below(3);
            for _ in 0..edits {
                match rng.below(10) {
                    // Byte flips anywhere, biased to the payload where probes live.
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
                        // Descriptor fields of the first descriptor.
                        let at = 64 + [0, 2, 4, 6, 8, 10, 12, 16, 18, 20, 24, 28, 32, 40, 48][rng.below(15)];
                        b[at] = rng.next() as u8;
                    }
                    _ => {}
                }
            }
            let limits =
                if round % 7 == 0 { Limits::DEFAULT.with_count_cap(3).with_byte_cap(8) } else { Limits::DEFAULT };
            let rule = match same(&mut core, &b, limits, &format!("{name} round {round}")) {
                Ok(_) => "accept",
                Err(e) => e.rule,
            };
            *seen.entry(rule).or_insert(0usize) += 1;
            checked += 1;
        }
    }
    assert!(checked > 50_000);
    // The mutations reach the verdicts that depend on payload bytes.
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

#[test]
fn payload_faults_are_found_through_probes() {
    let mut core = Core::default();
    let base = rich_block();
    let dir = Directory::parse(&base).unwrap();
    let pos = |name: &str| dir.find(name).unwrap().absolute_offset();
    // A bool byte 2, a high nibble, and a nonzero gap byte.
    for (at, value, rule) in [
        (pos("mask") + 3, 2u8, "BoolByte"),
        (pos("nibbles") + 1, 0x13, "PackedHighNibble"),
        (pos("mask") - 1, 9, "NonzeroGap"),
        (pos("tail"), 0x17, "PackedHighNibble"),
    ] {
        let mut b = base.clone();
        b[at] = value;
        let e = same(&mut core, &b, Limits::DEFAULT, rule).unwrap_err();
        assert_eq!((e.rule, e.offset), (rule, at as u64));
    }
}

#[test]
fn a_huge_declared_payload_plans_without_reserving_it() {
    // u8 [2^40] declared, 256 bytes present: EOF at the end of the input,
    // and the skeleton is only as long as the input.
    let mut b = rich_block();
    let mut core = Core::default();
    b[64 + 48..64 + 56].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let p = skeleton::plan(&b[..64], b.len() as u64);
    assert_eq!(p.len, b.len() as u64);
    let _ = same(&mut core, &b, Limits::DEFAULT, "huge");
}
