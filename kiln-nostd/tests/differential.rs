//! Differential testing: the Rust core against the Python reference codec
//! (`spec/reference/kiln_ref.py`).
//!
//! Inputs are the golden cases, canonical blocks from the [`Writer`], and
//! Frozen values of a dozen types, each mutated: single and multiple byte
//! changes, header/descriptor fields set to boundary values (optionally with
//! `directory_bytes` kept consistent so the check reaches later steps),
//! u32 count words set to boundary values, truncations, insertions and
//! appended bytes; some run with small caps. Both implementations must agree
//! on accept/reject and on the error code (offsets are diagnostics; their
//! disagreements are counted and printed, not failed).
//!
//! python3 is spawned once and every input goes through its stdin.
//! `KILN_DIFF_CASES` (default 10,000) and `KILN_DIFF_SEED` choose the run;
//! disagreements are written to `$CARGO_TARGET_TMPDIR/differential-disagreements.json`
//! in the regression-case format, ready to move into `spec/regressions/`.
//!
//! `spec/regressions/*.json` are replayed on both implementations by
//! [`regression_cases_replay_on_both`].

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{
    directory::DEFAULT_CAP,
    writer::{QuantSpec, TensorRef},
    DType, Error, Limits, Parser, TensorSpec, Writer,
};

mod owned;
use owned::OwnedTensor;

// ---------------------------------------------------------------- the reference

/// The driver: imports kiln_ref and validates `TYPE FRAMED COUNT_CAP BYTE_CAP HEX`
/// lines. Any exception other than a KilnError is reported as `crash`, so a
/// reference bug shows up as a disagreement instead of killing the run.
const DRIVER: &str = r#"
import sys
sys.path.insert(0, sys.argv[1])
import kiln_ref as k
out = sys.stdout
for line in sys.stdin:
    if line == "flush\n":
        out.flush()
        continue
    ty, framed, cc, bc, hx = line.rstrip("\n").split(" ")
    try:
        e = k.validate(ty, bytes.fromhex(hx), framed=framed == "1", count_cap=int(cc), byte_cap=int(bc))
        out.write("accept\n" if e is None else "reject %s %d %s\n" % (e.code, e.offset, e.rule))
    except Exception as x:
        out.write("crash %s %s\n" % (type(x).__name__, str(x).replace("\n", " ")))
"#;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

struct Reference {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Reference {
    fn spawn() -> Reference {
        let dir = repo_root().join("spec/reference");
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(DRIVER)
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 must be installed to run the differential test");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Reference { child, stdin, stdout }
    }

    /// Sends every case (from a writer thread, so neither pipe fills up) and
    /// reads one answer per case.
    fn run(&mut self, cases: &[Case]) -> Vec<String> {
        let stdin = self.stdin.as_mut().expect("open");
        let mut answers = Vec::with_capacity(cases.len());
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut w = std::io::BufWriter::with_capacity(1 << 16, stdin);
                for c in cases {
                    writeln!(
                        w,
                        "{} {} {} {} {}",
                        c.ty,
                        u8::from(c.framed),
                        c.count_cap,
                        c.byte_cap,
                        hex::encode(&c.bytes)
                    )
                    .expect("write to python");
                }
                writeln!(w, "flush").expect("write to python");
                w.flush().expect("flush to python");
            });
            let mut line = String::new();
            for _ in cases {
                line.clear();
                let n = self.stdout.read_line(&mut line).expect("read from python");
                assert!(n > 0, "python reference exited early");
                answers.push(line.trim_end().to_owned());
            }
        });
        answers
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- cases and verdicts

#[derive(Clone, Debug)]
struct Case {
    ty: String,
    framed: bool,
    count_cap: u32,
    byte_cap: u32,
    bytes: Vec<u8>,
    origin: String,
    /// Set for the out-of-order class: where its directory block starts.
    /// Such a case is compared strictly: the error offset must point at the
    /// same descriptor (or the same byte outside the descriptor table) on
    /// both sides, not only the code.
    block_at: Option<usize>,
}

impl Case {
    fn new(ty: &str, framed: bool, bytes: Vec<u8>, origin: impl Into<String>) -> Case {
        Case {
            ty: ty.to_owned(),
            framed,
            count_cap: DEFAULT_CAP,
            byte_cap: DEFAULT_CAP,
            bytes,
            origin: origin.into(),
            block_at: None,
        }
    }
}

/// accept, or (code, offset).
type Verdict = Option<(String, usize)>;

fn parse_answer(a: &str) -> Result<Verdict, String> {
    let mut it = a.split(' ');
    match it.next() {
        Some("accept") => Ok(None),
        Some("reject") => {
            let code = it.next().unwrap_or("?").to_owned();
            let off = it.next().and_then(|o| o.parse().ok()).unwrap_or(usize::MAX);
            Ok(Some((code, off)))
        }
        _ => Err(a.to_owned()),
    }
}

/// The reference's rule name from a `reject CODE OFFSET RULE` answer.
fn answer_rule(a: &str) -> Option<&str> {
    a.strip_prefix("reject ").and_then(|r| r.splitn(3, ' ').nth(2))
}

fn verdict(r: &Result<(), Error>) -> Verdict {
    r.as_ref().err().map(|e| (e.code().as_str().to_owned(), e.offset()))
}

fn show(v: &Verdict) -> String {
    match v {
        None => "accept".into(),
        Some((c, o)) => format!("{c} at {o}"),
    }
}

/// The Rust verdict. For a standalone `tensors` value the directory parser
/// (with and without name scratch) and the Frozen validator must agree
/// exactly (rule and offset); every error offset must lie inside the buffer.
fn rust_check(c: &Case) -> Result<(), Error> {
    let limits = Limits { count_cap: c.count_cap, byte_cap: c.byte_cap };
    let schema: Schema<'_> = Schema::parse(&c.ty).expect("test types parse");
    let got = frozen::validate(&c.bytes, &schema, &limits, c.framed);
    if let Err(e) = &got {
        assert!(e.offset() <= c.bytes.len(), "{}: error offset {} past {}: {e}", c.origin, e.offset(), c.bytes.len());
    }
    if c.ty == "tensors" && !c.framed {
        let plain = Parser::new().limits(limits).parse(&c.bytes).map(|_| ());
        assert_eq!(plain, got, "{}: Parser and frozen::validate disagree on {}", c.origin, hex::encode(&c.bytes));
        let count = kiln_nostd::wire::Header::peek_count(&c.bytes).unwrap_or(0).min(1 << 16);
        let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(count)];
        let hashed = Parser::new().limits(limits).scratch(&mut scratch).hash_seed(0x5eed).parse(&c.bytes).map(|_| ());
        assert_eq!(hashed, got, "{}: hashed name check disagrees on {}", c.origin, hex::encode(&c.bytes));
    }
    if c.ty == "struct{id:i64,batch:tensors,}" && !c.framed && c.bytes.len() >= 8 {
        // The same block through parse_at: an error there is the frozen error
        // unless the frozen walk got past the block (then only TRAILING remains).
        let at = Parser::new().limits(limits).parse_at(&c.bytes, 8);
        match (&at, &got) {
            (Err(a), Err(g)) => assert_eq!(a, g, "{}: parse_at disagrees on {}", c.origin, hex::encode(&c.bytes)),
            (Err(a), Ok(())) => panic!("{}: parse_at rejects ({a}) what frozen accepts", c.origin),
            (Ok(d), Err(g)) => assert!(g.offset() >= d.end(), "{}: parse_at accepts, frozen {g}", c.origin),
            (Ok(_), Ok(())) => {}
        }
    }
    got
}

