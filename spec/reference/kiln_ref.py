#!/usr/bin/env python3
"""Kiln v2 reference codec (Python 3.11, standard library only).

Written from the Kiln v2 specification text and the project's rulings, both
restated in spec/kiln-v2.md (the repository does not carry the specification text).

Public API
    parse_type(text) -> KType          canonical type text parser (LIMIT past depth 64)
    KType.text(), type_text(t)         canonical text back
    schema_hash(t_or_text) -> int      FNV-1a 64 over the type's tokens
    encode(t, value) -> bytes          canonical Frozen encoding
    decode(t, buf, framed=False, count_cap=, byte_cap=) -> value   (raises KilnError)
    validate(...) -> KilnError | None  same checks, builds no values
    encode_frame(t, value) -> bytes    16-byte frame + value
    encode_directory(tensors, validate=True) -> bytes   canonical tensor block
    validate_directory(buf, pos=0, ...) -> (tensors | None, end)   the 12-step check

Errors are KilnError(code, offset, rule): code in FRAME LIMIT EOF TYPE UTF8
TRAILING SCHEMA; offset is absolute in the caller's buffer; rule is snake_case.

CLI
    kiln_ref.py validate --type TEXT [--framed] [--count-cap N] [--byte-cap N]
        one hex string per stdin line -> "accept" or "reject CODE OFFSET RULE"
    kiln_ref.py selftest
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import struct
import sys
from typing import Any

__all__ = [
    "KilnError", "TypeTextError", "KType", "F32", "F64", "Some", "Tensor",
    "parse_type", "type_text", "type_tokens", "schema_hash", "fnv1a64",
    "encode", "decode", "validate", "encode_frame",
    "encode_directory", "validate_directory",
    "DEFAULT_CAP", "U64_MAX", "U32_MAX", "DTYPES", "DTYPE_CODES",
    "EMPTY_DIRECTORY_HEX", "HDR", "DESC",
]

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
DEFAULT_CAP = 16_777_216
MAX_DEPTH = 64
CODES = ("FRAME", "LIMIT", "EOF", "TYPE", "UTF8", "TRAILING", "SCHEMA")

FNV_OFFSET = 14695981039346656037
FNV_PRIME = 1099511628211

FRAME_MAGIC = b"KLN0"
DIR_MAGIC = b"KLNT"
DIR_VERSION = 2
FLAG_NAMES = 0x01
FLAG_LE = 0x02
HEADER_SIZE = 64
DESC_SIZE = 128
NONE16 = 0xFFFF
NONE32 = 0xFFFFFFFF

EMPTY_DIRECTORY_HEX = (
    "4b4c4e5402020000" + "00" * 56
)


class HDR:
    """Byte offsets of the 64-byte directory header fields."""
    MAGIC = 0
    VERSION = 4
    FLAGS = 5
    RESERVED0 = 6          # 2 bytes
    TENSOR_COUNT = 8       # u32
    NAME_BYTES = 12        # u32
    PAYLOAD_BYTES = 16     # u64
    DIRECTORY_BYTES = 24   # u64
    RESERVED1 = 32         # 32 bytes


class DESC:
    """Byte offsets of the 128-byte descriptor fields."""
    DTYPE = 0              # u16
    RANK = 2               # u8
    RESERVED0 = 3          # u8
    NAME_OFF = 4           # u16
    NAME_LEN = 6           # u16
    LAYOUT_OFF = 8         # u16
    LAYOUT_LEN = 10        # u16
    BLOCK_SIZE = 12        # u32
    QUANT_SCHEME = 16      # u16
    QUANT_AXIS = 18        # u16
    GROUP_SIZE = 20        # u32
    SCALE_INDEX = 24       # u32
    OUTER_INDEX = 28       # u32
    BYTE_OFFSET = 32       # u64
    BYTE_LENGTH = 40       # u64
    SHAPE = 48             # 8 x u64
    RESERVED1 = 112        # 16 bytes


# code -> (name, width in bytes, or 0 for a packed nibble dtype)
DTYPES = {
    1: ("f64", 8), 2: ("f32", 4), 3: ("f16", 2), 4: ("bf16", 2),
    5: ("f8e4m3", 1), 6: ("f8e5m2", 1), 7: ("bool", 1), 8: ("i8", 1),
    9: ("u8", 1), 10: ("i16", 2), 11: ("u16", 2), 12: ("i32", 4),
    13: ("u32", 4), 14: ("i64", 8), 15: ("u64", 8), 16: ("i4", 0),
    17: ("u4", 0), 18: ("e2m1", 0), 19: ("e8m0", 1),
}
DTYPE_CODES = {name: code for code, (name, _w) in DTYPES.items()}
PACKED = frozenset((16, 17, 18))
OPAQUE_MIN = 4096
OPAQUE_MAX = 32767
DTYPE_BOOL = 7
DTYPE_F32 = 2

_NONZERO = re.compile(rb"[^\x00]")
_NOT_BOOL = re.compile(rb"[^\x00\x01]")

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_HEADER = struct.Struct("<4sBBHIIQQ")           # first 32 bytes of the header
_DESCR = struct.Struct("<HBBHHHHIHHIIIQQ8Q16s")  # a whole descriptor
assert _DESCR.size == DESC_SIZE
# indexes into a tuple unpacked with _DESCR
(_DTYPE, _RANK, _RES0, _NOFF, _NLEN, _LOFF, _LLEN, _BLOCK, _SCHEME, _AXIS,
 _GROUP, _SCALE, _OUTER, _OFF, _LEN) = range(15)
_SHAPE = 15
_RES1 = 23


# --------------------------------------------------------------------------
# errors and value wrappers


class KilnError(Exception):
    """A rejected buffer: code (contract), absolute offset and rule (for people)."""

    def __init__(self, code: str, offset: int, rule: str):
        if code not in CODES:
            raise ValueError(f"unknown Kiln error code {code!r}")
        super().__init__(f"{code} {offset} {rule}")
        self.code = code
        self.offset = offset
        self.rule = rule

    def __eq__(self, other):
        return (isinstance(other, KilnError) and self.code == other.code
                and self.offset == other.offset and self.rule == other.rule)

    def __hash__(self):
        return hash((self.code, self.offset, self.rule))


class TypeTextError(ValueError):
    """Type text that is not canonical Kiln type text (not a wire error)."""

    def __init__(self, msg: str, pos: int):
        super().__init__(f"{msg} at text offset {pos}")
        self.pos = pos


class _FloatBits:
    __slots__ = ("bits",)
    _fmt_bits: struct.Struct
    _fmt_float: struct.Struct
    _mask: int

    def __init__(self, bits: int):
        if not isinstance(bits, int) or not 0 <= bits <= self._mask:
            raise ValueError(f"{type(self).__name__} bits out of range: {bits!r}")
        self.bits = bits

    @classmethod
    def from_float(cls, x: float):
        return cls(cls._fmt_bits.unpack(cls._fmt_float.pack(float(x)))[0])

    def __float__(self) -> float:
        return self._fmt_float.unpack(self._fmt_bits.pack(self.bits))[0]

    def __eq__(self, other):
        return type(other) is type(self) and other.bits == self.bits

    def __hash__(self):
        return hash((type(self).__name__, self.bits))

    def __repr__(self):
        width = self._fmt_bits.size * 2
        return f"{type(self).__name__}(0x{self.bits:0{width}x})"


class F32(_FloatBits):
    """An f32 value kept as its exact IEEE binary32 bits."""
    __slots__ = ()
    _fmt_bits = _U32
    _fmt_float = struct.Struct("<f")
    _mask = U32_MAX


class F64(_FloatBits):
    """An f64 value kept as its exact IEEE binary64 bits."""
    __slots__ = ()
    _fmt_bits = _U64
    _fmt_float = struct.Struct("<d")
    _mask = U64_MAX


class Some:
    """Present value of an opt<T>. Decoding produces it only when T is itself
    an opt (so opt<opt<T>> can tell 'absent' from 'present, inner absent').
    The encoder accepts it for any opt."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Some) and other.value == self.value

    def __hash__(self):
        return hash(("Some", self.value))

    def __repr__(self):
        return f"Some({self.value!r})"


