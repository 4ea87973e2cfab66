#!/usr/bin/env python3
"""Reference dequantization: spec/kiln-v2.md section 11.1, written from that text alone.

Every value is exact (fractions.Fraction with a sign, or an infinity or NaN)
until the spec says to round, and each rounding is the one binary32
round-to-nearest-ties-to-even step the spec names. No host float conversion
is used for a value that needs rounding, so this does not share a rounding
mistake with an implementation under test.

    import kiln_ref, dequant_ref
    tensors, _ = kiln_ref.validate_directory(buf)
    bits = dequant_ref.dequantize(tensors, 0)   # list of f32 bit patterns (int)

An opaque data or scale tensor raises Refused.
"""

from __future__ import annotations

import struct
from fractions import Fraction

OPAQUE_MIN = 4096

# code -> name, as in spec section 10.
NAMES = {
    1: "f64", 2: "f32", 3: "f16", 4: "bf16", 5: "f8e4m3", 6: "f8e5m2", 7: "bool", 8: "i8",
    9: "u8", 10: "i16", 11: "u16", 12: "i32", 13: "u32", 14: "i64", 15: "u64", 16: "i4",
    17: "u4", 18: "e2m1", 19: "e8m0",
}
WIDTH = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i16": 2, "u16": 2, "i32": 4, "u32": 4,
         "i64": 8, "u64": 8}
INT_FORMATS = {"bool": "<B", "i8": "<b", "u8": "<B", "i16": "<h", "u16": "<H", "i32": "<i",
               "u32": "<I", "i64": "<q", "u64": "<Q"}
E2M1 = [Fraction(0), Fraction(1, 2), Fraction(1), Fraction(3, 2), Fraction(2), Fraction(3),
        Fraction(4), Fraction(6)]

QUIET_NAN = 0x7FC00000


class Refused(Exception):
    """The helper refuses the tensor (an opaque data or scale dtype)."""


class Val:
    """An exact value: NaN, a signed infinity, or a signed rational (the sign kept for zero)."""

    __slots__ = ("kind", "neg", "mag")

    def __init__(self, kind: str, neg: bool = False, mag: Fraction = Fraction(0)):
        self.kind, self.neg, self.mag = kind, neg, mag

    @classmethod
    def num(cls, x) -> "Val":
        x = Fraction(x)
        return cls("num", x < 0, abs(x))

    def __mul__(self, other: "Val") -> "Val":
        neg = self.neg != other.neg
        if self.kind == "nan" or other.kind == "nan":
            return NAN
        if self.kind == "inf" or other.kind == "inf":
            zero = (self.kind == "num" and self.mag == 0) or (other.kind == "num" and other.mag == 0)
            return NAN if zero else Val("inf", neg)
        return Val("num", neg, self.mag * other.mag)


NAN = Val("nan")