// ---------------------------------------------------------------- randomness

/// SplitMix64: deterministic, dependency free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.next() % n == 0
    }
    fn pick<'a, T>(&mut self, s: &'a [T]) -> &'a T {
        &s[self.below(s.len())]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

// ---------------------------------------------------------------- writer-made blocks

fn byte_len(dtype: DType, n: u64) -> usize {
    match dtype.width() {
        kiln_nostd::dtype::Width::Bytes(w) => (n * u64::from(w)) as usize,
        kiln_nostd::dtype::Width::Nibble => n.div_ceil(2) as usize,
        kiln_nostd::dtype::Width::Opaque => 0,
    }
}

fn payload(rng: &mut Rng, dtype: DType, n: u64) -> Vec<u8> {
    let mut data = rng.bytes(byte_len(dtype, n));
    match dtype {
        DType::Bool => data.iter_mut().for_each(|b| *b &= 1),
        DType::I4 | DType::U4 | DType::E2M1 if n % 2 == 1 => {
            if let Some(l) = data.last_mut() {
                *l &= 0x0F;
            }
        }
        _ => {}
    }
    if rng.one_in(4) {
        data.iter_mut().for_each(|b| *b = 0); // zeros look like padding
    }
    data
}

fn plain_tensor(rng: &mut Rng) -> OwnedTensor {
    if rng.one_in(8) {
        let block = 1 + rng.below(20) as u32;
        let blocks = rng.below(3);
        return OwnedTensor {
            name: None,
            dtype: DType::Opaque(4096 + rng.below(28672) as u16),
            shape: (0..rng.below(3)).map(|_| rng.below(40) as u64).collect(),
            data: rng.bytes(blocks * block as usize),
            layout: Some(rng.pick(&["Q4_K", "Q8_0", "é", "x", "Q4_K"]).to_string()),
            block_size: block,
            quant: QuantSpec::None,
        };
    }
    let dtype = *rng.pick(DType::closed_set());
    let rank = rng.below(5);
    let shape: Vec<u64> = (0..rank).map(|_| if rng.one_in(10) { 0 } else { 1 + rng.below(4) as u64 }).collect();
    let n = shape.iter().product();
    OwnedTensor {
        name: None,
        data: payload(rng, dtype, n),
        dtype,
        shape,
        layout: None,
        block_size: 0,
        quant: QuantSpec::None,
    }
}

/// A quantized tensor with its scale (and maybe outer) tensor, appended at `base`.
fn quant_group(rng: &mut Rng, base: u32) -> Vec<OwnedTensor> {
    let dtype = *rng.pick(&[DType::E2M1, DType::I4, DType::U8, DType::F8E4M3]);
    let rank = 1 + rng.below(2);
    let shape: Vec<u64> = (0..rank).map(|_| 1 + rng.below(40) as u64).collect();
    let axis = rng.below(rank);
    let group = 1 + rng.below(40) as u32;
    let scales = kiln_nostd::dequant::quant::scale_count(&shape, axis, group).expect("small");
    let n: u64 = shape.iter().product();
    let scale_dtype = *rng.pick(&[DType::E8M0, DType::F8E4M3, DType::F16, DType::F32]);
    let outer = rng.one_in(2);
    let scale_first = rng.one_in(3);
    let (data_i, scale_i) = if scale_first { (base + 1, base) } else { (base, base + 1) };
    let quant = if outer {
        QuantSpec::ScalesOuter {
            axis: axis as u16,
            group_size: group,
            scale: TensorRef::Index(scale_i),
            outer: TensorRef::Index(base + 2),
        }
    } else {
        QuantSpec::Scales { axis: axis as u16, group_size: group, scale: TensorRef::Index(scale_i) }
    };
    let data =
        OwnedTensor { name: None, data: payload(rng, dtype, n), dtype, shape, layout: None, block_size: 0, quant };
    let scale = OwnedTensor {
        name: None,
        data: payload(rng, scale_dtype, scales),
        dtype: scale_dtype,
        shape: vec![scales],
        layout: None,
        block_size: 0,
        quant: QuantSpec::None,
    };
    let _ = data_i;
    let mut out = if scale_first { vec![scale, data] } else { vec![data, scale] };
    if outer {
        let shape = if rng.one_in(2) { vec![] } else { vec![1] };
        out.push(OwnedTensor {
            name: None,
            dtype: DType::F32,
            shape,
            data: 1.0f32.to_le_bytes().to_vec(),
            layout: None,
            block_size: 0,
            quant: QuantSpec::None,
        });
    }
    out
}

fn tensor_set(rng: &mut Rng, max: usize) -> Vec<OwnedTensor> {
    let mut ts: Vec<OwnedTensor> = (0..rng.below(max + 1)).map(|_| plain_tensor(rng)).collect();
    if rng.one_in(3) {
        let base = ts.len() as u32;
        ts.extend(quant_group(rng, base));
    }
    if !ts.is_empty() && rng.one_in(2) {
        name_all(rng, &mut ts);
    }
    ts
}

/// Names every tensor in one of four styles (ASCII, dotted, non-ASCII, long).
fn name_all(rng: &mut Rng, ts: &mut [OwnedTensor]) {
    let style = rng.below(4);
    for (i, t) in ts.iter_mut().enumerate() {
        t.name = Some(match style {
            0 => format!("t{i}"),
            1 => format!("model.layers.{}.attention.wq", i),
            2 => format!("名前-{i}-é"),
            _ => format!("{}{}", "p".repeat(20), char::from(b'a' + (i % 26) as u8)),
        });
    }
}

fn write_set(ts: &[OwnedTensor]) -> Vec<u8> {
    let specs = owned::specs(ts);
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).expect("plan")];
    Writer::new().write(&specs, &mut out).expect("generated sets are legal");
    out
}

// ---------------------------------------------------------------- Frozen values