@dataclasses.dataclass
class Tensor:
    """One tensor: the encoder's input and the decoder's output.

    name: str (or raw bytes for the encoder), None when unnamed.
    dtype: int code (the encoder also takes a dtype name such as "f32").
    shape: tuple of dimensions (len == rank, 0..8).
    payload: the exact payload bytes.
    layout: opaque layout name (str / bytes) or None.
    quant_axis / scale_index / outer_index: None stands for the 0xFFFF /
    0xFFFFFFFF sentinels.
    byte_offset / byte_length are filled by the decoder and ignored by the
    encoder and by equality.
    """
    dtype: Any
    shape: tuple = ()
    payload: bytes = b""
    name: Any = None
    layout: Any = None
    block_size: int = 0
    quant_scheme: int = 0
    quant_axis: int | None = None
    group_size: int = 0
    scale_index: int | None = None
    outer_index: int | None = None
    byte_offset: int | None = dataclasses.field(default=None, compare=False)
    byte_length: int | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self):
        if isinstance(self.dtype, str):
            if self.dtype not in DTYPE_CODES:
                raise ValueError(f"unknown dtype name {self.dtype!r}")
            self.dtype = DTYPE_CODES[self.dtype]
        self.shape = tuple(self.shape)
        self.payload = bytes(self.payload)


# --------------------------------------------------------------------------
# types

# scalar name -> (kind, size, struct format or None)
_SCALARS = {
    "bool": ("bool", 1, None),
    "i8": ("int", 1, "<b"), "i16": ("int", 2, "<h"),
    "i32": ("int", 4, "<i"), "i64": ("int", 8, "<q"),
    "u8": ("int", 1, "<B"), "u16": ("int", 2, "<H"),
    "u32": ("int", 4, "<I"), "u64": ("int", 8, "<Q"),
    "int": ("int", 8, "<q"), "uint": ("int", 8, "<Q"),
    "f32": ("f32", 4, "<I"), "f64": ("f64", 8, "<Q"),
    "str": ("str", 4, None),
    "tensors": ("tensors", HEADER_SIZE, None),
}
_INT_RANGES = {
    "i8": (-(1 << 7), (1 << 7) - 1), "i16": (-(1 << 15), (1 << 15) - 1),
    "i32": (-(1 << 31), (1 << 31) - 1), "i64": (-(1 << 63), (1 << 63) - 1),
    "int": (-(1 << 63), (1 << 63) - 1),
    "u8": (0, 0xFF), "u16": (0, 0xFFFF), "u32": (0, U32_MAX),
    "u64": (0, U64_MAX), "uint": (0, U64_MAX),
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class KType:
    """A parsed Kiln type.

    kind: int f32 f64 bool str tensors bytes(list<u8>) list opt dict struct.
    min_size: minimum wire size (spec's table; struct = sum of fields).
    fixed: exact wire size when every encoding has that size and needs no
    byte check (ints, floats, structs of those), else None.
    """
    __slots__ = ("kind", "name", "elem", "fields", "min_size", "fixed",
                 "depth", "packer", "_text")

    def __init__(self, kind, name=None, elem=None, fields=None):
        self.kind = kind
        self.name = name            # scalar name
        self.elem = elem            # list/opt element, dict value
        self.fields = fields        # struct: tuple of (name, KType)
        self.packer = None
        self._text = None
        if kind in ("int", "f32", "f64"):
            _k, size, fmt = _SCALARS[name]
            self.packer = struct.Struct(fmt)
            self.min_size = size
            self.fixed = size
            self.depth = 0
        elif kind in ("bool", "str", "tensors"):
            self.min_size = _SCALARS[name][1]
            self.fixed = None
            self.depth = 0
        elif kind == "bytes":
            self.min_size = 4
            self.fixed = None
            self.depth = 1
        elif kind in ("list", "opt"):
            self.min_size = 4 if kind == "list" else 1
            self.fixed = None
            self.depth = 1 + elem.depth
        elif kind == "dict":
            self.min_size = 4
            self.fixed = None
            self.depth = 1 + elem.depth
        elif kind == "struct":
            self.min_size = sum(t.min_size for _n, t in fields)
            sizes = [t.fixed for _n, t in fields]
            self.fixed = None if any(s is None for s in sizes) else sum(sizes)
            self.depth = 1 + max((t.depth for _n, t in fields), default=0)
        else:
            raise ValueError(kind)

    def tokens(self) -> list[str]:
        return type_tokens(self)

    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self.tokens())
        return self._text

    def __str__(self):
        return self.text()

    def __repr__(self):
        return f"KType({self.text()!r})"

    def __eq__(self, other):
        return isinstance(other, KType) and other.text() == self.text()

    def __hash__(self):
        return hash(self.text())


