//! `kiln convert` on files made by writers nobody here wrote: the
//! `safetensors` and `gguf` Python packages and NumPy (plus
//! spec/reference/hk_writer.py for HK). The Python side also writes what it
//! expects (`expect.json`: dtype, shape and payload hex per tensor), and
//! reads our outputs back with its own loaders.
//!
//! Needs: `python3 -m pip install numpy safetensors gguf`. Without them
//! every test here prints a loud SKIPPED line and passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{Directory, Limits};

/// What `kiln convert` writes: a model file with digests (spec/model-file.md).
const RECORD_TYPE: &str = kiln_model::DIGESTS_TYPE;

fn python_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, safetensors, gguf"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!(
            "\n!!!!!!!! SKIPPED: python3 cannot import numpy, safetensors and gguf.\n\
             !!!!!!!! Install them with: python3 -m pip install numpy safetensors gguf\n"
        );
    }
    ok
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn py(dir: &Path, script: &str) {
    let out = Command::new("python3").arg("-c").arg(script).current_dir(dir).output().expect("python3");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kiln(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln")).args(args).current_dir(dir).output().expect("kiln")
}

fn convert_ok(dir: &Path, input: &str, output: &str, extra: &[&str]) -> String {
    let mut args = vec!["convert", input, "-o", output];
    args.extend_from_slice(extra);
    let out = kiln(dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "kiln convert {input} failed:\n{stderr}");
    assert!(!stderr.contains('\x1b') && !stderr.contains('\r'), "no progress bar when stderr is not a terminal");
    stderr
}

#[derive(Debug, PartialEq)]
struct Got {
    dtype: String,
    code: u16,
    shape: Vec<u64>,
    bytes: Vec<u8>,
    layout: Option<String>,
    block_size: u32,
}

fn tensors_of(dir: &Directory<'_>) -> BTreeMap<String, Got> {
    dir.iter()
        .map(|t| {
            let g = Got {
                dtype: t.dtype().name().to_string(),
                code: t.dtype().code(),
                shape: t.shape().to_vec(),
                bytes: t.bytes().to_vec(),
                layout: t.layout().map(str::to_string),
                block_size: t.block_size(),
            };
            (t.name().expect("named").to_string(), g)
        })
        .collect()
}

/// Reads a `kiln convert` record with the no_std Frozen reader.
fn read_record(path: &Path) -> (Vec<String>, BTreeMap<String, Got>, BTreeMap<String, String>) {
    read_record_aligned(path, 1)
}

/// The same, checking that every payload starts at a multiple of `align` in the file
/// (the converter keeps the input's payload alignment).
fn read_record_aligned(path: &Path, align: usize) -> (Vec<String>, BTreeMap<String, Got>, BTreeMap<String, String>) {
    let bytes = std::fs::read(path).unwrap();
    let schema: Schema<'_> = Schema::parse(RECORD_TYPE).unwrap();
    let v = frozen::read(&bytes, &schema, &Limits::MAX, true).expect("a valid record");
    kiln_model::Model::parse_verified(&bytes).expect("its digests match its payloads");
    let dir = v.field("tensors").and_then(|t| t.as_tensors()).unwrap();
    let fields = v.field("metadata").unwrap().raw().len() + v.field("digests").unwrap().raw().len();
    assert_eq!(dir.start(), 16 + fields, "metadata and digests first, then the block");
    for t in dir.iter() {
        assert_eq!(t.absolute_offset() % align, 0, "{:?} at {}", t.name(), t.absolute_offset());
    }
    let order = dir.iter().map(|t| t.name().unwrap().to_string()).collect();
    let meta = v
        .field("metadata")
        .and_then(|m| m.as_dict())
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_str().unwrap().to_string()))
        .collect();
    (order, tensors_of(&dir), meta)
}