#[derive(Clone, Debug)]
enum Ty {
    Scalar(&'static str, usize),
    Bool,
    Str,
    Bytes,
    Tensors,
    List(Box<Ty>),
    Opt(Box<Ty>),
    Dict(Box<Ty>),
    Struct(Vec<(&'static str, Ty)>),
}

impl Ty {
    fn text(&self) -> String {
        match self {
            Ty::Scalar(n, _) => (*n).to_owned(),
            Ty::Bool => "bool".into(),
            Ty::Str => "str".into(),
            Ty::Bytes => "list<u8>".into(),
            Ty::Tensors => "tensors".into(),
            Ty::List(t) => format!("list<{}>", t.text()),
            Ty::Opt(t) => format!("opt<{}>", t.text()),
            Ty::Dict(t) => format!("dict<str,{}>", t.text()),
            Ty::Struct(fs) => {
                let mut s = String::from("struct{");
                for (n, t) in fs {
                    s += &format!("{n}:{},", t.text());
                }
                s + "}"
            }
        }
    }
}

fn list(t: Ty) -> Ty {
    Ty::List(Box::new(t))
}
fn opt(t: Ty) -> Ty {
    Ty::Opt(Box::new(t))
}
fn dict(t: Ty) -> Ty {
    Ty::Dict(Box::new(t))
}

/// The Frozen types the differential run covers (every construct), with the
/// count cap to use (types of minimum size 0 get a small one, so a hostile
/// count cannot make either side loop 16 million times).
fn frozen_types() -> Vec<(Ty, bool, u32)> {
    let rec = Ty::Struct(vec![("id", Ty::Scalar("u32", 4)), ("name", Ty::Str)]);
    let batch = Ty::Struct(vec![("id", Ty::Scalar("i64", 8)), ("batch", Ty::Tensors)]);
    let mixed = Ty::Struct(vec![
        ("a", Ty::Bool),
        ("b", opt(Ty::Scalar("f64", 8))),
        ("c", dict(Ty::Bytes)),
        ("d", list(Ty::Tensors)),
        ("e", Ty::Scalar("uint", 8)),
        ("f", Ty::Struct(vec![])),
        ("g", Ty::Scalar("i16", 2)),
    ]);
    vec![
        (Ty::Tensors, false, DEFAULT_CAP),
        (batch.clone(), false, DEFAULT_CAP),
        (batch, true, DEFAULT_CAP),
        (list(Ty::Scalar("f32", 4)), false, DEFAULT_CAP),
        (list(Ty::Str), false, DEFAULT_CAP),
        (list(rec.clone()), false, DEFAULT_CAP),
        (list(rec), true, DEFAULT_CAP),
        (dict(opt(Ty::Scalar("i16", 2))), false, DEFAULT_CAP),
        (opt(Ty::Bytes), false, DEFAULT_CAP),
        (mixed.clone(), false, 4096),
        (mixed, true, 4096),
        (list(Ty::Struct(vec![])), false, 4096),
        (list(opt(Ty::Bool)), false, DEFAULT_CAP),
        (dict(Ty::Tensors), false, DEFAULT_CAP),
        (list(list(Ty::Scalar("i8", 1))), false, DEFAULT_CAP),
        (opt(opt(Ty::Scalar("int", 8))), false, DEFAULT_CAP),
        (Ty::Str, false, DEFAULT_CAP),
        (Ty::Bool, false, DEFAULT_CAP),
        (Ty::Scalar("u16", 2), true, DEFAULT_CAP),
        (Ty::Scalar("f32", 4), false, DEFAULT_CAP),
    ]
}

const STRINGS: &[&str] = &["", "a", "b", "ab", "é", "名前", "key", "k\u{10FFFF}", "zz", "\u{7f}"];

fn gen_value(rng: &mut Rng, t: &Ty, out: &mut Vec<u8>) {
    match t {
        Ty::Scalar(_, w) => out.extend(rng.bytes(*w)),
        Ty::Bool => out.push(rng.below(2) as u8),
        Ty::Str => {
            let s = *rng.pick(STRINGS);
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
        }
        Ty::Bytes => {
            let n = rng.below(6);
            let b = rng.bytes(n);
            out.extend((b.len() as u32).to_le_bytes());
            out.extend(b);
        }
        Ty::Tensors => {
            let ts = tensor_set(rng, 2);
            out.extend(write_set(&ts));
        }
        Ty::List(e) => {
            let n = rng.below(4);
            out.extend((n as u32).to_le_bytes());
            for _ in 0..n {
                gen_value(rng, e, out);
            }
        }
        Ty::Opt(e) => {
            if rng.one_in(3) {
                out.push(0);
            } else {
                out.push(1);
                gen_value(rng, e, out);
            }
        }
        Ty::Dict(v) => {
            let mut keys: Vec<&str> = (0..rng.below(4)).map(|_| *rng.pick(STRINGS)).collect();
            keys.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            keys.dedup();
            out.extend((keys.len() as u32).to_le_bytes());
            for k in keys {
                out.extend((k.len() as u32).to_le_bytes());
                out.extend(k.as_bytes());
                gen_value(rng, v, out);
            }
        }
        Ty::Struct(fs) => fs.iter().for_each(|(_, f)| gen_value(rng, f, out)),
    }
}

fn frame(ty: &str, body: Vec<u8>) -> Vec<u8> {
    let mut out = frozen::frame_bytes(frozen::hash_text(ty)).to_vec();
    out.extend(body);
    out
}

// ---------------------------------------------------------------- mutations

/// Field offsets and widths of the directory header and descriptor.
const HEADER_FIELDS: &[(usize, usize)] = &[(4, 1), (5, 1), (6, 2), (8, 4), (12, 4), (16, 8), (24, 8)];
const DESC_FIELDS: &[(usize, usize)] = &[
    (0, 2),
    (2, 1),
    (3, 1),
    (4, 2),
    (6, 2),
    (8, 2),
    (10, 2),
    (12, 4),
    (16, 2),
    (18, 2),
    (20, 4),
    (24, 4),
    (28, 4),
    (32, 8),
    (40, 8),
    (48, 8),
    (56, 8),
    (64, 8),
    (72, 8),
    (80, 8),
    (88, 8),
    (96, 8),
    (104, 8),
    (112, 1),
    (127, 1),
];

fn read_le(b: &[u8], at: usize, w: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..w].copy_from_slice(&b[at..at + w]);
    u64::from_le_bytes(v)
}

fn write_le(b: &mut [u8], at: usize, w: usize, v: u64) {
    b[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
}

fn boundary(rng: &mut Rng, w: usize, old: u64) -> u64 {
    let max = if w == 8 { u64::MAX } else { (1u64 << (8 * w)) - 1 };
    let common = [0, 1, 2, 3, old.wrapping_add(1), old.wrapping_sub(1), max, max - 1, max / 2, max / 2 + 1, rng.next()];
    let v = match w {
        1 => *rng.pick(&[7, 8, 9, 0x7f, 0x80, 0xfe][..]),
        2 => *rng.pick(&[8, 19, 20, 4095, 4096, 32767, 32768, 0xfffe, 0xffff, 64, 128][..]),
        4 => *rng.pick(&[0xffff, 0x1_0000, 16_777_215, 16_777_216, 16_777_217, 0x7fff_ffff, 0x8000_0000, 32, 33][..]),
        _ => *rng.pick(
            &[
                63,
                64,
                65,
                128,
                1 << 32,
                (1 << 32) + 1,
                1 << 63,
                u64::MAX - 63,
                u64::MAX - 64,
                u64::MAX - old,
                old.wrapping_mul(2),
                old.wrapping_add(64),
                1 << 21,
                1 << 31,
                0x1_0000_0001,
            ][..],
        ),
    };
    let v = if rng.one_in(2) { *rng.pick(&common) } else { v };
    v & max
}

/// Positions of `KLNT` in `b` (directory blocks, real or accidental).
fn blocks_in(b: &[u8]) -> Vec<usize> {
    b.windows(4).enumerate().filter(|(_, w)| *w == b"KLNT").map(|(i, _)| i).collect()
}

/// Sets one header or descriptor field of a block in `b` to a boundary value.
fn mutate_field(rng: &mut Rng, b: &mut [u8]) -> bool {
    let starts = blocks_in(b);
    let Some(&start) = starts.get(rng.below(starts.len())) else { return false };
    if start + 64 > b.len() {
        return false;
    }
    let count = read_le(b, start + 8, 4) as usize;
    let fits = (b.len() - start - 64) / 128;
    let (at, w) = if count == 0 || fits == 0 || rng.one_in(3) {
        if rng.one_in(8) {
            (start + 32 + rng.below(32), 1)
        } else {
            let (f, w) = *rng.pick(HEADER_FIELDS);
            (start + f, w)
        }
    } else {
        let i = rng.below(count.min(fits));
        let (f, w) = *rng.pick(DESC_FIELDS);
        (start + 64 + 128 * i + f, w)
    };
    let old = read_le(b, at, w);
    write_le(b, at, w, boundary(rng, w, old));
    if rng.one_in(2) {
        // Keep directory_bytes consistent so later steps run.
        let count = read_le(b, start + 8, 4);
        let names = read_le(b, start + 12, 4);
        write_le(b, start + 24, 8, count.wrapping_mul(128).wrapping_add(names));
    }
    true
}

fn mutate(rng: &mut Rng, mut b: Vec<u8>) -> (Vec<u8>, &'static str) {
    let what = match rng.below(10) {
        0 | 1 if !b.is_empty() => {
            let i = rng.below(b.len());
            b[i] = match rng.below(4) {
                0 => b[i] ^ (1 << rng.below(8)),
                1 => *rng.pick(&[0, 1, 2, 0x7f, 0x80, 0xff]),
                _ => rng.next() as u8,
            };
            "byte"
        }
        2 if !b.is_empty() => {
            for _ in 0..2 + rng.below(7) {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            "bytes"
        }
        3..=5 => {
            let mut any = false;
            for _ in 0..1 + rng.below(3) {
                any |= mutate_field(rng, &mut b);
            }
            if any {
                "field"
            } else {
                return mutate(rng, b);
            }
        }
        6 if b.len() >= 4 => {
            // A u32 word (count or length) at any position.
            let i = rng.below(b.len() - 3);
            let old = read_le(&b, i, 4);
            write_le(&mut b, i, 4, boundary(rng, 4, old));
            "word"
        }
        7 if !b.is_empty() => {
            let n = rng.below(b.len());
            b.truncate(n);
            "truncate"
        }
        8 => {
            let n = 1 + rng.below(70);
            let extra = rng.bytes(n);
            if rng.one_in(2) || b.is_empty() {
                b.extend(extra);
            } else {
                let i = rng.below(b.len());
                b.splice(i..i, extra);
            }
            "insert"
        }
        9 if !b.is_empty() => {
            let i = rng.below(b.len());
            let n = 1 + rng.below((b.len() - i).min(64));
            b.drain(i..i + n);
            "delete"
        }
        _ => "none",
    };
    (b, what)
}

// ---------------------------------------------------------------- out-of-order ranges

/// Descriptor field offsets used by the out-of-order generator.
const AT_DTYPE: usize = 0;
const AT_RANK: usize = 2;
const AT_NAME_OFF: usize = 4;
const AT_NAME_LEN: usize = 6;
const AT_LAYOUT_OFF: usize = 8;
const AT_LAYOUT_LEN: usize = 10;
const AT_OFFSET: usize = 32;
const AT_LENGTH: usize = 40;
const AT_SHAPE: usize = 48;

/// A step-9 (or step-10) fault planted in a descriptor that comes after the
/// first out-of-order range. `None` leaves the block to step 10.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Later {
    None,
    /// LIMIT: the shape product overflows.
    ShapeOverflow,
    /// LIMIT: byte_offset + byte_length overflows.
    RangeOverflow,
    /// LIMIT: the element count fits, n × width does not.
    WidthOverflow,
    /// TYPE: the range ends past payload_bytes.
    PastPayload,
    /// TYPE: dtype 0, reserved, above 32767, or opaque without a layout.
    Dtype,
    /// TYPE: rank above 8.
    Rank,
    /// TYPE: a shape slot at or past the rank is nonzero.
    ShapeTail,
    /// TYPE: byte_length is not n × width.
    LengthMismatch,
    /// TYPE: the range really intersects another nonempty range.
    Intersect,
}

const LATER: &[Later] = &[
    Later::None,
    Later::None,
    Later::ShapeOverflow,
    Later::ShapeOverflow,
    Later::RangeOverflow,
    Later::WidthOverflow,
    Later::WidthOverflow,
    Later::PastPayload,
    Later::Dtype,
    Later::Rank,
    Later::ShapeTail,
    Later::LengthMismatch,
    Later::Intersect,
    Later::Intersect,
];

fn align64(x: u64) -> u64 {
    x.div_ceil(64) * 64
}

fn zero_length_tensor(rng: &mut Rng) -> OwnedTensor {
    if rng.one_in(5) {
        return OwnedTensor {
            name: None,
            dtype: DType::Opaque(4096 + rng.below(28672) as u16),
            shape: vec![rng.below(3) as u64],
            data: Vec::new(),
            layout: Some("Q4_K".into()),
            block_size: 1 + rng.below(20) as u32,
            quant: QuantSpec::None,
        };
    }
    let rank = 1 + rng.below(3);
    let mut shape: Vec<u64> = (0..rank).map(|_| 1 + rng.below(4) as u64).collect();
    shape[rng.below(rank)] = 0;
    OwnedTensor {
        name: None,
        dtype: *rng.pick(DType::closed_set()),
        shape,
        data: Vec::new(),
        layout: None,
        block_size: 0,
        quant: QuantSpec::None,
    }
}

/// A legal set of at least two tensors, some of them zero-length, sometimes
/// with a quantized group at the end, sometimes named.
fn out_of_order_set(rng: &mut Rng) -> Vec<OwnedTensor> {
    let n = match rng.below(8) {
        0 => 2,
        1 => 7 + rng.below(6),
        _ => 3 + rng.below(4),
    };
    let mut ts: Vec<OwnedTensor> =
        (0..n).map(|_| if rng.one_in(5) { zero_length_tensor(rng) } else { plain_tensor(rng) }).collect();
    if rng.one_in(5) {
        let base = ts.len() as u32;
        ts.extend(quant_group(rng, base));
    }
    if rng.one_in(2) {
        name_all(rng, &mut ts);
    }
    ts
}

/// A placement order of `n >= 2` items that is usually not the identity.
fn placement_order(rng: &mut Rng, n: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    match rng.below(4) {
        0 => p.reverse(),
        1 => {
            let i = rng.below(n - 1);
            p.swap(i, i + 1);
        }
        2 => p.rotate_left(1 + rng.below(n - 1)),
        _ => {
            for i in (1..n).rev() {
                let j = rng.below(i + 1);
                p.swap(i, j);
            }
        }
    }
    p
}

/// The first descriptor whose nonempty range starts before the end of an
/// earlier nonempty range (the place where the old Rust core reported a
/// false overlap), if any.
fn first_inversion(offs: &[u64], lens: &[u64]) -> Option<usize> {
    let mut furthest = 0u64;
    let mut any = false;
    for (i, (&o, &l)) in offs.iter().zip(lens).enumerate() {
        if l == 0 {
            continue;
        }
        if any && o < furthest {
            return Some(i);
        }
        furthest = furthest.max(o.saturating_add(l));
        any = true;
    }
    None
}

/// A canonical block whose payloads are moved to out-of-order places that
/// intersect nothing (gaps of any size, touching ranges, zero-length tensors
/// anywhere, even inside another range), `payload_bytes` set so every range
/// stays inside the region; then, usually in a descriptor after the first
/// out-of-order range, one step-9 fault of each kind (or none, so step 10
/// decides), sometimes a second one, sometimes an earlier step-8 fault, and
/// sometimes a nonzero gap byte. Returns the block and a description.
fn out_of_order_block(rng: &mut Rng) -> (Vec<u8>, String) {
    let ts = out_of_order_set(rng);
    let canon = write_set(&ts);
    let n = ts.len();
    let name_bytes = read_le(&canon, 12, 4) as usize;
    let base = (64 + 128 * n + name_bytes + 63) & !63;
    let d = |i: usize| 64 + 128 * i;
    let lens: Vec<u64> = (0..n).map(|i| read_le(&canon, d(i) + AT_LENGTH, 8)).collect();
    let data: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let o = base + read_le(&canon, d(i) + AT_OFFSET, 8) as usize;
            canon[o..o + lens[i] as usize].to_vec()
        })
        .collect();

    // Nonempty ranges in a permuted order, never intersecting.
    let order = placement_order(rng, n);
    let mut offs = vec![0u64; n];
    let mut cursor = if rng.one_in(5) { 64 * rng.below(3) as u64 } else { 0 };
    for &i in order.iter().filter(|&&i| lens[i] != 0) {
        let o = match rng.below(5) {
            0 => cursor, // touching the range placed before it
            1..=3 => align64(cursor),
            _ => cursor + rng.below(100) as u64,
        };
        offs[i] = o;
        cursor = o + lens[i];
    }
    // Zero-length tensors: anywhere in the region, even inside a range.
    for i in (0..n).filter(|&i| lens[i] == 0) {
        offs[i] = match rng.below(4) {
            0 => rng.below(cursor as usize + 1) as u64,
            1 => align64(rng.below(cursor as usize + 1) as u64),
            2 => cursor,
            _ => order.iter().position(|&k| k == i).map_or(0, |p| 64 * p as u64),
        };
    }

    let inv = first_inversion(&offs, &lens);
    let later_than = |rng: &mut Rng| -> usize {
        match inv {
            Some(v) if v + 1 < n && !rng.one_in(8) => v + 1 + rng.below(n - v - 1),
            _ => rng.below(n),
        }
    };
    let mut faults = vec![(*rng.pick(LATER), later_than(rng))];
    if rng.one_in(6) {
        faults.push((*rng.pick(&LATER[2..]), later_than(rng)));
    }

    // A true intersection moves an offset, so it is planted before the
    // payload region is laid out.
    for &(kind, j) in &faults {
        if kind != Later::Intersect {
            continue;
        }
        let others: Vec<usize> = (0..n).filter(|&k| k != j && lens[k] != 0).collect();
        let earlier: Vec<usize> = others.iter().copied().filter(|&k| k < j).collect();
        let pool = if earlier.is_empty() { &others } else { &earlier };
        if pool.is_empty() {
            continue;
        }
        let k = *rng.pick(pool);
        let len_j = lens[j].max(1);
        offs[j] = if rng.one_in(2) {
            offs[k] + rng.below(lens[k] as usize) as u64
        } else {
            offs[k].saturating_sub(rng.below(len_j as usize) as u64)
        };
    }

    let end = (0..n).map(|i| offs[i] + lens[i]).max().unwrap_or(0);
    let payload_bytes = end + if rng.one_in(5) { rng.below(70) as u64 } else { 0 };
    let mut region = vec![0u8; payload_bytes as usize];
    for i in 0..n {
        region[offs[i] as usize..(offs[i] + lens[i]) as usize].copy_from_slice(&data[i]);
    }
    let mut b = canon[..base].to_vec();
    write_le(&mut b, 16, 8, payload_bytes);
    for (i, &o) in offs.iter().enumerate() {
        write_le(&mut b, d(i) + AT_OFFSET, 8, o);
    }
    let mut notes = Vec::new();
    if rng.one_in(8) {
        // A nonzero byte that no range covers (step 10, after the offsets).
        let free: Vec<usize> = (0..region.len())
            .filter(|&p| !(0..n).any(|i| (offs[i]..offs[i] + lens[i]).contains(&(p as u64))))
            .collect();
        if !free.is_empty() {
            let p = *rng.pick(&free);
            region[p] = 1 + rng.below(255) as u8;
            notes.push(format!("gap byte {p}"));
        }
    }
    b.extend(region);

    for &(kind, j) in &faults {
        plant(rng, &mut b, kind, d(j), payload_bytes, offs[j], lens[j]);
    }
    if rng.one_in(8) {
        notes.push(step8_fault(rng, &mut b, n, name_bytes));
    }
    let faults: Vec<String> = faults.iter().map(|(k, j)| format!("{k:?}@{j}")).collect();
    let how = format!(
        "out-of-order {n} tensors, placement {order:?}, first inversion {inv:?}, later {}{}{}",
        faults.join("+"),
        if notes.is_empty() { "" } else { ", " },
        notes.join(", ")
    );
    (b, how)
}

/// Plants one step-9 fault in the descriptor at `at` (range already placed).
fn plant(rng: &mut Rng, b: &mut [u8], kind: Later, at: usize, payload_bytes: u64, off: u64, len: u64) {
    let set_shape = |b: &mut [u8], dims: &[u64]| {
        b[at + AT_RANK] = dims.len() as u8;
        for s in 0..8 {
            write_le(b, at + AT_SHAPE + 8 * s, 8, dims.get(s).copied().unwrap_or(0));
        }
    };
    match kind {
        Later::None | Later::Intersect => {}
        Later::ShapeOverflow => {
            let dims: &[u64] = match rng.below(6) {
                0 => &[1 << 62, 8],
                1 => &[1 << 32, 1 << 32],
                2 => &[u64::MAX, 2],
                3 => &[3, 1 << 63, 1],
                4 => &[1 << 8; 8],
                _ => &[1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16],
            };
            set_shape(b, dims);
        }
        Later::RangeOverflow => {
            if rng.one_in(2) {
                let len = if len == 0 { 1 + rng.below(100) as u64 } else { len };
                write_le(b, at + AT_LENGTH, 8, len);
                write_le(b, at + AT_OFFSET, 8, u64::MAX - rng.below(len as usize) as u64);
            } else {
                let off = if off == 0 { 1 + rng.below(64) as u64 } else { off };
                write_le(b, at + AT_OFFSET, 8, off);
                write_le(b, at + AT_LENGTH, 8, u64::MAX - rng.below(off as usize) as u64);
            }
        }
        Later::WidthOverflow => {
            let (code, w) = *rng.pick(&[(1u16, 8u64), (2, 4), (3, 2), (11, 2), (14, 8), (13, 4)]);
            write_le(b, at + AT_DTYPE, 2, u64::from(code));
            let least = u64::MAX / w + 1; // the smallest count whose byte size overflows
            match rng.below(3) {
                0 => set_shape(b, &[least]),
                1 => set_shape(b, &[u64::MAX - rng.below(1000) as u64]),
                _ => set_shape(b, &[1 << 32, least.div_ceil(1 << 32)]),
            }
        }
        Later::PastPayload => match rng.below(3) {
            0 => write_le(b, at + AT_LENGTH, 8, payload_bytes - off + 1 + rng.below(64) as u64),
            1 => write_le(b, at + AT_OFFSET, 8, payload_bytes + 1 + rng.below(1 << 20) as u64),
            _ => {
                write_le(b, at + AT_OFFSET, 8, payload_bytes);
                write_le(b, at + AT_LENGTH, 8, len.max(1));
            }
        },
        Later::Dtype => {
            let code = match rng.below(7) {
                0 => 0,
                1 => 20,
                2 => 21 + rng.below(4074) as u64,
                3 => 4095,
                4 => 32768,
                5 => 0xffff,
                _ => 4096 + rng.below(28672) as u64, // opaque: needs a layout name
            };
            write_le(b, at + AT_DTYPE, 2, code);
        }
        Later::Rank => b[at + AT_RANK] = 9 + rng.below(247) as u8,
        Later::ShapeTail => {
            let rank = usize::from(b[at + AT_RANK]).min(8);
            if rank < 8 {
                let s = rank + rng.below(8 - rank);
                write_le(b, at + AT_SHAPE + 8 * s, 8, *rng.pick(&[1, 2, 1 << 63, u64::MAX]));
            } else {
                write_le(b, at + AT_DTYPE, 2, 0);
            }
        }
        Later::LengthMismatch => {
            let rank = usize::from(b[at + AT_RANK]);
            let dim0 = read_le(b, at + AT_SHAPE, 8);
            if rank >= 1 && dim0 < 1 << 20 && rng.one_in(2) {
                write_le(b, at + AT_SHAPE, 8, dim0 + 1);
            } else if len > 0 {
                write_le(b, at + AT_LENGTH, 8, len - 1);
            } else {
                write_le(b, at + AT_LENGTH, 8, 1);
            }
        }
    }
}

/// Plants a step-8 fault (reserved byte, name field, name or layout UTF-8)
/// in any descriptor of a block of `n` descriptors.
fn step8_fault(rng: &mut Rng, b: &mut [u8], n: usize, name_bytes: usize) -> String {
    let e = rng.below(n);
    let at = 64 + 128 * e;
    let heap = 64 + 128 * n;
    let named = b[5] & 1 != 0;
    let name_len = read_le(b, at + AT_NAME_LEN, 2) as usize;
    match rng.below(3) {
        0 => {
            let r = if rng.one_in(3) { 3 } else { 112 + rng.below(16) };
            b[at + r] = 1 + rng.below(255) as u8;
            format!("step 8 reserved byte {r} of descriptor {e}")
        }
        1 if named => {
            let off = read_le(b, at + AT_NAME_OFF, 2);
            write_le(b, at + AT_NAME_OFF, 2, off + 1);
            format!("step 8 name_off of descriptor {e}")
        }
        1 => {
            write_le(b, at + AT_NAME_LEN, 2, 1);
            format!("step 8 name_len without the flag, descriptor {e}")
        }
        _ if named && name_len > 0 => {
            let off = read_le(b, at + AT_NAME_OFF, 2) as usize;
            b[heap + off + rng.below(name_len)] = 0xff;
            format!("step 8 name of descriptor {e} not UTF-8")
        }
        _ => {
            let layout_len = read_le(b, at + AT_LAYOUT_LEN, 2) as usize;
            let layout_off = read_le(b, at + AT_LAYOUT_OFF, 2) as usize;
            if layout_len > 0 && layout_off + layout_len <= name_bytes {
                b[heap + layout_off] = 0xc0;
                format!("step 8 layout name of descriptor {e} not UTF-8")
            } else {
                write_le(b, at + AT_LAYOUT_OFF, 2, 0);
                format!("step 8 layout_off of descriptor {e}")
            }
        }
    }
}

/// An out-of-order case: a standalone `tensors` value, or the same block as
/// the `batch` field of `struct{id:i64,batch:tensors,}`. Its verdict is
/// compared strictly (see [`compare`]).
fn out_of_order_case(rng: &mut Rng) -> Case {
    let (block, how) = out_of_order_block(rng);
    let mut c = if rng.one_in(4) {
        let mut bytes = rng.bytes(8);
        bytes.extend(block);
        let mut c = Case::new("struct{id:i64,batch:tensors,}", false, bytes, how);
        c.block_at = Some(8);
        c
    } else {
        let mut c = Case::new("tensors", false, block, how);
        c.block_at = Some(0);
        c
    };
    if rng.one_in(10) {
        // Now and then a random mutation on top: an ordinary case again.
        let (b, what) = mutate(rng, std::mem::take(&mut c.bytes));
        c.bytes = b;
        c.origin = format!("{} + [{what}]", c.origin);
        c.block_at = None;
    }
    c
}

/// Where an error offset points, for comparing two implementations that may
/// pick different fields of one descriptor for the same fault: the
/// descriptor's index, or the exact byte outside the descriptor table.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Descriptor(usize),
    Byte(usize),
}