def type_tokens(t: KType) -> list[str]:
    """Hash tokens of a type; their concatenation is the canonical text."""
    out: list[str] = []

    def walk(t):
        k = t.kind
        if k in ("int", "f32", "f64", "bool", "str", "tensors"):
            out.append(t.name)
        elif k == "bytes":
            out.extend(("list<", "u8", ">"))
        elif k == "list":
            out.append("list<"); walk(t.elem); out.append(">")
        elif k == "opt":
            out.append("opt<"); walk(t.elem); out.append(">")
        elif k == "dict":
            out.extend(("dict<", "str", ",")); walk(t.elem); out.append(">")
        else:
            out.append("struct{")
            for name, ft in t.fields:
                out.append(name); out.append(":"); walk(ft); out.append(",")
            out.append("}")

    walk(t)
    return out


def type_text(t: KType | str) -> str:
    return (parse_type(t) if isinstance(t, str) else t).text()


class _TypeParser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def fail(self, msg):
        raise TypeTextError(msg, self.i)

    def take(self, lit: str) -> bool:
        if self.s.startswith(lit, self.i):
            self.i += len(lit)
            return True
        return False

    def expect(self, lit: str):
        if not self.take(lit):
            self.fail(f"expected {lit!r}")

    def open_level(self, depth: int, start: int):
        if depth + 1 > MAX_DEPTH:
            raise KilnError("LIMIT", start, "type_depth")

    def parse(self, depth: int) -> KType:
        start = self.i
        if self.take("list<"):
            self.open_level(depth, start)
            elem = self.parse(depth + 1)
            self.expect(">")
            if elem.kind == "int" and elem.name == "u8":
                return KType("bytes", elem=elem)
            return KType("list", elem=elem)
        if self.take("opt<"):
            self.open_level(depth, start)
            elem = self.parse(depth + 1)
            self.expect(">")
            return KType("opt", elem=elem)
        if self.take("dict<"):
            self.open_level(depth, start)
            if not self.take("str,"):
                self.fail("dict key must be str, written 'dict<str,V>'")
            val = self.parse(depth + 1)
            self.expect(">")
            return KType("dict", elem=val)
        if self.take("struct{"):
            self.open_level(depth, start)
            fields = []
            seen = set()
            while not self.take("}"):
                m = _IDENT.match(self.s, self.i)
                if not m:
                    self.fail("expected a field name or '}'")
                name = m.group(0)
                if name in seen:
                    self.fail(f"duplicate field name {name!r}")
                seen.add(name)
                self.i = m.end()
                self.expect(":")
                ft = self.parse(depth + 1)
                self.expect(",")
                fields.append((name, ft))
            return KType("struct", fields=tuple(fields))
        m = _IDENT.match(self.s, self.i)
        if not m or m.group(0) not in _SCALARS:
            self.fail("expected a type")
        self.i = m.end()
        name = m.group(0)
        return KType(_SCALARS[name][0], name=name)


_TYPE_CACHE: dict[str, KType] = {}


def parse_type(text: str) -> KType:
    """Parse canonical type text. TypeTextError on bad syntax; KilnError
    LIMIT (rule type_depth) when more than 64 containers nest."""
    if isinstance(text, KType):
        return text
    t = _TYPE_CACHE.get(text)
    if t is not None:
        return t
    p = _TypeParser(text)
    t = p.parse(0)
    if p.i != len(text):
        p.fail("unexpected text after the type")
    t._text = text
    if len(_TYPE_CACHE) < 4096:
        _TYPE_CACHE[text] = t
    return t


def fnv1a64(tokens) -> int:
    h = FNV_OFFSET
    for tok in tokens:
        for b in tok.encode("utf-8"):
            h ^= b
            h = (h * FNV_PRIME) & U64_MAX
        h = (h * FNV_PRIME) & U64_MAX     # the 0x00 step after each token
    return h


_HASH_CACHE: dict[str, int] = {}


def schema_hash(t: KType | str) -> int:
    """FNV-1a 64 of the type's tokens, each followed by a 0x00 step."""
    t = parse_type(t)
    text = t.text()
    h = _HASH_CACHE.get(text)
    if h is None:
        h = fnv1a64(type_tokens(t))
        if len(_HASH_CACHE) < 4096:
            _HASH_CACHE[text] = h
    return h


# --------------------------------------------------------------------------
# Frozen decoding


class _Cx:
    __slots__ = ("buf", "end", "count_cap", "byte_cap", "build")

    def __init__(self, buf, count_cap, byte_cap, build):
        self.buf = buf
        self.end = len(buf)
        self.count_cap = count_cap
        self.byte_cap = byte_cap
        self.build = build


def _check_count(cx: _Cx, pos: int, cap: int, m: int, what: str) -> int:
    """Spec 'Lengths and allocation' steps 1-4 for the u32 word at pos.
    Returns the count; the caller continues at pos + 4."""
    if cx.end - pos < 4:
        raise KilnError("EOF", pos, f"{what}_eof")
    n = _U32.unpack_from(cx.buf, pos)[0]
    if n > cap:
        raise KilnError("LIMIT", pos, f"{what}_cap")
    need = n * m
    if m > 0 and need > U64_MAX:
        raise KilnError("LIMIT", pos, f"{what}_overflow")
    if need > cx.end - pos - 4:
        raise KilnError("EOF", pos, f"{what}_past_end")
    return n


def _dec_str(cx: _Cx, pos: int):
    n = _check_count(cx, pos, cx.byte_cap, 1, "length")
    start = pos + 4
    end = start + n
    raw = cx.buf[start:end]
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KilnError("UTF8", start + e.start, "str_utf8") from None
    return s, end


def _fixed_eof(t: KType, pos: int, cx: _Cx):
    """Locate the first fixed-width scalar inside t at pos that does not fit."""
    if t.kind == "struct":
        for _n, ft in t.fields:
            if cx.end - pos < ft.fixed:
                _fixed_eof(ft, pos, cx)
            pos += ft.fixed
        raise AssertionError("unreachable")
    raise KilnError("EOF", pos, "value_eof")