/// `expect.json`: {name: {"dtype", "shape", "hex", ["layout", "block_size", "code"]}}.
fn check_expected(dir: &Path, got: &BTreeMap<String, Got>) {
    let text = std::fs::read_to_string(dir.join("expect.json")).unwrap();
    let want: serde_json::Value = serde_json::from_str(&text).unwrap();
    let want = want.as_object().unwrap();
    let mut names: Vec<&String> = want.keys().collect();
    names.sort();
    assert_eq!(got.keys().collect::<Vec<_>>(), names, "tensor names");
    for (name, w) in want {
        let g = &got[name];
        assert_eq!(g.dtype, w["dtype"].as_str().unwrap(), "{name} dtype");
        let shape: Vec<u64> = w["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(g.shape, shape, "{name} shape");
        assert!(g.bytes == hex::decode(w["hex"].as_str().unwrap()).unwrap(), "{name} payload bytes differ");
        if let Some(l) = w.get("layout") {
            assert_eq!(g.layout.as_deref(), l.as_str(), "{name} layout");
            assert_eq!(u64::from(g.block_size), w["block_size"].as_u64().unwrap(), "{name} block size");
            assert_eq!(u64::from(g.code), w["code"].as_u64().unwrap(), "{name} opaque code");
        }
    }
}

const PY_COMMON: &str = r#"
import json, numpy as np
KILN = {'float64':'f64','float32':'f32','float16':'f16','bool':'bool','int8':'i8','uint8':'u8',
        'int16':'i16','uint16':'u16','int32':'i32','uint32':'u32','int64':'i64','uint64':'u64'}
def le(a):
    a = np.ascontiguousarray(a)
    return a.astype(a.dtype.newbyteorder('<')).tobytes()
def entry(a):
    return {'dtype': KILN[a.dtype.name], 'shape': list(a.shape), 'hex': le(a).hex()}
"#;

#[test]
fn safetensors_round_trip_is_byte_identical() {
    if !python_ready() {
        return;
    }
    let d = tempdir();
    py(
        d.path(),
        &format!(
            "{PY_COMMON}{}",
            r#"
from safetensors.numpy import save_file
rng = np.random.default_rng(7)
t = {
  'model.embed.weight': rng.standard_normal((16, 8)).astype(np.float32),
  'model.norm': np.array([1.0, -0.0, np.nan, np.inf], np.float32),
  'h': rng.standard_normal((3, 5)).astype(np.float16),
  'd': rng.standard_normal((2,)).astype(np.float64),
  'mask': np.array([[True, False], [False, True]]),
  'i8': np.arange(-4, 4, dtype=np.int8), 'u8': np.arange(200, 206, dtype=np.uint8),
  'i16': np.arange(-3, 3, dtype=np.int16), 'u16': np.arange(6, dtype=np.uint16),
  'i32': np.arange(-5, 5, dtype=np.int32).reshape(2, 5), 'u32': np.arange(4, dtype=np.uint32),
  'i64': np.array([-(2**63), 2**63 - 1], np.int64), 'u64': np.array([2**64 - 1], np.uint64),
  'scalar': np.array(3.5, np.float32), 'empty': np.zeros((0, 4), np.float32),
}
save_file(t, 'in.safetensors', metadata={'format': 'pt'})
json.dump({k: entry(v) for k, v in t.items()}, open('expect.json', 'w'))
"#
        ),
    );
    convert_ok(d.path(), "in.safetensors", "out.kiln", &[]);
    let (order, got, meta) = read_record_aligned(&d.path().join("out.kiln"), 8);
    assert!(meta.contains_key("kiln.convert.pad"));
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "a dict of tensors is written in key order");
    check_expected(d.path(), &got);
    assert_eq!(meta.get("format").map(String::as_str), Some("pt"));
    assert_eq!(meta.get("kiln.convert.source_format").map(String::as_str), Some("safetensors"));

    let stderr = convert_ok(d.path(), "out.kiln", "back.safetensors", &[]);
    assert!(stderr.contains("kiln.convert"), "says which keys it did not write back: {stderr}");
    let a = std::fs::read(d.path().join("in.safetensors")).unwrap();
    let b = std::fs::read(d.path().join("back.safetensors")).unwrap();
    assert!(a == b, "safetensors -> Kiln -> safetensors changed the bytes");
    // And the Python loader agrees, bit for bit.
    py(
        d.path(),
        r#"
import numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open
a, b = load_file('in.safetensors'), load_file('back.safetensors')
assert a.keys() == b.keys()
for k in a:
    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
    assert a[k].tobytes() == b[k].tobytes(), k
with safe_open('back.safetensors', 'np') as f:
    assert f.metadata() == {'format': 'pt'}
"#,
    );
}

