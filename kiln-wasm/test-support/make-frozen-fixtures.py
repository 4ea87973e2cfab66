#!/usr/bin/env python3
"""Frozen-value fixtures for kiln-wasm's tests, encoded by the Python reference
codec (spec/reference/kiln_ref.py), written to test-support/frozen-fixtures.json.

    python3 kiln-wasm/test-support/make-frozen-fixtures.py           # rewrite the file
    python3 kiln-wasm/test-support/make-frozen-fixtures.py --check   # exit 1 when it is stale

Each accepted case is (name, type, framed, hex, note); test/frozen.test.mjs holds the
JavaScript value each one must decode to. Rejected cases also carry the code and
offset the reference reports, which the package must match.
"""

from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "spec" / "reference"))
sys.dont_write_bytecode = True  # leave spec/reference/ as it is

import kiln_ref as k  # noqa: E402
from kiln_ref import F32, F64, Some, Tensor  # noqa: E402

OUT = HERE / "frozen-fixtures.json"

I64_MIN, I64_MAX, U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1

SCALARS = ("struct{b:bool,c:bool,i8:i8,i16:i16,i32:i32,i64:i64,u8:u8,u16:u16,u32:u32,"
           "u64:u64,n:int,un:uint,f:f32,d:f64,s:str,}")

W = Tensor(dtype="f32", shape=(3,), payload=F32.from_float(1.5).bits.to_bytes(4, "little")
           + F32.from_float(-2).bits.to_bytes(4, "little") + F32.from_float(0.25).bits.to_bytes(4, "little"),
           name="w")
MASK = Tensor(dtype="bool", shape=(2, 2), payload=bytes([1, 0, 0, 1]), name="mask")
I8T = Tensor(dtype="i8", shape=(2,), payload=bytes([0xff, 0x80]))


def f32s(*xs):
    return [F32.from_float(x) for x in xs]


ACCEPT = [
    ("scalars-min", SCALARS, dict(
        b=True, c=False, i8=-128, i16=-32768, i32=-(1 << 31), i64=I64_MIN, u8=0, u16=0, u32=0, u64=0,
        n=I64_MIN, un=0, f=F32(0x80000000), d=F64(0x8000000000000000), s=""),
     "every scalar at its minimum; f32 and f64 are -0"),
    ("scalars-max", SCALARS, dict(
        b=True, c=True, i8=127, i16=32767, i32=(1 << 31) - 1, i64=I64_MAX, u8=255, u16=65535, u32=(1 << 32) - 1,
        u64=U64_MAX, n=I64_MAX, un=U64_MAX, f=F32.from_float(3.4028234663852886e38), d=F64.from_float(1.7976931348623157e308),
        s="héllo, wörld ✓ 🦀"),
     "every scalar at its maximum; a non-ASCII string"),
    ("floats-special", "struct{qnan32:f32,qnan64:f64,inf:f64,ninf:f32,tiny:f64,third:f32,}", dict(
        qnan32=F32(0x7fc00001), qnan64=F64(0x7ff8000000000001), inf=F64.from_float(float("inf")),
        ninf=F32.from_float(float("-inf")), tiny=F64(1), third=F32.from_float(1 / 3)),
     "quiet NaNs with payloads, infinities, the smallest subnormal, an f32 rounding"),
    ("nested-structs", "struct{a:struct{b:struct{c:u8,},d:str,},e:i16,empty:struct{},}",
     dict(a=dict(b=dict(c=9), d="deep"), e=-2, empty={}), "structs in structs, struct{} is 0 bytes"),
    ("opts", "struct{none:opt<i32>,some:opt<i32>,s:opt<str>,oo_none:opt<opt<i8>>,oo_inner_none:opt<opt<i8>>,"
             "oo_some:opt<opt<i8>>,ol:opt<list<u16>>,}",
     dict(none=None, some=-5, s="x", oo_none=None, oo_inner_none=Some(None), oo_some=Some(Some(3)), ol=[1, 2]),
     "opt absent and present; opt<opt<T>> in its three states"),
    ("dict-order", "dict<str,u16>", {"a": 1, "2": 2, "10": 3, "__proto__": 4, "é": 5, "": 6, "constructor": 7},
     "keys in byte order: '', '10', '2', '__proto__', 'a', 'constructor', 'é'"),
    ("dict-nested", "struct{tags:dict<str,list<str>>,m:dict<str,struct{x:f64,}>,}",
     dict(tags={"b": ["1", "2"], "a": []}, m={"k": dict(x=0.5)}), "dicts of lists and structs"),
    ("list-structs", "list<struct{id:u32,name:str,score:opt<f32>,}>",
     [dict(id=1, name="one", score=F32.from_float(0.5)), dict(id=2, name="two", score=None),
      dict(id=3, name="", score=F32.from_float(-1))], "a list of structs"),
    ("list-f32-aligned", "list<f32>", f32s(1, -2, 0.5, 3), "the elements start at byte 4: a view"),
    ("list-f32-misaligned", "struct{pad:u8,xs:list<f32>,}", dict(pad=7, xs=f32s(1, -2, 0.5)),
     "the elements start at byte 5: a copy"),
    ("list-f64-aligned", "struct{pad:u32,xs:list<f64>,}", dict(pad=1, xs=[1.25, -0.0, F64(0x7ff8000000000001)]),
     "f64 elements at byte 8: a view, NaN bits kept"),
    ("list-f64-misaligned", "list<f64>", [1.25, -0.0], "f64 elements at byte 4: a copy"),
    ("list-ints", "struct{i8:list<i8>,u8:list<u8>,i16:list<i16>,u16:list<u16>,i32:list<i32>,u32:list<u32>,"
                  "i64:list<i64>,u64:list<u64>,n:list<int>,un:list<uint>,b:list<bool>,e:list<u32>,}",
     dict(i8=[-1, 127], u8=[0, 255, 16], i16=[-300], u16=[65535, 1], i32=[-(1 << 31)], u32=[(1 << 32) - 1],
          i64=[I64_MIN, I64_MAX], u64=[U64_MAX, 0], n=[-1], un=[1 << 63], b=[True, False, True], e=[]),
     "lists of every fixed-width kind"),
    ("lists-nested", "list<list<list<u8>>>", [[[1, 2], []], [], [[255]]], "lists of lists; list<u8> byte runs"),
    ("list-empty-structs", "list<struct{}>", [{}, {}, {}], "three empty structs in 4 bytes"),
    ("strings", "list<str>", ["", "a", "\ufeffbom", "ASCII text longer than thirty-two characters...",
                              "ünïcödé longer than thirty-two bytes, for TextDecoder", "\u0000nul"],
     "empty, short, a leading BOM (kept), long ASCII, long non-ASCII, NUL"),
    ("tensors-in-struct", "struct{id:i64,model:tensors,tag:str,}",
     dict(id=-7, model=[W, MASK], tag="after"), "a directory between two fields (absolute offsets)"),
    ("tensors-many", "struct{layers:list<tensors>,extra:opt<tensors>,none:opt<tensors>,byname:dict<str,tensors>,}",
     dict(layers=[[W], [], [I8T]], extra=[MASK], none=None, byname={"z": [I8T], "a": []}),
     "directories in a list, an opt and a dict, in byte order"),
    ("tensors-root", "tensors", [W], "a bare directory decoded as a value"),
]