def _dec(t: KType, pos: int, cx: _Cx):
    k = t.kind
    buf = cx.buf
    if t.fixed is not None:
        if cx.end - pos < t.fixed:
            _fixed_eof(t, pos, cx)
        if not cx.build:
            return None, pos + t.fixed
        if k == "int":
            return t.packer.unpack_from(buf, pos)[0], pos + t.fixed
        if k == "f32":
            return F32(t.packer.unpack_from(buf, pos)[0]), pos + 4
        if k == "f64":
            return F64(t.packer.unpack_from(buf, pos)[0]), pos + 8
        # a struct made only of fixed-width fields
        out = {}
        for name, ft in t.fields:
            out[name], pos = _dec(ft, pos, cx)
        return out, pos
    if k == "bool":
        if pos >= cx.end:
            raise KilnError("EOF", pos, "value_eof")
        b = buf[pos]
        if b > 1:
            raise KilnError("TYPE", pos, "bool_byte")
        return b == 1, pos + 1
    if k == "str":
        return _dec_str(cx, pos)
    if k == "bytes":
        n = _check_count(cx, pos, cx.byte_cap, 1, "length")
        return (bytes(buf[pos + 4:pos + 4 + n]) if cx.build else None), pos + 4 + n
    if k == "list":
        et = t.elem
        n = _check_count(cx, pos, cx.count_cap, et.min_size, "count")
        pos += 4
        if et.fixed is not None and not cx.build:
            return None, pos + n * et.fixed     # fits: the count check proved it
        if et.kind == "bool":
            m = _NOT_BOOL.search(buf, pos, pos + n)
            if m:
                raise KilnError("TYPE", m.start(), "bool_byte")
            return ([b == 1 for b in buf[pos:pos + n]] if cx.build else None), pos + n
        if et.kind == "int" and cx.build:
            size = et.fixed
            vals = [v for (v,) in et.packer.iter_unpack(buf[pos:pos + n * size])]
            return vals, pos + n * size
        out = [] if cx.build else None
        for _ in range(n):
            v, pos = _dec(et, pos, cx)
            if out is not None:
                out.append(v)
        return out, pos
    if k == "opt":
        if pos >= cx.end:
            raise KilnError("EOF", pos, "opt_tag_eof")
        tag = buf[pos]
        if tag == 0:
            return None, pos + 1
        if tag != 1:
            raise KilnError("TYPE", pos, "opt_tag")
        v, pos = _dec(t.elem, pos + 1, cx)
        if cx.build and t.elem.kind == "opt":
            v = Some(v)
        return v, pos
    if k == "dict":
        vt = t.elem
        n = _check_count(cx, pos, cx.count_cap, 4 + vt.min_size, "count")
        pos += 4
        out = {} if cx.build else None
        prev = None
        for _ in range(n):
            kpos = pos
            key, pos = _dec_str(cx, pos)
            raw = buf[kpos + 4:pos]
            if prev is not None and raw <= prev:
                raise KilnError("TYPE", kpos, "dict_key_order")
            prev = raw
            v, pos = _dec(vt, pos, cx)
            if out is not None:
                out[key] = v
        return out, pos
    if k == "struct":
        out = {} if cx.build else None
        for name, ft in t.fields:
            v, pos = _dec(ft, pos, cx)
            if out is not None:
                out[name] = v
        return out, pos
    if k == "tensors":
        return _directory(cx, pos)
    raise AssertionError(k)


def _check_frame(buf, t: KType) -> int:
    if len(buf) < 16:
        raise KilnError("EOF", 0, "frame_eof")
    if buf[0:4] != FRAME_MAGIC:
        raise KilnError("FRAME", 0, "frame_magic")
    if buf[4] != 0:
        raise KilnError("FRAME", 4, "frame_profile")
    if buf[5] != 0:
        raise KilnError("FRAME", 5, "frame_flags")
    if buf[6] != 0 or buf[7] != 0:
        raise KilnError("FRAME", 6 if buf[6] else 7, "frame_reserved")
    if _U64.unpack_from(buf, 8)[0] != schema_hash(t):
        raise KilnError("SCHEMA", 8, "schema_hash")
    return 16


def _run(t, buf, framed, count_cap, byte_cap, build):
    t = parse_type(t)
    if not 0 <= count_cap <= U32_MAX or not 0 <= byte_cap <= U32_MAX:
        raise ValueError("caps must lie in 0..4294967295")
    buf = bytes(buf)
    cx = _Cx(buf, count_cap, byte_cap, build)
    pos = _check_frame(buf, t) if framed else 0
    value, pos = _dec(t, pos, cx)
    if pos != len(buf):
        raise KilnError("TRAILING", pos, "trailing")
    return value


def decode(t, buf, framed: bool = False, count_cap: int = DEFAULT_CAP,
           byte_cap: int = DEFAULT_CAP):
    """Decode one standalone Frozen value (optionally framed). Raises KilnError."""
    return _run(t, buf, framed, count_cap, byte_cap, True)


def validate(t, buf, framed: bool = False, count_cap: int = DEFAULT_CAP,
             byte_cap: int = DEFAULT_CAP):
    """Run every check without building values. Returns None or the KilnError."""
    try:
        _run(t, buf, framed, count_cap, byte_cap, False)
    except KilnError as e:
        return e
    return None


# --------------------------------------------------------------------------
# tensor directory validation (spec "Check order", steps 1-11; step 12 is
# the standalone TRAILING check done by the caller)


def validate_directory(buf, pos: int = 0, count_cap: int = DEFAULT_CAP,
                       byte_cap: int = DEFAULT_CAP, build: bool = True):
    """Check the directory block starting at pos. Returns (tensors, end):
    tensors is a list of Tensor (None when build is False), end is the
    absolute offset just past the block. The bytes after end are not looked
    at: a standalone caller applies TRAILING itself."""
    cx = _Cx(bytes(buf), count_cap, byte_cap, build)
    return _directory(cx, pos)