fn place(bytes: &[u8], block_at: usize, off: usize) -> Place {
    let count = if bytes.len() >= block_at + 12 { read_le(bytes, block_at + 8, 4) as usize } else { 0 };
    let table = block_at + 64;
    match off.checked_sub(table).map(|k| k / 128) {
        Some(i) if i < count => Place::Descriptor(i),
        _ => Place::Byte(off),
    }
}

fn show_place(p: Place) -> String {
    match p {
        Place::Descriptor(i) => format!("descriptor {i}"),
        Place::Byte(o) => format!("byte {o}"),
    }
}

/// The Rust rules that report what a reference rule reports (steps 8 to 10,
/// where the out-of-order class lands); `None` for rules not compared.
fn rust_rules_for(py_rule: &str) -> Option<&'static [&'static str]> {
    Some(match py_rule {
        "desc_reserved" => &["DescriptorReserved"],
        "name_utf8" => &["NameUtf8"],
        "layout_utf8" => &["LayoutUtf8"],
        "name_duplicate" => &["DuplicateName"],
        "range_overflow" => &["RangeOverflow"],
        "range_past_payload" => &["RangePastPayload"],
        "dtype_zero" | "dtype_reserved" | "dtype_range" => &["UnknownDtype"],
        "rank" => &["RankTooLarge"],
        "shape_tail" => &["ShapeTail"],
        "shape_overflow" | "byte_size_overflow" => &["ShapeOverflow"],
        "length_mismatch" => &["LengthMismatch"],
        "layout_non_opaque" | "block_size_non_opaque" => &["LayoutOnDenseDtype"],
        "opaque_no_layout" => &["OpaqueWithoutLayout"],
        "opaque_block_size" | "opaque_block_multiple" => &["OpaqueBlockSize"],
        "overlap" => &["RangeOverlap"],
        "offset_not_canonical" => &["NonCanonicalOffset"],
        "gap_nonzero" => &["NonzeroGap"],
        "payload_bytes_not_canonical" => &["NonCanonicalPayloadBytes"],
        _ => return None,
    })
}

