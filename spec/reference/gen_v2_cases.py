#!/usr/bin/env python3
"""Regenerate spec/kiln-v2-cases.json: the 46 golden cases of the Kiln v2 spec.

    python3 spec/reference/gen_v2_cases.py            # write the file
    python3 spec/reference/gen_v2_cases.py --check    # compare with the file on disk
    python3 spec/reference/gen_v2_cases.py --out PATH # write (or --check) another path

Every case is built with kiln_ref's encoder, plus explicit byte mutations for
the rejects, and decoded again with kiln_ref. The script refuses to write
(exit 1, naming the case) when a case does not give the result the spec's
"Golden cases" table records, when a reject does not fail at the intended
rule (so no earlier fault hides in it), when the mutated base is not itself
valid, or when the list is not exactly the table's 46 names in order.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kiln_ref as K  # noqa: E402
from kiln_ref import DESC, HDR, F32, Tensor  # noqa: E402

CAP = K.DEFAULT_CAP
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "kiln-v2-cases.json"

# The spec's "Golden cases" table, in its order: (name, result).
TABLE = [
    ("kiln-v2-empty", "accept"),
    ("kiln-v2-f32", "accept"),
    ("kiln-v2-f32-scalar", "accept"),
    ("kiln-v2-f32-negzero", "accept"),
    ("kiln-v2-f64-nan", "accept"),
    ("kiln-v2-f16-named", "accept"),
    ("kiln-v2-bf16", "accept"),
    ("kiln-v2-i8", "accept"),
    ("kiln-v2-bool", "accept"),
    ("kiln-v2-u4", "accept"),
    ("kiln-v2-f8-pair", "accept"),
    ("kiln-v2-scales", "accept"),
    ("kiln-v2-scales-outer", "accept"),
    ("kiln-v2-opaque", "accept"),
    ("kiln-v2-in-struct", "accept"),
    ("kiln-v2-framed", "accept"),
    ("kiln-pod-list-f32", "accept"),
    ("kiln-v2-bad-magic", "FRAME"),
    ("kiln-v2-bad-version", "FRAME"),
    ("kiln-v2-empty-name-flag", "TYPE"),
    ("kiln-v2-le-clear", "FRAME"),
    ("kiln-v2-unknown-flag", "FRAME"),
    ("kiln-v2-reserved", "FRAME"),
    ("kiln-v2-directory-eof", "EOF"),
    ("kiln-v2-count-cap", "LIMIT"),
    ("kiln-v2-directory-mismatch", "TYPE"),
    ("kiln-v2-shape-overflow", "LIMIT"),
    ("kiln-v2-length-mismatch", "TYPE"),
    ("kiln-v2-overlap", "TYPE"),
    ("kiln-v2-unaligned", "TYPE"),
    ("kiln-v2-nonzero-pad", "TYPE"),
    ("kiln-v2-duplicate-name", "TYPE"),
    ("kiln-v2-bad-utf8", "UTF8"),
    ("kiln-v2-bool-byte", "TYPE"),
    ("kiln-v2-scale-count", "TYPE"),
    ("kiln-v2-opaque-no-layout", "TYPE"),
    ("kiln-v2-trailing", "TRAILING"),
    ("kiln-v2-high-nibble", "TYPE"),
    ("kiln-v2-shape-tail", "TYPE"),
    ("kiln-v2-dtype-zero", "TYPE"),
    ("kiln-v2-dtype-reserved", "TYPE"),
    ("kiln-v2-payload-overflow", "LIMIT"),
    ("kiln-list-struct-hostile", "EOF"),
    ("kiln-list-struct-short", "EOF"),
    ("kiln-list-str-short", "EOF"),
    ("kiln-pod-list-short", "EOF"),
]

STRUCT = "struct{id:i64,batch:tensors,}"
ROW = "struct{id:u32,name:str,}"
ROWS = f"list<{ROW}>"

# exact bytes the spec gives
EMPTY_HEX = ("4b4c4e54020200000000000000000000000000000000000000000000000000000000"
             "000000000000000000000000000000000000000000000000000000000000")
F32_PAYLOAD = bytes.fromhex("0000803f000000c0")          # 1.0, -2.0
STRUCT_HASH = 0xE58AADC7552F0D82


# ---------------------------------------------------------------- byte edits

def put(block: bytes, off: int, fmt: str, value: int) -> bytes:
    b = bytearray(block)
    struct.pack_into("<" + fmt, b, off, value)
    return bytes(b)


def hdr(block: bytes, field: int, fmt: str, value: int) -> bytes:
    return put(block, field, fmt, value)


def desc(block: bytes, i: int, field: int, fmt: str, value: int) -> bytes:
    return put(block, K.HEADER_SIZE + i * K.DESC_SIZE + field, fmt, value)


def payload_at(block: bytes, rel: int) -> int:
    """Absolute offset of payload byte rel in a standalone block."""
    _m, _v, _f, _r, count, name_bytes, _pb, dir_bytes = K._HEADER.unpack_from(block, 0)
    return ((K.HEADER_SIZE + dir_bytes + 63) & ~63) + rel


def heap_at(block: bytes, rel: int) -> int:
    count = struct.unpack_from("<I", block, HDR.TENSOR_COUNT)[0]
    return K.HEADER_SIZE + count * K.DESC_SIZE + rel


def setbyte(block: bytes, off: int, value: int) -> bytes:
    b = bytearray(block)
    b[off] = value
    return bytes(b)


# ---------------------------------------------------------------- blocks

def D(tensors, validate=True) -> bytes:
    return K.encode_directory(tensors, validate=validate)


def t_f32():
    return Tensor("f32", (2,), F32_PAYLOAD)


def b_empty():
    return D([])


def b_f32():
    return D([t_f32()])


def b_f16_named():
    return D([Tensor("f16", (1,), b"\x00\x3c", name="half")])


def b_bool():
    return D([Tensor("bool", (3,), b"\x01\x00\x01")])


def b_u4():
    return D([Tensor("u4", (3,), b"\x21\x03")])


def b_two_f32(names=(None, None)):
    return D([Tensor("f32", (2,), F32_PAYLOAD, name=names[0]),
              Tensor("f32", (2,), bytes.fromhex("00004040000080c0"), name=names[1])])


E2M1_32 = bytes(range(0x00, 0x100, 0x11))      # 16 bytes: 32 e2m1 nibbles
E2M1_16 = bytes(range(0x10, 0x90, 0x11))[:8]     # 8 bytes: 16 e2m1 nibbles


def b_scales():
    return D([
        Tensor("e2m1", (32,), E2M1_32, quant_scheme=1, quant_axis=0, group_size=32, scale_index=1),
        Tensor("e8m0", (1,), b"\x7f"),
    ])


def b_scales_outer():
    return D([
        Tensor("e2m1", (16,), E2M1_16, quant_scheme=2, quant_axis=0, group_size=16,
               scale_index=1, outer_index=2),
        Tensor("f8e4m3", (1,), b"\x38"),
        Tensor("f32", (1,), bytes.fromhex("0000803f")),
    ])


OPAQUE_PAYLOAD = bytes(range(1, 19))


def b_opaque(layout="Q4_K"):
    return D([Tensor(4096, (32,), OPAQUE_PAYLOAD, layout=layout, block_size=18)],
             validate=layout is not None)


# ---------------------------------------------------------------- the cases

def _case(name, typ, value, expect, note, rule=None, base=None, framed=False):
    return {"name": name, "type": typ, "framed": framed, "bytes": value,
            "expect": expect, "note": note, "rule": rule, "base": base}


def build_cases():
    """Every case as a dict: name, type, framed, bytes, expect, note, plus the
    private fields rule (the rule kiln_ref must report) and base (the valid
    buffer the reject was mutated from, or None)."""
    T = "tensors"
    cases = []
    add = cases.append

    # ---- accepts
    add(_case("kiln-v2-empty", T, b_empty(), "accept",
              "Header-only directory: every length 0, flags = little-endian bit only."))
    add(_case("kiln-v2-f32", T, b_f32(), "accept",
              "One unnamed f32 vector of 2 (1.0, -2.0): 64 + 128 + 8 = 200 bytes, payload at 192."))
    add(_case("kiln-v2-f32-scalar", T, D([Tensor("f32", (), bytes.fromhex("0000803f"))]), "accept",
              "Rank 0 f32 scalar 1.0: element count 1, all shape slots 0."))
    add(_case("kiln-v2-f32-negzero", T, D([Tensor("f32", (1,), bytes.fromhex("00000080"))]), "accept",
              "f32 -0.0 kept as 00 00 00 80."))
    add(_case("kiln-v2-f64-nan", T, D([Tensor("f64", (1,), struct.pack("<Q", 0x7FF8000000000001))]),
              "accept", "f64 quiet NaN with payload 1, bits 0x7FF8000000000001 little-endian."))
    add(_case("kiln-v2-f16-named", T, b_f16_named(), "accept",
              "f16 1.0 (00 3c) named 'half': name flag set, 4-byte heap at 192, 60 zero pad bytes up to payload_base 256."))
    add(_case("kiln-v2-bf16", T, D([Tensor("bf16", (1,), b"\x80\x3f")]), "accept",
              "bf16 1.0 = bits 0x3F80, bytes 80 3f."))
    add(_case("kiln-v2-i8", T, D([Tensor("i8", (3,), b"\xff\x80\x7f")]), "accept",
              "i8 -1, -128, 127 as two's-complement bytes ff 80 7f."))
    add(_case("kiln-v2-bool", T, b_bool(), "accept",
              "bool true, false, true: one byte each, 01 00 01."))
    add(_case("kiln-v2-u4", T, b_u4(), "accept",
              "u4 values 1, 2, 3 packed low nibble first: 21 03 (odd count, high nibble 0)."))
    add(_case("kiln-v2-f8-pair", T, D([Tensor("f8e4m3", (1,), b"\x38"), Tensor("f8e5m2", (1,), b"\x3c")]),
              "accept", "f8e4m3 byte 38 at 0, f8e5m2 byte 3c at 64; the 63 gap bytes are zero."))
    add(_case("kiln-v2-scales", T, b_scales(), "accept",
              "Scheme 1: 32 e2m1 elements, axis 0, group 32, scale_index 1 -> one e8m0 byte 127."))
    add(_case("kiln-v2-scales-outer", T, b_scales_outer(), "accept",
              "Scheme 2: 16 e2m1 elements, group 16, one f8e4m3 scale (38), one f32 outer 1.0."))
    add(_case("kiln-v2-opaque", T, b_opaque(), "accept",
              "Opaque dtype 4096, layout name Q4_K in the heap, block_size 18, 18 payload bytes."))
    add(_case("kiln-v2-in-struct", STRUCT, K.encode(STRUCT, {"id": 7, "batch": [t_f32()]}), "accept",
              "i64 7, then the 200-byte kiln-v2-f32 block; the struct ends at the block end."))
    add(_case("kiln-v2-framed", STRUCT, K.encode_frame(STRUCT, {"id": 7, "batch": []}), "accept",
              "Frame KLN0, profile 0, hash 0xe58aadc7552f0d82 LE, then i64 7 and the empty directory.",
              framed=True))
    add(_case("kiln-pod-list-f32", "list<f32>", K.encode("list<f32>", [F32(0x3F800000), F32(0xC0000000)]),
              "accept", "list<f32> count 2, then 1.0 and -2.0 as 8 contiguous little-endian bytes."))

    # ---- header rejects
    e, f = b_empty(), b_f32()
    add(_case("kiln-v2-bad-magic", T, setbyte(e, 3, ord("X")), "FRAME",
              "Empty block with magic KLNX (step 1).", "dir_magic", e))
    add(_case("kiln-v2-bad-version", T, setbyte(e, HDR.VERSION, 1), "FRAME",
              "Empty block with version byte 1 (step 2).", "dir_version", e))
    add(_case("kiln-v2-empty-name-flag", T, setbyte(e, HDR.FLAGS, 0x03), "TYPE",
              "Empty block with the name flag set: TYPE at step 8 (name rules).", "name_flag_empty", e))
    add(_case("kiln-v2-le-clear", T, setbyte(f, HDR.FLAGS, 0x00), "FRAME",
              "kiln-v2-f32 with the little-endian flag clear (step 2).", "dir_le_clear", f))
    add(_case("kiln-v2-unknown-flag", T, setbyte(f, HDR.FLAGS, 0x06), "FRAME",
              "kiln-v2-f32 with flag bit 2 also set (step 2).", "dir_flag_unknown", f))
    add(_case("kiln-v2-reserved", T, setbyte(e, HDR.RESERVED1, 0x01), "FRAME",
              "Empty block with header reserved byte 32 = 1 (step 2).", "dir_reserved", e))
    m = hdr(hdr(e, HDR.TENSOR_COUNT, "I", 1), HDR.DIRECTORY_BYTES, "Q", 128)
    add(_case("kiln-v2-directory-eof", T, m, "EOF",
              "Empty block claiming tensor_count 1 (directory_bytes 128, consistent): the "
              "descriptor is missing, EOF at step 5 before any descriptor is allocated.",
              "dir_past_end", e))
    m = hdr(hdr(e, HDR.TENSOR_COUNT, "I", CAP + 1), HDR.DIRECTORY_BYTES, "Q", (CAP + 1) * 128)
    add(_case("kiln-v2-count-cap", T, m, "LIMIT",
              "tensor_count 16,777,217 (directory_bytes consistent) at the default cap: LIMIT at "
              "step 3, before the EOF a cap-less reader would give.", "dir_count_cap", e))
    add(_case("kiln-v2-directory-mismatch", T, hdr(f, HDR.DIRECTORY_BYTES, "Q", 129), "TYPE",
              "kiln-v2-f32 with directory_bytes 129 instead of 1*128+0 (step 4).",
              "dir_bytes_mismatch", f))

    # ---- descriptor rejects
    m = desc(desc(desc(f, 0, DESC.RANK, "B", 2), 0, DESC.SHAPE, "Q", 1 << 32),
             0, DESC.SHAPE + 8, "Q", 1 << 32)
    add(_case("kiln-v2-shape-overflow", T, m, "LIMIT",
              "kiln-v2-f32 with rank 2, shape [2^32, 2^32]: the element count overflows u64 (step 9).",
              "shape_overflow", f))
    add(_case("kiln-v2-length-mismatch", T, desc(f, 0, DESC.SHAPE, "Q", 3), "TYPE",
              "kiln-v2-f32 with shape [3]: 3 f32 need 12 bytes, byte_length is 8 (step 9).",
              "length_mismatch", f))
    two = b_two_f32()
    add(_case("kiln-v2-overlap", T, desc(two, 1, DESC.BYTE_OFFSET, "Q", 4), "TYPE",
              "Two f32[2] tensors; the second moved to offset 4 so [4,12) overlaps [0,8) (step 9, "
              "before the canonical-offset check).", "overlap", two))
    add(_case("kiln-v2-unaligned", T, desc(two, 1, DESC.BYTE_OFFSET, "Q", 8), "TYPE",
              "Two f32[2] tensors; the second at offset 8 instead of 64: in range, no overlap, "
              "not the greedy placement (step 10).", "offset_not_canonical", two))
    named = b_f16_named()
    pad = K.HEADER_SIZE + K.DESC_SIZE + 4
    add(_case("kiln-v2-nonzero-pad", T, setbyte(named, pad + 10, 0x01), "TYPE",
              "kiln-v2-f16-named with one padding byte after the heap set to 01 (step 7).",
              "pad_nonzero", named))
    ab = b_two_f32(("a", "b"))
    add(_case("kiln-v2-duplicate-name", T, setbyte(ab, heap_at(ab, 1), ord("a")), "TYPE",
              "Two f32 tensors named a and b; heap byte b changed to a: names not unique (step 8).",
              "name_duplicate", ab))
    add(_case("kiln-v2-bad-utf8", T, setbyte(named, heap_at(named, 0), 0xFF), "UTF8",
              "kiln-v2-f16-named with the first name byte 0xFF (step 8).", "name_utf8", named))
    bl = b_bool()
    add(_case("kiln-v2-bool-byte", T, setbyte(bl, payload_at(bl, 1), 0x02), "TYPE",
              "kiln-v2-bool with the second element byte 02 (step 11).", "bool_byte", bl))
    sc = b_scales()
    add(_case("kiln-v2-scale-count", T, desc(sc, 0, DESC.GROUP_SIZE, "I", 16), "TYPE",
              "kiln-v2-scales with group_size 16: two scales needed, one present (step 11).",
              "quant_scale_count", sc))
    add(_case("kiln-v2-opaque-no-layout", T, b_opaque(None), "TYPE",
              "kiln-v2-opaque encoded without its layout name (heap empty, layout_off 0xFFFF): "
              "opaque dtype needs a layout name (step 9).", "opaque_no_layout", b_opaque()))
    add(_case("kiln-v2-trailing", T, e + b"\x00", "TRAILING",
              "Standalone empty block followed by one 00 byte (step 12).", "trailing", e))
    u4 = b_u4()
    add(_case("kiln-v2-high-nibble", T, setbyte(u4, payload_at(u4, 1), 0x13), "TYPE",
              "kiln-v2-u4 with last byte 13: odd count, high nibble of the last byte not 0 (step 11).",
              "high_nibble", u4))
    add(_case("kiln-v2-shape-tail", T, desc(f, 0, DESC.SHAPE + 8, "Q", 1), "TYPE",
              "kiln-v2-f32 (rank 1) with shape slot 1 = 1 (step 9).", "shape_tail", f))
    add(_case("kiln-v2-dtype-zero", T, desc(f, 0, DESC.DTYPE, "H", 0), "TYPE",
              "kiln-v2-f32 with dtype code 0 (step 9).", "dtype_zero", f))
    add(_case("kiln-v2-dtype-reserved", T, desc(f, 0, DESC.DTYPE, "H", 20), "TYPE",
              "kiln-v2-f32 with dtype code 20, first reserved code (step 9).", "dtype_reserved", f))
    add(_case("kiln-v2-payload-overflow", T, hdr(e, HDR.PAYLOAD_BYTES, "Q", (1 << 64) - 64), "LIMIT",
              "Empty block with payload_bytes 2^64-64: payload_base 64 + payload_bytes = 2^64 "
              "overflows u64 (step 6).", "payload_end_overflow", e))

    # ---- Frozen allocation rule
    rows = K.encode(ROWS, [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
    add(_case("kiln-list-struct-hostile", ROWS, struct.pack("<I", CAP), "EOF",
              "list<struct> with minimum 8 bytes per element, count 16,777,216 (at the cap) and "
              "nothing after it: count*8 > 0 unread bytes, EOF before allocating.",
              "count_past_end", K.encode(ROWS, [])))
    add(_case("kiln-list-struct-short", ROWS, rows[:4 + 9], "EOF",
              "list<struct> count 2 with one 9-byte struct present: 2*8 > 9 unread, EOF at the count.",
              "count_past_end", rows))
    strs = K.encode("list<str>", ["a", "b", "c"])
    add(_case("kiln-list-str-short", "list<str>", strs[:4 + 5], "EOF",
              "list<str> count 3 with one string (length word + 'a') present: 3*4 > 5, EOF at the count.",
              "count_past_end", strs))
    pod = K.encode("list<f32>", [F32(0x3F800000), F32(0xC0000000)])
    add(_case("kiln-pod-list-short", "list<f32>", pod[:4 + 4], "EOF",
              "list<f32> count 2 with 4 payload bytes: 2*4 > 4, EOF at the count.",
              "count_past_end", pod))
    return cases


# ---------------------------------------------------------------- checking

def _result(case):
    try:
        value = K.decode(case["type"], case["bytes"], framed=case["framed"],
                         count_cap=CAP, byte_cap=CAP)
    except K.KilnError as e:
        return e.code, e.rule, None
    return "accept", None, value


def verify(cases) -> list[str]:
    """Problems with the case list; empty when it may be written."""
    problems = []
    if len(cases) != 46:
        problems.append(f"expected 46 cases, built {len(cases)}")
    names = [c["name"] for c in cases]
    if names != [n for n, _r in TABLE]:
        for i, (want, _r) in enumerate(TABLE):
            got = names[i] if i < len(names) else None
            if got != want:
                problems.append(f"case #{i}: expected {want} in the table's order, built {got}")
                break
    table = dict(TABLE)
    for c in cases:
        name = c["name"]
        if name in table and c["expect"] != table[name]:
            problems.append(f"case {name}: records {c['expect']}, the spec's table says {table[name]}")
        if c["expect"] not in ("accept",) + K.CODES:
            problems.append(f"case {name}: unknown expectation {c['expect']!r}")
        try:
            K.parse_type(c["type"])
        except (K.TypeTextError, K.KilnError) as e:
            problems.append(f"case {name}: bad type text: {e}")
            continue
        code, rule, value = _result(c)
        if code != c["expect"]:
            problems.append(f"case {name}: kiln_ref gives {code}"
                            + (f" ({rule})" if rule else "") + f", expected {c['expect']}")
            continue
        if code == "accept":
            again = (K.encode_frame if c["framed"] else K.encode)(c["type"], value)
            if again != c["bytes"]:
                problems.append(f"case {name}: decodes but does not re-encode to the same bytes")
        elif c.get("rule") and rule != c["rule"]:
            problems.append(f"case {name}: fails at rule {rule}, intended {c['rule']} "
                            "(an earlier fault in the check order?)")
        base = c.get("base")
        if base is not None:
            err = K.validate(c["type"], base, framed=c["framed"])
            if err is not None:
                problems.append(f"case {name}: the valid base it mutates is rejected: {err}")
    exact = {
        "kiln-v2-empty": EMPTY_HEX,
        "kiln-v2-f32": None,
    }
    by = {c["name"]: c for c in cases}
    if "kiln-v2-empty" in by and by["kiln-v2-empty"]["bytes"].hex() != exact["kiln-v2-empty"]:
        problems.append("case kiln-v2-empty: not the spec's 64-byte header")
    if "kiln-v2-f32" in by:
        b = by["kiln-v2-f32"]["bytes"]
        if len(b) != 200 or b[192:] != F32_PAYLOAD:
            problems.append("case kiln-v2-f32: not 200 bytes ending in 00 00 80 3f 00 00 00 c0")
    if "kiln-v2-framed" in by:
        b = by["kiln-v2-framed"]["bytes"]
        if b[8:16] != struct.pack("<Q", STRUCT_HASH):
            problems.append("case kiln-v2-framed: frame hash is not 0xe58aadc7552f0d82")
    if "kiln-v2-in-struct" in by and "kiln-v2-f32" in by:
        if by["kiln-v2-in-struct"]["bytes"] != struct.pack("<q", 7) + by["kiln-v2-f32"]["bytes"]:
            problems.append("case kiln-v2-in-struct: not i64 7 followed by kiln-v2-f32")
    return problems


def render(cases) -> str:
    out = {"cap": CAP, "cases": [
        {"name": c["name"], "type": c["type"], "framed": c["framed"],
         "hex": c["bytes"].hex(), "expect": c["expect"], "note": c["note"]}
        for c in cases]}
    return json.dumps(out, indent=1, ensure_ascii=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gen_v2_cases.py",
                                 description="Regenerate the Kiln v2 golden cases.")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help=f"output path (default {DEFAULT_OUT})")
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and fail if the file differs")
    args = ap.parse_args(argv)
    out = Path(args.out)

    cases = build_cases()
    problems = verify(cases)
    if problems:
        for p in problems:
            print(f"gen_v2_cases: refusing to write: {p}", file=sys.stderr)
        return 1
    text = render(cases)
    n_acc = sum(c["expect"] == "accept" for c in cases)
    summary = f"{len(cases)} cases ({n_acc} accept, {len(cases) - n_acc} reject)"
    if args.check:
        try:
            current = out.read_text(encoding="utf-8")
        except OSError as e:
            print(f"gen_v2_cases: cannot read {out}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"gen_v2_cases: {out} differs from the regenerated cases; "
                  "run spec/reference/gen_v2_cases.py", file=sys.stderr)
            return 1
        print(f"gen_v2_cases: {out.name} up to date, {summary}")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, out)
    print(f"gen_v2_cases: wrote {summary} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
