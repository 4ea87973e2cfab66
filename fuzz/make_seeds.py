#!/usr/bin/env python3
"""Write the fuzz seed corpora to fuzz/seeds/<target>/ (committed, small).

    python3 fuzz/make_seeds.py            # (re)write every seed
    python3 fuzz/make_seeds.py --check    # exit 1 when fuzz/seeds differs (hk excepted)

Sources: the golden cases (spec/kiln-v2-cases.json), the regression cases
(spec/regressions/*.json), values encoded with the Python reference
(spec/reference/kiln_ref.py) for every type of the `frozen` target (whose
table is read from fuzz_targets/frozen.rs so the selector bytes match), HK
files from spec/reference/hk_writer.py, and a few fixed pseudo-random byte
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


def seeds():
    out: dict[str, dict[str, bytes]] = {t: {} for t in ("directory", "directory_in_struct", "frozen", "writer", "hk")}
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
            if target != "hk" and have != files:
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