// ---------------------------------------------------------------- the run

#[derive(serde::Deserialize)]
struct CaseFile {
    cases: Vec<CaseEntry>,
}

#[derive(serde::Deserialize, serde::Serialize, Clone, Debug)]
struct CaseEntry {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    framed: bool,
    hex: String,
    expect: String,
    #[serde(default)]
    note: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count_cap: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    byte_cap: Option<u32>,
    /// The reference's error offset, where the case pins it: the reference
    /// must report exactly this offset, the Rust core an offset in the same
    /// descriptor (or this exact byte outside the descriptor table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset: Option<usize>,
    /// The reference's rule name, where the case pins it (reference only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
}

fn goldens() -> Vec<CaseEntry> {
    let text = std::fs::read_to_string(repo_root().join("spec/kiln-v2-cases.json")).expect("golden cases");
    serde_json::from_str::<CaseFile>(&text).expect("golden json").cases
}

/// Percentage of generated cases drawn from the out-of-order class.
const OUT_OF_ORDER_PERCENT: usize = 15;

fn generate(rng: &mut Rng, n: usize, gold: &[CaseEntry]) -> Vec<Case> {
    let types = frozen_types();
    let mut cases = Vec::with_capacity(n);
    while cases.len() < n {
        if rng.below(100) < OUT_OF_ORDER_PERCENT {
            cases.push(out_of_order_case(rng));
            continue;
        }
        let mut base = match rng.below(10) {
            0..=2 => {
                let g = rng.pick(gold);
                Case::new(&g.ty, g.framed, hex::decode(&g.hex).expect("hex"), format!("golden {}", g.name))
            }
            3..=6 => {
                let ts = tensor_set(rng, 5);
                Case::new("tensors", false, write_set(&ts), format!("writer {} tensors", ts.len()))
            }
            _ => {
                let (t, framed, cap) = rng.pick(&types).clone();
                let text = t.text();
                let mut body = Vec::new();
                gen_value(rng, &t, &mut body);
                let bytes = if framed { frame(&text, body) } else { body };
                let mut c = Case::new(&text, framed, bytes, format!("frozen {text}"));
                c.count_cap = cap;
                c
            }
        };
        if rng.one_in(10) {
            // Small caps, so LIMIT is reachable with small inputs.
            base.count_cap = base.count_cap.min(*rng.pick(&[0, 1, 2, 3, 4, 100]));
            base.byte_cap = *rng.pick(&[0, 1, 2, 3, 4, 100, DEFAULT_CAP]);
        }
        let rounds = if rng.one_in(20) { 0 } else { 1 + usize::from(rng.one_in(4)) };
        let mut how = Vec::new();
        for _ in 0..rounds {
            let (b, what) = mutate(rng, std::mem::take(&mut base.bytes));
            base.bytes = b;
            how.push(what);
        }
        base.origin = format!("{} + [{}]", base.origin, how.join(","));
        cases.push(base);
    }
    cases
}