def _binary(bits: int, exp_bits: int, man_bits: int, ieee_specials: bool) -> Val:
    """An IEEE-style binary float's exact value (sign, biased exponent, mantissa)."""
    neg = bool(bits >> (exp_bits + man_bits))
    e = (bits >> man_bits) & ((1 << exp_bits) - 1)
    m = bits & ((1 << man_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    if ieee_specials and e == (1 << exp_bits) - 1:
        return Val("inf", neg) if m == 0 else NAN
    if e == 0:
        mag = Fraction(m, 1 << man_bits) * Fraction(2) ** (1 - bias)
    else:
        mag = (1 + Fraction(m, 1 << man_bits)) * Fraction(2) ** (e - bias)
    return Val("num", neg, mag)


def element(code: int, payload: bytes, i: int) -> Val:
    """Element i's exact value (before any rounding) by the spec's element table."""
    if code >= OPAQUE_MIN:
        raise Refused(f"dtype code {code} is opaque")
    name = NAMES[code]
    if name in ("i4", "u4", "e2m1"):
        byte = payload[i // 2]
        nib = byte & 0x0F if i % 2 == 0 else byte >> 4
        if name == "u4":
            return Val.num(nib)
        if name == "i4":
            return Val.num(nib - 16 if nib >= 8 else nib)
        return Val("num", bool(nib & 8), E2M1[nib & 7])
    if name in INT_FORMATS:
        w = struct.calcsize(INT_FORMATS[name])
        return Val.num(struct.unpack_from(INT_FORMATS[name], payload, i * w)[0])
    if name == "e8m0":
        b = payload[i]
        return NAN if b == 0xFF else Val.num(Fraction(2) ** (b - 127))
    if name == "f8e4m3":
        b = payload[i]
        if b & 0x7F == 0x7F:
            return NAN
        return _binary(b, 4, 3, ieee_specials=False)
    if name == "f8e5m2":
        return _binary(payload[i], 5, 2, ieee_specials=True)
    w = WIDTH[name]
    bits = int.from_bytes(payload[i * w:(i + 1) * w], "little")
    return {"f16": lambda: _binary(bits, 5, 10, True), "bf16": lambda: _binary(bits, 8, 7, True),
            "f32": lambda: _binary(bits, 8, 23, True), "f64": lambda: _binary(bits, 11, 52, True)}[name]()


def round_f32(v: Val) -> int:
    """The binary32 bits nearest v, ties to even (NaN: the quiet NaN; overflow: infinity)."""
    sign = 0x80000000 if v.neg else 0
    if v.kind == "nan":
        return QUIET_NAN
    if v.kind == "inf":
        return sign | 0x7F800000
    mag = v.mag
    if mag == 0:
        return sign
    # e with 2^e <= mag < 2^(e+1)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    e = max(e, -126)
    quantum = Fraction(2) ** (e - 23)
    q, r = divmod(mag, quantum)
    n = int(q)
    if r * 2 > quantum or (r * 2 == quantum and n % 2 == 1):
        n += 1
    if n == 1 << 24:
        n, e = 1 << 23, e + 1
    if e > 127:
        return sign | 0x7F800000
    if n < 1 << 23:  # subnormal (e is -126)
        return sign | n
    return sign | ((e + 127) << 23) | (n - (1 << 23))


def f32_value(bits: int) -> Val:
    return _binary(bits, 8, 23, True)


def element_f32(code: int, payload: bytes, i: int) -> int:
    """x(i): element i as f32 bits (exact, or rounded once as the table says)."""
    return round_f32(element(code, payload, i))


def scale_index(shape, axis: int, group: int, i: int) -> int:
    """The spec's row-major rule: i's multi-index, the axis digit divided by the group."""
    idx = []
    rest = i
    for d in reversed(shape):
        idx.append(rest % d)
        rest //= d
    idx.reverse()
    scale_shape = list(shape)
    scale_shape[axis] = -(-shape[axis] // group)
    idx[axis] //= group
    flat = 0
    for k, d in enumerate(scale_shape):
        flat = flat * d + idx[k]
    return flat


def dequantize(tensors, index: int) -> list[int]:
    """Tensor `index` of a decoded directory as f32 bit patterns, per section 11.1."""
    t = tensors[index]
    if t.dtype >= OPAQUE_MIN:
        raise Refused(f"dtype code {t.dtype} is opaque")
    count = 1
    for d in t.shape:
        count *= d
    if t.quant_scheme == 0:
        return [element_f32(t.dtype, t.payload, i) for i in range(count)]
    s = tensors[t.scale_index]
    if s.dtype >= OPAQUE_MIN:
        raise Refused(f"the scale's dtype code {s.dtype} is opaque")
    outer = f32_value(int.from_bytes(tensors[t.outer_index].payload[:4], "little")) \
        if t.quant_scheme == 2 else None
    out = []
    for i in range(count):
        x = f32_value(element_f32(t.dtype, t.payload, i))
        sc = f32_value(element_f32(s.dtype, s.payload, scale_index(t.shape, t.quant_axis, t.group_size, i)))
        y = round_f32(x * sc)
        if outer is not None:
            y = round_f32(f32_value(y) * outer)
        out.append(y)
    return out


def is_nan(bits: int) -> bool:
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0