def _directory(cx: _Cx, pos: int):
    buf = cx.buf
    avail = cx.end - pos

    # step 1: magic and header length
    if avail < 4:
        raise KilnError("EOF", pos, "dir_magic_eof")
    if buf[pos:pos + 4] != DIR_MAGIC:
        raise KilnError("FRAME", pos, "dir_magic")
    if avail < HEADER_SIZE:
        raise KilnError("EOF", pos, "dir_header_eof")

    (_magic, version, flags, _res, count, name_bytes, payload_bytes,
     directory_bytes) = _HEADER.unpack_from(buf, pos)

    # step 2: version, flags, reserved header bytes
    if version != DIR_VERSION:
        raise KilnError("FRAME", pos + HDR.VERSION, "dir_version")
    if flags & ~(FLAG_NAMES | FLAG_LE):
        raise KilnError("FRAME", pos + HDR.FLAGS, "dir_flag_unknown")
    if not flags & FLAG_LE:
        raise KilnError("FRAME", pos + HDR.FLAGS, "dir_le_clear")
    for off in (6, 7):
        if buf[pos + off]:
            raise KilnError("FRAME", pos + off, "dir_reserved")
    m = _NONZERO.search(buf, pos + HDR.RESERVED1, pos + HEADER_SIZE)
    if m:
        raise KilnError("FRAME", m.start(), "dir_reserved")

    # step 3: caps
    if count > cx.count_cap:
        raise KilnError("LIMIT", pos + HDR.TENSOR_COUNT, "dir_count_cap")
    if name_bytes > cx.byte_cap:
        raise KilnError("LIMIT", pos + HDR.NAME_BYTES, "dir_name_bytes_cap")

    # step 4: directory_bytes
    want = count * DESC_SIZE + name_bytes
    if want > U64_MAX:
        raise KilnError("LIMIT", pos + HDR.TENSOR_COUNT, "dir_size_overflow")
    if directory_bytes != want:
        raise KilnError("TYPE", pos + HDR.DIRECTORY_BYTES, "dir_bytes_mismatch")

    # step 5: descriptors and heap inside the buffer
    if HEADER_SIZE + directory_bytes > avail:
        raise KilnError("EOF", pos + HDR.TENSOR_COUNT, "dir_past_end")

    # step 6: block end
    payload_base = (HEADER_SIZE + directory_bytes + 63) & ~63
    block_len = payload_base + payload_bytes
    if block_len > U64_MAX:
        raise KilnError("LIMIT", pos + HDR.PAYLOAD_BYTES, "payload_end_overflow")
    if block_len > avail:
        raise KilnError("EOF", pos + HDR.PAYLOAD_BYTES, "block_past_end")

    # step 7: padding after the heap
    heap_start = pos + HEADER_SIZE + count * DESC_SIZE
    heap_end = heap_start + name_bytes
    base = pos + payload_base
    m = _NONZERO.search(buf, heap_end, base)
    if m:
        raise KilnError("TYPE", m.start(), "pad_nonzero")

    descs = [_DESCR.unpack_from(buf, pos + HEADER_SIZE + i * DESC_SIZE)
             for i in range(count)]

    def at(i, field):
        return pos + HEADER_SIZE + i * DESC_SIZE + field

    # step 8a: descriptor reserved bytes (every descriptor, before name rules)
    for i, d in enumerate(descs):
        if d[_RES0]:
            raise KilnError("FRAME", at(i, DESC.RESERVED0), "desc_reserved")
        if d[_RES1] != bytes(16):
            m = _NONZERO.search(buf, at(i, DESC.RESERVED1), at(i, DESC_SIZE))
            raise KilnError("FRAME", m.start(), "desc_reserved")

    # step 8b: names and layout names
    named = bool(flags & FLAG_NAMES)
    if named and count == 0:
        raise KilnError("TYPE", pos + HDR.FLAGS, "name_flag_empty")
    names_total = sum(d[_NLEN] for d in descs)    # raw sum of name_len fields
    name_cursor = 0
    layout_cursor = names_total
    seen_names = set()
    names: list = [None] * count
    layouts: list = [None] * count
    for i, d in enumerate(descs):
        name_off, name_len, layout_off, layout_len = d[_NOFF], d[_NLEN], d[_LOFF], d[_LLEN]
        if not named:
            if name_len != 0:
                raise KilnError("TYPE", at(i, DESC.NAME_LEN), "name_without_flag")
            if name_off != NONE16:
                raise KilnError("TYPE", at(i, DESC.NAME_OFF), "name_off_unnamed")
        else:
            if name_len == 0:
                raise KilnError("TYPE", at(i, DESC.NAME_LEN), "name_missing")
            if name_off != name_cursor:
                raise KilnError("TYPE", at(i, DESC.NAME_OFF), "name_placement")
            if name_off + name_len > name_bytes:
                raise KilnError("TYPE", at(i, DESC.NAME_LEN), "name_past_heap")
            raw = buf[heap_start + name_off:heap_start + name_off + name_len]
            try:
                names[i] = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise KilnError("UTF8", heap_start + name_off + e.start, "name_utf8") from None
            if raw in seen_names:
                raise KilnError("TYPE", at(i, DESC.NAME_OFF), "name_duplicate")
            seen_names.add(raw)
            name_cursor += name_len
        if layout_len == 0:
            if layout_off != NONE16:
                raise KilnError("TYPE", at(i, DESC.LAYOUT_OFF), "layout_off_absent")
        else:
            if layout_off != layout_cursor:
                raise KilnError("TYPE", at(i, DESC.LAYOUT_OFF), "layout_placement")
            if layout_off + layout_len > name_bytes:
                raise KilnError("TYPE", at(i, DESC.LAYOUT_LEN), "layout_past_heap")
            raw = buf[heap_start + layout_off:heap_start + layout_off + layout_len]
            try:
                layouts[i] = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise KilnError("UTF8", heap_start + layout_off + e.start, "layout_utf8") from None
            layout_cursor += layout_len
    if layout_cursor != name_bytes:
        raise KilnError("TYPE", pos + HDR.NAME_BYTES, "heap_length")

    # step 9: ranges, dtype, rank, shape, lengths, overlaps
    counts = [0] * count
    taken: list = []          # nonzero ranges seen so far
    for i, d in enumerate(descs):
        dtype, rank, block_size = d[_DTYPE], d[_RANK], d[_BLOCK]
        off, length = d[_OFF], d[_LEN]
        end = off + length
        if end > U64_MAX:
            raise KilnError("LIMIT", at(i, DESC.BYTE_OFFSET), "range_overflow")
        if end > payload_bytes:
            raise KilnError("TYPE", at(i, DESC.BYTE_LENGTH), "range_past_payload")
        opaque = OPAQUE_MIN <= dtype <= OPAQUE_MAX
        if dtype == 0:
            raise KilnError("TYPE", at(i, DESC.DTYPE), "dtype_zero")
        if dtype not in DTYPES and not opaque:
            rule = "dtype_reserved" if dtype < OPAQUE_MIN else "dtype_range"
            raise KilnError("TYPE", at(i, DESC.DTYPE), rule)
        if rank > 8:
            raise KilnError("TYPE", at(i, DESC.RANK), "rank")
        shape = d[_SHAPE:_SHAPE + 8]
        for s in range(rank, 8):
            if shape[s]:
                raise KilnError("TYPE", at(i, DESC.SHAPE + 8 * s), "shape_tail")
        n = 1
        for s in range(rank):
            n *= shape[s]
        if n > U64_MAX:
            raise KilnError("LIMIT", at(i, DESC.SHAPE), "shape_overflow")
        counts[i] = n
        if opaque:
            if d[_LLEN] == 0:
                raise KilnError("TYPE", at(i, DESC.LAYOUT_LEN), "opaque_no_layout")
            if block_size == 0:
                raise KilnError("TYPE", at(i, DESC.BLOCK_SIZE), "opaque_block_size")
            if length % block_size:
                raise KilnError("TYPE", at(i, DESC.BYTE_LENGTH), "opaque_block_multiple")
        else:
            if d[_LLEN] != 0:
                raise KilnError("TYPE", at(i, DESC.LAYOUT_LEN), "layout_non_opaque")
            if block_size != 0:
                raise KilnError("TYPE", at(i, DESC.BLOCK_SIZE), "block_size_non_opaque")
            width = DTYPES[dtype][1]
            if width == 0:
                expect = (n + 1) // 2
            else:
                expect = n * width
                if expect > U64_MAX:
                    raise KilnError("LIMIT", at(i, DESC.SHAPE), "byte_size_overflow")
            if length != expect:
                raise KilnError("TYPE", at(i, DESC.BYTE_LENGTH), "length_mismatch")
        if length:
            for (o2, e2) in taken:
                if off < e2 and o2 < end:
                    raise KilnError("TYPE", at(i, DESC.BYTE_OFFSET), "overlap")
            taken.append((off, end))

    # step 10: canonical placement and zero gaps
    running = 0
    for i, d in enumerate(descs):
        off, length = d[_OFF], d[_LEN]
        expect = (running + 63) & ~63
        if off != expect:
            raise KilnError("TYPE", at(i, DESC.BYTE_OFFSET), "offset_not_canonical")
        m = _NONZERO.search(buf, base + running, base + off)
        if m:
            raise KilnError("TYPE", m.start(), "gap_nonzero")
        running = off + length
    if payload_bytes != running:
        raise KilnError("TYPE", pos + HDR.PAYLOAD_BYTES, "payload_bytes_not_canonical")

    # step 11: element bytes and quantization
    for i, d in enumerate(descs):
        dtype, rank = d[_DTYPE], d[_RANK]
        off, length = d[_OFF], d[_LEN]
        start = base + off
        if dtype == DTYPE_BOOL:
            m = _NOT_BOOL.search(buf, start, start + length)
            if m:
                raise KilnError("TYPE", m.start(), "bool_byte")
        elif dtype in PACKED and counts[i] % 2 == 1:
            if buf[start + length - 1] & 0xF0:
                raise KilnError("TYPE", start + length - 1, "high_nibble")
        scheme, axis, group = d[_SCHEME], d[_AXIS], d[_GROUP]
        scale, outer = d[_SCALE], d[_OUTER]
        if scheme > 2:
            raise KilnError("TYPE", at(i, DESC.QUANT_SCHEME), "quant_scheme")
        if scheme == 0:
            if axis != NONE16:
                raise KilnError("TYPE", at(i, DESC.QUANT_AXIS), "quant_none_axis")
            if group != 0:
                raise KilnError("TYPE", at(i, DESC.GROUP_SIZE), "quant_none_group")
            if scale != NONE32:
                raise KilnError("TYPE", at(i, DESC.SCALE_INDEX), "quant_none_scale")
            if outer != NONE32:
                raise KilnError("TYPE", at(i, DESC.OUTER_INDEX), "quant_none_outer")
            continue
        if rank == 0:
            raise KilnError("TYPE", at(i, DESC.RANK), "quant_rank")
        if axis >= rank:
            raise KilnError("TYPE", at(i, DESC.QUANT_AXIS), "quant_axis")
        if group == 0:
            raise KilnError("TYPE", at(i, DESC.GROUP_SIZE), "quant_group")
        if scale >= count or scale == i:
            raise KilnError("TYPE", at(i, DESC.SCALE_INDEX), "quant_scale_index")
        if descs[scale][_SCHEME] != 0:
            raise KilnError("TYPE", at(i, DESC.SCALE_INDEX), "quant_scale_chain")
        shape = d[_SHAPE:_SHAPE + rank]
        need = -(-shape[axis] // group)
        for s in range(rank):
            if s != axis:
                need *= shape[s]
        if counts[scale] != need:
            raise KilnError("TYPE", at(i, DESC.SCALE_INDEX), "quant_scale_count")
        if scheme == 1:
            if outer != NONE32:
                raise KilnError("TYPE", at(i, DESC.OUTER_INDEX), "quant_outer_index")
            continue
        if outer >= count or outer == i or outer == scale:
            raise KilnError("TYPE", at(i, DESC.OUTER_INDEX), "quant_outer_index")
        od = descs[outer]
        if od[_SCHEME] != 0:
            raise KilnError("TYPE", at(i, DESC.OUTER_INDEX), "quant_outer_chain")
        if od[_DTYPE] != DTYPE_F32:
            raise KilnError("TYPE", at(i, DESC.OUTER_INDEX), "quant_outer_dtype")
        if counts[outer] != 1:
            raise KilnError("TYPE", at(i, DESC.OUTER_INDEX), "quant_outer_count")

    end = pos + block_len
    if not cx.build:
        return None, end
    out = []
    for i, d in enumerate(descs):
        off, length = d[_OFF], d[_LEN]
        out.append(Tensor(
            dtype=d[_DTYPE], shape=tuple(d[_SHAPE:_SHAPE + d[_RANK]]),
            payload=bytes(buf[base + off:base + off + length]),
            name=names[i], layout=layouts[i], block_size=d[_BLOCK],
            quant_scheme=d[_SCHEME],
            quant_axis=None if d[_AXIS] == NONE16 else d[_AXIS],
            group_size=d[_GROUP],
            scale_index=None if d[_SCALE] == NONE32 else d[_SCALE],
            outer_index=None if d[_OUTER] == NONE32 else d[_OUTER],
            byte_offset=off, byte_length=length))
    return out, end


# --------------------------------------------------------------------------
# encoding


def _as_bytes_name(x, what):
    if x is None:
        return None
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise ValueError(f"{what} must be str, bytes or None, not {type(x).__name__}")


def _as_tensor(x) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, dict):
        allowed = {f.name for f in dataclasses.fields(Tensor)}
        bad = set(x) - allowed
        if bad:
            raise ValueError(f"unknown tensor keys {sorted(bad)}")
        return Tensor(**x)
    raise ValueError(f"a tensor must be a Tensor or a dict, not {type(x).__name__}")