#[derive(Default)]
struct Tally {
    cases: usize,
    accepted: usize,
    codes: BTreeMap<String, usize>,
    offset_mismatches: usize,
    offset_samples: Vec<String>,
    offset_kinds: BTreeMap<String, usize>,
    /// Same code, and the reference rule is one [`rust_rules_for`] maps.
    rules_compared: usize,
    rule_mismatches: usize,
    rule_kinds: BTreeMap<String, usize>,
    ooo: ClassTally,
    disagreements: Vec<Disagreement>,
}

/// Counts for the out-of-order class (cases with `block_at`).
#[derive(Default)]
struct ClassTally {
    cases: usize,
    accepted: usize,
    codes: BTreeMap<String, usize>,
    /// Reference verdicts by rule (what the class reaches).
    py_rules: BTreeMap<String, usize>,
    code_disagreements: usize,
    /// Same code, offsets in different descriptors (or bytes): failures.
    place_disagreements: usize,
    /// Same code and place, different exact offset: counted only (the two
    /// implementations pick different fields of one descriptor for some rules).
    exact_offset_differences: usize,
    /// Those by "rust rule / python rule".
    exact_offset_kinds: BTreeMap<String, usize>,
    rule_mismatches: usize,
}

struct Disagreement {
    case: Case,
    /// "code", "crash" or "offset".
    kind: &'static str,
    rust: String,
    python: String,
}

