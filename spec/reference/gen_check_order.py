#!/usr/bin/env python3
"""Regenerate spec/check-order-matrix.json: the pairwise check-order matrix.

    python3 spec/reference/gen_check_order.py            # write the file
    python3 spec/reference/gen_check_order.py --check    # compare with the file on disk
    python3 spec/reference/gen_check_order.py --out PATH # write (or --check) another path

The order the matrix tests is not written here: it is parsed from the rule
tables of spec/kiln-v2.md (section 14.1 for the directory, 14.2 for Frozen
values). For every pair of rules A and B that can be planted in one block,
the generator plants both into a valid canonical block (kiln_ref's encoder)
and expects the verdict the table orders first:

  * cross-step: A at an earlier step, B at a later one, B's fault in an
    EARLIER descriptor (or byte) than A's, so a reader that stops at the
    first faulty descriptor instead of the first failing step is caught;
  * same-step: two faults of one step in two descriptors, the earlier
    descriptor's wins; built with the lower (or equal) rank in the LATER
    descriptor, the arrangement a reader ordering by rank would get wrong;
  * same-descriptor: two faults in one descriptor, the lower rank wins.

Frozen values get the same treatment where an order is defined: the frame's
checks, the schema hash before any field, the count-word checks, the first
faulty value in encoding order, the dict key before its value, TRAILING last.

Blocks are small (1-byte names, at most 16 payload bytes a tensor, quantized
tensors sharing their scale tensors), but a pair usually needs two 128-byte
descriptors, so the file is a few MB for the ~2,600 feasible pairs.

Every case is checked with kiln_ref before it is written: the block without
faults must be accepted, each fault planted alone must give its own rule and
offset, and both together must give the table's winner (code, offset and
rule). Any difference is a refusal to write (exit 1), so the matrix is also a
test of the reference. Pairs that cannot share a block (both need the same
field, a truncation removes one, one needs the name flag set and the other
clear, ...) are listed under "skipped" with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kiln_ref as K  # noqa: E402
from kiln_ref import DESC, Tensor  # noqa: E402

CAP = K.DEFAULT_CAP
U64_MAX = K.U64_MAX
SPEC = Path(__file__).resolve().parent.parent / "kiln-v2.md"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "check-order-matrix.json"


class MatrixError(Exception):
    """The table, a planter or the reference disagrees: refuse to write."""


# --------------------------------------------------------------------------
# the rule tables of spec/kiln-v2.md


@dataclass(frozen=True)
class Row:
    """One row of a rule table."""
    rule: str
    rust: str
    step: str
    rank: int
    scope: str        # directory: "yes"/"no" (per descriptor); Frozen: frame/unit/buffer
    code: str
    note: str

    @property
    def per(self) -> bool:
        return self.scope == "yes"

    @property
    def unreachable(self) -> bool:
        return self.note.startswith("unreachable")


TABLE_COLUMNS = {
    "directory": ["rule", "Rust Rule", "step", "rank", "per descriptor", "code", "note"],
    "frozen": ["rule", "Rust Rule", "step", "rank", "scope", "code", "note"],
}


def parse_table(text: str, name: str) -> dict[str, Row]:
    """The markdown table between the rule-table:NAME:begin/end comments."""
    begin, end = f"<!-- rule-table:{name}:begin -->", f"<!-- rule-table:{name}:end -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        raise MatrixError(f"spec: expected one {begin} ... {end} block")
    body = text.split(begin)[1].split(end)[0]
    lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip()]

    def cells(line):
        if not (line.startswith("|") and line.endswith("|")):
            raise MatrixError(f"spec {name} table: not a table row: {line!r}")
        return [c.strip() for c in line[1:-1].split("|")]

    if cells(lines[0]) != TABLE_COLUMNS[name]:
        raise MatrixError(f"spec {name} table: columns {cells(lines[0])}, "
                          f"expected {TABLE_COLUMNS[name]}")
    rows: dict[str, Row] = {}
    for line in lines[2:]:
        c = cells(line)
        if len(c) != len(TABLE_COLUMNS[name]):
            raise MatrixError(f"spec {name} table: wrong cell count in {line!r}")
        rule, rust = c[0].strip("`"), c[1].strip("`")
        if rule in rows:
            raise MatrixError(f"spec {name} table: rule {rule} listed twice")
        if c[5] not in K.CODES:
            raise MatrixError(f"spec {name} table: {rule}: unknown code {c[5]}")
        rows[rule] = Row(rule, rust, c[2], int(c[3]), c[4], c[5], c[6])
    return rows


def step_key(step: str) -> tuple:
    """Sort key of a step label: 1 < 2 < ... < 8a < 8b < 8c < 8d < 9 < 12; F1 < F4."""
    m = re.fullmatch(r"F?(\d+)([a-z]?)", step)
    if not m:
        raise MatrixError(f"spec table: bad step {step!r}")
    return (int(m.group(1)), m.group(2))


class Order:
    """The check order the directory table defines."""

    def __init__(self, rows: dict[str, Row]):
        self.rows = rows
        # Inside a step the per-descriptor rules run as one walk; a rule that
        # is not per descriptor runs before or after that walk, by its rank.
        self.walk_rank: dict[str, int] = {}
        for r in rows.values():
            if r.per:
                self.walk_rank[r.step] = min(self.walk_rank.get(r.step, r.rank), r.rank)
        keys = [self.key(r.rule, 0) for r in rows.values()]
        if keys != sorted(keys):
            raise MatrixError("spec directory table: rows are not in check order")

    def key(self, rule: str, desc: int | None) -> tuple:
        r = self.rows[rule]
        if r.per:
            return (step_key(r.step), self.walk_rank[r.step], desc, r.rank)
        return (step_key(r.step), r.rank, -1, r.rank)


# --------------------------------------------------------------------------
# directory blocks: tensor kinds, the base block, planting helpers

F32_ONE = bytes.fromhex("0000803f")

# Slot kinds: the tensor a fault is planted in. Every kind is legal alone,
# small (at most 16 payload bytes, so each tensor sits alone in its 64-byte
# slot and a shifted or backfilled range still fits its gap), and rank 1.
KIND_TEXT = {
    "u8": "u8[4]", "f32": "f32[1]", "bool": "bool[4]", "u4": "u4[3]",
    "opq": "opaque[4]", "q1": "e2m1[31]/q1", "q2": "e2m1[15]/q2", "q2w": "e2m1[15]/q2+f32[2]",
}
QUANT = ("q1", "q2", "q2w")
PLAIN = ("u8", "f32", "bool", "u4", "opq")    # scheme 0
ANY = PLAIN + QUANT
NOT_OPAQUE = ("u8", "f32", "bool", "u4") + QUANT
LAYOUT_KINDS = frozenset({"opq"})


def kind_tensor(kind: str) -> Tensor:
    if kind == "u8":
        return Tensor("u8", (4,), b"\x01\x02\x03\x04")
    if kind == "f32":
        return Tensor("f32", (1,), F32_ONE)
    if kind == "bool":
        return Tensor("bool", (4,), b"\x01\x00\x01\x00")
    if kind == "u4":
        return Tensor("u4", (3,), b"\x21\x03")
    if kind == "opq":
        return Tensor(4096, (4,), b"\x05\x06\x07\x08", layout="QK", block_size=2)
    if kind == "q1":    # 31 elements: odd, so the packed high-nibble rule applies too
        return Tensor("e2m1", (31,), bytes(16), quant_scheme=1, quant_axis=0, group_size=32)
    if kind in ("q2", "q2w"):
        return Tensor("e2m1", (15,), bytes(8), quant_scheme=2, quant_axis=0, group_size=16)
    raise AssertionError(kind)


@dataclass(frozen=True)
class Layout:
    slots: tuple          # kinds of descriptors 0..n-1 (fault slots and u8 fillers)
    named: bool
    heap_support: bool    # unnamed but a rule needs a heap: an opaque tensor goes last
    private: tuple = ()   # quantized slots whose siblings a planter changes (not shared)

    def describe(self) -> str:
        s = " ".join(KIND_TEXT[k] for k in self.slots) or "no tensors"
        if any(k in QUANT for k in self.slots):
            s += " +siblings"
        if self.heap_support:
            s += " +opaque"
        return s + (" named" if self.named else "")


class Block:
    """A canonical block from a Layout, and the mutations planted into it."""

    def __init__(self, layout: Layout):
        specs = [kind_tensor(k) for k in layout.slots]
        # Quantized slots share their scale (and outer) tensors, which follow
        # the slots, unless a planter changes a sibling (then it gets its own).
        self.siblings: dict[int, dict[str, int]] = {}
        groups: dict = {}
        for k, kind in enumerate(layout.slots):
            if kind not in QUANT:
                continue
            group = ("private", k) if k in layout.private else kind[:2]
            sib = groups.get(group)
            if sib is None:
                sib = groups[group] = {"scale": len(specs)}
                if kind == "q1":
                    specs.append(Tensor("e8m0", (1,), b"\x7f"))
                else:
                    sib["outer"] = len(specs) + 1
                    specs.append(Tensor("f8e4m3", (1,), b"\x38"))
                    specs.append(Tensor("f32", (1,), F32_ONE))
            if kind == "q2w" and "wide" not in sib:   # a legal f32[2] to point an outer index at
                sib["wide"] = len(specs)
                specs.append(Tensor("f32", (2,), F32_ONE * 2))
            specs[k].scale_index = sib["scale"]
            specs[k].outer_index = sib.get("outer")
            self.siblings[k] = sib
        if layout.heap_support:
            specs.append(kind_tensor("opq"))
        if layout.named:
            for i, t in enumerate(specs):
                t.name = chr(ord("a") + i)
        try:
            self.buf = bytearray(K.encode_directory(specs))   # validates
        except ValueError as e:
            raise MatrixError(f"base block {layout.describe()} is not legal: {e}") from None
        self.layout = layout
        self.count = len(specs)
        self.base = (64 + self.get(24, "Q") + 63) & ~63      # payload_base
        self.g = [self.getd(k, DESC.BYTE_OFFSET, "Q") for k in range(self.count)]
        self.L = [self.getd(k, DESC.BYTE_LENGTH, "Q") for k in range(self.count)]
        self.orig = bytes(self.buf)
        self.touched: set[int] = set()
        self.truncate_to: int | None = None

    # byte access; every write is recorded so a truncation can tell what it removes
    def get(self, pos: int, fmt: str) -> int:
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def put(self, pos: int, fmt: str, value: int) -> None:
        struct.pack_into("<" + fmt, self.buf, pos, value)
        self.touched.update(range(pos, pos + struct.calcsize("<" + fmt)))

    @staticmethod
    def at(k: int, field: int) -> int:
        return 64 + 128 * k + field

    def getd(self, k: int, field: int, fmt: str) -> int:
        return self.get(self.at(k, field), fmt)

    def based(self, k: int, field: int, fmt: str) -> int:
        """A descriptor field as the canonical block has it. Planters compute
        from these, so two faults in one descriptor do not see each other."""
        return struct.unpack_from("<" + fmt, self.orig, self.at(k, field))[0]

    def putd(self, k: int, field: int, fmt: str, value: int) -> int:
        self.put(self.at(k, field), fmt, value)
        return self.at(k, field)

    def heap(self, off: int) -> int:
        """Absolute position of heap offset off."""
        return 64 + 128 * self.count + off


# --------------------------------------------------------------------------
# planters: how each rule's fault is planted


@dataclass(frozen=True)
class Planter:
    """Plants one rule's fault. apply(block, k) mutates the block and returns
    the absolute offset the reference reports; res(block, k) names what the
    planter writes, so two planters that need the same field are not combined."""
    key: str                      # the rule id, or rule.variant
    rule: str
    apply: Callable
    res: Callable
    what: str
    kinds: tuple = ()             # slot kinds it can be planted in; empty: block-level
    named: bool | None = None     # needs the name flag set (True) or clear (False)
    min_index: int = 0            # needs this many descriptors before it
    span: int = 1                 # descriptors it uses from k on
    heap: bool = False            # needs a name heap, so padding exists
    tensors: bool = False         # block-level, needs at least one tensor
    empty: bool = False           # needs tensor_count 0
    names_total: bool = False     # changes the sum of name_len fields
    tail: bool = False            # needs a tensor after its own
    phase: int = 1                # 0 header, 1 descriptors, 2 append, 3 truncate
    needs: str | None = None      # step 9 branch it is checked in: "opaque" or "dense"
    sets: str | None = None       # the dtype class it gives the tensor
    reads: Callable | None = None  # fields its fault depends on (like res)
    private: bool = False         # changes a quant sibling: needs siblings of its own

    @property
    def per(self) -> bool:
        return bool(self.kinds)


def fields(*names):
    """res() for a planter that writes these fields of its own descriptor."""
    return lambda b, k: {("desc", k, n) for n in names}


def header(*names):
    return lambda b, k: {("header", n) for n in names}


def _truncate(b: Block, n: int, offset: int) -> int:
    b.truncate_to = n
    return offset


def _append(b: Block, data: bytes) -> int:
    at = len(b.buf)
    b.buf += data
    return at


def _flags(b: Block, set_bits: int = 0, clear_bits: int = 0) -> int:
    b.put(5, "B", (b.get(5, "B") | set_bits) & ~clear_bits)
    return 5


def _add(b: Block, pos: int, fmt: str, delta: int) -> None:
    b.put(pos, fmt, b.get(pos, fmt) + delta)


def _heap_end(b: Block) -> int:
    """The heap length a past-heap slice must pass: name_bytes as it now is
    (heap_length may have grown it), or the real heap when name_bytes was set
    above anything a u16 slice can reach (that cap fault is reported first)."""
    now = b.get(12, "I")
    return now if now < 0x8000 else struct.unpack_from("<I", b.orig, 12)[0]


def _heap_length(b: Block, k) -> int:
    # One more heap byte: it comes out of the padding (the heap needs padding
    # behind it, see heap=True), so payload_base and everything after stay put.
    _add(b, 12, "I", 1)
    _add(b, 24, "Q", 1)
    return 12


def _payload_bytes(b: Block, k) -> int:
    # 64 more payload bytes, all zero and present: only the canonical end is wrong.
    _add(b, 16, "Q", 64)
    b.buf += bytes(64)
    return 16


def _swap(b: Block, k) -> int:
    # Tensor k and its u8 neighbour swap places: neither range intersects the
    # other, so step 9 passes; step 10 finds tensor k at the wrong offset.
    b.putd(k, DESC.BYTE_OFFSET, "Q", b.g[k + 1])
    b.putd(k + 1, DESC.BYTE_OFFSET, "Q", b.g[k])
    return b.at(k, DESC.BYTE_OFFSET)


def _name_duplicate(b: Block, k) -> int:
    # Names are one byte each: copy the previous tensor's name.
    prev = b.heap(b.based(k - 1, DESC.NAME_OFF, "H"))
    b.put(b.heap(b.based(k, DESC.NAME_OFF, "H")), "B", b.get(prev, "B"))
    return b.at(k, DESC.NAME_OFF)


def _overlap(b: Block, k) -> int:
    # Start one byte into the previous tensor's range, where that range is now
    # (another fault may have moved it inside the payload; if it moved it out,
    # that fault is reported first anyway and the canonical range is used).
    prev, plen = b.getd(k - 1, DESC.BYTE_OFFSET, "Q"), b.getd(k - 1, DESC.BYTE_LENGTH, "Q")
    if not 0 < plen <= 16 or prev + 1 + b.L[k] > b.g[-1] + b.L[-1]:
        prev, plen = b.g[k - 1], b.L[k - 1]
    return b.putd(k, DESC.BYTE_OFFSET, "Q", prev + min(1, plen - 1))


def _shape_overflow(b: Block, k) -> int:
    # rank 2, shape [2^62, 8]: 2^65 elements
    b.putd(k, DESC.RANK, "B", 2)
    b.putd(k, DESC.SHAPE, "Q", 1 << 62)
    b.putd(k, DESC.SHAPE + 8, "Q", 8)
    return b.at(k, DESC.SHAPE)


def _quant_rank(b: Block, k) -> int:
    # rank 0 with a consistent length (one element, one zero byte), so only
    # the quantization rule (a scheme needs rank >= 1) fails
    b.putd(k, DESC.RANK, "B", 0)
    b.putd(k, DESC.SHAPE, "Q", 0)
    b.putd(k, DESC.BYTE_LENGTH, "Q", 1)
    return b.at(k, DESC.RANK)


def _outer_index(b: Block, k) -> int:
    # scheme 1 must not name an outer tensor; scheme 2 must not name the scale
    value = 0 if b.layout.slots[k] == "q1" else b.siblings[k]["scale"]
    return b.putd(k, DESC.OUTER_INDEX, "I", value)


def _sibling(name: str, field: int, fmt: str, value: int, report: int):
    """Changes the quantized tensor's scale or outer sibling; reported at the index field."""
    def apply(b: Block, k) -> int:
        b.putd(b.siblings[k][name], field, fmt, value)
        return b.at(k, report)
    return apply


