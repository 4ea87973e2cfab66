//! Foreign files and outputs (issue 41): what `kiln validate` says of a
//! valid file Kiln cannot hold (`kiln_limit`), Fortran-order NumPy arrays
//! (transposed to row-major, checked against `np.load`), the pre-GGUF ggml
//! formats, and OUT names of formats `kiln convert` does not write.
//!
//! The NumPy comparisons need `python3 -m pip install numpy` (and `onnx` for
//! the ONNX case); without them those tests print a loud SKIPPED line. The
//! rest build their inputs here, byte by byte.

use std::path::Path;
use std::process::{Command, Output};

fn kiln(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln")).args(args).current_dir(dir).output().expect("kiln")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn python_has(modules: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("\n!!!!!!!! SKIPPED: python3 cannot import {modules} (python3 -m pip install {modules})\n");
    }
    ok
}

fn py(dir: &Path, script: &str) {
    let out = Command::new("python3").arg("-c").arg(script).current_dir(dir).output().expect("python3");
    assert!(out.status.success(), "python failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// A version 1.0 `.npy` file: `header` padded as NumPy pads it, then `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend(u16::try_from(h.len()).unwrap().to_le_bytes());
    out.extend(h);
    out.extend(data);
    out
}

/// The one JSON line `kiln validate --json FILE` prints, and its exit code.
fn validate_json(dir: &Path, file: &str) -> (serde_json::Value, Option<i32>) {
    let out = kiln(dir, &["validate", "--json", file]);
    let (stdout, stderr) = text(&out);
    let line: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    (line, out.status.code())
}

/// A GGUF v3 file of `n` f32 tensors of one element each (no metadata).
fn gguf_tensors(n: u32) -> Vec<u8> {
    let mut f = b"GGUF".to_vec();
    f.extend(3u32.to_le_bytes());
    f.extend(u64::from(n).to_le_bytes());
    f.extend(0u64.to_le_bytes());
    for i in 0..n {
        let name = format!("t{i}");
        f.extend(u64::try_from(name.len()).unwrap().to_le_bytes());
        f.extend(name.as_bytes());
        f.extend(1u32.to_le_bytes());
        f.extend(1u64.to_le_bytes());
        f.extend(0u32.to_le_bytes());
        f.extend((u64::from(i) * 32).to_le_bytes());
    }
    f.resize(f.len().div_ceil(32) * 32, 0);
    f.resize(f.len() + 32 * usize::try_from(n).unwrap(), 0);
    f
}

/// A valid file Kiln cannot hold: validate exits 0 with `"ok": true` and the
/// reason in `kiln_limit`; convert refuses it (exit 1). A broken file still
/// fails validate, with no `kiln_limit`.
#[test]
fn valid_files_kiln_cannot_hold_pass_validate_with_kiln_limit() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("c.npy"), npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", &[0; 16]))
        .unwrap();
    std::fs::write(p.join("obj.npy"), npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", b"\x80\x04."))
        .unwrap();
    std::fs::write(p.join("short.npy"), npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", &[0; 15]))
        .unwrap();
    std::fs::write(p.join("many.gguf"), gguf_tensors(65_536)).unwrap();
    let mut r9 = br#"{"r9":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}"#.to_vec();
    r9.resize(r9.len().div_ceil(8) * 8, b' ');
    let mut st = u64::try_from(r9.len()).unwrap().to_le_bytes().to_vec();
    st.extend(r9);
    st.extend([0; 4]);
    std::fs::write(p.join("r9.safetensors"), st).unwrap();
    for (file, format, why) in [
        ("c.npy", "npy", "NumPy dtype \"<c8\" has no Kiln dtype"),
        ("obj.npy", "npy", "NumPy dtype \"|O\" has no Kiln dtype"),
        ("many.gguf", "gguf", "65536 tensors: a Kiln directory holds at most 65535"),
        ("r9.safetensors", "safetensors", "tensor r9: rank 9 (Kiln allows at most 8)"),
    ] {
        let (line, code) = validate_json(p, file);
        assert_eq!(code, Some(0), "{file}: {line}");
        assert_eq!(line["ok"], true, "{file}: {line}");
        assert_eq!(line["format"], format, "{file}: {line}");
        let limit = line["kiln_limit"].as_str().unwrap_or_else(|| panic!("{file}: no kiln_limit: {line}"));
        assert!(limit.contains(why), "{file}: {limit}");
        assert!(line.get("message").is_none() && line.get("error").is_none(), "{line}");
        let (stdout, _) = text(&kiln(p, &["validate", file]));
        assert!(
            stdout.starts_with(&format!("{file}: ok ({format}); a Kiln limit")) && stdout.contains(why),
            "{stdout}"
        );
        let out = kiln(p, &["convert", file, "-o", "out.kiln"]);
        assert_eq!(out.status.code(), Some(1), "convert {file}: {}", text(&out).1);
        assert!(text(&out).1.contains(why), "{}", text(&out).1);
        assert!(!p.join("out.kiln").exists());
    }
    // A broken file is still rejected (the data is one byte short).
    let (line, code) = validate_json(p, "short.npy");
    assert_eq!((code, &line["ok"]), (Some(1), &serde_json::json!(false)), "{line}");
    assert!(line.get("kiln_limit").is_none(), "{line}");
    // A file with nothing Kiln cannot hold has no kiln_limit key.
    std::fs::write(p.join("f.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", &[0; 8])).unwrap();
    let (line, code) = validate_json(p, "f.npy");
    assert_eq!((code, line.to_string()), (Some(0), r#"{"file":"f.npy","ok":true,"format":"npy"}"#.to_string()));
}

/// An ONNX model with a STRING initializer (valid ONNX; Kiln has no strings).
#[test]
fn onnx_string_initializer_is_a_kiln_limit() {
    if !python_has("onnx") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import onnx
from onnx import helper, TensorProto
s = helper.make_tensor('s', TensorProto.STRING, [2], [b'a', b'bc'])
w = helper.make_tensor('w', TensorProto.FLOAT, [2], [1.0, 2.0])
g = helper.make_graph([], 'g', [], [helper.make_tensor_value_info('w', TensorProto.FLOAT, [2])], [s, w])
onnx.save(helper.make_model(g), 'str.onnx')
"#,
    );
    let (line, code) = validate_json(p, "str.onnx");
    assert_eq!(
        (code, &line["ok"], &line["format"]),
        (Some(0), &serde_json::json!(true), &serde_json::json!("onnx")),
        "{line}"
    );
    let limit = line["kiln_limit"].as_str().unwrap();
    assert!(limit.contains("initializer \"s\"") && limit.contains("ONNX type STRING has no Kiln dtype"), "{limit}");
    assert_eq!(kiln(p, &["convert", "str.onnx", "-o", "o.kiln"]).status.code(), Some(1));
}

/// llama.cpp's formats before GGUF: refused by validate and convert, naming
/// the format and what to do.
#[test]
fn pre_gguf_ggml_files_are_refused_with_what_to_do() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for (magic, name, advice) in [
        (0x6767_6d6c_u32, "ggml", "convert_llama_ggml_to_gguf.py"),
        (0x6767_6d66, "ggmf", "convert_llama_ggml_to_gguf.py"),
        (0x6767_6a74, "ggjt", "convert_llama_ggml_to_gguf.py"),
        (0x6767_6c61, "ggla", "convert_lora_to_gguf.py"),
        (0x6767_736e, "ggsn", "session file"),
    ] {
        let mut f = magic.to_le_bytes().to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend([7u8; 64]);
        let file = format!("model-{name}.bin");
        std::fs::write(p.join(&file), &f).unwrap();
        let (line, code) = validate_json(p, &file);
        assert_eq!(
            (code, &line["ok"], &line["format"]),
            (Some(1), &serde_json::json!(false), &serde_json::json!(name))
        );
        let msg = line["message"].as_str().unwrap();
        assert!(msg.contains("pre-GGUF") || msg.contains("GGSN"), "{msg}");
        assert!(msg.contains(advice) && msg.starts_with(&format!("{file} ({name}): ")), "{msg}");
        for args in [&["convert", &file, "-o", "o.kiln"][..], &["convert", &file, "-o", "o.kiln", "--from", "gguf"]] {
            let out = kiln(p, args);
            let (_, err) = text(&out);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(err.contains(advice) && err.contains("kiln reads GGUF, not the formats before it"), "{err}");
        }
        assert!(!p.join("o.kiln").exists());
    }
}

/// OUT named for a format with no writer: exit 2 before anything is read or
/// written; .kiln, .safetensors and other names as before.
#[test]
fn out_names_of_formats_without_a_writer_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("a.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", &[0; 8])).unwrap();
    std::fs::write(p.join("junk.bin"), b"not a model").unwrap();
    for out in ["o.onnx", "o.gguf", "o.npy", "o.NPZ", "o.pt", "o.pth", "o.bin", "o.h5", "o.tflite", "o.pb", "o.ckpt"] {
        let o = kiln(p, &["convert", "a.npy", "-o", out]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(err.contains("which kiln convert does not write") && err.contains(out), "{err}");
        assert!(!p.join(out).exists(), "{out} was written");
        // Before the input is read: a file that is not .npy at all gets the same answer.
        assert!(text(&kiln(p, &["convert", "junk.bin", "-o", out])).1.contains("does not write"));
    }
    for out in ["o.kiln", "o", "o.weights"] {
        let o = kiln(p, &["convert", "a.npy", "-o", out]);
        assert_eq!(o.status.code(), Some(0), "{out}: {}", text(&o).1);
    }
}

/// Fortran-order arrays in .npy and .npz (stored and compressed members)
/// convert to the same shape with row-major bytes equal to np.load's.
#[test]
fn fortran_order_arrays_convert_to_what_np_load_reads() {
    if !python_has("numpy") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import numpy as np
rng = np.random.default_rng(5)
arrays = {
    'f32': np.asfortranarray(rng.standard_normal((3, 4)).astype('<f4')),
    'f64_3d': np.asfortranarray(rng.standard_normal((2, 3, 4))),
    'be_i4': np.asfortranarray(np.arange(15, dtype='>i4').reshape(5, 3)),
    'u8_ones': np.asfortranarray(np.arange(21, dtype=np.uint8).reshape(1, 7, 1, 3)),
    'bool': np.asfortranarray(rng.integers(0, 2, (4, 5)).astype(bool)),
    'wide': np.asfortranarray(rng.standard_normal((3, 70000)).astype('<f2')),
    'tall': np.asfortranarray(rng.integers(-99, 99, (5000, 2, 3)).astype('<i2')),
}
for name, a in arrays.items():
    assert a.flags.f_contiguous and not a.flags.c_contiguous or a.ndim < 2 or min(a.shape) == 1
    np.save(name + '.npy', a)
    b = np.load(name + '.npy')
    open(name + '.expect', 'wb').write(np.ascontiguousarray(b).astype(b.dtype.newbyteorder('<')).tobytes())
np.savez('stored.npz', **{k: v for k, v in arrays.items() if not k.startswith('be')})
np.savez_compressed('packed.npz', **{k: v for k, v in arrays.items() if not k.startswith('be')})
"#,
    );
    let names = ["f32", "f64_3d", "be_i4", "u8_ones", "bool", "wide", "tall"];
    let expect = |name: &str| std::fs::read(p.join(format!("{name}.expect"))).unwrap();
    let shapes =
        [vec![3u64, 4], vec![2, 3, 4], vec![5, 3], vec![1, 7, 1, 3], vec![4, 5], vec![3, 70000], vec![5000, 2, 3]];
    let check = |out: &str, wanted: &[(&str, &Vec<u64>)]| {
        let bytes = std::fs::read(p.join(out)).unwrap();
        let model = kiln_model::Model::parse_verified(&bytes).expect("a valid model file");
        let dir = model.directory();
        for (name, shape) in wanted {
            let t = dir.iter().find(|t| t.name() == Some(name)).unwrap_or_else(|| panic!("{out}: no tensor {name}"));
            assert_eq!(t.shape(), shape.as_slice(), "{out} {name}");
            assert!(t.bytes() == expect(name).as_slice(), "{out} {name}: the bytes differ from np.load's");
        }
        assert_eq!(dir.iter().count(), wanted.len(), "{out}");
    };
    for (name, shape) in names.iter().zip(&shapes) {
        let out = format!("{name}.kiln");
        let o = kiln(p, &["convert", &format!("{name}.npy"), "-o", &out]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        if name != &"u8_ones" {
            assert!(err.contains("Fortran-order (column-major) NumPy data transposed to row-major"), "{name}: {err}");
        }
        check(&out, &[(name, shape)]);
        let (line, code) = validate_json(p, &format!("{name}.npy"));
        assert_eq!((code, line.get("kiln_limit")), (Some(0), None), "{line}");
    }
    let npz: Vec<(&str, &Vec<u64>)> =
        names.iter().copied().zip(&shapes).filter(|(n, _)| !n.starts_with("be")).collect();
    for archive in ["stored", "packed"] {
        let out = format!("{archive}.kiln");
        let o = kiln(p, &["convert", &format!("{archive}.npz"), "-o", &out]);
        assert_eq!(o.status.code(), Some(0), "{archive}: {}", text(&o).1);
        check(&out, &npz);
        let (line, code) = validate_json(p, &format!("{archive}.npz"));
        assert_eq!((code, &line["ok"]), (Some(0), &serde_json::json!(true)), "{line}");
    }
    // A flipped data byte of a stored Fortran member fails its CRC-32, in validate and convert.
    let mut z = std::fs::read(p.join("stored.npz")).unwrap();
    let at = z.windows(4).position(|w| w == b"wide").unwrap() + 400;
    z[at] ^= 1;
    std::fs::write(p.join("bad.npz"), z).unwrap();
    let (line, code) = validate_json(p, "bad.npz");
    assert_eq!(code, Some(1), "{line}");
    assert!(line["message"].as_str().unwrap().contains("CRC-32"), "{line}");
}

/// Legacy headers NumPy reads (Python 2's `2L`, u'' strings), checked against np.load.
#[test]
fn legacy_npy_headers_convert_as_np_load_reads_them() {
    if !python_has("numpy") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let data: Vec<u8> = (0..6u32).flat_map(|i| (i as f32 * 1.5).to_le_bytes()).collect();
    std::fs::write(p.join("py2.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", &data))
        .unwrap();
    std::fs::write(p.join("u.npy"), npy("{u'descr': u'<f4', u'fortran_order': True, u'shape': (2, 3)}", &data))
        .unwrap();
    py(
        p,
        r#"
import numpy as np, warnings
warnings.simplefilter('ignore')
for n in ['py2', 'u']:
    a = np.load(n + '.npy')
    assert a.shape == (2, 3), a.shape
    open(n + '.expect', 'wb').write(np.ascontiguousarray(a).tobytes())
"#,
    );
    for name in ["py2", "u"] {
        let o = kiln(p, &["convert", &format!("{name}.npy"), "-o", &format!("{name}.kiln")]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o).1);
        let bytes = std::fs::read(p.join(format!("{name}.kiln"))).unwrap();
        let model = kiln_model::Model::parse_verified(&bytes).unwrap();
        let t = model.directory().iter().next().unwrap();
        assert_eq!(t.shape(), [2, 3]);
        assert_eq!(t.bytes(), std::fs::read(p.join(format!("{name}.expect"))).unwrap().as_slice(), "{name}");
    }
}