def encode_directory(tensors, validate: bool = True) -> bytes:
    """Canonical version-2 block for the tensors in the order given.

    With validate=True the result is run through the 12-step check and a
    ValueError is raised when the tensors do not form a legal directory.
    validate=False writes the same layout anyway (for building test cases).
    """
    specs = [_as_tensor(t) for t in tensors]
    names = [_as_bytes_name(t.name, "name") for t in specs]
    layouts = [_as_bytes_name(t.layout, "layout") for t in specs]
    any_named = any(nm is not None for nm in names)
    heap = bytearray()
    name_pos = []
    for nm in names:
        name_pos.append(len(heap) if nm is not None else None)
        if nm is not None:
            heap += nm
    layout_pos = []
    for lo in layouts:
        layout_pos.append(len(heap) if lo else None)
        if lo:
            heap += lo

    count = len(specs)
    directory_bytes = count * DESC_SIZE + len(heap)
    payload_base = (HEADER_SIZE + directory_bytes + 63) & ~63

    payload = bytearray()
    descs = bytearray()
    for i, t in enumerate(specs):
        data = bytes(t.payload)
        off = (len(payload) + 63) & ~63
        payload += bytes(off - len(payload))
        payload += data
        dtype = t.dtype
        shape = tuple(t.shape)
        if len(shape) > 8:
            raise ValueError("rank above 8")
        nm, lo = names[i], layouts[i]
        fields = (
            dtype, len(shape), 0,
            name_pos[i] if nm is not None else NONE16,
            len(nm) if nm is not None else 0,
            layout_pos[i] if lo else NONE16,
            len(lo) if lo else 0,
            t.block_size, t.quant_scheme,
            NONE16 if t.quant_axis is None else t.quant_axis,
            t.group_size,
            NONE32 if t.scale_index is None else t.scale_index,
            NONE32 if t.outer_index is None else t.outer_index,
            off, len(data),
        ) + shape + (0,) * (8 - len(shape)) + (bytes(16),)
        try:
            descs += _DESCR.pack(*fields)
        except struct.error as e:
            raise ValueError(f"tensor {i}: field out of range ({e})") from None

    flags = FLAG_LE | (FLAG_NAMES if any_named else 0)
    header = _HEADER.pack(DIR_MAGIC, DIR_VERSION, flags, 0, count, len(heap),
                          len(payload), directory_bytes) + bytes(32)
    block = bytearray(header)
    block += descs
    block += heap
    block += bytes(payload_base - len(block))
    block += payload
    block = bytes(block)
    if validate:
        try:
            _directory(_Cx(block, U32_MAX, U32_MAX, False), 0)
        except KilnError as e:
            raise ValueError(f"not a legal tensor directory: {e}") from None
    return block


