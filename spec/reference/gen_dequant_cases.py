#!/usr/bin/env python3
"""Regenerate spec/dequant-cases.json: directories and the f32 bits that
spec/kiln-v2.md section 11.1 (dequantization, an optional helper) gives them.

    python3 spec/reference/gen_dequant_cases.py            # write the file
    python3 spec/reference/gen_dequant_cases.py --check    # compare with the file on disk
    python3 spec/reference/gen_dequant_cases.py --out PATH # write (or --check) another path

Each case is one canonical directory (kiln_ref's encoder, checked again by
kiln_ref's decoder), the index of the tensor to dequantize, and either the
expected f32 bit patterns (8 hex digits each; a NaN stands for any NaN) or
the reason the helper refuses it. The values come from dequant_ref, which
computes exactly and rounds only where the spec does. The cases cover every
element dtype (unquantized, with the rounding edges of f64 and the wide
integers, and quantized), e8m0 and other scale dtypes, axis 0, 1 and last of
ranks 1 to 3, group sizes that do not divide the dimension, scheme 2 (where
the two roundings are visible), the spec's own kiln-v2-scales goldens, and
opaque data and scales.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dequant_ref as R  # noqa: E402
import gen_v2_cases as V  # noqa: E402
import kiln_ref as K  # noqa: E402
from kiln_ref import Tensor  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "dequant-cases.json"


def f32b(*xs) -> bytes:
    return struct.pack(f"<{len(xs)}f", *xs)


def u32b(*xs) -> bytes:
    return struct.pack(f"<{len(xs)}I", *xs)


def f64b(*xs) -> bytes:
    return struct.pack(f"<{len(xs)}d", *xs)


def u64b(*xs) -> bytes:
    return struct.pack(f"<{len(xs)}Q", *xs)


def packed(nibbles) -> bytes:
    out = bytearray((len(nibbles) + 1) // 2)
    for i, n in enumerate(nibbles):
        out[i // 2] |= (n & 0xF) << (4 * (i % 2))
    return bytes(out)


def f64_bits(*bits) -> bytes:
    return u64b(*bits)


# f64 inputs by bits: exact, ties to even, overflow, subnormals, NaN.
F64_BITS = [
    0x3FF0000000000000,  # 1.0
    0x8000000000000000,  # -0.0
    0x7FF8000000000001,  # NaN with payload 1 (the spec's golden NaN)
    0x7FF0000000000000,  # +inf
    0xFFF0000000000000,  # -inf
    0x3FF0000010000000,  # 1 + 2^-24: a tie, to even (1.0)
    0x3FF0000030000000,  # 1 + 3 * 2^-24: a tie, to even (1 + 2^-22)
    0x3FF0000010000001,  # just above the tie: up
    0x47EFFFFFE0000000,  # f32 max
    0x47EFFFFFF0000000,  # (2 - 2^-24) * 2^127: the tie above f32 max, to infinity
    0x47EFFFFFEFFFFFFF,  # just below that tie: f32 max
    0xC7F0000000000000,  # -2^128: -infinity
    0x36A0000000000000,  # 2^-149, the smallest f32 subnormal
    0x3690000000000000,  # 2^-150: a tie with 0, to even (0)
    0x3698000000000000,  # 3 * 2^-151: above the tie, 2^-149
    0xB6A8000000000000,  # -3 * 2^-150: a tie between 1 and 2 ulps, to even (-2^-148)
    0x3810000000000000,  # 2^-126, the smallest f32 normal
    0x380FFFFFF0000000,  # just under 2^-126, rounds up to it
    0x3FB999999999999A,  # 0.1
    0x0000000000000001,  # the smallest f64 subnormal: 0
]
F16_BITS = [0x3C00, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
            0x3555, 0xC000, 0x0000]
BF16_BITS = [0x3F80, 0x4049, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0x0001, 0x7F7F, 0xBF80]
F32_BITS = [0x3F800000, 0x80000000, 0x7FA00001, 0x7F800000, 0x00000001, 0xC0000000,
            0x7F7FFFFF, 0x3DCCCCCD]

I32 = [0, 1, -1, (1 << 24) + 1, (1 << 24) + 3, -((1 << 24) + 1), (1 << 25) + 6, (1 << 31) - 1,
       -(1 << 31), 2147483584, 2147483520, 123456789]
U32 = [0, 1, (1 << 32) - 1, (1 << 24) + 1, (1 << 24) + 3, 4294967167, 4294967168, 3000000001]
# 2^60 + 2^36 + 1 is a double-rounding trap: through an f64 it is a tie that
# goes down; rounded once it goes up.
I64 = [0, -1, (1 << 63) - 1, -(1 << 63), (1 << 60) + (1 << 36) + 1, -((1 << 60) + (1 << 36) + 1),
       (1 << 60) + (1 << 36), (1 << 53) + 1, (1 << 24) + 1, 9007199254740993 * 1000]
U64 = [0, (1 << 64) - 1, (1 << 63) + (1 << 39) + 1, (1 << 63) + (1 << 39), (1 << 60) + (1 << 36) + 1,
       (1 << 24) + 3, 18446742974197923840, 18446742974197923839]


def plain(code_or_name, payload: bytes, count: int) -> list:
    return [Tensor(code_or_name, (count,), payload, name="x")]


def element_cases() -> list:
    """Every element dtype, unquantized (scheme 0): conversion only."""
    cases = [
        ("f64", f64_bits(*F64_BITS), len(F64_BITS)),
        ("f32", u32b(*F32_BITS), len(F32_BITS)),
        ("f16", struct.pack(f"<{len(F16_BITS)}H", *F16_BITS), len(F16_BITS)),
        ("bf16", struct.pack(f"<{len(BF16_BITS)}H", *BF16_BITS), len(BF16_BITS)),
        ("f8e4m3", bytes(range(256)), 256),
        ("f8e5m2", bytes(range(256)), 256),
        ("bool", b"\x00\x01\x01", 3),
        ("i8", bytes(range(256)), 256),
        ("u8", bytes(range(256)), 256),
        ("i16", struct.pack("<6h", 0, 1, -1, 32767, -32768, 1234), 6),
        ("u16", struct.pack("<4H", 0, 1, 65535, 40000), 4),
        ("i32", struct.pack(f"<{len(I32)}i", *I32), len(I32)),
        ("u32", struct.pack(f"<{len(U32)}I", *U32), len(U32)),
        ("i64", struct.pack(f"<{len(I64)}q", *I64), len(I64)),
        ("u64", struct.pack(f"<{len(U64)}Q", *U64), len(U64)),
        ("i4", packed(range(16)), 16),
        ("u4", packed(range(16)), 16),
        ("e2m1", packed(range(16)), 16),
        ("e8m0", bytes(range(256)), 256),
        ("i4", packed([7, 8, 15]), 3),
    ]
    out = []
    for name, payload, n in cases:
        suffix = "-odd" if name == "i4" and n == 3 else ""
        out.append(case(f"element-{name}{suffix}", f"{name} elements, scheme 0: conversion only",
                        plain(name, payload, n), 0))
    return out


def q(dtype, shape, payload, axis, group, scale_index=1, outer_index=None, name="q"):
    return Tensor(dtype, shape, payload, name=name, quant_scheme=2 if outer_index is not None else 1,
                  quant_axis=axis, group_size=group, scale_index=scale_index, outer_index=outer_index)


def count_of(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def scales_for(shape, axis, group) -> int:
    s = list(shape)
    s[axis] = -(-s[axis] // group)
    return count_of(s)


def pattern(name: str, n: int) -> bytes:
    """Deterministic valid payload bytes for n elements of a dtype."""
    if name == "bool":
        return bytes(i % 2 for i in range(n))
    if name in ("i4", "u4", "e2m1"):
        return packed([(5 * i + 3) % 16 for i in range(n)])
    width = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i16": 2, "u16": 2, "i32": 4, "u32": 4,
             "i64": 8, "u64": 8}.get(name, 1)
    if name == "f32":
        return f32b(*[(i - 3) * 0.37 for i in range(n)])
    if name == "f64":
        return f64b(*[(i - 3) * 0.1 + 1e-9 for i in range(n)])
    if name == "f16":
        return struct.pack(f"<{n}H", *[0x3C00 + 0x155 * i - 0x400 * (i % 3) for i in range(n)])
    if name == "bf16":
        return struct.pack(f"<{n}H", *[(0x3F80 + 0x23 * i) | (0x8000 * (i % 2)) for i in range(n)])
    if name == "f8e4m3" or name == "f8e5m2" or name == "e8m0":
        return bytes((0x31 + 7 * i) % 0xFE for i in range(n))
    return bytes((0x9D * i + 0x4B) % 256 for i in range(n * width))


def quantized_cases() -> list:
    out = []
    # Every element dtype quantized: [2, 5] along axis 1 (the last) in groups of 3
    # (2 groups per row, the last one short), e8m0 scales or f32 scales in turn.
    for k, name in enumerate(R.NAMES[c] for c in sorted(R.NAMES)):
        shape, axis, group = (2, 5), 1, 3
        ns = scales_for(shape, axis, group)
        if k % 2 == 0:
            sc = Tensor("e8m0", (ns,), bytes([127, 129, 124, 130][:ns]), name="s")
        else:
            sc = Tensor("f32", (ns,), f32b(*[0.5, -3.0, 1.25, 1e-3][:ns]), name="s")
        out.append(case(f"quantized-{name}", f"{name} [2, 5] axis 1 group 3, {sc.dtype == 19 and 'e8m0' or 'f32'} scales",
                        [q(name, shape, pattern(name, count_of(shape)), axis, group), sc], 0))

    # Rank 1: e2m1 x e8m0 (MXFP4), 40 elements in groups of 16 (3 groups, the last of 8);
    # scale bytes 2^-127 (subnormal products), 0xFF (NaN) and 254 (products past f32 max).
    out.append(case("mxfp4-rank1-short-group", "e2m1 [40] axis 0 group 16, e8m0 scales 0, 0xFF, 254",
                    [q("e2m1", (40,), packed([(3 * i + 1) % 16 for i in range(40)]), 0, 16),
                     Tensor("e8m0", (3,), bytes([0, 0xFF, 254]), name="s")], 0))
    # Rank 2, axis 0: i4 [5, 3] in groups of 2 (3 groups, the last of 1), f16 scales, scheme 2.
    out.append(case("i4-rank2-axis0-scheme2", "i4 [5, 3] axis 0 group 2, f16 [3, 3] scales, outer 0.5",
                    [q("i4", (5, 3), packed([(i % 16) - 8 for i in range(15)]), 0, 2, 1, 2),
                     Tensor("f16", (3, 3), struct.pack("<9H", *[0x3C00 + 0x400 * k for k in range(9)]), name="s"),
                     Tensor("f32", (1,), f32b(0.5), name="o")], 0))
    # Rank 2, axis 1 (last): u8 [3, 7] in groups of 3 (3 groups a row, the last of 1), bf16 scales.
    out.append(case("u8-rank2-axis1-bf16", "u8 [3, 7] axis 1 group 3, bf16 scales",
                    [q("u8", (3, 7), bytes(range(0, 210, 10)), 1, 3),
                     Tensor("bf16", (9,), struct.pack("<9H", *[0x3F80 + 0x81 * k for k in range(9)]), name="s")], 0))
    # Rank 2, a group larger than the axis: one scale a row.
    out.append(case("f16-rank2-axis1-wide-group", "f16 [4, 3] axis 1 group 8, e8m0 scales (one a row)",
                    [q("f16", (4, 3), struct.pack("<12H", *[0x3C00 + 0x111 * k for k in range(12)]), 1, 8),
                     Tensor("e8m0", (4,), bytes([120, 127, 130, 140]), name="s")], 0))
    # Rank 3, axis 0: f8e4m3 [3, 2, 4] in groups of 2 (2 groups, the last of 1), f32 scales.
    out.append(case("f8e4m3-rank3-axis0", "f8e4m3 [3, 2, 4] axis 0 group 2, f32 [2, 2, 4] scales",
                    [q("f8e4m3", (3, 2, 4), bytes((0x20 + 5 * i) % 0x7E for i in range(24)), 0, 2),
                     Tensor("f32", (2, 2, 4), f32b(*[(k + 1) * 0.75 * (-1) ** k for k in range(16)]), name="s")], 0))
    # Rank 3, axis 1 (middle): i8 [2, 5, 3] in groups of 2 (3 groups, the last of 1), i8 scales.
    out.append(case("i8-rank3-axis1-int-scales", "i8 [2, 5, 3] axis 1 group 2, i8 scales (negative ones too)",
                    [q("i8", (2, 5, 3), bytes((17 * i + 200) % 256 for i in range(30)), 1, 2),
                     Tensor("i8", (18,), bytes((k * 37 + 250) % 256 for k in range(18)), name="s")], 0))
    # Rank 3, axis 2 (last): f32 [2, 3, 5] in groups of 4 (2 groups, the last of 1), f64 scales
    # that themselves round, scheme 2 with a negative outer scale.
    out.append(case("f32-rank3-axis2-f64-scales-scheme2",
                    "f32 [2, 3, 5] axis 2 group 4, f64 scales (rounded to f32 first), outer -1.5",
                    [q("f32", (2, 3, 5), f32b(*[1.0 + i / 7 for i in range(30)]), 2, 4, 1, 2),
                     Tensor("f64", (12,), f64b(*[1 / (k + 3) for k in range(12)]), name="s"),
                     Tensor("f32", (1,), f32b(-1.5), name="o")], 0))
    # Group size 1: every element its own scale; u4 x u16 scales.
    out.append(case("u4-group1-u16-scales", "u4 [3, 3] axis 0 group 1, u16 scales",
                    [q("u4", (3, 3), packed(range(9)), 0, 1),
                     Tensor("u16", (9,), struct.pack("<9H", *[1, 2, 3, 100, 1000, 65535, 7, 0, 9]), name="s")], 0))
    # Scheme 2's two roundings: (x * s) rounded, then * o rounded, is not x * s * o rounded once.
    x, s, o = 0x3F9132D9, 0x3FEC78B5, 0x3FE1C35E
    out.append(case("scheme2-two-roundings", "f32 x f32 scale x f32 outer: each product rounded to f32 in turn",
                    [q("f32", (2,), u32b(x, x), 0, 2, 1, 2), Tensor("f32", (1,), u32b(s), name="s"),
                     Tensor("f32", (1,), u32b(o), name="o")], 0))
    # MXFP4 with an e8m0 scale and a scheme-2 outer in a 3-D tensor, axis 2 (last), rank 3.
    out.append(case("mxfp4-rank3-axis2-scheme2", "e2m1 [2, 2, 6] axis 2 group 4, e8m0 scales, outer 3.0",
                    [q("e2m1", (2, 2, 6), packed([(7 * i + 2) % 16 for i in range(24)]), 2, 4, 1, 2),
                     Tensor("e8m0", (8,), bytes([127, 126, 128, 100, 150, 127, 1, 253]), name="s"),
                     Tensor("f32", (1,), f32b(3.0), name="o")], 0))
    # An empty quantized tensor: no elements, no scales.
    out.append(case("empty-quantized", "e2m1 [0, 4] axis 1 group 2: no elements",
                    [q("e2m1", (0, 4), b"", 1, 2), Tensor("e8m0", (0,), b"", name="s")], 0))
    # The scale tensor's own shape does not matter, only the layout rule does.
    out.append(case("scale-shape-ignored", "u8 [2, 4] axis 1 group 2 with scales stored as [4] (not [2, 2])",
                    [q("u8", (2, 4), bytes(range(1, 9)), 1, 2),
                     Tensor("f32", (4,), f32b(1.0, 10.0, 100.0, 1000.0), name="s")], 0))
    # The spec's own golden cases of quantization.
    out.append(case("kiln-v2-scales", "the golden case: 32 e2m1 elements, one e8m0 scale of 127",
                    K.validate_directory(V.b_scales())[0], 0))
    out.append(case("kiln-v2-scales-outer", "the golden case: 16 e2m1, one f8e4m3 scale, one f32 outer",
                    K.validate_directory(V.b_scales_outer())[0], 0))
    # Refusals.
    out.append(case("opaque-data", "an opaque tensor is refused",
                    [Tensor(4096, (2,), b"\x01\x02", name="x", layout="Q8", block_size=2)], 0))
    out.append(case("opaque-scale", "u8 [4] axis 0 group 2 with an opaque scale tensor is refused",
                    [q("u8", (4,), b"\x01\x02\x03\x04", 0, 2),
                     Tensor(4096, (2,), b"\x01\x02", name="s", layout="Q8", block_size=1)], 0))
    return out


def case(name: str, note: str, tensors: list, index: int) -> dict:
    buf = K.encode_directory(tensors)
    decoded, end = K.validate_directory(buf)
    if end != len(buf):
        raise SystemExit(f"gen_dequant_cases: {name}: the block does not end at its last byte")
    c = {"name": name, "note": note, "hex": buf.hex(), "tensor": index}
    try:
        c["expect"] = [f"{b:08x}" for b in R.dequantize(decoded, index)]
    except R.Refused as e:
        c["refused"] = "opaque scale" if "scale" in str(e) else "opaque data"
    return c


def build_cases() -> list:
    cases = element_cases() + quantized_cases()
    names = [c["name"] for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"gen_dequant_cases: duplicate case names {sorted(dup)}")
    return cases


def render(cases) -> str:
    lines = ['{', ' "about": "spec/kiln-v2.md section 11.1: each directory\'s tensor dequantized to f32 bits'
             ' (NaN: any NaN), or refused. Regenerate with spec/reference/gen_dequant_cases.py.",',
             ' "cases": [']
    for k, c in enumerate(cases):
        lines.append("  " + json.dumps(c, separators=(", ", ": ")) + ("," if k + 1 < len(cases) else ""))
    lines += [" ]", "}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gen_dequant_cases.py", description="Regenerate the dequantization cases.")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help=f"output path (default {DEFAULT_OUT})")
    ap.add_argument("--check", action="store_true", help="regenerate in memory and fail if the file differs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    cases = build_cases()
    text = render(cases)
    values = sum(len(c.get("expect", [])) for c in cases)
    summary = f"{len(cases)} cases, {values} values"
    if args.check:
        try:
            current = out.read_text(encoding="utf-8")
        except OSError as e:
            print(f"gen_dequant_cases: cannot read {out}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"gen_dequant_cases: {out} differs from the regenerated cases; "
                  "run spec/reference/gen_dequant_cases.py", file=sys.stderr)
            return 1
        print(f"gen_dequant_cases: {out.name} up to date, {summary}")
        return 0
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, out)
    print(f"gen_dequant_cases: wrote {summary} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