/// Headers read both ways: each `.npy` file is valid for `kiln validate`
/// exactly when NumPy's own header reader (`_read_array_header`, the one
/// `np.load` uses) reads it, with the same shape.
#[test]
fn npy_headers_are_read_exactly_as_numpy_reads_them() {
    if !python_has("numpy") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import io, json, struct, warnings
import numpy as np
try:
    from numpy.lib import _format_impl as fmt
except ImportError:
    from numpy.lib import format as fmt
warnings.simplefilter('ignore')
H = [
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2 L, 3), }",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2l,), }",
    "{u'descr': u'<f4', u'fortran_order': False, u'shape': (2,)}",
    "{U'descr': R'<f4', 'fortran_order': False, 'shape': (2,)}",
    "{b'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': b'<f4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': f'<f4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<' 'f4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<' b'f4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '\\u003cf4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '''<f4''', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (0x2, 0o3, 0b1, 1_0)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (0x_2,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (1__0,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (00,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (+2,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (--2,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (True, 2)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': ((2),)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': ()}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
    "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
    "{'descr': '<f4', 'fortran_order': None, 'shape': (2,)}",
    "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} # a comment",
    "\n{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (2,)}",
    "({'descr': '<f4', 'fortran_order': False, 'shape': (2,)})",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
    "{'descr': '<f4', 'fortran_order': False, 'shape': \\\n(2,)}",
    "{'descr': '<f4', 'fortran_order': False}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
    "{'descr': '<f3', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': 'f', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': 'float32', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '|f4', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '|S3', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<U2', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': '<M8[xs]', 'fortran_order': False, 'shape': (2,)}",
    "{'descr': [('a', '<f4'), ('b', '<i2')], 'fortran_order': False, 'shape': (2,)}",
    "{'descr': 5, 'fortran_order': False, 'shape': (2,)}",
    "[1, 2]",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\t\x0c ",
]
expect = []
for i, h in enumerate(H):
    for version in [(1, 0), (3, 0)]:
        raw = h.encode('latin1')
        pad = (-(len(raw) + 1 + (10 if version == (1, 0) else 12))) % 64
        raw = raw + b' ' * pad + b'\n'
        size = struct.pack('<H', len(raw)) if version == (1, 0) else struct.pack('<I', len(raw))
        head = b'\x93NUMPY' + bytes(version) + size + raw
        try:
            shape, fortran, dtype = fmt._read_array_header(io.BytesIO(head[8:]), version)
            ok = True
            data = bytes(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        except Exception as e:
            ok, shape, data = False, None, bytes(8)
        name = f'h{i}_{version[0]}.npy'
        open(name, 'wb').write(head + data)
        expect.append({'file': name, 'header': h, 'ok': ok, 'shape': [int(x) for x in shape] if ok else None})
json.dump(expect, open('expect.json', 'w'))
"#,
    );
    let expect: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("expect.json")).unwrap()).unwrap();
    let mut checked = 0;
    for case in expect.as_array().unwrap() {
        let file = case["file"].as_str().unwrap();
        let (line, code) = validate_json(p, file);
        let numpy_ok = case["ok"].as_bool().unwrap();
        assert_eq!(line["ok"].as_bool(), Some(numpy_ok), "{}: numpy {numpy_ok}, kiln {line}", case["header"]);
        assert_eq!(code, Some(if numpy_ok { 0 } else { 1 }), "{line}");
        if numpy_ok && line.get("kiln_limit").is_none() {
            let out = kiln(p, &["inspect", "--json", file]);
            let table: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(table["tensors"][0]["shape"], case["shape"], "{}", case["header"]);
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
}

/// HK with a repeated or empty tensor name: valid HK (spec/reference's
/// writer makes it), a Kiln limit; the same file cut short still fails.
#[test]
fn hk_names_kiln_cannot_hold_are_a_kiln_limit() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/reference");
    py(
        p,
        &format!(
            "import sys\nsys.path.insert(0, {:?})\nfrom hk_writer import *\n{}",
            reference.display().to_string(),
            r#"
w = HkWriter()
w.add_tensor('w', 'f32', (1,), bytes(4)); w.add_tensor('w', 'f32', (1,), bytes(4))
open('dup.hk', 'wb').write(w.to_bytes())
w = HkWriter()
w.add_tensor('', 'f32', (1,), bytes(4))
open('empty.hk', 'wb').write(w.to_bytes())
"#
        ),
    );
    for (file, why) in [("dup.hk", "tensor name \"w\" appears twice"), ("empty.hk", "a tensor with an empty name")] {
        let (line, code) = validate_json(p, file);
        assert_eq!((code, &line["ok"]), (Some(0), &serde_json::json!(true)), "{line}");
        assert!(line["kiln_limit"].as_str().unwrap().contains(why), "{line}");
        assert_eq!(kiln(p, &["convert", file, "-o", "o.kiln"]).status.code(), Some(1));
    }
    let mut b = std::fs::read(p.join("dup.hk")).unwrap();
    b.truncate(b.len() - 1);
    std::fs::write(p.join("cut.hk"), b).unwrap();
    let (line, code) = validate_json(p, "cut.hk");
    assert_eq!((code, &line["ok"]), (Some(1), &serde_json::json!(false)), "{line}");
}
