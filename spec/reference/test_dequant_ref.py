"""Unit tests of dequant_ref (spec/kiln-v2.md section 11.1) and of spec/dequant-cases.json."""

from __future__ import annotations

import math
import random
import struct
import sys
import unittest
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dequant_ref as R  # noqa: E402
import gen_dequant_cases as G  # noqa: E402
import kiln_ref as K  # noqa: E402


def host_f32_bits(x: float) -> int:
    """The host's double -> float conversion (one correct rounding on IEEE hosts)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


class RoundF32(unittest.TestCase):
    def test_agrees_with_the_hosts_one_rounding_of_a_double(self):
        rng = random.Random(11)
        samples = [1.0, -0.0, 0.1, 1 + 2 ** -24, 1 + 3 * 2 ** -24, 2 ** -149, 2 ** -150, 3 * 2 ** -151,
                   2 ** -126 * (1 - 2 ** -25), 3.4028234663852886e38]
        samples += [rng.uniform(-1e6, 1e6) for _ in range(2000)]
        samples += [math.ldexp(rng.random(), rng.randint(-160, 127)) for _ in range(2000)]
        for x in samples:
            v = R.Val.num(Fraction(x)) if x != 0 or math.copysign(1, x) > 0 else R.Val("num", True)
            self.assertEqual(R.round_f32(v), host_f32_bits(x), repr(x))

    def test_overflow_is_infinity_and_ties_go_to_even(self):
        self.assertEqual(R.round_f32(R.Val.num(Fraction(2) ** 128)), 0x7F800000)
        self.assertEqual(R.round_f32(R.Val.num(-(Fraction(2) - Fraction(2) ** -24) * Fraction(2) ** 127)), 0xFF800000)
        self.assertEqual(R.round_f32(R.Val.num((1 << 24) + 1)), 0x4B800000)
        self.assertEqual(R.round_f32(R.Val.num((1 << 24) + 3)), 0x4B800002)
        # 2^60 + 2^36 + 1 rounds up when rounded once (through a double it would tie and go down).
        self.assertEqual(R.round_f32(R.Val.num((1 << 60) + (1 << 36) + 1)), 0x5D800001)


class Elements(unittest.TestCase):
    def test_e8m0_is_two_to_the_byte_minus_127(self):
        for b in range(255):
            self.assertEqual(R.element(19, bytes([b]), 0).mag, Fraction(2) ** (b - 127))
        self.assertEqual(R.element(19, b"\xff", 0).kind, "nan")

    def test_e2m1_i4_and_f8e4m3(self):
        want = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
        for n in range(16):
            v = R.element(18, bytes([n]), 0)
            self.assertEqual((v.neg, v.mag), (bool(n & 8), Fraction(want[n & 7])))
            self.assertEqual(R.element(16, bytes([n << 4]), 1).mag * (-1 if n >= 8 else 1), n - 16 if n >= 8 else n)
        self.assertEqual(R.element(5, b"\x7f", 0).kind, "nan")
        self.assertEqual(R.element(5, b"\x7e", 0).mag, 448)

    def test_opaque_is_refused(self):
        with self.assertRaises(R.Refused):
            R.element(4096, b"\x00", 0)


class ScaleIndex(unittest.TestCase):
    def test_the_closed_formula_equals_the_multi_index_rule(self):
        for shape in [(7,), (3, 5), (5, 3), (2, 3, 4), (4, 1, 3), (1, 1, 5)]:
            for axis in range(len(shape)):
                for g in (1, 2, 3, 4, 8):
                    inner = 1
                    for d in shape[axis + 1:]:
                        inner *= d
                    groups = -(-shape[axis] // g)
                    count = 1
                    for d in shape:
                        count *= d
                    for i in range(count):
                        closed = ((i // (inner * shape[axis])) * groups + ((i // inner) % shape[axis]) // g) * inner \
                            + i % inner
                        self.assertEqual(R.scale_index(shape, axis, g, i), closed, (shape, axis, g, i))


class Cases(unittest.TestCase):
    def test_the_file_is_current(self):
        self.assertEqual(G.render(G.build_cases()), G.DEFAULT_OUT.read_text(encoding="utf-8"))

    def test_scheme_2_rounds_twice(self):
        x, s, o = 0x3F9132D9, 0x3FEC78B5, 0x3FE1C35E
        once = R.round_f32(R.f32_value(x) * R.f32_value(s) * R.f32_value(o))
        twice = R.round_f32(R.f32_value(R.round_f32(R.f32_value(x) * R.f32_value(s))) * R.f32_value(o))
        self.assertNotEqual(once, twice)
        tensors, _ = K.validate_directory(bytes.fromhex(next(
            c["hex"] for c in G.build_cases() if c["name"] == "scheme2-two-roundings")))
        self.assertEqual(R.dequantize(tensors, 0), [twice, twice])


if __name__ == "__main__":
    unittest.main()