FRAMED = [
    ("framed-struct", "struct{id:i64,name:str,}", dict(id=42, name="framed"), "a framed value"),
]

PREFIX = "struct{id:i64,model:tensors,tag:str,}"


def rejects():
    """(name, type, framed, bytes, note); the expected code/offset come from the reference."""
    good = k.encode(PREFIX, dict(id=1, model=[W, MASK], tag="t"))
    mask_at = good.index(bytes([1, 0, 0, 1]))
    bad_bool = bytearray(good)
    bad_bool[mask_at + 1] = 2
    framed = bytearray(k.encode_frame("struct{id:i64,name:str,}", dict(id=1, name="x")))
    wrong_hash = bytearray(framed)
    wrong_hash[8] ^= 1
    bad_magic = bytearray(framed)
    bad_magic[3] = ord("1")
    return [
        ("bool-byte", "struct{a:u8,b:bool,}", bytes([1, 2]), "a bool byte of 2"),
        ("opt-tag", "struct{a:u8,b:opt<u8>,}", bytes([1, 2, 0]), "an opt tag of 2"),
        ("utf8", "struct{a:u8,s:str,}", bytes([1, 3, 0, 0, 0, ord("a"), 0xc3, 0x28]), "bad UTF-8 at byte 6"),
        ("dict-key-order", "dict<str,u8>", bytes([2, 0, 0, 0, 1, 0, 0, 0, ord("b"), 1, 1, 0, 0, 0, ord("a"), 2]),
         "keys out of order"),
        ("dict-dup", "dict<str,u8>", bytes([2, 0, 0, 0, 1, 0, 0, 0, ord("a"), 1, 1, 0, 0, 0, ord("a"), 2]),
         "a duplicate key"),
        ("trailing", "u16", bytes([1, 0, 0]), "one byte after the value"),
        ("eof-scalar", "struct{a:u8,b:i64,}", bytes([1, 0, 0]), "an i64 cut short"),
        ("tensor-bool-in-struct", PREFIX, bytes(bad_bool), "a bool tensor byte of 2 inside a struct (absolute offset)"),
        ("frame-hash", "struct{id:i64,name:str,}", bytes(wrong_hash), "the frame's hash is off by one bit", True),
        ("frame-magic", "struct{id:i64,name:str,}", bytes(bad_magic), "KLN1", True),
        ("frame-short", "struct{id:i64,name:str,}", bytes(framed[:10]), "a 10-byte frame", True),
        ("frame-unframed", "struct{id:i64,name:str,}", bytes(framed), "a framed value decoded as unframed"),
    ]


def hexof(b: bytes) -> str:
    return bytes(b).hex()


def build():
    cases = []
    for name, ty, val, note in ACCEPT:
        buf = k.encode(ty, val)
        assert k.validate(ty, buf) is None, name
        cases.append(dict(name=name, type=ty, framed=False, hex=hexof(buf), expect="accept", note=note))
    for name, ty, val, note in FRAMED:
        buf = k.encode_frame(ty, val)
        assert k.validate(ty, buf, framed=True) is None, name
        cases.append(dict(name=name, type=ty, framed=True, hex=hexof(buf), expect="accept", note=note))
    for r in rejects():
        name, ty, buf, note = r[:4]
        framed = len(r) > 4 and r[4]
        err = k.validate(ty, buf, framed=framed)
        assert err is not None, name
        cases.append(dict(name=name, type=ty, framed=framed, hex=hexof(buf), expect=err.code,
                          offset=err.offset, note=note))
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "fixture names must be unique"
    return {
        "generator": "kiln-wasm/test-support/make-frozen-fixtures.py (spec/reference/kiln_ref.py)",
        "cases": cases,
    }


def main() -> int:
    text = json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run {pathlib.Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(json.loads(text)['cases'])} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