fn compare(cases: &[Case], answers: &[String], tally: &mut Tally) {
    for (c, a) in cases.iter().zip(answers) {
        tally.cases += 1;
        let strict = c.block_at.is_some();
        if strict {
            tally.ooo.cases += 1;
        }
        let rust_result = rust_check(c);
        let rust = verdict(&rust_result);
        let rust_rule = rust_result.as_ref().err().map_or("", |e| e.rule().id());
        let py = match parse_answer(a) {
            Ok(v) => v,
            Err(crash) => {
                tally.disagreements.push(Disagreement {
                    case: c.clone(),
                    kind: "crash",
                    rust: show(&rust),
                    python: crash,
                });
                continue;
            }
        };
        match &rust {
            None => tally.accepted += 1,
            Some((code, _)) => *tally.codes.entry(code.clone()).or_default() += 1,
        }
        if strict {
            match &py {
                None => tally.ooo.accepted += 1,
                Some((code, _)) => {
                    *tally.ooo.codes.entry(code.clone()).or_default() += 1;
                    let rule = answer_rule(a).unwrap_or("?");
                    *tally.ooo.py_rules.entry(format!("{code} {rule}")).or_default() += 1;
                }
            }
        }
        let same_code = rust.as_ref().map(|r| &r.0) == py.as_ref().map(|p| &p.0);
        if !same_code {
            if strict {
                tally.ooo.code_disagreements += 1;
            }
            let rust = format!("{} ({rust_rule})", show(&rust));
            tally.disagreements.push(Disagreement { case: c.clone(), kind: "code", rust, python: a.clone() });
            continue;
        }
        let (Some((_, r_off)), Some((_, p_off))) = (&rust, &py) else { continue };
        let py_rule = answer_rule(a).unwrap_or("");
        if let Some(ok) = rust_rules_for(py_rule) {
            tally.rules_compared += 1;
            if !ok.contains(&rust_rule) {
                tally.rule_mismatches += 1;
                *tally.rule_kinds.entry(format!("{rust_rule} / {py_rule}")).or_default() += 1;
                if strict {
                    tally.ooo.rule_mismatches += 1;
                }
            }
        }
        if r_off == p_off {
            continue;
        }
        if let Some(at) = c.block_at {
            let (rp, pp) = (place(&c.bytes, at, *r_off), place(&c.bytes, at, *p_off));
            if rp != pp {
                tally.ooo.place_disagreements += 1;
                tally.disagreements.push(Disagreement {
                    case: c.clone(),
                    kind: "offset",
                    rust: format!("{} ({rust_rule}, {})", show(&rust), show_place(rp)),
                    python: format!("{a} ({})", show_place(pp)),
                });
                continue;
            }
            tally.ooo.exact_offset_differences += 1;
            *tally.ooo.exact_offset_kinds.entry(format!("{rust_rule} / {py_rule}")).or_default() += 1;
        }
        tally.offset_mismatches += 1;
        let key = format!("{rust_rule} / {py_rule}");
        *tally.offset_kinds.entry(key).or_default() += 1;
        if tally.offset_samples.len() < 5 {
            tally.offset_samples.push(format!("{} {}: rust {} / python {a}", c.ty, c.origin, show(&rust)));
        }
    }
}

