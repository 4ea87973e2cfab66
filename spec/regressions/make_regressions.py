#!/usr/bin/env python3
"""Regenerate spec/regressions/*.json: inputs on which the Rust core and the
Python reference once disagreed (found by kiln-nostd/tests/differential.rs),
each with the verdict the spec and the rulings give and the reason.

    python3 spec/regressions/make_regressions.py           # write the files
    python3 spec/regressions/make_regressions.py --check   # compare with the files on disk

Each file has the shape of spec/kiln-v2-cases.json: {"cap": ..., "cases": [...]},
every case {name, type, framed, hex, expect, note, reason}. A case may also pin
the reference's error "offset" and "rule" (where the code alone cannot tell
the right fault from a wrong one, e.g. two TYPE faults in different
descriptors). The script checks every case against kiln_ref before writing;
the Rust test `regression_cases_replay_on_both` (kiln-nostd/tests/differential.rs)
replays them on both implementations (a pinned offset: exactly on the
reference, in the same descriptor on the Rust core).

Hand-made cases come first in each file (the smallest input showing the
class); the inputs the differential run actually found follow (`found-*`).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "reference"))
import kiln_ref as K  # noqa: E402
from kiln_ref import DESC, Tensor  # noqa: E402

U64 = (1 << 64) - 1


def block(tensors, validate=True):
    return bytearray(K.encode_directory(tensors, validate=validate))


def desc_at(i, field):
    return 64 + 128 * i + field


def put(buf, fmt, at, value):
    struct.pack_into("<" + fmt, buf, at, value)
    return buf


def case(name, hexstr, expect, note, ty="tensors", framed=False, offset=None, rule=None):
    c = {"name": name, "type": ty, "framed": framed, "hex": hexstr, "expect": expect, "note": note}
    if offset is not None:
        c["offset"] = offset
    if rule is not None:
        c["rule"] = rule
    return c


def f32_block():
    return block([Tensor("f32", (2,), bytes.fromhex("0000803f000000c0"))])


# ---------------------------------------------------------------- step 9 order


def step9_cases():
    out = []
    b = f32_block()
    put(b, "H", desc_at(0, DESC.DTYPE), 0)
    put(b, "Q", desc_at(0, DESC.BYTE_OFFSET), U64 - 3)
    out.append(case("dtype-zero-and-range-overflow", b.hex(), "LIMIT",
                    "dtype 0 and byte_offset + byte_length past 2^64 in one descriptor"))
    b = f32_block()
    put(b, "B", desc_at(0, DESC.RANK), 9)
    put(b, "Q", desc_at(0, DESC.BYTE_OFFSET), U64)
    out.append(case("rank-nine-and-range-overflow", b.hex(), "LIMIT",
                    "rank 9 and an overflowing range in one descriptor"))
    b = f32_block()
    put(b, "B", desc_at(0, DESC.RANK), 2)
    put(b, "Q", desc_at(0, DESC.SHAPE), 1 << 32)
    put(b, "Q", desc_at(0, DESC.SHAPE + 8), 1 << 32)
    put(b, "Q", desc_at(0, DESC.BYTE_LENGTH), 9)
    out.append(case("range-past-payload-and-shape-overflow", b.hex(), "TYPE",
                    "a range past payload_bytes and a shape product past 2^64 in one descriptor"))
    b = f32_block()
    put(b, "Q", desc_at(0, DESC.SHAPE + 8), 5)
    put(b, "Q", desc_at(0, DESC.BYTE_OFFSET), 64)
    put(b, "Q", desc_at(0, DESC.BYTE_LENGTH), U64 - 8)
    out.append(case("shape-tail-and-range-overflow", b.hex(), "LIMIT",
                    "a nonzero shape slot past the rank and an overflowing range"))
    reason = ("Step 9 sub-order inside one descriptor. The reference checks the range (overflow "
              "LIMIT, past the payload TYPE) before dtype, rank, shape tail and element-count "
              "overflow (spec/kiln-v2.md section 14: the sub-order inside a step is the reference's "
              "choice where the sources are silent; the rulings only fix that an overflowing range "
              "is LIMIT at step 9). The Rust core checked dtype/rank/shape first and so reported "
              "TYPE for dtype-or-shape + range overflow, and LIMIT for shape overflow + range past "
              "the payload. Fixed in kiln-nostd/src/descriptor.rs (check_shape_and_range).")
    return out, reason


# ---------------------------------------------------------------- exact products


def zero_dim_cases():
    out = []
    big = 1 << 40
    b = block([Tensor("u8", (2, big, 0), b"")])
    out.append(case("zero-dim-after-overflowing-prefix", b.hex(), "accept",
                    "u8 of shape [2, 2^40, 0]: the element count is 0 (no overflow), byte_length 0"))
    b = block([Tensor("u8", (big, big, 0, 7), b"")])
    out.append(case("zero-dim-rank4", b.hex(), "accept",
                    "u8 of shape [2^40, 2^40, 0, 7]: element count 0"))
    b = block([Tensor("f32", (big, big, 0), b"", name="a")])
    put(b, "Q", desc_at(0, DESC.BYTE_LENGTH), 4)
    b += bytes(4)
    put(b, "Q", 16, 4)
    out.append(case("zero-dim-length-mismatch", b.hex(), "TYPE",
                    "shape [2^40, 2^40, 0] with byte_length 4: the count is 0, so the length is wrong (TYPE, not LIMIT)"))
    q = Tensor("e2m1", (big, big, 0), b"", quant_scheme=1, quant_axis=0, group_size=1, scale_index=1)
    s = Tensor("e8m0", (0,), b"")
    b = block([q, s])
    out.append(case("zero-dim-scale-count", b.hex(), "accept",
                    "scheme 1 on shape [2^40, 2^40, 0], axis 0, group 1: zero scales needed, scale tensor [0]"))
    reason = ("The element count (and the scale count) is the exact product of the dimensions: a "
              "zero dimension makes it 0 whatever the others are, so nothing overflows (spec: 'The "
              "product is computed so that overflow is LIMIT, not a wrapped count'; spec/kiln-v2.md "
              "section 8 and 14). The Rust core multiplied left to right with checked_mul and reported "
              "LIMIT when a prefix overflowed before the zero. Fixed in kiln-nostd/src/descriptor.rs "
              "(element_count) and kiln-nostd/src/quant.rs (scale_count).")
    return out, reason


# ---------------------------------------------------------------- step 8 order


def step8_cases():
    out = []
    # golden kiln-v2-bad-utf8: one f16 named "\xffalf"; add a half-set layout field.
    b = block([Tensor("f16", (1,), bytes.fromhex("003c"), name=b"half")])
    b[192] = 0xFF
    put(b, "H", desc_at(0, DESC.LAYOUT_OFF), 0)
    out.append(case("name-utf8-then-layout-field", b.hex(), "UTF8",
                    "descriptor 0: name not UTF-8, and layout_off 0 with layout_len 0"))
    # descriptor 0: layout name at the wrong heap offset; descriptor 1: name not UTF-8
    b = block([Tensor(4096, (1,), b"\x01", name="a", layout="L", block_size=1),
               Tensor("u8", (1,), b"\x02", name="b")])
    heap = 64 + 2 * 128
    b[heap + 1] = 0xFF                                  # name "b" -> b"\xff"
    put(b, "H", desc_at(0, DESC.LAYOUT_OFF), 0)           # layout should start at 2
    out.append(case("layout-fault-before-later-name-utf8", b.hex(), "TYPE",
                    "descriptor 0's layout_off is wrong (TYPE); descriptor 1's name is not UTF-8"))
    # descriptor 0: layout name not UTF-8; descriptor 1: name_off wrong
    b = block([Tensor(4096, (1,), b"\x01", name="a", layout="L", block_size=1),
               Tensor("u8", (1,), b"\x02", name="b")])
    b[heap + 2] = 0xFF                                  # layout "L" -> b"\xff"
    put(b, "H", desc_at(1, DESC.NAME_OFF), 0)
    out.append(case("layout-utf8-before-later-name-placement", b.hex(), "UTF8",
                    "descriptor 0's layout name is not UTF-8; descriptor 1's name_off is wrong (TYPE)"))
    # duplicate at descriptor 1, bad UTF-8 name at descriptor 2
    b = block([Tensor("u8", (1,), b"\x01", name="a"), Tensor("u8", (1,), b"\x02", name="a"),
               Tensor("u8", (1,), b"\x03", name="c")], validate=False)
    b[64 + 3 * 128 + 2] = 0xFF
    out.append(case("duplicate-before-later-name-utf8", b.hex(), "TYPE",
                    "descriptors 0 and 1 are both named 'a' (TYPE); descriptor 2's name is not UTF-8"))
    # duplicate at descriptor 1 whose layout is also misplaced: the name rule comes first
    b = block([Tensor(4096, (1,), b"\x01", name="a", layout="L", block_size=1),
               Tensor(4096, (1,), b"\x02", name="a", layout="L", block_size=1)], validate=False)
    b[heap + 3] = 0xFF                                   # second layout name: first byte bad
    out.append(case("duplicate-before-own-layout-utf8", b.hex(), "TYPE",
                    "descriptor 1 repeats name 'a' (TYPE) and its layout name is not UTF-8"))
    for i, (expect, ty, framed, hexstr, note) in enumerate(FOUND_STEP8):
        out.append(case(f"found-step8-{i}", hexstr, expect, note, ty=ty, framed=framed))
    reason = ("Step 8 sub-order. The ruling 'Within one step, report the first fault in descriptor "
              "order' and spec/kiln-v2.md section 14 (8c) check each descriptor's name rules "
              "(flag, placement, heap bounds, UTF-8, uniqueness) and then its layout rules before "
              "the next descriptor. The Rust core checked every descriptor's layout-field agreement "
              "first, then all names, then all layout names, then uniqueness, so a later "
              "descriptor's UTF8 fault could win over an earlier TYPE fault and the other way round. "
              "Fixed in kiln-nostd/src/names.rs (NameCursor::check_layout, check_heap_total) and "
              "kiln-nostd/src/directory.rs (check_descriptors).")
    return out, reason


# Inputs found by the differential run (seed 0x4b494c4e), kept verbatim.

FOUND_STEP8: list = [
    ('TYPE', 'tensors', False,
     '4b4c4e5402030000040000002d00000008010000000000002d0200000000000000000000000000000000000000000000000000000000000000000000000000000800030000000b00ffff000000000000ff0fffff00000000ffffffffffffffff00000000000000000c000000000000000200000000000000030000000000000003000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000050004000b000b00ffff0000000000000000ffff00000000ffffffffffffffff400000000000000060000000000000000200000000000000040000000000000003000000000000000400000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000161f000016000b002c0001000d0000000000ffff00000000ffffffffffffffffc0000000000000001a0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000400010021000100ffff0000000000000000ffff00000000ffffffffffffffff000100000000000008000000000000000400000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e5908de5898d2d302dc3a9e5908de5898d2d312dc3a9e5908de5898d2d322dc3a9e5908de5898d2d332dc3a97800000000000000000000000000000000000000e26c8b8db1e3272a31743e16000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000dcc69f1a42faeec09b00591af6436c0d916a7eda6abdfa6e86c800000000000000000000000000000000000000000000000000000000000000000000000000004a662b340231a7da',
     'writer 4 tensors + [field]; rust: UTF8 at 609; python: reject TYPE 328 layout_placement'),
    ('TYPE', 'tensors', False,
     '4b4c4e540203000005000000390000000401000000000000b9020000000000000000000000000000000000000000000000000000000000000000000000000000e029020000000b0037000200010000000000ffff00000000ffffffffffffffff0000ffffffff000002000000000000000200000000000000250000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000110002000b000b00ffff0000000000000000ffff00000000ffffffffffffffff4000000000000000040000000000000004000000000000000200000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001000010016000b00ffff000000000000020000001700000003000000040000008000000000000000030000000000000005000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000200010021000b00ffff0000000000000000ffff00000000ffffffffffffffffc00000000000000004000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000020001002c000200ffff0000000000000000ffff00000000ffffffffffffffff000100000000000004000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000041000000000000000000000000000000000000000000000000000000000000000000000000000000e5908de5898d2d302dc3a9e5908de5898d2d312dc3a9e5908de5898d2d322dc3a9e5908de5898d2d332dc3a9e5908de5898d2d342dc3a9c3a900000000000000577500000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001d1c9dd60000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000010d3571b0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000803f',
     'writer 5 tensors + [word,field]; rust: UTF8 at 748; python: reject TYPE 72 layout_placement'),
    ('UTF8', 'tensors', False,
     '4b4c4e540203000001000000040000000200000000000000840000000000000000000000000000000000000000000000000000000000000000000000000000000300010000000400ffff0100000000000000ffff00000000ffffffffffffffff00000000000000000200000000000000020000000000000000000000000000000000000000000000ffffffffffffffff000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000ff616c66000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000003c',
     'golden kiln-v2-bad-utf8 + [field]; rust: TYPE at 72; python: reject UTF8 192 name_utf8'),
    ('UTF8', 'tensors', False,
     '4b4c4e5402030000010000001b00000002000000000000009b0000000000000000000000000000000000000000000000000000000000000000000000000000000a00010000001b00ffff0088000000000000ffff00000000ffffffffffd4ffff0000000000000000020000000000000001c60000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000061000000000000000000000000000000000000000000000000000000000000006d6f64656c2e6c61796572739a302e617474656e74696f6e2e7771000000000000000000000000000000000000000000000000000000000000000000000000004d7d',
     'frozen tensors + [bytes]; rust: TYPE at 72; python: reject UTF8 204 name_utf8'),
    ('UTF8', 'tensors', False,
     '4b4c4e540203000002000000360000000500000000000000360100000000000000000000000000000000000000000000000000000000000000000000000000000c00040000001b00ff7f0000000000000000ffff66000000ffffffbaffffffff00fc00000000000000000000000000000100000000000000030000000000000000000000000000000300000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000110004001b001b00ff290000000000000000ffff00000000ffffffffffffffff00a7000000000000050000000000000003000000000000000100000000000000010000000000000003000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000006d6f64656c2e6cf8796572732e302e617474656e74696f6e2e77716d6f64656c2e6c61796572732e312e617474656e74696f6e2e7771000000000000000000000b81ebb006',
     'writer 2 tensors + [bytes,field]; rust: TYPE at 72; python: reject UTF8 327 name_utf8'),
    ('UTF8', 'struct{id:i64,batch:tensors,}', False,
     '8353fc093ba60b304b4c4e540203000002000000160000008000000000000000160100000000000000000000000000000000000000000000000000000000000000000000000000000800040000000b0008000000000000000000ffff00000000ffffffffffffffff0000000000000000020000000000000002000000000000000100000000000000010000000000000001000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e0003000b000b00ffff0000000000000000ffff00000000ffffffffffffffff400000000000000040000000000000000100000000000000020000000000000004000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e5908de5000000012dc3a9e5908de5898d2d312dc3a90000000000000000000000000000000000000000000000000000000000000000000000000000000000008d960000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000712c35df8d3ed383cf0f888923943e45cbef6539014169bba0acf75eaed332440798ce71d8f8387563fe7d7d503d2b83095c2e86a732e52e7c42adcc4161dffb',
     'frozen struct{id:i64,batch:tensors,} + [field,word]; rust: TYPE at 80; python: reject UTF8 331 name_utf8'),
]


# ---------------------------------------------------------------- step 9: out of order is not overlap


def relaid(tensors, offsets, payload_bytes=None):
    """The canonical block of `tensors` with each payload moved to `offsets`
    (payload offsets); payload_bytes is the furthest end unless given."""
    b = block(tensors)
    n = len(tensors)
    base = K.HEADER_SIZE + K.DESC_SIZE * n
    base += struct.unpack_from("<I", b, 12)[0]
    base = (base + 63) & ~63
    data = []
    for i in range(n):
        off, length = struct.unpack_from("<QQ", b, desc_at(i, DESC.BYTE_OFFSET))
        data.append(bytes(b[base + off:base + off + length]))
    end = max(o + len(d) for o, d in zip(offsets, data))
    pb = end if payload_bytes is None else payload_bytes
    region = bytearray(pb)
    for o, d in zip(offsets, data):
        region[o:o + len(d)] = d
    out = b[:base]
    put(out, "Q", 16, pb)
    for i, o in enumerate(offsets):
        put(out, "Q", desc_at(i, DESC.BYTE_OFFSET), o)
    return out + region


def u8x4(fill):
    return Tensor("u8", (4,), bytes([fill] * 4))


def f32x2():
    return Tensor("f32", (2,), bytes.fromhex("0000803f000000c0"))


def out_of_order_cases():
    out = []
    # u8[4] at 64, u8[4] at 0: descriptor 1 lies before descriptor 0 and
    # intersects nothing. Descriptor 2 is f32[2] (8 bytes) at 128, made faulty.
    three = [u8x4(1), u8x4(2), f32x2()]

    b = relaid(three, [64, 0, 128])
    put(b, "B", desc_at(2, DESC.RANK), 2)
    put(b, "Q", desc_at(2, DESC.SHAPE), 1 << 62)
    put(b, "Q", desc_at(2, DESC.SHAPE + 8), 8)
    out.append(case("out-of-order-then-shape-overflow", b.hex(), "LIMIT",
                    "u8[4] at 64, u8[4] at 0, f32[2^62, 8] at 128 (byte_length 8), payload_bytes 136: "
                    "descriptor 1 precedes descriptor 0 without intersecting it; descriptor 2's shape "
                    "product overflows (step 9, LIMIT)",
                    offset=desc_at(2, DESC.SHAPE), rule="shape_overflow"))

    b = relaid(three, [64, 0, 128])
    put(b, "Q", desc_at(2, DESC.BYTE_OFFSET), U64 - 3)
    out.append(case("out-of-order-then-range-overflow", b.hex(), "LIMIT",
                    "as above with descriptor 2 a plain f32[2] whose byte_offset is 2^64 - 4: "
                    "byte_offset + byte_length overflows (step 9, LIMIT)",
                    offset=desc_at(2, DESC.BYTE_OFFSET), rule="range_overflow"))

    b = relaid(three, [64, 0, 128])
    put(b, "Q", desc_at(2, DESC.SHAPE), 1 << 62)
    out.append(case("out-of-order-then-width-overflow", b.hex(), "LIMIT",
                    "as above with descriptor 2 f32[2^62]: the element count fits, 2^62 * 4 bytes "
                    "does not (step 9, LIMIT)",
                    offset=desc_at(2, DESC.SHAPE), rule="byte_size_overflow"))

    b = relaid(three, [64, 0, 128])
    put(b, "H", desc_at(2, DESC.DTYPE), 0)
    out.append(case("out-of-order-then-later-dtype", b.hex(), "TYPE",
                    "as above with descriptor 2's dtype 0: TYPE at descriptor 2's dtype (step 9), "
                    "not at descriptor 1's byte_offset",
                    offset=desc_at(2, DESC.DTYPE), rule="dtype_zero"))

    b = relaid(three, [64, 0, 128])
    put(b, "Q", desc_at(2, DESC.SHAPE + 8), 3)
    out.append(case("out-of-order-then-later-shape-tail", b.hex(), "TYPE",
                    "as above with descriptor 2's second shape slot 3 at rank 1: TYPE at that slot "
                    "(step 9), not at descriptor 1's byte_offset",
                    offset=desc_at(2, DESC.SHAPE + 8), rule="shape_tail"))

    b = relaid(three, [64, 0, 2], payload_bytes=68)
    out.append(case("out-of-order-then-intersects-it", b.hex(), "TYPE",
                    "u8[4] at 64, u8[4] at 0, f32[2] at 2: descriptor 2's range [2, 10) intersects "
                    "descriptor 1's out-of-order range [0, 4) (step 9 overlap at descriptor 2)",
                    offset=desc_at(2, DESC.BYTE_OFFSET), rule="overlap"))

    b = relaid(three, [64, 0, 62])
    out.append(case("out-of-order-then-intersects-earlier", b.hex(), "TYPE",
                    "u8[4] at 64, u8[4] at 0, f32[2] at 62: descriptor 2's range [62, 70) intersects "
                    "descriptor 0's range [64, 68) (step 9 overlap at descriptor 2)",
                    offset=desc_at(2, DESC.BYTE_OFFSET), rule="overlap"))

    b = relaid(three, [64, 0, 128])
    out.append(case("out-of-order-only-first-misplaced", b.hex(), "TYPE",
                    "u8[4] at 64, u8[4] at 0, f32[2] at 128, no step-9 fault: step 10 reports "
                    "descriptor 0 (offset 64, the canonical placement is 0)",
                    offset=desc_at(0, DESC.BYTE_OFFSET), rule="offset_not_canonical"))

    b = relaid([u8x4(1), u8x4(2), u8x4(3)], [0, 128, 64])
    out.append(case("out-of-order-only-later-misplaced", b.hex(), "TYPE",
                    "u8[4] at 0, 128, 64, no step-9 fault: descriptor 2 lies before descriptor 1 "
                    "without intersecting it; step 10 reports descriptor 1 (offset 128, the canonical "
                    "placement is 64)",
                    offset=desc_at(1, DESC.BYTE_OFFSET), rule="offset_not_canonical"))

    b = relaid([u8x4(1), u8x4(2), f32x2()], [4, 0, 128])
    put(b, "B", desc_at(2, DESC.RANK), 2)
    put(b, "Q", desc_at(2, DESC.SHAPE), 1 << 32)
    put(b, "Q", desc_at(2, DESC.SHAPE + 8), 1 << 32)
    out.append(case("touching-out-of-order-then-shape-overflow", b.hex(), "LIMIT",
                    "u8[4] at 4, u8[4] at 0 (the ranges touch: [4, 8) and [0, 4)), f32[2^32, 2^32] at 128: "
                    "touching is not intersecting; descriptor 2's shape overflows (LIMIT)",
                    offset=desc_at(2, DESC.SHAPE), rule="shape_overflow"))

    zero = Tensor("u8", (0,), b"")
    b = relaid([u8x4(1), zero, u8x4(2), f32x2()], [64, 65, 0, 128])
    put(b, "B", desc_at(3, DESC.RANK), 2)
    put(b, "Q", desc_at(3, DESC.SHAPE), 1 << 62)
    put(b, "Q", desc_at(3, DESC.SHAPE + 8), 8)
    out.append(case("zero-length-inside-range-then-shape-overflow", b.hex(), "LIMIT",
                    "u8[4] at 64, u8[0] at 65 (inside [64, 68): a zero length intersects nothing), "
                    "u8[4] at 0, f32[2^62, 8] at 128: descriptor 3's shape overflows (LIMIT)",
                    offset=desc_at(3, DESC.SHAPE), rule="shape_overflow"))

    b = relaid([zero, u8x4(1), u8x4(2), Tensor("f32", (3, 0), b"")], [68, 64, 0, 2])
    put(b, "H", desc_at(3, DESC.DTYPE), 20)
    out.append(case("zero-length-out-of-order-then-later-dtype", b.hex(), "TYPE",
                    "u8[0] at 68, u8[4] at 64, u8[4] at 0, f32[3, 0] at 2 with dtype 20: descriptor 2 "
                    "precedes descriptor 1 without intersecting it, the zero-length ranges sit anywhere "
                    "and intersect nothing; descriptor 3's dtype is reserved (TYPE at descriptor 3's "
                    "dtype, not at descriptor 2's byte_offset)",
                    offset=desc_at(3, DESC.DTYPE), rule="dtype_reserved"))

    b = relaid([u8x4(1), zero, Tensor("f32", (0,), b""), u8x4(2)], [0, 200, 3, 64], payload_bytes=200)
    out.append(case("zero-length-out-of-order-only", b.hex(), "TYPE",
                    "u8[4] at 0, u8[0] at 200 (= payload_bytes), f32[0] at 3, u8[4] at 64: no step-9 "
                    "fault; step 10 reports descriptor 1 (offset 200, the canonical placement is 64)",
                    offset=desc_at(1, DESC.BYTE_OFFSET), rule="offset_not_canonical"))

    reason = ("Issue 17. 'Overlap' (spec step 9) means two nonempty half-open payload ranges that "
              "intersect; a zero length intersects nothing, and a range that lies before an earlier "
              "tensor's range without intersecting it is not a step-9 fault: the canonical placement "
              "(step 10) rejects it (the project's ruling on tensor directory placements, "
              "spec/kiln-v2.md section 14, steps 9 and 10). The Rust core (RangeWalk in "
              "kiln-nostd/src/directory.rs) reported any nonempty range starting before the end of "
              "the previous one as TYPE overlap at step 9, so a later descriptor's step-9 LIMIT "
              "(shape, range or n*width overflow) lost to that TYPE, and a later step-9 TYPE fault or "
              "the step-10 misplacement was reported at the wrong descriptor. The reference's offset "
              "and rule are pinned; the Rust core must report the same code in the same descriptor.")
    return out, reason


# ---------------------------------------------------------------- main


FILES = {
    "step9-range-before-dtype.json": step9_cases,
    "exact-element-count.json": zero_dim_cases,
    "step8-per-descriptor-order.json": step8_cases,
    "step9-out-of-order-is-not-overlap.json": out_of_order_cases,
}


def build():
    out = {}
    for fname, fn in FILES.items():
        cases, reason = fn()
        for c in cases:
            c["reason"] = reason
            e = K.validate(c["type"], bytes.fromhex(c["hex"]), framed=c["framed"])
            got = "accept" if e is None else e.code
            if got != c["expect"]:
                raise SystemExit(f"{fname}: {c['name']}: kiln_ref gives {got} ({e}), expected {c['expect']}")
            if "offset" in c and (e.offset, e.rule) != (c["offset"], c.get("rule", e.rule)):
                raise SystemExit(f"{fname}: {c['name']}: kiln_ref gives {e.code} at {e.offset} ({e.rule}), "
                                 f"expected offset {c['offset']} ({c.get('rule')})")
        out[fname] = json.dumps({"cap": K.DEFAULT_CAP, "cases": cases}, indent=1) + "\n"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = build()
    bad = 0
    for fname, text in files.items():
        path = HERE / fname
        if args.check:
            if not path.exists() or path.read_text() != text:
                print(f"{fname}: out of date", file=sys.stderr)
                bad += 1
        else:
            path.write_text(text)
    n = sum(len(json.loads(t)["cases"]) for t in files.values())
    print(f"make_regressions: {'checked' if args.check else 'wrote'} {len(files)} files, {n} cases")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
