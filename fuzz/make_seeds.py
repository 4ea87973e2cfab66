#!/usr/bin/env python3
"""Write the fuzz seed corpora to fuzz/seeds/<target>/ (committed, small).

    python3 fuzz/make_seeds.py            # (re)write every seed
    python3 fuzz/make_seeds.py --check    # exit 1 when fuzz/seeds differs (hk excepted)

Sources: the golden cases (spec/kiln-v2-cases.json), the regression cases
(spec/regressions/*.json), values encoded with the Python reference
(spec/reference/kiln_ref.py) for every type of the `frozen` target (whose
table is read from fuzz_targets/frozen.rs so the selector bytes match), HK
files from spec/reference/hk_writer.py (also for `convert_hk`), small
valid safetensors, GGUF, .npy and .npz files written here for the other
`convert_*` targets (no third-party writer needed), and a few fixed pseudo-random byte
strings for the `writer` target (its input is `arbitrary`'s encoding).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import struct
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
sys.path.insert(0, str(ROOT / "spec" / "reference"))
import kiln_ref as K  # noqa: E402
from kiln_ref import F32, F64, Some, Tensor  # noqa: E402


def goldens():
    cases = json.loads((ROOT / "spec" / "kiln-v2-cases.json").read_text())["cases"]
    for p in sorted((ROOT / "spec" / "regressions").glob("*.json")):
        cases += json.loads(p.read_text())["cases"]
    return cases


def frozen_types():
    """The (type text) table of fuzz_targets/frozen.rs, in order."""
    src = (FUZZ / "fuzz_targets" / "frozen.rs").read_text()
    table = src[src.index("const TYPES"):]
    table = table[:table.index("];")]
    return re.findall(r'\(\s*"([^"]+)",', table)


def sample_values():
    f32 = [Tensor("f32", (2,), bytes.fromhex("0000803f000000c0"))]
    named = [Tensor("f16", (1,), bytes.fromhex("003c"), name="half"),
             Tensor("u4", (3,), bytes.fromhex("2103"), name="nib")]
    return {
        "tensors": [[], f32, named],
        "struct{id:i64,batch:tensors,}": [{"id": 7, "batch": f32}, {"id": -1, "batch": []}],
        "list<f32>": [[F32(0x3f800000), F32(0x80000000)], []],
        "list<str>": [["a", "\u00e9", ""], []],
        "list<struct{id:u32,name:str,}>": [[{"id": 1, "name": "x"}, {"id": 2, "name": ""}]],
        "dict<str,opt<i16>>": [{"a": 1, "b": None, "\u00e9": -2}, {}],
        "opt<list<u8>>": [b"\x01\x02", None, b""],
        "struct{a:bool,b:opt<f64>,c:dict<str,list<u8>>,d:list<tensors>,e:uint,f:struct{},g:i16,}": [
            {"a": True, "b": F64(0x7FF8000000000001), "c": {"k": b"x", "l": b""}, "d": [f32, []],
             "e": 5, "f": {}, "g": -2},
            {"a": False, "b": None, "c": {}, "d": [], "e": 0, "f": {}, "g": 0},
        ],
        "list<struct{}>": [[{}, {}, {}], []],
        "list<opt<bool>>": [[True, None, False]],
        "dict<str,tensors>": [{"b": [], "w": f32}],
        "list<list<i8>>": [[[1, -1], []]],
        "opt<opt<int>>": [Some(None), 5, None],
        "str": ["h\u00e9llo", ""],
        "list<u64>": [[1, (1 << 64) - 1]],
        "struct{a:i8,b:i16,c:i32,d:i64,e:u8,f:u16,g:u32,h:u64,i:int,j:uint,k:f32,l:f64,m:bool,}": [
            {"a": -1, "b": 2, "c": -3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": -9, "j": 10,
             "k": F32(0x3f800000), "l": F64(0x8000000000000000), "m": True},
        ],
        "list<tensors>": [[[], f32]],
    }


def hk_seeds():
    try:
        import hk_writer as H
    except ImportError:
        return {}
    out = {"hk-sample": H.sample()}
    w = H.HkWriter()
    w.add_metadata("general.architecture", "mlp")
    w.add_tensor("w", "f32", (2,), bytes.fromhex("0000803f000000c0"))
    out["hk-small"] = w.to_bytes()
    out["hk-empty"] = H.HkWriter().to_bytes()
    return out


def safetensors_file(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] -> a safetensors file (header padded to 8)."""
    head, data = {}, b""
    if metadata is not None:
        head["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        head[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = struct.pack("<2f", 1.0, -2.0)
    return {
        "st-f32": safetensors_file([("w", "F32", (2,), f32)]),
        "st-meta": safetensors_file([("a.b", "BF16", (2, 1), b"\x80\x3f\x00\xc0"), ("n", "BOOL", (3,), b"\x01\x00\x01")],
                                    {"format": "pt", "kiln.convert.pad": "x"}),
        "st-mixed": safetensors_file([("e", "F32", (0,), b""), ("i", "I64", (1,), struct.pack("<q", -5)),
                                      ("u", "U8", (4,), b"\x00\x01\x02\xff"), ("h", "F16", (1,), b"\x00\x3c")]),
        "st-empty": safetensors_file([]),
    }


def gguf_str(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_file(kvs, tensors, align=32):
    """kvs: [(key, type, packed value)]; tensors: [(name, dims, ggml_type, payload)] -> GGUF v3."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, packed in kvs:
        out += gguf_str(key) + struct.pack("<I", vtype) + packed
    data = b""
    for name, dims, gtype, payload in tensors:
        data += b"\x00" * (-len(data) % align)
        out += gguf_str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        out += struct.pack("<IQ", gtype, len(data))
        data += payload
    out += b"\x00" * (-len(out) % align)
    return out + data


def gguf_seeds():
    f32 = struct.pack("<4f", 1.0, 2.0, -3.0, 0.5)
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    kvs = [
        ("general.architecture", 8, gguf_str("llama")),
        ("general.alignment", 4, struct.pack("<I", 32)),
        ("a.u8", 0, b"\x07"), ("a.i16", 3, struct.pack("<h", -2)), ("a.bool", 7, b"\x01"),
        ("a.f64", 12, struct.pack("<d", 5e-324)), ("a.u64", 10, struct.pack("<Q", 1 << 63)),
        ("a.arr", 9, struct.pack("<IQ", 6, 2) + struct.pack("<2f", 0.1, -0.0)),
        ("a.strs", 9, struct.pack("<IQ", 8, 2) + gguf_str("x") + gguf_str("")),
    ]
    return {
        "gguf-f32": gguf_file(kvs[:1], [("w", (2, 2), 0, f32)]),
        "gguf-kinds": gguf_file(kvs, [("w", (4,), 0, f32), ("h", (1,), 1, b"\x00\x3c"), ("q", (32,), 8, q8)]),
        "gguf-empty": gguf_file([], []),
    }


def npy_file(descr, shape, payload, fortran=False):
    dims = "".join(f"{d}, " if len(shape) == 1 else f"{d}," for d in shape)
    if len(shape) > 1:
        dims = dims.rstrip(",")
    head = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': ({dims}), }}"
    pad = -(10 + len(head) + 1) % 64
    head = head + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + payload


def npy_seeds():
    return {
        "npy-f32": npy_file("<f4", (2,), struct.pack("<2f", 1.0, -2.0)),
        "npy-2d-be": npy_file(">i2", (2, 3), struct.pack(">6h", 1, 2, 3, -4, 5, 6)),
        "npy-bool": npy_file("|b1", (3,), b"\x01\x00\x01"),
        "npy-scalar": npy_file("<f8", (), struct.pack("<d", 0.25)),
        "npy-fortran": npy_file("<u2", (2, 2), struct.pack("<4H", 1, 2, 3, 4), fortran=True),
    }


def npz_file(members, compress):
    import io
    import zipfile
    buf = io.BytesIO()
    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", mode) as z:
        for name, payload in members.items():
            # A fixed date keeps the bytes (and the seed's name) stable.
            info = zipfile.ZipInfo(name + ".npy", date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = mode
            z.writestr(info, payload)
    return buf.getvalue()


def npz_seeds():
    n = npy_seeds()
    members = {"a": n["npy-f32"], "b": n["npy-2d-be"]}
    return {
        "npz-stored": npz_file(members, False),
        "npz-deflated": npz_file(members, True),
        "npz-one": npz_file({"x": n["npy-bool"]}, True),
    }


def model_seeds():
    """Model files from spec/examples (a digests record, plain records)."""
    ex = FUZZ.parent / "spec" / "examples"
    out = {"digits-mlp.model": (ex / "digits-mlp.model.kiln").read_bytes()}
    for p in sorted((ex / "small").glob("*.model.kiln")):
        out[p.name] = p.read_bytes()
    return out


def pb_varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def pb(field, value):
    """One protobuf field: an int is a varint, bytes/str are length-delimited."""
    if isinstance(value, int):
        return pb_varint(field << 3) + pb_varint(value & (2**64 - 1))
    if isinstance(value, str):
        value = value.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(value)) + value


def onnx_tensor(name, data_type, dims, raw=None, int32=None, floats=None, external=None):
    """A TensorProto (onnx-ml.proto field numbers: dims 1, data_type 2, float_data 4 packed,
    int32_data 5 packed, name 8, raw_data 9, external_data 13, data_location 14)."""
    out = b"".join(pb(1, d) for d in dims) + pb(2, data_type)
    if floats is not None:
        out += pb(4, struct.pack(f"<{len(floats)}f", *floats))
    if int32 is not None:
        out += pb(5, b"".join(pb_varint(v & (2**64 - 1)) for v in int32))
    out += pb(8, name)
    if raw is not None:
        out += pb(9, raw)
    if external is not None:
        out += b"".join(pb(13, pb(1, k) + pb(2, v)) for k, v in external) + pb(14, 1)
    return out


def onnx_model(tensors, metadata=()):
    """A ModelProto (ir_version 1, opset_import 8, producer_name 2, graph 7, metadata_props 14)
    whose graph (node 1, name 2, initializer 5) holds one Identity node and `tensors`."""
    node = pb(1, "w") + pb(2, "y") + pb(4, "Identity")
    graph = pb(1, node) + pb(2, "g") + b"".join(pb(5, t) for t in tensors)
    props = b"".join(pb(14, pb(1, k) + pb(2, v)) for k, v in metadata)
    return pb(1, 10) + pb(2, "seeds") + pb(7, graph) + pb(8, pb(1, "") + pb(2, 17)) + props


def onnx_seeds():
    """Small ONNX models written here (no onnx package needed): raw, typed and external
    initializers, 4-bit and bool types, metadata; and the bundled example when present."""
    out = {
        "onnx-raw-f32": onnx_model([onnx_tensor("w", 1, [2], raw=struct.pack("<2f", 1.0, -2.0))], [("k", "v")]),
        "onnx-typed": onnx_model([onnx_tensor("f", 1, [2], floats=[0.5, 3.0]), onnx_tensor("i8", 3, [3], int32=[-1, 0, 127]),
                                  onnx_tensor("b", 9, [2], int32=[1, 0])]),
        "onnx-int4": onnx_model([onnx_tensor("q", 22, [3], raw=b"\x21\x03"), onnx_tensor("e", 23, [2, 2], int32=[0x21, 0x43])]),
        "onnx-scalar-empty": onnx_model([onnx_tensor("s", 11, [], raw=struct.pack("<d", 2.5)), onnx_tensor("z", 7, [0, 3], raw=b"")]),
        "onnx-external": onnx_model([onnx_tensor("x", 1, [4], external=[("location", "w.bin"), ("offset", "0"), ("length", "16")])]),
    }
    example = FUZZ.parent / "spec" / "examples" / "digits-mlp.onnx"
    if example.exists():
        out["digits-mlp.onnx"] = example.read_bytes()
    return out


CONVERT_TARGETS = ("convert_safetensors", "convert_gguf", "convert_npy", "convert_npz", "convert_hk", "convert_onnx")


def seeds():
    out: dict[str, dict[str, bytes]] = {
        t: {} for t in ("directory", "directory_in_struct", "frozen", "writer", "hk", "model", "onnx_graph_check")
        + CONVERT_TARGETS
    }
    types = frozen_types()
    for c in goldens():
        b = bytes.fromhex(c["hex"])
        name = c["name"]
        if c["type"] == "tensors" and not c["framed"]:
            out["directory"][name] = b
            out["directory_in_struct"][name] = struct.pack("<q", 7) + b
        if c["type"] == "struct{id:i64,batch:tensors,}":
            out["directory_in_struct"][name] = b[16:] if c["framed"] else b
        if c["type"] in types:
            out["frozen"][name] = bytes([types.index(c["type"]), 1 if c["framed"] else 0]) + b
    for text, values in sample_values().items():
        sel = types.index(text)
        for i, v in enumerate(values):
            body = K.encode(text, v)
            assert K.validate(text, body) is None, text
            out["frozen"][f"sample-{sel}-{i}"] = bytes([sel, 0]) + body
            out["frozen"][f"sample-{sel}-{i}-frame"] = bytes([sel, 2]) + body
            out["frozen"][f"sample-{sel}-{i}-framed"] = bytes([sel, 1]) + K.encode_frame(text, v)
    rng = random.Random(0x4B494C4E)
    for i in range(8):
        out["writer"][f"random-{i}"] = bytes(rng.randrange(256) for _ in range(16 + 24 * i))
    out["hk"].update(hk_seeds())
    out["convert_hk"].update(hk_seeds())
    out["convert_safetensors"].update(safetensors_seeds())
    out["convert_gguf"].update(gguf_seeds())
    out["convert_npy"].update(npy_seeds())
    out["convert_npz"].update(npz_seeds())
    out["convert_onnx"].update(onnx_seeds())
    # The sessions' check: the same models, and each naming a Kiln model
    # (ModelProto.metadata_props, field 14: appended fields merge in protobuf).
    entry = b"\x0a\x0akiln.model\x12\x06m.kiln"
    named = bytes([14 << 3 | 2, len(entry)]) + entry
    for n, b in onnx_seeds().items():
        out["onnx_graph_check"][n] = b
        out["onnx_graph_check"][n + "-named"] = b + named
    out["model"].update(model_seeds())
    # Content-addressed file names keep the directory free of duplicates.
    return {t: {hashlib.sha1(b).hexdigest()[:16] + "-" + n[:40]: b for n, b in s.items()} for t, s in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    want = seeds()
    bad = 0
    total = 0
    for target, files in want.items():
        d = FUZZ / "seeds" / target
        have = {p.name: p.read_bytes() for p in d.glob("*")} if d.exists() else {}
        total += len(files)
        if args.check:
            # HK seeds come from another component's writer; they may drift.
            if target not in ("hk", "convert_hk") and have != files:
                print(f"fuzz/seeds/{target}: out of date", file=sys.stderr)
                bad += 1
            continue
        d.mkdir(parents=True, exist_ok=True)
        for name in set(have) - set(files):
            (d / name).unlink()
        for name, b in files.items():
            (d / name).write_bytes(b)
    print(f"make_seeds: {'checked' if args.check else 'wrote'} {total} seeds for {len(want)} targets")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