def _sibling_res(name: str, *names):
    return lambda b, k: {("desc", b.siblings[k][name], n) for n in names}


def directory_planters() -> list[Planter]:
    P = Planter
    return [
        # steps 1-7: the header, block-level
        P("dir_magic_eof", "dir_magic_eof", lambda b, k: _truncate(b, 3, 0),
          lambda b, k: {("buffer end",)}, "the buffer cut to 3 bytes", phase=3),
        P("dir_magic", "dir_magic", lambda b, k: (b.put(0, "B", ord("X")), 0)[1],
          header("magic"), "magic XLNT", phase=0),
        P("dir_header_eof", "dir_header_eof", lambda b, k: _truncate(b, 63, 0),
          lambda b, k: {("buffer end",)}, "the buffer cut to 63 bytes", phase=3),
        P("dir_version", "dir_version", lambda b, k: (b.put(4, "B", 1), 4)[1],
          header("version"), "version 1", phase=0),
        P("dir_flag_unknown", "dir_flag_unknown", lambda b, k: _flags(b, set_bits=4),
          header("flag bit 2"), "flag bit 2 set", phase=0),
        P("dir_le_clear", "dir_le_clear", lambda b, k: _flags(b, clear_bits=2),
          header("flag bit 1"), "little-endian flag clear", phase=0),
        P("dir_reserved", "dir_reserved", lambda b, k: (b.put(6, "B", 1), 6)[1],
          header("reserved"), "header byte 6 = 1", phase=0),
        P("dir_count_cap", "dir_count_cap", lambda b, k: (b.put(8, "I", CAP + 1), 8)[1],
          header("tensor_count"), "tensor_count = cap + 1", phase=0),
        P("dir_name_bytes_cap", "dir_name_bytes_cap", lambda b, k: (b.put(12, "I", CAP + 1), 12)[1],
          header("name_bytes"), "name_bytes = cap + 1", phase=0),
        P("dir_bytes_mismatch", "dir_bytes_mismatch", lambda b, k: (_add(b, 24, "Q", 1), 24)[1],
          header("directory_bytes"), "directory_bytes + 1", phase=0),
        P("dir_past_end", "dir_past_end",
          lambda b, k: _truncate(b, 64 + b.get(24, "Q") - 1, 8),
          lambda b, k: {("buffer end",)}, "the buffer cut 1 byte before the heap ends",
          tensors=True, phase=3),
        P("payload_end_overflow", "payload_end_overflow",
          lambda b, k: (b.put(16, "Q", (1 << 64) - b.base), 16)[1],
          header("payload_bytes"), "payload_base + payload_bytes = 2^64", phase=0),
        P("block_past_end", "block_past_end", lambda b, k: _truncate(b, len(b.buf) - 1, 16),
          lambda b, k: {("buffer end",)}, "the last payload byte cut off", tensors=True, phase=3),
        P("pad_nonzero", "pad_nonzero", lambda b, k: (b.put(b.base - 1, "B", 1), b.base - 1)[1],
          lambda b, k: {("padding",)}, "the last padding byte = 1", heap=True, phase=0),
        # step 8
        P("desc_reserved", "desc_reserved", lambda b, k: b.putd(k, DESC.RESERVED0, "B", 1),
          fields("reserved"), "descriptor byte 3 = 1", kinds=ANY),
        P("name_flag_empty", "name_flag_empty", lambda b, k: _flags(b, set_bits=1),
          header("flag bit 0", "tensor_count"), "name flag on an empty directory",
          empty=True, phase=0),
        P("name_without_flag", "name_without_flag", lambda b, k: b.putd(k, DESC.NAME_LEN, "H", 1),
          fields("name_len"), "name_len 1, flag clear", kinds=ANY, named=False, names_total=True),
        P("name_off_unnamed", "name_off_unnamed", lambda b, k: b.putd(k, DESC.NAME_OFF, "H", 0),
          fields("name_off"), "name_off 0, flag clear", kinds=ANY, named=False),
        P("name_missing", "name_missing", lambda b, k: b.putd(k, DESC.NAME_LEN, "H", 0),
          fields("name_len"), "name_len 0, flag set", kinds=ANY, named=True, names_total=True),
        P("name_placement", "name_placement",
          lambda b, k: b.putd(k, DESC.NAME_OFF, "H", b.based(k, DESC.NAME_OFF, "H") + 1),
          fields("name_off"), "name_off + 1", kinds=ANY, named=True),
        P("name_past_heap", "name_past_heap",
          lambda b, k: b.putd(k, DESC.NAME_LEN, "H", _heap_end(b) - b.based(k, DESC.NAME_OFF, "H") + 1),
          fields("name_len"), "name_len one past the heap", kinds=ANY, named=True, names_total=True),
        P("name_utf8", "name_utf8",
          lambda b, k: (lambda p: (b.put(p, "B", 0xFF), p)[1])(b.heap(b.based(k, DESC.NAME_OFF, "H"))),
          lambda b, k: {("name", k)}, "name byte 0xFF", kinds=ANY, named=True),
        P("name_duplicate", "name_duplicate", _name_duplicate,
          lambda b, k: {("name", k), ("name", k - 1)}, "the previous tensor's name",
          kinds=ANY, named=True, min_index=1),
        P("layout_off_absent", "layout_off_absent", lambda b, k: b.putd(k, DESC.LAYOUT_OFF, "H", 0),
          fields("layout_off"), "layout_off 0, no layout", kinds=NOT_OPAQUE),
        P("layout_placement", "layout_placement",
          lambda b, k: b.putd(k, DESC.LAYOUT_OFF, "H", b.based(k, DESC.LAYOUT_OFF, "H") + 1),
          fields("layout_off"), "layout_off + 1", kinds=("opq",)),
        P("layout_past_heap", "layout_past_heap",
          lambda b, k: b.putd(k, DESC.LAYOUT_LEN, "H", _heap_end(b) - b.based(k, DESC.LAYOUT_OFF, "H") + 1),
          fields("layout_len"), "layout_len one past the heap", kinds=("opq",)),
        P("layout_utf8", "layout_utf8",
          lambda b, k: (lambda p: (b.put(p, "B", 0xFF), p)[1])(b.heap(b.based(k, DESC.LAYOUT_OFF, "H"))),
          lambda b, k: {("layout", k)}, "layout byte 0xFF", kinds=("opq",)),
        # directory_bytes is only added to (here and by dir_bytes_mismatch), so the two combine
        P("heap_length", "heap_length", _heap_length, header("name_bytes"),
          "name_bytes + 1 (one unused heap byte)", heap=True, phase=0),
        # step 9
        P("range_overflow", "range_overflow", lambda b, k: b.putd(k, DESC.BYTE_OFFSET, "Q", U64_MAX),
          fields("byte_offset"), "byte_offset 2^64-1", kinds=ANY),
        P("range_past_payload", "range_past_payload",
          lambda b, k: (b.putd(k, DESC.BYTE_OFFSET, "Q", b.get(16, "Q")), b.at(k, DESC.BYTE_LENGTH))[1],
          fields("byte_offset"), "byte_offset = payload_bytes", kinds=ANY),
        P("dtype_zero", "dtype_zero", lambda b, k: b.putd(k, DESC.DTYPE, "H", 0),
          fields("dtype"), "dtype 0", kinds=ANY, sets="invalid"),
        P("dtype_reserved", "dtype_reserved", lambda b, k: b.putd(k, DESC.DTYPE, "H", 20),
          fields("dtype"), "dtype 20", kinds=ANY, sets="invalid"),
        P("dtype_range", "dtype_range", lambda b, k: b.putd(k, DESC.DTYPE, "H", 40000),
          fields("dtype"), "dtype 40000", kinds=ANY, sets="invalid"),
        P("rank", "rank", lambda b, k: b.putd(k, DESC.RANK, "B", 9),
          fields("rank"), "rank 9", kinds=ANY),
        P("shape_tail", "shape_tail", lambda b, k: b.putd(k, DESC.SHAPE + 56, "Q", 1),
          fields("shape[7]"), "shape slot 7 = 1", kinds=ANY),
        P("shape_overflow", "shape_overflow", _shape_overflow,
          fields("rank", "shape[0]", "shape[1]"), "shape [2^62, 8]", kinds=("f32",) + ANY),
        P("opaque_no_layout", "opaque_no_layout",
          lambda b, k: (b.putd(k, DESC.DTYPE, "H", 4096), b.at(k, DESC.LAYOUT_LEN))[1],
          fields("dtype"), "dtype 4096 without a layout", kinds=NOT_OPAQUE, sets="opaque"),
        P("opaque_block_size", "opaque_block_size", lambda b, k: b.putd(k, DESC.BLOCK_SIZE, "I", 0),
          fields("block_size"), "block_size 0", kinds=("opq",), needs="opaque"),
        P("opaque_block_multiple", "opaque_block_multiple",
          lambda b, k: (b.putd(k, DESC.BLOCK_SIZE, "I", 3), b.at(k, DESC.BYTE_LENGTH))[1],
          fields("block_size"), "block_size 3 for 4 bytes", kinds=("opq",), needs="opaque"),
        P("layout_non_opaque", "layout_non_opaque",
          lambda b, k: (b.putd(k, DESC.DTYPE, "H", 9), b.at(k, DESC.LAYOUT_LEN))[1],
          fields("dtype"), "dtype u8 with a layout", kinds=("opq",), sets="dense"),
        P("block_size_non_opaque", "block_size_non_opaque", lambda b, k: b.putd(k, DESC.BLOCK_SIZE, "I", 4),
          fields("block_size"), "block_size 4", kinds=NOT_OPAQUE, needs="dense"),
        P("byte_size_overflow", "byte_size_overflow",
          lambda b, k: b.putd(k, DESC.SHAPE, "Q", 1 << 63),
          fields("shape[0]"), "f32 shape [2^63]", kinds=("f32",), needs="dense"),
        P("length_mismatch", "length_mismatch",
          lambda b, k: b.putd(k, DESC.BYTE_LENGTH, "Q", b.L[k] - 1),
          fields("byte_length"), "byte_length - 1", kinds=NOT_OPAQUE, needs="dense"),
        P("overlap", "overlap", _overlap,
          fields("byte_offset"), "starts 1 byte into the previous range", kinds=ANY, min_index=1),
        # step 10
        P("offset_not_canonical", "offset_not_canonical",
          lambda b, k: b.putd(k, DESC.BYTE_OFFSET, "Q", b.g[k] + 4),
          fields("byte_offset"), "byte_offset + 4", kinds=ANY, tail=True),
        P("offset_not_canonical.swap", "offset_not_canonical", _swap,
          lambda b, k: {("desc", k, "byte_offset"), ("desc", k + 1, "byte_offset")},
          "swapped with the next tensor (out of order, no intersection)",
          kinds=("u8", "f32", "bool", "u4", "opq"), span=2),
        P("offset_not_canonical.backfill", "offset_not_canonical",
          lambda b, k: b.putd(k, DESC.BYTE_OFFSET, "Q", b.g[k - 2] + 32),
          fields("byte_offset"), "placed in the gap before the previous range (out of order)",
          kinds=ANY, min_index=2),
        P("gap_nonzero", "gap_nonzero",
          lambda b, k: (b.put(b.base + b.g[k] - 1, "B", 1), b.base + b.g[k] - 1)[1],
          lambda b, k: {("gap", k)}, "the gap byte before it = 1", kinds=ANY, min_index=1),
        P("payload_bytes_not_canonical", "payload_bytes_not_canonical", _payload_bytes,
          header("payload_bytes"), "payload_bytes + 64 (zeros present)", phase=0),
        # step 11
        P("bool_byte", "bool_byte",
          lambda b, k: (b.put(b.base + b.g[k] + 1, "B", 2), b.base + b.g[k] + 1)[1],
          lambda b, k: {("payload", k)}, "bool element 2", kinds=("bool",)),
        P("high_nibble", "high_nibble",
          lambda b, k: (lambda p: (b.put(p, "B", b.get(p, "B") | 0x10), p)[1])(b.base + b.g[k] + b.L[k] - 1),
          lambda b, k: {("payload", k)}, "final high nibble 1", kinds=("u4",) + QUANT),
        P("quant_scheme", "quant_scheme", lambda b, k: b.putd(k, DESC.QUANT_SCHEME, "H", 3),
          fields("quant_scheme"), "quant_scheme 3", kinds=ANY),
        P("quant_none_axis", "quant_none_axis", lambda b, k: b.putd(k, DESC.QUANT_AXIS, "H", 0),
          fields("quant_axis"), "scheme 0, axis 0", kinds=PLAIN),
        P("quant_none_group", "quant_none_group", lambda b, k: b.putd(k, DESC.GROUP_SIZE, "I", 1),
          fields("group_size"), "scheme 0, group 1", kinds=PLAIN),
        P("quant_none_scale", "quant_none_scale", lambda b, k: b.putd(k, DESC.SCALE_INDEX, "I", 0),
          fields("scale_index"), "scheme 0, scale index 0", kinds=PLAIN),
        P("quant_none_outer", "quant_none_outer", lambda b, k: b.putd(k, DESC.OUTER_INDEX, "I", 0),
          fields("outer_index"), "scheme 0, outer index 0", kinds=PLAIN),
        P("quant_rank", "quant_rank", _quant_rank,
          lambda b, k: {("desc", k, "rank"), ("desc", k, "shape[0]"), ("desc", k, "byte_length"),
                        ("payload", k)}, "rank 0, one element", kinds=QUANT),
        P("quant_axis", "quant_axis", lambda b, k: b.putd(k, DESC.QUANT_AXIS, "H", 1),
          fields("quant_axis"), "axis 1 of rank 1", kinds=QUANT),
        P("quant_group", "quant_group", lambda b, k: b.putd(k, DESC.GROUP_SIZE, "I", 0),
          fields("group_size"), "group 0", kinds=QUANT),
        P("quant_scale_index", "quant_scale_index", lambda b, k: b.putd(k, DESC.SCALE_INDEX, "I", k),
          fields("scale_index"), "scale index = itself", kinds=QUANT),
        P("quant_scale_chain", "quant_scale_chain",
          _sibling("scale", DESC.QUANT_SCHEME, "H", 1, DESC.SCALE_INDEX),
          _sibling_res("scale", "quant_scheme"), "the scale tensor has scheme 1", kinds=QUANT,
          reads=fields("scale_index"), private=True),
        P("quant_scale_count", "quant_scale_count",
          lambda b, k: (b.putd(k, DESC.GROUP_SIZE, "I", b.based(k, DESC.GROUP_SIZE, "I") // 2),
                        b.at(k, DESC.SCALE_INDEX))[1],
          fields("group_size"), "half the group size (two scales needed)", kinds=QUANT),
        P("quant_outer_index", "quant_outer_index", _outer_index,
          fields("outer_index"), "an outer index on scheme 1, the scale's on scheme 2", kinds=QUANT),
        P("quant_outer_chain", "quant_outer_chain",
          _sibling("outer", DESC.QUANT_SCHEME, "H", 1, DESC.OUTER_INDEX),
          _sibling_res("outer", "quant_scheme"), "the outer tensor has scheme 1", kinds=("q2", "q2w"),
          reads=fields("outer_index"), private=True),
        P("quant_outer_dtype", "quant_outer_dtype",
          _sibling("outer", DESC.DTYPE, "H", 13, DESC.OUTER_INDEX),
          _sibling_res("outer", "dtype"), "the outer tensor is u32", kinds=("q2", "q2w"),
          reads=fields("outer_index"), private=True),
        P("quant_outer_count", "quant_outer_count",
          lambda b, k: b.putd(k, DESC.OUTER_INDEX, "I", b.siblings[k]["wide"]),
          fields("outer_index"), "the outer index names an f32[2]", kinds=("q2w",)),
        # step 12
        P("trailing", "trailing", lambda b, k: _append(b, b"\x00"),
          lambda b, k: {("buffer end",)}, "one byte after the block", phase=2),
    ]


# --------------------------------------------------------------------------
# planting pairs


class Infeasible(Exception):
    """The two faults cannot share a block; the message is the reason."""


def layout_for(placed: list[tuple[Planter, int | None]]) -> Layout:
    """The smallest layout that carries every placed planter, or Infeasible."""
    want_named = {p.named for p, _k in placed if p.named is not None}
    if len(want_named) > 1:
        a = next(p for p, _ in placed if p.named)
        b = next(p for p, _ in placed if p.named is False)
        raise Infeasible(f"{a.key} needs named tensors (name flag set), {b.key} the name flag clear")
    heap = any(p.heap for p, _k in placed)
    named = want_named.pop() if want_named else heap   # a named heap is the smaller way to get one
    kinds: dict[int, tuple] = {}
    n = 0
    for p, k in placed:
        if k is None:
            continue
        have = kinds.get(k)
        kinds[k] = p.kinds if have is None else tuple(x for x in have if x in p.kinds)
        if not kinds[k]:
            others = [q.key for q, j in placed if j == k and q is not p]
            raise Infeasible(f"no tensor kind carries both {others[0]} and {p.key}")
        n = max(n, k + p.span)
    if any(p.empty for p, _k in placed):
        other = next((p for p, _k in placed if not p.empty), None)
        if n or any(p.tensors or p.heap for p, _k in placed):
            raise Infeasible(f"name_flag_empty needs tensor_count 0, {other.key} needs a "
                             f"{'name heap' if other.heap else 'descriptor'}")
    elif n == 0:
        n = 1
    slots = [kinds[k][0] if k in kinds else "u8" for k in range(n)]
    has_tail = any(s in QUANT for s in slots) or (heap and not named)
    for p, k in placed:
        if p.tail and k == n - 1 and not has_tail:
            slots.append("u8")
    private = tuple(sorted({k for p, k in placed if p.private}))
    return Layout(tuple(slots), named, heap and not named, private)


def plant(layout: Layout, placed: list[tuple[Planter, int | None]], order: "Order | None" = None):
    """Plants the faults into the layout's block. Returns (bytes, {index in
    placed: the offset that fault reports}), or raises Infeasible. With the
    table's order, pairs whose winner would be hidden by the loser are refused."""
    b = Block(layout)
    # A fault that changes the dtype class in one descriptor hides the rules
    # of the other branch of step 9, when it is checked after them.
    for p, kp in placed:
        for q, kq in placed:
            if (order and p.sets and q.needs and kp == kq and p.sets != q.needs
                    and order.key(p.rule, kp) > order.key(q.rule, kq)):
                raise Infeasible(f"{p.key} makes the dtype {p.sets}, so {q.key}'s "
                                 f"{q.needs}-dtype rule no longer applies")
    res = [p.res(b, k) for p, k in placed]
    for i in range(len(placed)):
        for j in range(i):
            both = res[i] & res[j]
            if both:
                what = ", ".join(" ".join(map(str, r)) for r in sorted(both, key=str))
                raise Infeasible(f"{placed[j][0].key} and {placed[i][0].key} both set {what}")
    # A fault that wins must not depend on a field the losing fault writes.
    for p, kp in placed:
        for q, kq in placed:
            if order and p.reads and q is not p and order.key(p.rule, kp) < order.key(q.rule, kq):
                both = p.reads(b, kp) & q.res(b, kq)
                if both:
                    what = ", ".join(" ".join(map(str, r)) for r in sorted(both, key=str))
                    raise Infeasible(f"{q.key} changes {what}, which {p.key}'s fault depends on")
    # A rule that changes the sum of name_len fields moves the expected offset
    # of every layout name (spec 14, the reference's choice), so a layout name
    # in an earlier descriptor would fail first.
    for p, kp in placed:
        if p.names_total:
            for q, kq in placed:
                if q is not p and kq is not None and kq < kp and layout.slots[kq] in LAYOUT_KINDS:
                    raise Infeasible(f"{p.key} changes the sum of name_len fields, which moves "
                                     f"the expected offset of {q.key}'s layout name before it")
    # Header first (a past-heap slice reads name_bytes after heap_length),
    # then descriptors in order, then appends, then the truncation.
    offsets = {}
    touched = {}
    sequence = sorted(range(len(placed)), key=lambda i: (placed[i][0].phase, placed[i][1] or 0, i))
    for i in sequence:
        p, k = placed[i]
        b.touched = set()
        offsets[i] = p.apply(b, k)
        touched[i] = b.touched
    data = bytes(b.buf)
    if b.truncate_to is not None:
        for i, (p, _k) in enumerate(placed):
            if p.phase != 3 and touched[i] and max(touched[i]) >= b.truncate_to:
                cut = next(q.key for q, _ in placed if q.phase == 3)
                raise Infeasible(f"{cut} cuts the buffer to {b.truncate_to} bytes, "
                                 f"which removes {p.key}")
        data = data[:b.truncate_to]
    return data, offsets


def placements(relation: str, first: Planter, second: Planter):
    """Candidate descriptor indexes (first, second): the first planter's fault
    sits in the earlier descriptor (same-descriptor: the same one)."""
    if relation == "same-descriptor":
        k = max(first.min_index, second.min_index)
        return [(k + d, k + d) for d in range(3)]
    if not first.per and not second.per:
        return [(None, None)]
    if not first.per:
        return [(None, second.min_index + d) for d in range(3)]
    if not second.per:
        return [(first.min_index + d, None) for d in range(3)]
    x = first.min_index
    y = max(x + first.span, second.min_index)
    return [(x, y + d) for d in range(3)]


# --------------------------------------------------------------------------
# the directory matrix


def verdict(t: str, data: bytes, framed: bool = False):
    e = K.validate(t, data, framed=framed)
    return None if e is None else (e.code, e.offset, e.rule)


def directory_cases(rows: dict[str, Row], planters: list[Planter]):
    order = Order(rows)
    cases, skipped = [], []
    by_key = {p.key: p for p in planters}
    if len(by_key) != len(planters):
        raise MatrixError("two planters share a key")
    for p in planters:
        if p.rule not in rows:
            raise MatrixError(f"planter {p.key}: rule {p.rule} is not in the spec table")
        if p.per != rows[p.rule].per:
            raise MatrixError(f"planter {p.key}: the table says per descriptor = {rows[p.rule].scope}")
    planted = {p.rule for p in planters}
    for r in rows.values():
        if r.unreachable:
            if r.rule in planted:
                raise MatrixError(f"{r.rule} is marked unreachable but has a planter")
            skipped.append({"a": r.rule, "b": "*", "relation": "any",
                            "reason": f"{r.rule} cannot be planted: {r.note}"})
        elif r.rule not in planted:
            raise MatrixError(f"spec table rule {r.rule} has no planter")

    def step_of(p):
        return step_key(rows[p.rule].step)

    for first in planters:
        for second in planters:
            # first: the fault placed earlier in the block (earlier descriptor)
            # second: the one placed later. The table decides who wins.
            ra, rb = rows[first.rule], rows[second.rule]
            if step_of(first) == step_of(second):
                if first.per and second.per:
                    # Two descriptors: the earlier one wins whatever the ranks.
                    # Only the arrangement a reader ordering by rank would get
                    # wrong is built (the lower or equal rank in the later
                    # descriptor); the other proves nothing more.
                    relations = ["same-step"] if ra.rank >= rb.rank else []
                    if ra.rank < rb.rank:
                        relations.append("same-descriptor")
                elif first.per or second.per:
                    # a block-level rule and a walk of the same step: one arrangement
                    if not first.per:
                        continue
                    relations = ["same-step"]
                else:
                    if ra.rank >= rb.rank:
                        continue
                    relations = ["same-step"]
            elif step_of(first) > step_of(second):
                # B (the later step) goes first in the block, A after it
                relations = ["cross-step"]
            else:
                # the earlier step in the earlier descriptor is the easy order;
                # every pair is already built the other way round above
                continue
            for relation in relations:
                case, reason = build_pair(order, rows, relation, first, second)
                if case is not None:
                    cases.append(case)
                else:
                    win, lose = (first, second) if order.key(first.rule, 0) < order.key(second.rule, 0) \
                        else (second, first)
                    skipped.append({"a": win.key, "b": lose.key, "relation": relation,
                                    "reason": reason})
    cases.extend(pinned_cases(order, rows, by_key))
    return cases, skipped


def build_pair(order: Order, rows, relation: str, first: Planter, second: Planter):
    """One case with first's fault before second's; (case, None) or (None, reason)."""
    reason = None
    for kf, ks in placements(relation, first, second):
        placed = [(first, kf), (second, ks)]
        try:
            layout = layout_for(placed)
            data, offsets = plant(layout, placed, order)
        except Infeasible as e:
            reason = reason or str(e)
            continue
        return make_case(order, rows, relation, layout, placed, data, offsets), None
    return None, reason


def make_case(order: Order, rows, relation, layout, placed, data, offsets):
    keys = [order.key(p.rule, k) for p, k in placed]
    w = min(range(len(placed)), key=lambda i: keys[i])
    lose = 1 - w
    win_p, win_k = placed[w]
    lose_p, lose_k = placed[lose]
    row = rows[win_p.rule]
    want = (row.code, offsets[w], row.rule)

    def where(p, k):
        return p.what if k is None else f"{p.what} @{k}"

    name = f"{relation}/{where_short(win_p, win_k)}/{where_short(lose_p, lose_k)}"
    # the reference must accept the base, see each fault alone, and the winner of both
    base = bytes(Block(layout).buf)
    if verdict("tensors", base) is not None:
        raise MatrixError(f"{name}: the base block is rejected: {verdict('tensors', base)}")
    for i, (p, k) in enumerate(placed):
        alone, off = plant(layout, [(p, k)])
        got = verdict("tensors", alone)
        exp = (rows[p.rule].code, off[0], p.rule)
        if got != exp:
            raise MatrixError(f"{name}: {p.key} planted alone gives {got}, expected {exp}")
    got = verdict("tensors", data)
    if got != want:
        raise MatrixError(f"{name}: kiln_ref gives {got}, the table expects {want}")
    note = f"{where(win_p, win_k)}; {where(lose_p, lose_k)}; {layout.describe()}"
    return {
        "name": name, "type": "tensors", "framed": False, "hex": data.hex(),
        "expect": row.code, "offset": offsets[w], "rule": row.rule, "rust_rule": row.rust,
        "note": note, "relation": relation, "a_step": row.step, "b_step": rows[lose_p.rule].step,
    }


def where_short(p: Planter, k) -> str:
    return p.key if k is None else f"{p.key}@{k}"


def pinned_cases(order: Order, rows, by_key):
    """Cases named in the issue, built exactly as described there."""
    out = []
    # Three unnamed u8[4], u8[4], f32[2^62, 8] tensors at payload offsets 64, 0,
    # 128: the first two are out of order without intersecting (a step-10
    # fault), the third's element count overflows (step 9): LIMIT at the third.
    layout = Layout(("u8", "u8", "f32"), False, False)
    placed = [(by_key["offset_not_canonical.swap"], 0), (by_key["shape_overflow"], 2)]
    data, offsets = plant(layout, placed)
    case = make_case(order, rows, "pinned", layout, placed, data, offsets)
    b = Block(layout)
    offs = [struct.unpack_from("<Q", data, b.at(k, DESC.BYTE_OFFSET))[0] for k in range(3)]
    if offs != [64, 0, 128] or case["offset"] != b.at(2, DESC.SHAPE) or case["expect"] != "LIMIT":
        raise MatrixError(f"pinned case: offsets {offs}, verdict {case['expect']} {case['offset']}")
    case["name"] = "pinned/out-of-order-ranges-then-shape-overflow"
    out.append(case)
    return out


# --------------------------------------------------------------------------
# Frozen values


@dataclass(frozen=True)
class Unit:
    """A Frozen value with a fault: bad differs from good only in the fault."""
    key: str
    rule: str
    table: str            # which rule table the rule is in
    ty: str
    good: bytes
    bad: bytes
    at: int               # the fault's offset inside bad
    terminal: bool = False  # the buffer must end inside it
    open_end: bool = False  # it claims more bytes than the buffer holds: a byte after it is inside


def _u32(n: int) -> bytes:
    return struct.pack("<I", n)


def _dir_units() -> list[Unit]:
    """Directory faults inside a tensors value (their rules are the directory table's)."""
    plain = K.encode_directory([kind_tensor("u8")])
    named = K.encode_directory([Tensor("u8", (4,), b"\x01\x02\x03\x04", name="a")])
    flags = K.encode_directory([kind_tensor("bool")])

    def with_byte(block, pos, value):
        b = bytearray(block)
        b[pos] = value
        return bytes(b)

    mismatch = bytearray(plain)
    struct.pack_into("<Q", mismatch, 64 + DESC.BYTE_LENGTH, 3)
    # The header alone, announcing one descriptor and a 0x7000-byte heap:
    # whatever follows it in a struct is far too short to hold them.
    past = bytearray(plain[:64])
    struct.pack_into("<I", past, 12, 0x7000)
    struct.pack_into("<Q", past, 24, 128 + 0x7000)
    base = (64 + 128 + 63) & ~63
    return [
        Unit("tensors:dir_magic", "dir_magic", "directory", "tensors", plain,
             with_byte(plain, 0, ord("X")), 0),
        Unit("tensors:dir_past_end", "dir_past_end", "directory", "tensors", plain, bytes(past), 8,
             open_end=True),
        Unit("tensors:name_utf8", "name_utf8", "directory", "tensors", named,
             with_byte(named, 64 + 128, 0xFF), 64 + 128),
        Unit("tensors:length_mismatch", "length_mismatch", "directory", "tensors", plain,
             bytes(mismatch), 64 + DESC.BYTE_LENGTH),
        Unit("tensors:bool_byte", "bool_byte", "directory", "tensors", flags,
             with_byte(flags, base + 1, 2), base + 1),
    ]


def frozen_units() -> list[Unit]:
    dict_ok = _u32(2) + _u32(1) + b"a" + b"\x01" + _u32(1) + b"b" + b"\x02"
    dict_bad = _u32(2) + _u32(1) + b"b" + b"\x01" + _u32(1) + b"a" + b"\x02"
    u16s = bytes.fromhex("01000200")
    return [
        Unit("bool_byte", "bool_byte", "frozen", "bool", b"\x01", b"\x02", 0),
        Unit("opt_tag", "opt_tag", "frozen", "opt<u8>", b"\x01\x07", b"\x02\x07", 0),
        Unit("str_utf8", "str_utf8", "frozen", "str", _u32(2) + b"hi", _u32(2) + b"h\xff", 5),
        Unit("length_cap", "length_cap", "frozen", "str", _u32(2) + b"hi", _u32(CAP + 1) + b"hi", 0),
        Unit("length_past_end", "length_past_end", "frozen", "str", _u32(2) + b"hi",
             _u32(0x7FFF) + b"hi", 0, open_end=True),
        Unit("count_cap", "count_cap", "frozen", "list<u16>", _u32(2) + u16s, _u32(CAP + 1) + u16s, 0),
        Unit("count_past_end", "count_past_end", "frozen", "list<u16>", _u32(2) + u16s,
             _u32(0x7FFF) + u16s, 0, open_end=True),
        Unit("dict_key_order", "dict_key_order", "frozen", "dict<str,u8>", dict_ok, dict_bad, 10),
        Unit("value_eof", "value_eof", "frozen", "u32", _u32(1), b"\x01\x00", 0, terminal=True),
        Unit("count_eof", "count_eof", "frozen", "list<u16>", _u32(2) + u16s, b"\x02\x00", 0,
             terminal=True),
        Unit("length_eof", "length_eof", "frozen", "str", _u32(2) + b"hi", b"\x02", 0, terminal=True),
        Unit("opt_tag_eof", "opt_tag_eof", "frozen", "opt<u8>", b"\x01\x07", b"", 0, terminal=True),
    ] + _dir_units()


FRAME_FAULTS = [
    # (rule, what, mutate(frame bytearray))
    ("frame_magic", "frame magic KLNX", lambda f: f.__setitem__(3, ord("X"))),
    ("frame_profile", "profile 1", lambda f: f.__setitem__(4, 1)),
    ("frame_flags", "frame flags 1", lambda f: f.__setitem__(5, 1)),
    ("frame_reserved", "frame byte 6 = 1", lambda f: f.__setitem__(6, 1)),
    ("schema_hash", "hash bit 0 flipped", lambda f: f.__setitem__(8, f[8] ^ 1)),
]
FRAME_OFFSET = {"frame_eof": 0, "frame_magic": 0, "frame_profile": 4, "frame_flags": 5,
                "frame_reserved": 6, "schema_hash": 8}


class FrozenBuilder:
    def __init__(self, rows: dict[str, Row], dir_rows: dict[str, Row]):
        self.rows, self.dir_rows = rows, dir_rows
        self.cases, self.skipped = [], []

    def row(self, rule: str, table: str = "frozen") -> Row:
        return (self.rows if table == "frozen" else self.dir_rows)[rule]

    def key(self, rule: str, table: str, unit_pos: int) -> tuple:
        """Frozen order: step (F1 frame < F2 schema < F3 value < F4 trailing),
        then the position of the unit being read, then the rank inside it. A
        directory fault is an F3 fault at its block's position."""
        if table == "directory":
            return (step_key("F3"), unit_pos, 0)
        r = self.rows[rule]
        return (step_key(r.step), unit_pos if r.step == "F3" else 0, r.rank)

    def add(self, name, relation, ty, framed, data, faults, alone=()):
        """faults: [(rule, table, unit_pos, offset)]; the table's first wins.
        alone: [(bytes, rule, table, offset)] single-fault variants to check."""
        win = min(faults, key=lambda f: self.key(f[0], f[1], f[2]))
        lose = [f for f in faults if f is not win][0]
        row = self.row(win[0], win[1])
        want = (row.code, win[3], row.rule)
        got = verdict(ty, data, framed)
        if got != want:
            raise MatrixError(f"{name}: kiln_ref gives {got}, the table expects {want}")
        for data1, rule1, table1, off1 in alone:
            exp = (self.row(rule1, table1).code, off1, rule1)
            got1 = verdict(ty, data1, framed)
            if got1 != exp:
                raise MatrixError(f"{name}: {rule1} planted alone gives {got1}, expected {exp}")
        lrow = self.row(lose[0], lose[1])

        def step(r: Row, table: str) -> str:
            # A standalone tensors value is a directory: its steps are the
            # directory's (TRAILING is step 12). Elsewhere a directory fault
            # is one more F3 value fault.
            if ty == "tensors" and not framed:
                return r.step if table == "directory" else "12"
            return r.step if table == "frozen" else "F3"

        self.cases.append({
            "name": name, "type": ty, "framed": framed, "hex": data.hex(),
            "expect": row.code, "offset": win[3], "rule": row.rule, "rust_rule": row.rust,
            "note": f"{win[0]} at byte {win[3]}, {lose[0]} at byte {lose[3]}",
            "relation": relation, "a_step": step(row, win[1]), "b_step": step(lrow, lose[1]),
        })

    def skip(self, a, b, relation, reason):
        self.skipped.append({"a": a, "b": b, "relation": relation, "reason": reason})

    def frame_pairs(self, units):
        """F1 frame checks in rank order, F2 the hash, both before any value
        fault and before TRAILING."""
        st = "struct{id:i64,batch:tensors,}"
        good = K.encode_frame(st, {"id": 7, "batch": []})
        faults = [("frame_eof", "the frame cut to 15 bytes", None)] + FRAME_FAULTS

        def framed(ty, value, muts, cut):
            f = bytearray(_frame(ty) + value)
            for m in muts:
                m(f)
            return bytes(f[:15]) if cut else bytes(f)

        def solo(ty, value, rule, m):
            return (framed(ty, value, [m] if m else [], m is None), rule, "frozen", FRAME_OFFSET[rule])

        for i, (ra, wa, ma) in enumerate(faults):
            for rb, wb, mb in faults[i + 1:]:
                cut = ra == "frame_eof"
                data = framed(st, good[16:], [m for m in (ma, mb) if m], cut)
                alone = [solo(st, good[16:], ra, ma), solo(st, good[16:], rb, mb)]
                self.add(f"frozen-frame/{ra}/{rb}", "frozen-frame", st, True, data,
                         [(ra, "frozen", 0, FRAME_OFFSET[ra]), (rb, "frozen", 0, FRAME_OFFSET[rb])],
                         alone)
            for u in units:
                if ra == "frame_eof":
                    self.skip(ra, u.key, "frozen-frame-value",
                              "the value starts at byte 16; a 15-byte frame holds none of it")
                    continue
                data = framed(u.ty, u.bad, [ma], False)
                alone = [(framed(u.ty, u.good, [ma], False), ra, "frozen", FRAME_OFFSET[ra]),
                         (framed(u.ty, u.bad, [], False), u.rule, u.table, 16 + u.at)]
                self.add(f"frozen-frame-value/{ra}/{u.key}", "frozen-frame-value", u.ty, True, data,
                         [(ra, "frozen", 0, FRAME_OFFSET[ra]), (u.rule, u.table, 16, 16 + u.at)],
                         alone)
            if ra == "frame_eof":
                self.skip(ra, "trailing", "frozen-frame-value",
                          "a 15-byte frame has no value to trail")
                continue
            data = framed(st, good[16:] + b"\x00", [ma], False)
            alone = [(framed(st, good[16:] + b"\x00", [], False), "trailing", "frozen", len(good))]
            self.add(f"frozen-frame-value/{ra}/trailing", "frozen-frame-value", st, True, data,
                     [(ra, "frozen", 0, FRAME_OFFSET[ra]), ("trailing", "frozen", 0, len(good))],
                     alone)

    def value_pairs(self, units):
        """F3 faults in encoding order: the first faulty field of a struct wins,
        whatever the codes; every value fault wins over TRAILING (F4)."""
        for x in units:
            if x.terminal:
                for y in units:
                    self.skip(x.key, y.key, "frozen-position",
                              f"{x.key} needs the buffer to end inside it, so no later field exists")
                self.skip(x.key, "trailing", "frozen-value-trailing",
                          f"{x.key} needs the buffer to end inside it, so no byte can trail")
                continue
            for y in units:
                ty = f"struct{{a:{x.ty},b:{y.ty},}}"
                data = x.bad + y.bad
                alone = [(x.bad + y.good, x.rule, x.table, x.at),
                         (x.good + y.bad, y.rule, y.table, len(x.good) + y.at)]
                self.add(f"frozen-position/{x.key}/{y.key}", "frozen-position", ty, False, data,
                         [(x.rule, x.table, 0, x.at), (y.rule, y.table, len(x.bad), len(x.bad) + y.at)],
                         alone)
            if x.open_end:
                self.skip(x.key, "trailing", "frozen-value-trailing",
                          f"{x.key} claims more bytes than the buffer holds, so a byte after it "
                          "is inside the value, not after it")
                continue
            self.add(f"frozen-value-trailing/{x.key}/trailing", "frozen-value-trailing", x.ty, False,
                     x.bad + b"\x00",
                     [(x.rule, x.table, 0, x.at), ("trailing", "frozen", 0, len(x.bad))],
                     [(x.good + b"\x00", "trailing", "frozen", len(x.good))])

    def unit_pairs(self):
        """Two faults read from the same bytes: the rank inside the unit decides."""
        big = _u32(CAP + 1)
        far = _u32(0x7FFF)
        # one count word above the cap and past the end: the cap is checked first
        self.add("frozen-unit/count_cap/count_past_end", "frozen-unit", "list<u16>", False, big,
                 [("count_cap", "frozen", 0, 0), ("count_past_end", "frozen", 0, 0)],
                 [(_u32(3) + bytes(4), "count_past_end", "frozen", 0)])
        self.add("frozen-unit/length_cap/length_past_end", "frozen-unit", "str", False, big,
                 [("length_cap", "frozen", 0, 0), ("length_past_end", "frozen", 0, 0)],
                 [(_u32(3) + b"hi", "length_past_end", "frozen", 0)])
        # a str's length word before its UTF-8
        self.add("frozen-unit/length_cap/str_utf8", "frozen-unit", "str", False, big + b"\xff",
                 [("length_cap", "frozen", 0, 0), ("str_utf8", "frozen", 0, 4)],
                 [(_u32(1) + b"\xff", "str_utf8", "frozen", 4)])
        self.add("frozen-unit/length_past_end/str_utf8", "frozen-unit", "str", False, far + b"\xff",
                 [("length_past_end", "frozen", 0, 0), ("str_utf8", "frozen", 0, 4)],
                 [(_u32(1) + b"\xff", "str_utf8", "frozen", 4)])
        # a dict key is read whole (its UTF-8 too) before its order is checked:
        # key 2 (0x80) sorts before key 1 (c3 a9) and is not UTF-8
        d = _u32(2) + _u32(2) + b"\xc3\xa9" + b"\x01" + _u32(1) + b"\x80" + b"\x02"
        self.add("frozen-unit/str_utf8/dict_key_order", "frozen-unit", "dict<str,u8>", False, d,
                 [("str_utf8", "frozen", 11, 15), ("dict_key_order", "frozen", 11, 11)],
                 [(_u32(2) + _u32(2) + b"\xc3\xa9" + b"\x01" + _u32(1) + b"a" + b"\x02",
                   "dict_key_order", "frozen", 11),
                  (_u32(2) + _u32(1) + b"a" + b"\x01" + _u32(1) + b"\x80" + b"\x02",
                   "str_utf8", "frozen", 14)])
        # ... and its order before its value
        d = _u32(2) + _u32(1) + b"b" + b"\x01" + _u32(1) + b"a" + b"\x02"
        self.add("frozen-unit/dict_key_order/bool_byte", "frozen-unit", "dict<str,bool>", False, d,
                 [("dict_key_order", "frozen", 10, 10), ("bool_byte", "frozen", 15, 15)],
                 [(_u32(2) + _u32(1) + b"a" + b"\x01" + _u32(1) + b"b" + b"\x02",
                   "bool_byte", "frozen", 15)])
        # the value of entry 0 comes before the key of entry 1
        d = _u32(2) + _u32(1) + b"b" + b"\x02" + _u32(1) + b"a" + b"\x01"
        self.add("frozen-unit/bool_byte/dict_key_order", "frozen-unit", "dict<str,bool>", False, d,
                 [("bool_byte", "frozen", 9, 9), ("dict_key_order", "frozen", 10, 10)],
                 [(_u32(2) + _u32(1) + b"b" + b"\x01" + _u32(1) + b"a" + b"\x01",
                   "dict_key_order", "frozen", 10)])
        # a count word before the elements it counts
        for rule, word in (("count_cap", big), ("count_past_end", far)):
            self.add(f"frozen-unit/{rule}/bool_byte", "frozen-unit", "list<bool>", False,
                     word + b"\x02",
                     [(rule, "frozen", 0, 0), ("bool_byte", "frozen", 4, 4)],
                     [(_u32(1) + b"\x02", "bool_byte", "frozen", 4)])
            self.add(f"frozen-unit/{rule}/dict_key_order", "frozen-unit", "dict<str,u8>", False,
                     word + _u32(1) + b"b" + b"\x01" + _u32(1) + b"a" + b"\x02",
                     [(rule, "frozen", 0, 0), ("dict_key_order", "frozen", 10, 10)],
                     [(_u32(2) + _u32(1) + b"b" + b"\x01" + _u32(1) + b"a" + b"\x02",
                       "dict_key_order", "frozen", 10)])

    def build(self):
        for r in self.rows.values():
            if r.unreachable:
                self.skip(r.rule, "*", "any", f"{r.rule} cannot be planted: {r.note}")
        units = frozen_units()
        used = {u.rule for u in units if u.table == "frozen"} | {r for r, *_ in FRAME_FAULTS}
        used |= {"frame_eof", "trailing"}
        missing = [r.rule for r in self.rows.values() if not r.unreachable and r.rule not in used]
        if missing:
            raise MatrixError(f"Frozen table rules without a planter: {missing}")
        self.frame_pairs(units)
        self.value_pairs(units)
        self.unit_pairs()
        return self.cases, self.skipped


def _frame(ty: str) -> bytes:
    return K.FRAME_MAGIC + bytes(4) + struct.pack("<Q", K.schema_hash(ty))


# --------------------------------------------------------------------------
# output


def build(spec_text: str | None = None):
    text = SPEC.read_text(encoding="utf-8") if spec_text is None else spec_text
    dir_rows = parse_table(text, "directory")
    frozen_rows = parse_table(text, "frozen")
    cases, skipped = directory_cases(dir_rows, directory_planters())
    fc, fs = FrozenBuilder(frozen_rows, dir_rows).build()
    cases += fc
    skipped += fs
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise MatrixError(f"duplicate case names: {dup[:5]}")
    return cases, skipped, dir_rows, frozen_rows


def render(cases, skipped) -> str:
    """One case per line: the file stays diffable and small."""
    def line(obj):
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    out = ['{"cap":%d,' % CAP, '"cases":[']
    out.append(",\n".join(line(c) for c in cases))
    out.append('],\n"skipped":[')
    out.append(",\n".join(line(s) for s in skipped))
    out.append("]}")
    return "\n".join(out) + "\n"


def summary(cases, skipped) -> str:
    by = {}
    for c in cases:
        by[c["relation"]] = by.get(c["relation"], 0) + 1
    parts = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
    return f"{len(cases)} cases ({parts}), {len(skipped)} skipped pairs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gen_check_order.py",
                                 description="Regenerate the Kiln v2 check-order matrix.")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help=f"output path (default {DEFAULT_OUT})")
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and fail if the file differs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:
        cases, skipped, _d, _f = build()
    except MatrixError as e:
        print(f"gen_check_order: refusing to write: {e}", file=sys.stderr)
        return 1
    text = render(cases, skipped)
    if args.check:
        try:
            current = out.read_text(encoding="utf-8")
        except OSError as e:
            print(f"gen_check_order: cannot read {out}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"gen_check_order: {out} differs from the regenerated matrix; "
                  "run spec/reference/gen_check_order.py", file=sys.stderr)
            return 1
        print(f"gen_check_order: {out.name} up to date, {summary(cases, skipped)}")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, out)
    print(f"gen_check_order: wrote {summary(cases, skipped)} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