def _enc(t: KType, v, out: bytearray):
    k = t.kind
    if k == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{t.name} needs an int, got {v!r}")
        lo, hi = _INT_RANGES[t.name]
        if not lo <= v <= hi:
            raise ValueError(f"{v} out of range for {t.name}")
        out += t.packer.pack(v)
    elif k in ("f32", "f64"):
        cls = F32 if k == "f32" else F64
        if isinstance(v, cls):
            bits = v.bits
        elif isinstance(v, (F32, F64)):
            raise ValueError(f"{k} value given as {type(v).__name__}")
        elif isinstance(v, (float, int)) and not isinstance(v, bool):
            try:
                bits = cls.from_float(v).bits
            except OverflowError:
                raise ValueError(f"{v!r} does not fit {k}") from None
        else:
            raise ValueError(f"{k} needs a float, got {v!r}")
        out += t.packer.pack(bits)
    elif k == "bool":
        if v not in (True, False) or not isinstance(v, (bool, int)):
            raise ValueError(f"bool needs True/False, got {v!r}")
        out.append(1 if v else 0)
    elif k == "str":
        if not isinstance(v, str):
            raise ValueError(f"str needs a str, got {v!r}")
        raw = v.encode("utf-8")
        if len(raw) > U32_MAX:
            raise ValueError("string longer than the wire maximum")
        out += _U32.pack(len(raw))
        out += raw
    elif k == "bytes":
        raw = bytes(v)
        if len(raw) > U32_MAX:
            raise ValueError("byte run longer than the wire maximum")
        out += _U32.pack(len(raw))
        out += raw
    elif k == "list":
        v = list(v)
        if len(v) > U32_MAX:
            raise ValueError("list longer than the wire maximum")
        out += _U32.pack(len(v))
        for x in v:
            _enc(t.elem, x, out)
    elif k == "opt":
        if v is None:
            out.append(0)
        else:
            if isinstance(v, Some):
                v = v.value
            out.append(1)
            _enc(t.elem, v, out)
    elif k == "dict":
        if not isinstance(v, dict):
            raise ValueError(f"dict needs a dict, got {type(v).__name__}")
        items = []
        for key, val in v.items():
            if not isinstance(key, str):
                raise ValueError(f"dict keys must be str, got {key!r}")
            items.append((key.encode("utf-8"), val))
        items.sort(key=lambda kv: kv[0])
        out += _U32.pack(len(items))
        for raw, val in items:
            out += _U32.pack(len(raw))
            out += raw
            _enc(t.elem, val, out)
    elif k == "struct":
        if isinstance(v, dict):
            names = [n for n, _ in t.fields]
            extra = set(v) - set(names)
            missing = [n for n in names if n not in v]
            if extra or missing:
                raise ValueError(f"struct fields: missing {missing}, unknown {sorted(extra)}")
            for name, ft in t.fields:
                _enc(ft, v[name], out)
        elif isinstance(v, (list, tuple)) and len(v) == len(t.fields):
            for (_n, ft), x in zip(t.fields, v):
                _enc(ft, x, out)
        else:
            raise ValueError(f"struct needs a dict or a tuple of {len(t.fields)}")
    elif k == "tensors":
        if isinstance(v, (bytes, bytearray)):
            raise ValueError("tensors takes a list of Tensor, not raw bytes")
        out += encode_directory(v)
    else:
        raise AssertionError(k)


def encode(t, value) -> bytes:
    """Canonical Frozen encoding of value as type t (text or KType)."""
    out = bytearray()
    _enc(parse_type(t), value, out)
    return bytes(out)


def encode_frame(t, value) -> bytes:
    t = parse_type(t)
    return FRAME_MAGIC + bytes(4) + _U64.pack(schema_hash(t)) + encode(t, value)


# --------------------------------------------------------------------------
# self test