fn write_disagreements(tally: &Tally) -> PathBuf {
    let entries: Vec<CaseEntry> = tally
        .disagreements
        .iter()
        .enumerate()
        .map(|(i, d)| CaseEntry {
            name: format!("diff-{i}"),
            ty: d.case.ty.clone(),
            framed: d.case.framed,
            hex: hex::encode(&d.case.bytes),
            expect: "?".into(),
            note: d.case.origin.clone(),
            reason: Some(format!("{} disagreement; rust: {}; python: {}", d.kind, d.rust, d.python)),
            count_cap: (d.case.count_cap != DEFAULT_CAP).then_some(d.case.count_cap),
            byte_cap: (d.case.byte_cap != DEFAULT_CAP).then_some(d.case.byte_cap),
            offset: None,
            rule: None,
        })
        .collect();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential-disagreements.json");
    let json = serde_json::json!({ "cap": DEFAULT_CAP, "cases": entries });
    std::fs::write(&path, serde_json::to_string_pretty(&json).expect("json")).expect("write disagreements");
    path
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn rust_core_and_python_reference_agree() {
    let total: usize = std::env::var("KILN_DIFF_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("KILN_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x4b49_4c4e);
    let gold = goldens();
    let mut rng = Rng(seed);
    let mut reference = Reference::spawn();
    let mut tally = Tally::default();

    // The goldens themselves first, then generated cases in batches.
    let exact: Vec<Case> = gold
        .iter()
        .map(|g| Case::new(&g.ty, g.framed, hex::decode(&g.hex).expect("hex"), format!("golden {}", g.name)))
        .collect();
    let answers = reference.run(&exact);
    compare(&exact, &answers, &mut tally);

    const BATCH: usize = 20_000;
    let mut left = total;
    while left > 0 {
        let n = left.min(BATCH);
        let cases = generate(&mut rng, n, &gold);
        let answers = reference.run(&cases);
        compare(&cases, &answers, &mut tally);
        left -= n;
    }

    println!(
        "differential: {} cases (seed {seed:#x}): {} accepted, rejected by code {:?}; {} offset-only differences",
        tally.cases, tally.accepted, tally.codes, tally.offset_mismatches
    );
    let o = &tally.ooo;
    println!(
        "  out-of-order class: {} cases, {} accepted, rejected by code {:?}; {} code disagreements, {} offset \
         (descriptor) disagreements, {} exact-offset differences in the same descriptor, {} rule differences",
        o.cases,
        o.accepted,
        o.codes,
        o.code_disagreements,
        o.place_disagreements,
        o.exact_offset_differences,
        o.rule_mismatches
    );
    let mut reached: Vec<_> = o.py_rules.iter().collect();
    reached.sort_by(|a, b| b.1.cmp(a.1));
    let reached: Vec<String> = reached.iter().map(|(r, n)| format!("{r} {n}")).collect();
    println!("  out-of-order class, reference verdicts: {}", reached.join(", "));
    let mut exact: Vec<_> = o.exact_offset_kinds.iter().collect();
    exact.sort_by(|a, b| b.1.cmp(a.1));
    let exact: Vec<String> = exact.iter().map(|(r, n)| format!("{r} {n}")).collect();
    println!("  out-of-order class, same descriptor, other field (rust rule / python rule): {}", exact.join(", "));
    println!(
        "  rules: {} same-code rejections with a compared rule, {} rule differences",
        tally.rules_compared, tally.rule_mismatches
    );
    let mut rk: Vec<_> = tally.rule_kinds.iter().collect();
    rk.sort_by(|a, b| b.1.cmp(a.1));
    for (k, n) in rk.iter().take(12) {
        println!("  rule differs {n:>7}x  rust rule / python rule: {k}");
    }
    for s in &tally.offset_samples {
        println!("  offset differs: {s}");
    }
    let mut kinds: Vec<_> = tally.offset_kinds.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1));
    for (k, n) in kinds.iter().take(12) {
        println!("  offset differs {n:>7}x  rust rule / python rule: {k}");
    }
    assert!(tally.accepted > tally.cases / 50, "too few accepted inputs: the generator is broken");
    assert!(tally.codes.len() >= 6, "not every error code is reached: {:?}", tally.codes);
    assert!(
        total < 1000 || tally.ooo.cases > total / 20,
        "too few out-of-order cases ({} of {total}): the generator is broken",
        tally.ooo.cases
    );
    if !tally.disagreements.is_empty() {
        let path = write_disagreements(&tally);
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for d in &tally.disagreements {
            *kinds.entry(d.kind).or_default() += 1;
        }
        let mut msg =
            format!("{} disagreements {kinds:?} (all written to {}):\n", tally.disagreements.len(), path.display());
        for d in tally.disagreements.iter().take(10) {
            let c = &d.case;
            msg += &format!(
                "  [{}] {} {} [{}]: rust {}, python {}\n    {}\n",
                d.kind,
                c.ty,
                c.framed,
                c.origin,
                d.rust,
                d.python,
                hex::encode(&c.bytes)
            );
        }
        panic!("{msg}");
    }
}

// ---------------------------------------------------------------- regressions

fn regression_entries() -> Vec<(String, CaseEntry)> {
    let dir = repo_root().join("spec/regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("regression file");
        let file: CaseFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let stem = f.file_name().unwrap().to_string_lossy().into_owned();
        out.extend(file.cases.into_iter().map(|c| (stem.clone(), c)));
    }
    out
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn regression_cases_replay_on_both() {
    let entries = regression_entries();
    let cases: Vec<Case> = entries
        .iter()
        .map(|(file, e)| Case {
            ty: e.ty.clone(),
            framed: e.framed,
            count_cap: e.count_cap.unwrap_or(DEFAULT_CAP),
            byte_cap: e.byte_cap.unwrap_or(DEFAULT_CAP),
            bytes: hex::decode(&e.hex).expect("hex"),
            origin: format!("{file}: {}", e.name),
            block_at: None,
        })
        .collect();
    let answers = if cases.is_empty() { Vec::new() } else { Reference::spawn().run(&cases) };
    let mut failures = Vec::new();
    for ((_, e), (c, a)) in entries.iter().zip(cases.iter().zip(&answers)) {
        assert!(e.reason.as_deref().is_some_and(|r| !r.is_empty()), "{}: a regression case needs a reason", c.origin);
        let rust_result = rust_check(c);
        let rust_verdict = verdict(&rust_result);
        let rust = rust_verdict.as_ref().map_or("accept".to_owned(), |v| v.0.clone());
        let py_verdict = parse_answer(a);
        let py = py_verdict.as_ref().map(|v| v.as_ref().map_or("accept".to_owned(), |v| v.0.clone()));
        let py = py.unwrap_or_else(|x| x.clone());
        if rust != e.expect || py != e.expect {
            failures.push(format!("{}: expect {}, rust {rust}, python {py}", c.origin, e.expect));
            continue;
        }
        // Cases that pin the offset: the reference exactly (and its rule),
        // the Rust core in the same descriptor.
        let Some(want) = e.offset else { continue };
        let py_off = py_verdict.ok().flatten().map(|v| v.1);
        if py_off != Some(want) || e.rule.as_deref().is_some_and(|r| answer_rule(a) != Some(r)) {
            failures.push(format!("{}: expect offset {want} {:?}, python {a}", c.origin, e.rule));
        }
        let block_at = if c.ty == "tensors" { 0 } else { 8 };
        let rust_off = rust_verdict.map(|v| v.1).unwrap_or(usize::MAX);
        let (rp, wp) = (place(&c.bytes, block_at, rust_off), place(&c.bytes, block_at, want));
        if rp != wp {
            let rule = rust_result.err().map_or("", |e| e.rule().id());
            failures.push(format!(
                "{}: expect {} at {want} ({}), rust {rust} at {rust_off} ({rule}, {})",
                c.origin,
                e.expect,
                show_place(wp),
                show_place(rp)
            ));
        }
    }
    assert!(failures.is_empty(), "regression cases fail:\n{}", failures.join("\n"));
    println!("replayed {} regression cases on both implementations", cases.len());
}

/// Found by review, not by the random run (it needs 65,535 bytes of names):
/// a layout name that starts at heap offset 0xFFFF, right after tensor names
/// totalling 65,535 bytes. layout_len != 0 makes it present, and its offset
/// is where the heap order puts it, so both implementations accept it (the
/// Rust core used to read layout_off 0xFFFF as "absent" and reject, TYPE,
/// which also made the Writer refuse this legal set).
#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn layout_name_at_heap_offset_ffff_agrees() {
    let name = "n".repeat(65_535);
    let specs = [TensorSpec::opaque(4096, "Q4_K", 1, &[1], &[7]).named(&name)];
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut out).expect("a legal set: the layout name starts at heap offset 65,535");
    assert_eq!(&out[64 + 8..64 + 12], &[0xff, 0xff, 4, 0], "layout_off 0xFFFF, layout_len 4");
    let case = Case::new("tensors", false, out, "layout at heap offset 0xFFFF");
    assert_eq!(rust_check(&case), Ok(()));
    assert_eq!(Reference::spawn().run(&[case]), ["accept"]);
}