#[test]
fn safetensors_with_several_metadata_keys_round_trips_its_values() {
    if !python_ready() {
        return;
    }
    let d = tempdir();
    py(
        d.path(),
        r#"
import numpy as np
from safetensors.numpy import save_file
save_file({'a': np.arange(6, dtype=np.float32).reshape(2, 3), 'b': np.ones(3, np.int16)}, 'in.safetensors',
          metadata={'format': 'np', 'author': 'ü', 'json': '{"x": [1, 2]}', 'empty': ''})
"#,
    );
    convert_ok(d.path(), "in.safetensors", "m.kiln", &[]);
    let (_, _, meta) = read_record(&d.path().join("m.kiln"));
    assert_eq!(meta["author"], "ü");
    assert_eq!(meta["json"], r#"{"x": [1, 2]}"#);
    assert_eq!(meta["empty"], "");
    convert_ok(d.path(), "m.kiln", "back.safetensors", &[]);
    py(
        d.path(),
        r#"
from safetensors.numpy import load_file
from safetensors import safe_open
a, b = load_file('in.safetensors'), load_file('back.safetensors')
assert all(a[k].tobytes() == b[k].tobytes() and a[k].dtype == b[k].dtype for k in a) and a.keys() == b.keys()
with safe_open('in.safetensors', 'np') as f, safe_open('back.safetensors', 'np') as g:
    assert f.metadata() == g.metadata(), (f.metadata(), g.metadata())
# The tensor part of the file is identical; only the order of __metadata__ keys may differ.
ra, rb = open('in.safetensors', 'rb').read(), open('back.safetensors', 'rb').read()
na, nb = int.from_bytes(ra[:8], 'little'), int.from_bytes(rb[:8], 'little')
assert ra[8 + na:] == rb[8 + nb:]
"#,
    );
}

#[test]
fn gguf_from_the_gguf_package() {
    if !python_ready() {
        return;
    }
    let d = tempdir();
    py(
        d.path(),
        &format!(
            "{PY_COMMON}{}",
            r#"
import gguf
from gguf import GGMLQuantizationType as Q
w = gguf.GGUFWriter('in.gguf', 'testarch')
w.add_custom_alignment(64)
w.add_uint8('t.u8', 200); w.add_int8('t.i8', -5); w.add_uint16('t.u16', 60000); w.add_int16('t.i16', -300)
w.add_uint32('t.u32', 4000000000); w.add_int32('t.i32', -7); w.add_float32('t.f32', 1e-5)
w.add_bool('t.bool', True); w.add_string('t.str', 'héllo "q"'); w.add_uint64('t.u64', 2**64 - 1)
w.add_int64('t.i64', -(2**63)); w.add_float64('t.f64', 0.1)
w.add_array('t.ints', [1, 2, 3]); w.add_array('t.strs', ['a', 'b']); w.add_array('t.nested', [[1, 2], [3]])
rng = np.random.default_rng(3)
f32 = rng.standard_normal((4, 8)).astype(np.float32)
f16 = rng.standard_normal((2, 3, 4)).astype(np.float16)
i32 = np.arange(12, dtype=np.int32).reshape(3, 4)
q = rng.standard_normal((4, 64)).astype(np.float32)
q8 = gguf.quants.quantize(q, Q.Q8_0)
q4 = gguf.quants.quantize(q, Q.Q4_0)
w.add_tensor('f32', f32); w.add_tensor('f16', f16); w.add_tensor('i32', i32)
w.add_tensor('q8', q8, raw_dtype=Q.Q8_0); w.add_tensor('q4', q4, raw_dtype=Q.Q4_0)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
exp = {'f32': entry(f32), 'f16': entry(f16), 'i32': entry(i32)}
exp['q8'] = {'dtype': 'opaque', 'shape': [4, 64], 'hex': q8.tobytes().hex(), 'layout': 'Q8_0', 'block_size': 34, 'code': 4096 + 8}
exp['q4'] = {'dtype': 'opaque', 'shape': [4, 64], 'hex': q4.tobytes().hex(), 'layout': 'Q4_0', 'block_size': 18, 'code': 4096 + 2}
json.dump(exp, open('expect.json', 'w'))
# Cross-check against gguf-py's own reader.
r = gguf.GGUFReader('in.gguf')
for t in r.tensors:
    assert t.data.tobytes() == bytes.fromhex(exp[t.name]['hex']), t.name
"#
        ),
    );
    convert_ok(d.path(), "in.gguf", "out.kiln", &[]);
    let (order, got, meta) = read_record_aligned(&d.path().join("out.kiln"), 64);
    assert_eq!(order, ["f32", "f16", "i32", "q8", "q4"], "GGUF order is kept");
    // check_expected compares sorted maps.
    check_expected(d.path(), &got);
    let want = [
        ("t.u8", "200"),
        ("t.i8", "-5"),
        ("t.u16", "60000"),
        ("t.i16", "-300"),
        ("t.u32", "4000000000"),
        ("t.i32", "-7"),
        ("t.f32", "0.00001"),
        ("t.bool", "true"),
        ("t.str", r#""héllo \"q\"""#),
        ("t.u64", "18446744073709551615"),
        ("t.i64", "-9223372036854775808"),
        ("t.f64", "0.1"),
        ("t.ints", "[1,2,3]"),
        ("t.strs", r#"["a","b"]"#),
        ("general.architecture", r#""testarch""#),
        ("general.alignment", "64"),
        ("kiln.convert.value_encoding", "json"),
    ];
    for (k, v) in want {
        assert_eq!(meta.get(k).map(String::as_str), Some(v), "{k}");
    }
    let types: serde_json::Value = serde_json::from_str(&meta["kiln.convert.source_types"]).unwrap();
    assert_eq!(types["t.u32"], "u32");
    assert_eq!(types["t.strs"], "array<string>");
    assert_eq!(types["t.ints"], "array<i32>");
    assert_eq!(meta["t.nested"], "[[1,2],[3]]");
    assert_eq!(types["t.nested"], "array<array<i32>>");

    // The way back: opaque blocks become U8 plus a description.
    let stderr = convert_ok(d.path(), "out.kiln", "back.safetensors", &[]);
    assert!(stderr.contains("tensor q8: Kiln opaque (Q8_0) has no safetensors dtype"), "{stderr}");
    py(
        d.path(),
        r#"
import json
from safetensors import safe_open
with safe_open('back.safetensors', 'np') as f:
    m = f.metadata()
    assert json.loads(m['kiln.dtype.q8'])['layout'] == 'Q8_0'
    assert f.get_tensor('q8').dtype.name == 'uint8' and f.get_tensor('f16').shape == (2, 3, 4)
    assert m['t.u32'] == '4000000000'
"#,
    );
}

#[test]
fn numpy_npy_and_npz() {
    if !python_ready() {
        return;
    }
    let d = tempdir();
    py(
        d.path(),
        &format!(
            "{PY_COMMON}{}",
            r#"
rng = np.random.default_rng(5)
x = rng.standard_normal((3, 5)).astype(np.float32)
np.save('x.npy', x)
be = np.arange(-6, 6, dtype='>i4').reshape(3, 4)
np.save('be.npy', be)
arrs = {'a': np.arange(10, dtype=np.uint8), 'b': rng.standard_normal((2, 2)), 'c': np.array([True, False]),
        'd': np.arange(6, dtype='>f8'), 'e': np.array(7, np.int64), 'f': np.asfortranarray(np.ones((4,), np.float16))}
np.savez('stored.npz', **arrs)
np.savez_compressed('packed.npz', **{k: v for k, v in arrs.items() if k != 'd'}, obj=np.array(['s', 't']))
json.dump({'x': entry(x)}, open('x.json', 'w'))
json.dump({'be': entry(be)}, open('be.json', 'w'))
json.dump({k: entry(v) for k, v in arrs.items()}, open('stored.json', 'w'))
json.dump({k: entry(v) for k, v in arrs.items() if k != 'd'}, open('packed.json', 'w'))
"#
        ),
    );
    for (input, expect) in
        [("x.npy", "x.json"), ("be.npy", "be.json"), ("stored.npz", "stored.json"), ("packed.npz", "packed.json")]
    {
        let out = format!("{input}.kiln");
        let stderr = convert_ok(d.path(), input, &out, &[]);
        std::fs::copy(d.path().join(expect), d.path().join("expect.json")).unwrap();
        let (_, got, meta) = read_record(&d.path().join(&out));
        check_expected(d.path(), &got);
        assert!(meta["kiln.convert.source_format"].starts_with("np"));
        if input == "packed.npz" {
            assert!(stderr.contains("array obj") && stderr.contains("NOT carried"), "{stderr}");
        }
        if input == "be.npy" {
            assert!(stderr.contains("byte-swapped"), "{stderr}");
        }
    }
}

#[test]
fn hk_from_the_reference_writer() {
    if !python_ready() {
        return;
    }
    let d = tempdir();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let status = Command::new("python3")
        .arg(root.join("spec/reference/hk_writer.py"))
        .args(["sample", "in.hk"])
        .current_dir(d.path())
        .status()
        .unwrap();
    assert!(status.success());
    let stderr = convert_ok(d.path(), "in.hk", "out.kiln", &[]);
    for needle in [
        "tensor lm_head.weight: shared_ref to embed.weight; Kiln payload ranges do not overlap, so its bytes are copied",
        "tensor pruned.weight: null_ref",
        "tensor dq.dq4: HK hk_scales region (8 bytes) stored as u8 tensor dq.dq4.hk_scales",
        "3 appendix record(s)",
        "tiled.weight",
    ] {
        assert!(stderr.contains(needle), "missing note {needle:?} in:\n{stderr}");
    }
    let (order, got, meta) = read_record_aligned(&d.path().join("out.kiln"), 64);
    assert_eq!(order[0], "embed.weight", "TOC order kept");
    assert_eq!(got["lm_head.weight"].bytes, got["embed.weight"].bytes);
    assert_eq!((got["embed.weight"].dtype.as_str(), got["embed.weight"].shape.as_slice()), ("f32", &[4u64, 8][..]));
    let q4k = &got["blk.q4_k"];
    assert_eq!((q4k.code, q4k.layout.as_deref(), q4k.block_size, q4k.bytes.len()), (4096 + 12, Some("Q4_K"), 144, 288));
    let dq4 = &got["dq.dq4"];
    assert_eq!((dq4.code, dq4.layout.as_deref(), dq4.block_size), (4352 + 0x10, Some("hk.dq4"), 1));
    assert_eq!(got["pruned.weight"].bytes.len(), 0);
    assert_eq!(got["pruned.weight"].shape, [4, 8]);
    assert_eq!(got["hk.appendix.0.data"].bytes, b"delta-1");
    assert_eq!(meta["general.architecture"], r#""mlp""#);
    assert_eq!(meta["mlp.tied"], "true");
    assert_eq!(meta["tokenizer.blob"], r#""0001feff""#);
    let rec: serde_json::Value = serde_json::from_str(&meta["hk.appendix.1"]).unwrap();
    assert_eq!(rec["name"], "patch-2");
    // Every ggml-compatible family got its ggml code.
    for (name, code) in
        [("blk.q8_0", 4096 + 8), ("blk.iq4_xs", 4096 + 23), ("blk.tq2_0", 4096 + 35), ("blk.mxfp4", 4096 + 39)]
    {
        assert_eq!(got[name].code, code, "{name}");
    }
}

#[test]
fn standalone_directory_with_sidecar() {
    if !python_ready() {
        return;
    }
    let d = tempdir();
    py(
        d.path(),
        r#"
import numpy as np
from safetensors.numpy import save_file
save_file({'w': np.ones((2, 2), np.float32)}, 'in.safetensors', metadata={'k': 'v'})
"#,
    );
    let stderr = convert_ok(d.path(), "in.safetensors", "plain.kiln", &["--to", "tensors"]);
    assert!(stderr.contains("plain.kiln.meta.json"), "{stderr}");
    let bytes = std::fs::read(d.path().join("plain.kiln")).unwrap();
    let dir = Directory::parse(&bytes).expect("a standalone directory");
    assert_eq!(dir.find("w").unwrap().shape(), &[2, 2]);
    let side: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("plain.kiln.meta.json")).unwrap()).unwrap();
    assert_eq!(side["k"], "v");
    let out = kiln(d.path(), &["inspect", "plain.kiln"]);
    assert_eq!(out.status.code(), Some(0));
    // And back.
    convert_ok(d.path(), "plain.kiln", "back.safetensors", &[]);
}

#[test]
fn bad_inputs_are_refused_without_output() {
    let d = tempdir();
    let p = d.path();
    std::fs::write(p.join("garbage.bin"), b"this is not a model file at all").unwrap();
    let mut st = 40u64.to_le_bytes().to_vec();
    st.extend(br#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#);
    st.resize(8 + 40, b' ');
    st.extend([0u8; 8]); // 8 of the 16 data bytes
    std::fs::write(p.join("short.safetensors"), &st).unwrap();
    let mut gg = b"GGUF".to_vec();
    gg.extend(3u32.to_le_bytes());
    gg.extend(1u64.to_le_bytes());
    gg.extend(u64::MAX.to_le_bytes()); // kv count far beyond the file
    std::fs::write(p.join("hostile.gguf"), &gg).unwrap();
    let mut hk = b"HKNT".to_vec();
    hk.resize(64, 0);
    std::fs::write(p.join("short.hk"), &hk).unwrap();
    std::fs::write(p.join("bad.npy"), b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'").unwrap();
    for (input, needle) in [
        ("garbage.bin", "not a recognised format"),
        ("short.safetensors", "not a valid safetensors file"),
        ("hostile.gguf", "needs more bytes than the file has"),
        ("short.hk", "EOF"),
        ("bad.npy", "npy"),
    ] {
        let out = kiln(p, &["convert", input, "-o", "out.kiln"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{input}: {stderr}");
        assert!(stderr.contains(needle), "{input}: {stderr}");
        assert!(!p.join("out.kiln").exists(), "{input}: no output on failure");
    }
    let leftovers: Vec<_> = std::fs::read_dir(p)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("kiln-convert"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files removed");
    let out = kiln(p, &["convert", "missing.safetensors", "-o", "out.kiln"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn converting_a_kiln_file_to_a_record_keeps_its_tensors() {
    // (OUT naming IN is refused: see convert_hardening.rs, point 3.)
    let d = tempdir();
    let p = d.path();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/examples/digits-mlp.kiln");
    std::fs::copy(&example, p.join("m.kiln")).unwrap();
    convert_ok(p, "m.kiln", "r.kiln", &["-q"]);
    let (_, got, _) = read_record(&p.join("r.kiln"));
    let original = std::fs::read(&example).unwrap();
    assert_eq!(tensors_of(&Directory::parse(&original).unwrap()), got);
    let leftovers = std::fs::read_dir(p).unwrap().count();
    assert_eq!(leftovers, 2, "only m.kiln and r.kiln");
}