def selftest() -> int:
    checks = 0

    def check(cond, what):
        nonlocal checks
        checks += 1
        if not cond:
            raise AssertionError(what)

    def rejects(t, buf, code, framed=False, **caps):
        e = validate(t, buf, framed=framed, **caps)
        check(e is not None and e.code == code,
              f"{t} {bytes(buf).hex()}: expected {code}, got {e}")

    st = "struct{id:i64,batch:tensors,}"
    check(schema_hash(st) == 0xe58aadc7552f0d82, "schema hash of the spec struct")
    check(parse_type(st).tokens() == ["struct{", "id", ":", "i64", ",", "batch",
                                      ":", "tensors", ",", "}"], "tokens")
    for text in ("bool", "list<u8>", "list<list<u8>>", "opt<opt<str>>",
                 "dict<str,list<f64>>", "struct{}", "struct{a:struct{},b:opt<int>,}"):
        check(parse_type(text).text() == text, f"text round trip {text}")
    deep = "list<" * 64 + "u8" + ">" * 64
    check(parse_type(deep).depth == 64, "depth 64 parses")
    try:
        parse_type("opt<" + deep + ">")
        check(False, "depth 65 must be LIMIT")
    except KilnError as e:
        check(e.code == "LIMIT", "depth 65 is LIMIT")
    for bad in ("struct{a:i8}", "struct{a:i8,", "list<u8", "dict<i8,u8>", "u128",
                "struct{ a:i8,}", "opt<>", "struct{1a:i8,}"):
        try:
            parse_type(bad)
            check(False, f"{bad} must not parse")
        except TypeTextError:
            checks += 1

    empty = encode_directory([])
    check(empty.hex() == EMPTY_DIRECTORY_HEX, "empty directory bytes")
    check(decode("tensors", empty) == [], "empty directory decodes")
    f32 = encode_directory([Tensor("f32", (2,), bytes.fromhex("0000803f000000c0"))])
    check(len(f32) == 200 and f32[-8:].hex() == "0000803f000000c0", "f32 block")
    t, = decode("tensors", f32)
    check(t.dtype == 2 and t.shape == (2,) and t.byte_offset == 0, "f32 decode")
    pair = encode_directory([Tensor("f8e4m3", (1,), b"\x38"), Tensor("f8e5m2", (1,), b"\x3c")])
    d = decode("tensors", pair)
    check(d[1].byte_offset == 64 and pair[-65:] == b"\x38" + bytes(63) + b"\x3c", "f8 pair")
    zl = decode("tensors", encode_directory([Tensor("u8", (5,), b"12345"), Tensor("u8", (0,), b"")]))
    check(zl[1].byte_offset == 64, "zero-length tensor sits at 64")

    samples = [
        ("bool", True), ("i8", -128), ("i16", -2), ("i32", 7), ("i64", -(1 << 63)),
        ("u8", 255), ("u16", 65535), ("u32", U32_MAX), ("u64", U64_MAX),
        ("int", -5), ("uint", 5), ("f32", F32(0x80000000)), ("f64", F64(0x7FF8000000000001)),
        ("str", "h\u00e9llo"), ("list<u8>", b"\x00\xff"), ("list<i32>", [1, -1]),
        ("list<str>", ["a", ""]), ("opt<i8>", None), ("opt<i8>", 3),
        ("opt<opt<i8>>", Some(None)), ("dict<str,u8>", {"b": 1, "a": 2, "\u00e9": 3}),
        ("struct{}", {}), ("struct{id:i64,batch:tensors,}", {"id": 7, "batch": []}),
        ("list<struct{a:bool,b:f32,}>", [{"a": False, "b": F32(0x3f800000)}]),
    ]
    for text, v in samples:
        b = encode(text, v)
        back = decode(text, b)
        check(back == v or (isinstance(v, Some) and back == v), f"round trip {text} {v!r}: {back!r}")
        check(encode(text, back) == b, f"re-encode {text}")
        check(decode(text, encode_frame(text, v), framed=True) == back, f"frame {text}")

    rejects("bool", b"\x02", "TYPE")
    rejects("opt<u8>", b"\x02", "TYPE")
    rejects("str", b"\x02\x00\x00\x00\xff\xfe", "UTF8")
    rejects("dict<str,u8>", bytes.fromhex("02000000" "0100000062" "01" "0100000061" "00"), "TYPE")
    rejects("list<f32>", bytes.fromhex("020000000000803f"), "EOF")
    rejects("list<struct{a:i32,b:str,}>", bytes.fromhex("00000001"), "EOF")
    rejects("list<u8>", bytes.fromhex("05000000"), "LIMIT", byte_cap=4)
    rejects("u8", b"\x00\x00", "TRAILING")
    rejects("u8", encode_frame("i8", 1), "SCHEMA", framed=True)
    rejects("tensors", empty[:63], "EOF")
    rejects("tensors", b"KLNX" + empty[4:], "FRAME")
    return checks


# --------------------------------------------------------------------------
# command line


def _cmd_validate(args) -> int:
    try:
        t = parse_type(args.type)
    except KilnError as e:
        print(f"kiln_ref: type text rejected: {e.code} {e.offset} {e.rule}", file=sys.stderr)
        return 2
    except TypeTextError as e:
        print(f"kiln_ref: bad type text: {e}", file=sys.stderr)
        return 2
    for cap in (args.count_cap, args.byte_cap):
        if not 0 <= cap <= U32_MAX:
            print("kiln_ref: caps must lie in 0..4294967295", file=sys.stderr)
            return 2
    out = []
    write = sys.stdout.write
    for line in sys.stdin:
        line = line.strip()
        try:
            buf = bytes.fromhex(line)
        except ValueError:
            out.append("error bad_hex\n")
            continue
        cx = _Cx(buf, args.count_cap, args.byte_cap, False)
        try:
            pos = _check_frame(buf, t) if args.framed else 0
            _v, pos = _dec(t, pos, cx)
            if pos != len(buf):
                raise KilnError("TRAILING", pos, "trailing")
            out.append("accept\n")
        except KilnError as e:
            out.append(f"reject {e.code} {e.offset} {e.rule}\n")
        if len(out) >= 256:
            write("".join(out))
            out.clear()
    write("".join(out))
    sys.stdout.flush()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="kiln_ref.py", description="Kiln v2 reference codec")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="validate hex buffers read from stdin, one per line")
    v.add_argument("--type", required=True, help="canonical type text, e.g. tensors")
    v.add_argument("--framed", action="store_true", help="inputs carry the 16-byte frame")
    v.add_argument("--count-cap", type=int, default=DEFAULT_CAP)
    v.add_argument("--byte-cap", type=int, default=DEFAULT_CAP)
    sub.add_parser("selftest", help="run built-in assertions")
    args = ap.parse_args(argv)
    if args.cmd == "validate":
        return _cmd_validate(args)
    n = selftest()
    print(f"kiln_ref selftest: {n} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
