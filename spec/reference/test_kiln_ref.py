"""Tests for the Kiln v2 reference codec, the golden-case generator and the
check-order matrix generator.

    python3 -m unittest discover -s spec/reference
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_check_order as CO  # noqa: E402
import gen_v2_cases as G  # noqa: E402
import kiln_ref as K  # noqa: E402
from kiln_ref import DESC, HDR, F32, F64, KilnError, Some, Tensor  # noqa: E402

CAP = K.DEFAULT_CAP
F32_2 = bytes.fromhex("0000803f000000c0")


def err(t, buf, framed=False, **caps):
    return K.validate(t, buf, framed=framed, **caps)


def put(block, off, fmt, value):
    b = bytearray(block)
    struct.pack_into("<" + fmt, b, off, value)
    return bytes(b)


def dput(block, i, field, fmt, value):
    return put(block, 64 + 128 * i + field, fmt, value)


def setb(block, off, value):
    b = bytearray(block)
    b[off] = value
    return bytes(b)


def D(tensors, validate=True):
    return K.encode_directory(tensors, validate=validate)


def f32v(n=2, name=None, payload=None):
    return Tensor("f32", (n,), payload if payload is not None else bytes(4 * n), name=name)


class Base(unittest.TestCase):
    def assertReject(self, t, buf, code, rule=None, offset=None, framed=False, **caps):
        e = err(t, buf, framed=framed, **caps)
        self.assertIsNotNone(e, f"{t}: {bytes(buf).hex()} accepted, expected {code}")
        self.assertEqual(e.code, code, f"{t}: got {e}")
        if rule is not None:
            self.assertEqual(e.rule, rule, f"{t}: got {e}")
        if offset is not None:
            self.assertEqual(e.offset, offset, f"{t}: got {e}")
        return e

    def assertAccept(self, t, buf, framed=False, **caps):
        e = err(t, buf, framed=framed, **caps)
        self.assertIsNone(e, f"{t}: {bytes(buf).hex()[:200]} rejected: {e}")

    def dir_reject(self, block, code, rule, offset=None, **caps):
        return self.assertReject("tensors", block, code, rule, offset, **caps)


# ---------------------------------------------------------------- type text


class TypeTextTests(Base):
    def test_schema_hash_of_spec_struct(self):
        self.assertEqual(K.schema_hash("struct{id:i64,batch:tensors,}"), 0xE58AADC7552F0D82)

    def test_hash_tokens(self):
        t = K.parse_type("dict<str,list<opt<u8>>>")
        self.assertEqual(t.tokens(), ["dict<", "str", ",", "list<", "opt<", "u8", ">", ">", ">"])
        self.assertEqual(K.schema_hash("tensors"), K.fnv1a64(["tensors"]))
        # 0x00 step after each token: splitting tokens differently changes the hash
        self.assertNotEqual(K.fnv1a64(["ab"]), K.fnv1a64(["a", "b"]))

    def test_fnv_known_value(self):
        # FNV-1a 64 of the single byte 0x61 then the 0x00 step, computed by hand
        h = K.FNV_OFFSET
        h = ((h ^ 0x61) * K.FNV_PRIME) % (1 << 64)
        h = (h * K.FNV_PRIME) % (1 << 64)
        self.assertEqual(K.fnv1a64(["a"]), h)

    def test_text_round_trip(self):
        for text in ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "int",
                     "uint", "f32", "f64", "str", "tensors", "list<u8>", "list<str>",
                     "opt<opt<i8>>", "dict<str,dict<str,u8>>", "struct{}",
                     "struct{a:i8,_b9:list<struct{}>,C:opt<tensors>,}"]:
            self.assertEqual(K.parse_type(text).text(), text)
            self.assertEqual(K.type_text(text), text)

    def test_int_alias_hashes_as_written(self):
        self.assertNotEqual(K.schema_hash("int"), K.schema_hash("i64"))

    def test_depth(self):
        for kind in ("list<", "opt<", "dict<str,"):
            ok = kind * 64 + "u8" + ">" * 64
            self.assertEqual(K.parse_type(ok).depth, 64)
            with self.assertRaises(KilnError) as cm:
                K.parse_type(kind * 65 + "u8" + ">" * 65)
            self.assertEqual(cm.exception.code, "LIMIT")
        deep = "struct{a:" * 64 + "u8" + ",}" * 64
        self.assertEqual(K.parse_type(deep).depth, 64)
        with self.assertRaises(KilnError):
            K.parse_type("struct{a:" * 65 + "u8" + ",}" * 65)

    def test_bad_text(self):
        for bad in ["", " u8", "u8 ", "struct{a:i8}", "struct{a:i8,b:i8}", "struct{a:i8,,}",
                    "struct{a:i8,a:i8,}", "struct{9a:i8,}", "dict<u8,u8>", "dict<str, u8>",
                    "list<>", "list<u8>>", "opt<u8", "float", "List<u8>", "struct{a : i8,}"]:
            with self.assertRaises(K.TypeTextError, msg=bad):
                K.parse_type(bad)

    def test_min_sizes(self):
        for text, m in [("bool", 1), ("i8", 1), ("u8", 1), ("i16", 2), ("u16", 2), ("i32", 4),
                        ("u32", 4), ("f32", 4), ("i64", 8), ("u64", 8), ("int", 8), ("uint", 8),
                        ("f64", 8), ("str", 4), ("list<u8>", 4), ("opt<f64>", 1),
                        ("list<f64>", 4), ("dict<str,f64>", 4), ("tensors", 64),
                        ("struct{}", 0), ("struct{a:i8,b:str,c:tensors,d:struct{},}", 69)]:
            self.assertEqual(K.parse_type(text).min_size, m, text)


# ---------------------------------------------------------------- Frozen


class FrozenRoundTrips(Base):
    SAMPLES = [
        ("bool", [True, False]),
        ("i8", [-128, 0, 127]), ("i16", [-32768, 32767]), ("i32", [-(1 << 31), (1 << 31) - 1]),
        ("i64", [-(1 << 63), (1 << 63) - 1]), ("int", [-1]), ("uint", [(1 << 64) - 1]),
        ("u8", [0, 255]), ("u16", [65535]), ("u32", [K.U32_MAX]), ("u64", [K.U64_MAX]),
        ("f32", [F32(0x3F800000), F32(0x80000000), F32(0x7FC00001), F32(0x7F800001)]),
        ("f64", [F64(0x7FF8000000000001), F64(0x8000000000000000), F64(0x7FF0000000000001)]),
        ("str", ["", "abc", "\u00e9\u4e2d\U0001F600"]),
        ("list<u8>", [b"", b"\x00\x01\xff"]),
        ("list<i8>", [[], [-1, 2]]),
        ("list<bool>", [[True, False, True]]),
        ("list<f64>", [[F64(0), F64(0x3FF0000000000000)]]),
        ("list<str>", [["a", "", "bc"]]),
        ("list<list<u16>>", [[[1], [], [2, 3]]]),
        ("opt<u32>", [None, 5]),
        ("opt<opt<u8>>", [None, Some(None), Some(3)]),
        ("opt<str>", [None, ""]),
        ("dict<str,u8>", [{}, {"a": 1, "B": 2, "\u00e9": 3, "aa": 4}]),
        ("dict<str,list<str>>", [{"k": ["v"]}]),
        ("struct{}", [{}]),
        ("struct{a:i8,b:str,c:opt<f32>,}", [{"a": 1, "b": "x", "c": None}]),
        ("list<struct{}>", [[{}, {}]]),
        ("tensors", [[], [f32v(2, payload=F32_2)]]),
        ("struct{id:i64,batch:tensors,}", [{"id": 7, "batch": [f32v(2, payload=F32_2)]}]),
        ("list<tensors>", [[[], [Tensor("u8", (1,), b"\x05")]]]),
        ("dict<str,tensors>", [{"a": [], "b": [Tensor("bool", (2,), b"\x01\x00", name="m")]}]),
        ("opt<tensors>", [None, []]),
    ]

    def test_round_trip_every_type(self):
        for text, values in self.SAMPLES:
            for v in values:
                with self.subTest(type=text, value=v):
                    b = K.encode(text, v)
                    back = K.decode(text, b)
                    self.assertEqual(K.encode(text, back), b)
                    self.assertEqual(back, v)
                    framed = K.encode_frame(text, v)
                    self.assertEqual(framed[:8], b"KLN0\x00\x00\x00\x00")
                    self.assertEqual(struct.unpack_from("<Q", framed, 8)[0], K.schema_hash(text))
                    self.assertEqual(K.decode(text, framed, framed=True), back)
                    self.assertIsNone(err(text, b))

    def test_float_bits_and_plain_floats(self):
        self.assertEqual(K.encode("f32", 1.0).hex(), "0000803f")
        self.assertEqual(K.encode("f32", -0.0).hex(), "00000080")
        self.assertEqual(K.encode("f64", F64(0x7FF8000000000001)).hex(), "010000000000f87f")
        self.assertEqual(float(K.decode("f32", bytes.fromhex("000000c0"))), -2.0)
        with self.assertRaises(ValueError):
            K.encode("f32", 1e300)

    def test_dict_encoder_sorts_by_utf8_bytes(self):
        b = K.encode("dict<str,u8>", {"\u00e9": 1, "z": 2, "Z": 3})
        self.assertEqual(list(K.decode("dict<str,u8>", b)), ["Z", "z", "\u00e9"])

    def test_encoder_refuses_bad_values(self):
        for text, v in [("u8", 256), ("i8", -129), ("bool", 2), ("str", b"x"), ("i32", 1.0),
                        ("struct{a:i8,}", {}), ("struct{a:i8,}", {"a": 1, "b": 2}),
                        ("dict<str,u8>", {1: 1})]:
            with self.assertRaises(ValueError, msg=(text, v)):
                K.encode(text, v)


class FrozenRejects(Base):
    def test_scalar_eof(self):
        for text, size in [("bool", 1), ("i8", 1), ("i16", 2), ("u32", 4), ("f64", 8), ("int", 8)]:
            self.assertReject(text, bytes(size - 1), "EOF", "value_eof", 0)
        self.assertReject("struct{a:i8,b:i32,}", bytes(4), "EOF", "value_eof", 1)

    def test_bool_and_opt_bytes(self):
        self.assertReject("bool", b"\x02", "TYPE", "bool_byte", 0)
        self.assertReject("list<bool>", b"\x02\x00\x00\x00\x01\xff", "TYPE", "bool_byte", 5)
        self.assertReject("opt<u8>", b"\x02", "TYPE", "opt_tag", 0)
        self.assertReject("opt<u8>", b"", "EOF", "opt_tag_eof", 0)
        self.assertReject("opt<u8>", b"\x01", "EOF", "value_eof", 1)

    def test_count_check_order(self):
        t = "list<u32>"
        self.assertReject(t, b"\x01\x00\x00", "EOF", "count_eof", 0)                # 1
        self.assertReject(t, struct.pack("<I", CAP + 1) + bytes(4 * (CAP + 1)) [:0],
                          "LIMIT", "count_cap", 0)                                    # 2
        self.assertReject(t, struct.pack("<I", 3) + bytes(8), "EOF", "count_past_end", 0)  # 4
        self.assertAccept(t, struct.pack("<I", 2) + bytes(8))
        # cap applies before the buffer check, and equality with the cap is allowed
        self.assertReject(t, struct.pack("<I", 5) + bytes(20), "LIMIT", "count_cap", count_cap=4)
        self.assertAccept(t, struct.pack("<I", 4) + bytes(16), count_cap=4)

    def test_count_overflow_step(self):
        # step 3 cannot be reached from type text (m would need > 2**32), test it directly
        cx = K._Cx(struct.pack("<I", 0x10000), K.U32_MAX, K.U32_MAX, False)
        with self.assertRaises(KilnError) as cm:
            K._check_count(cx, 0, K.U32_MAX, 1 << 48, "count")
        self.assertEqual((cm.exception.code, cm.exception.rule), ("LIMIT", "count_overflow"))

    def test_minimum_sizes_drive_the_count_check(self):
        self.assertReject("list<struct{a:i32,b:str,}>", struct.pack("<I", CAP), "EOF",
                          "count_past_end", 0)
        self.assertReject("list<tensors>", struct.pack("<I", 2) + K.encode_directory([]),
                          "EOF", "count_past_end", 0)
        self.assertReject("dict<str,u32>", struct.pack("<I", 2) + bytes(15), "EOF", "count_past_end")
        self.assertReject("list<opt<u64>>", struct.pack("<I", 3) + bytes(2), "EOF", "count_past_end")
        # a zero-size element: only the cap bounds the count
        self.assertAccept("list<struct{}>", struct.pack("<I", CAP))
        self.assertReject("list<struct{}>", struct.pack("<I", CAP + 1), "LIMIT", "count_cap")
        # a short element after a count that passed is the element's own error
        self.assertReject("list<str>", bytes.fromhex("02000000" "05000000" "0000000000"),
                          "EOF", "length_eof", 13)

    def test_string_and_byte_caps(self):
        self.assertReject("str", b"\x01\x00", "EOF", "length_eof", 0)
        self.assertReject("str", bytes.fromhex("05000000") + b"abcd", "EOF", "length_past_end", 0)
        self.assertReject("str", bytes.fromhex("05000000") + b"abcde", "LIMIT", "length_cap",
                          0, byte_cap=4)
        self.assertReject("str", bytes.fromhex("ffffffff"), "LIMIT", "length_cap", 0)
        self.assertReject("list<u8>", bytes.fromhex("05000000") + b"abcde", "LIMIT",
                          "length_cap", byte_cap=4)
        self.assertAccept("list<u8>", bytes.fromhex("05000000") + b"abcde", count_cap=1)
        self.assertReject("list<i8>", bytes.fromhex("05000000") + b"abcde", "LIMIT",
                          "count_cap", count_cap=4)
        self.assertAccept("list<i8>", bytes.fromhex("05000000") + b"abcde", byte_cap=1)
        self.assertReject("dict<str,u8>", bytes.fromhex("02000000"), "LIMIT", "count_cap",
                          count_cap=1)

    def test_utf8(self):
        for bad, at in [(b"\xff", 0), (b"a\xc0\x80", 1), (b"ab\xed\xa0\x80", 2),
                        (b"\xf4\x90\x80\x80", 0), (b"abc\xe2\x82", 3)]:
            buf = struct.pack("<I", len(bad)) + bad
            self.assertReject("str", buf, "UTF8", "str_utf8", 4 + at)
        self.assertAccept("str", struct.pack("<I", 4) + "\U0010FFFF".encode())

    def test_dict_keys(self):
        def entry(k):
            return struct.pack("<I", len(k)) + k + b"\x00"
        self.assertAccept("dict<str,u8>", struct.pack("<I", 2) + entry(b"a") + entry(b"b"))
        self.assertAccept("dict<str,u8>", struct.pack("<I", 2) + entry(b"a") + entry(b"aa"))
        self.assertReject("dict<str,u8>", struct.pack("<I", 2) + entry(b"b") + entry(b"a"),
                          "TYPE", "dict_key_order", 10)
        self.assertReject("dict<str,u8>", struct.pack("<I", 2) + entry(b"a") + entry(b"a"),
                          "TYPE", "dict_key_order", 10)
        # raw byte order, not code point order of a case-folded string
        self.assertReject("dict<str,u8>", struct.pack("<I", 2) + entry(b"a") + entry(b"B"),
                          "TYPE", "dict_key_order")
        self.assertReject("dict<str,u8>", struct.pack("<I", 1) + entry(b"\xff"), "UTF8", "str_utf8", 8)

    def test_trailing(self):
        self.assertReject("u8", b"\x00\x00", "TRAILING", "trailing", 1)
        self.assertReject("struct{}", b"\x00", "TRAILING", "trailing", 0)
        self.assertAccept("struct{}", b"")

    def test_frame(self):
        t = "struct{id:i64,batch:tensors,}"
        good = K.encode_frame(t, {"id": 7, "batch": []})
        self.assertAccept(t, good, framed=True)
        self.assertReject(t, good[:15], "EOF", "frame_eof", 0, framed=True)
        self.assertReject(t, b"", "EOF", "frame_eof", framed=True)
        self.assertReject(t, b"KLN1" + good[4:], "FRAME", "frame_magic", 0, framed=True)
        self.assertReject(t, setb(good, 4, 1), "FRAME", "frame_profile", 4, framed=True)
        self.assertReject(t, setb(good, 5, 1), "FRAME", "frame_flags", 5, framed=True)
        self.assertReject(t, setb(good, 7, 1), "FRAME", "frame_reserved", 7, framed=True)
        self.assertReject(t, setb(good, 8, good[8] ^ 1), "SCHEMA", "schema_hash", 8, framed=True)
        self.assertReject("struct{id:i64,}", good, "SCHEMA", framed=True)
        self.assertReject(t, good + b"\x00", "TRAILING", "trailing", len(good), framed=True)
        self.assertReject(t, good[:16], "EOF", "value_eof", 16, framed=True)

    def test_nested_directory_has_no_trailing_step(self):
        t = "struct{a:tensors,b:u8,}"
        d = D([Tensor("u8", (1,), b"\x07")])
        self.assertEqual(K.decode(t, d + b"\x09")["b"], 9)
        self.assertReject(t, d, "EOF", "value_eof", len(d))
        self.assertReject("tensors", d + b"\x09", "TRAILING", "trailing", len(d))
        # offsets are absolute in the caller's buffer
        bad = K.encode("struct{id:i64,batch:tensors,}", {"id": 1, "batch": []})
        self.assertReject("struct{id:i64,batch:tensors,}", setb(bad, 12, 1), "FRAME", "dir_version", 12)
        lst = K.encode("list<tensors>", [[], []])
        self.assertReject("list<tensors>", setb(lst, 4 + 64 + 4, 3), "FRAME", "dir_version", 72)


# ---------------------------------------------------------------- directory


class DirectoryEncoding(Base):
    def test_empty_block_bytes(self):
        self.assertEqual(D([]).hex(), K.EMPTY_DIRECTORY_HEX)
        self.assertEqual(len(K.EMPTY_DIRECTORY_HEX), 128)

    def test_f32_block(self):
        b = D([f32v(2, payload=F32_2)])
        self.assertEqual(len(b), 200)
        self.assertEqual(b[192:], F32_2)
        self.assertEqual(b[5], 0x02)

    def test_named_heap_and_pad(self):
        b = D([Tensor("f16", (1,), b"\x00\x3c", name="w"), Tensor("u8", (2,), b"ab", name="x")])
        hdr = K._HEADER.unpack_from(b, 0)
        self.assertEqual(hdr[2], 0x03)
        self.assertEqual(hdr[5], 2)                     # name_bytes
        self.assertEqual(b[320:321], b"w")
        self.assertEqual(b[320:322], b"wx")
        self.assertEqual(b[322:384], bytes(62))          # pad to payload_base 384
        self.assertEqual(b[384:386], b"\x00\x3c")

    def test_heap_order_names_then_layouts(self):
        ts = [Tensor(4096, (1,), b"xy", name="a", layout="L1", block_size=2),
              Tensor(4097, (1,), b"zw", name="bb", layout="L1", block_size=1)]
        b = D(ts)
        heap_start = 64 + 2 * 128
        self.assertEqual(b[heap_start:heap_start + 7], b"abbL1L1")
        out = K.decode("tensors", b)
        self.assertEqual([t.layout for t in out], ["L1", "L1"])   # layout names may repeat
        self.assertEqual(out, ts)

    def test_greedy_offsets(self):
        out = K.decode("tensors", D([Tensor("u8", (5,), b"abcde"), Tensor("u8", (0,), b""),
                                     Tensor("u8", (0,), b""), Tensor("u8", (64,), bytes(64)),
                                     Tensor("u8", (1,), b"z")]))
        self.assertEqual([t.byte_offset for t in out], [0, 64, 64, 64, 128])

    def test_first_zero_length_tensor(self):
        b = D([Tensor("u8", (0,), b""), Tensor("u8", (1,), b"x")])
        self.assertEqual([t.byte_offset for t in K.decode("tensors", b)], [0, 0])

    def test_zero_length_after_short_tensor(self):
        b = D([Tensor("u8", (5,), b"abcde"), Tensor("f32", (0,), b"")])
        self.assertEqual(struct.unpack_from("<Q", b, HDR.PAYLOAD_BYTES)[0], 64)
        self.assertEqual(K.decode("tensors", b)[1].byte_offset, 64)
        # placing it at 5 instead is not canonical
        m = put(put(b, HDR.PAYLOAD_BYTES, "Q", 5), 64 + 128 + DESC.BYTE_OFFSET, "Q", 5)
        self.dir_reject(m, "TYPE", "offset_not_canonical")

    def test_encoder_validates(self):
        for ts in ([Tensor("f32", (3,), bytes(8))],
                   [Tensor("f32", (1,), bytes(4), name="a"), Tensor("f32", (1,), bytes(4))],
                   [Tensor(4096, (1,), b"x", block_size=1)],
                   [Tensor("u8", (1,), b"x", layout="L")]):
            with self.assertRaises(ValueError):
                D(ts)

    def test_decoded_description(self):
        t, = K.decode("tensors", G.b_scales())[:1]
        self.assertEqual((t.dtype, t.shape, t.quant_scheme, t.quant_axis, t.group_size,
                          t.scale_index, t.outer_index), (18, (32,), 1, 0, 32, 1, None))
        self.assertEqual(t.byte_length, 16)


class DirectoryCheckOrder(Base):
    """Every directory rule, with its code, and the step ordering."""

    def setUp(self):
        self.e = D([])
        self.f = D([f32v(2, payload=F32_2)])
        self.two = D([f32v(2, payload=F32_2), f32v(2, payload=F32_2)])
        self.named = D([Tensor("f16", (1,), b"\x00\x3c", name="ab"), f32v(1, name="cd")])

    # step 1
    def test_step1(self):
        self.dir_reject(b"", "EOF", "dir_magic_eof", 0)
        self.dir_reject(b"KLN", "EOF", "dir_magic_eof", 0)
        self.dir_reject(b"XYZ", "EOF", "dir_magic_eof", 0)
        self.dir_reject(b"KLNX", "FRAME", "dir_magic", 0)
        self.dir_reject(b"KLNT", "EOF", "dir_header_eof", 0)
        self.dir_reject(self.e[:63], "EOF", "dir_header_eof", 0)
        self.dir_reject(b"KLN0" + self.e[4:], "FRAME", "dir_magic")

    # step 2
    def test_step2(self):
        for v in (0, 1, 3, 255):
            self.dir_reject(setb(self.e, 4, v), "FRAME", "dir_version", 4)
        self.dir_reject(setb(self.e, 5, 0x00), "FRAME", "dir_le_clear", 5)
        self.dir_reject(setb(self.e, 5, 0x01), "FRAME", "dir_le_clear", 5)
        for bit in range(2, 8):
            self.dir_reject(setb(self.e, 5, 0x02 | (1 << bit)), "FRAME", "dir_flag_unknown", 5)
        for off in [6, 7] + list(range(32, 64)):
            self.dir_reject(setb(self.e, off, 1), "FRAME", "dir_reserved", off)
        # step 2 beats step 3
        m = put(setb(self.e, 63, 1), HDR.TENSOR_COUNT, "I", CAP + 1)
        self.dir_reject(m, "FRAME", "dir_reserved")

    # step 3
    def test_step3(self):
        self.dir_reject(put(self.e, HDR.TENSOR_COUNT, "I", CAP + 1), "LIMIT", "dir_count_cap", 8)
        self.dir_reject(put(self.e, HDR.NAME_BYTES, "I", CAP + 1), "LIMIT", "dir_name_bytes_cap", 12)
        self.dir_reject(put(self.e, HDR.TENSOR_COUNT, "I", 2), "LIMIT", "dir_count_cap",
                        count_cap=1)
        self.dir_reject(put(self.e, HDR.NAME_BYTES, "I", 2), "LIMIT", "dir_name_bytes_cap",
                        byte_cap=1)
        # tensor_count uses the count cap, name_bytes the byte cap
        self.assertAccept("tensors", self.named, byte_cap=4, count_cap=2)
        self.dir_reject(self.named, "LIMIT", "dir_name_bytes_cap", byte_cap=3)
        self.dir_reject(self.named, "LIMIT", "dir_count_cap", count_cap=1)
        # LIMIT beats the later directory_bytes mismatch
        self.dir_reject(put(self.e, HDR.TENSOR_COUNT, "I", K.U32_MAX), "LIMIT", "dir_count_cap")

    # step 4
    def test_step4(self):
        for v in (0, 127, 129, 1 << 63):
            self.dir_reject(put(self.f, HDR.DIRECTORY_BYTES, "Q", v), "TYPE", "dir_bytes_mismatch", 24)
        self.dir_reject(put(self.e, HDR.NAME_BYTES, "I", 5), "TYPE", "dir_bytes_mismatch")
        # mismatch beats EOF
        m = put(self.e, HDR.TENSOR_COUNT, "I", 1)
        self.dir_reject(m, "TYPE", "dir_bytes_mismatch")

    # step 5
    def test_step5(self):
        m = put(put(self.e, HDR.TENSOR_COUNT, "I", 1), HDR.DIRECTORY_BYTES, "Q", 128)
        self.dir_reject(m, "EOF", "dir_past_end", 8)
        self.dir_reject(self.f[:191], "EOF", "dir_past_end")
        m = put(put(self.e, HDR.NAME_BYTES, "I", 1), HDR.DIRECTORY_BYTES, "Q", 1)
        self.dir_reject(m, "EOF", "dir_past_end")
        # a count at the cap that does not fit is EOF, not an allocation
        m = put(put(self.e, HDR.TENSOR_COUNT, "I", CAP), HDR.DIRECTORY_BYTES, "Q", CAP * 128)
        self.dir_reject(m, "EOF", "dir_past_end")

    # step 6
    def test_step6(self):
        for v in ((1 << 64) - 64, (1 << 64) - 1):
            self.dir_reject(put(self.e, HDR.PAYLOAD_BYTES, "Q", v), "LIMIT", "payload_end_overflow", 16)
        self.dir_reject(put(self.e, HDR.PAYLOAD_BYTES, "Q", (1 << 64) - 65), "EOF", "block_past_end", 16)
        self.dir_reject(self.f[:199], "EOF", "block_past_end", 16)
        self.dir_reject(put(self.e, HDR.PAYLOAD_BYTES, "Q", 1), "EOF", "block_past_end")
        # heap fits but the padding to payload_base does not
        m = put(put(self.e, HDR.NAME_BYTES, "I", 1), HDR.DIRECTORY_BYTES, "Q", 1) + b"\x00"
        self.dir_reject(m, "EOF", "block_past_end")

    # step 7
    def test_step7(self):
        b = self.named
        heap_end = 64 + 2 * 128 + 4
        self.dir_reject(setb(b, heap_end, 1), "TYPE", "pad_nonzero", heap_end)
        self.dir_reject(setb(b, 383, 0x80), "TYPE", "pad_nonzero", 383)
        # pad (step 7) beats a descriptor reserved byte (step 8)
        m = setb(setb(b, heap_end + 3, 1), 64 + 3, 1)
        self.dir_reject(m, "TYPE", "pad_nonzero")

    # step 8: reserved
    def test_step8_reserved(self):
        for field in [3] + list(range(112, 128)):
            self.dir_reject(setb(self.f, 64 + field, 1), "FRAME", "desc_reserved", 64 + field)
        # reserved of a later descriptor beats a name fault of an earlier one
        m = setb(setb(self.named, 64 + 128 + 120, 1), 64 + 320, ord("c"))
        self.dir_reject(m, "FRAME", "desc_reserved", 64 + 128 + 120)
        # and beats UTF8
        m = setb(setb(self.named, 64 + 128 + 3, 1), 320, 0xFF)
        self.dir_reject(m, "FRAME", "desc_reserved")

    # step 8: names
    def test_step8_names(self):
        self.dir_reject(setb(self.e, 5, 3), "TYPE", "name_flag_empty", 5)
        # flag clear but a tensor named
        n1 = D([f32v(1, name="a")])
        m = setb(n1, 5, 2)
        self.dir_reject(m, "TYPE", "name_without_flag", 64 + 6)
        m = dput(self.f, 0, DESC.NAME_OFF, "H", 0)
        self.dir_reject(m, "TYPE", "name_off_unnamed", 64 + 4)
        # flag set but a tensor unnamed
        m = setb(self.f, 5, 3)
        self.dir_reject(m, "TYPE", "name_missing", 64 + 6)
        mixed = D([f32v(1, name="a"), f32v(1)], validate=False)
        self.dir_reject(mixed, "TYPE", "name_missing", 64 + 128 + 6)
        # placement: reordered heap, hole, slice past the heap, extra byte
        b = self.named   # heap "abcd", names at 0 (len 2) and 2 (len 2)
        self.dir_reject(dput(dput(b, 0, DESC.NAME_OFF, "H", 2), 1, DESC.NAME_OFF, "H", 0),
                        "TYPE", "name_placement", 64 + 4)
        self.dir_reject(dput(dput(b, 0, DESC.NAME_LEN, "H", 1), 1, DESC.NAME_OFF, "H", 2),
                        "TYPE", "name_placement", 64 + 128 + 4)
        self.dir_reject(dput(b, 1, DESC.NAME_LEN, "H", 3), "TYPE", "name_past_heap", 64 + 128 + 6)
        self.dir_reject(dput(b, 1, DESC.NAME_LEN, "H", 1), "TYPE", "heap_length", 12)
        # unique as raw bytes
        dup = setb(setb(b, 322, ord("a")), 323, ord("b"))
        self.dir_reject(dup, "TYPE", "name_duplicate", 64 + 128 + 4)
        # utf8 in a name; offset is the bad byte in the heap
        self.dir_reject(setb(b, 323, 0xC3), "UTF8", "name_utf8", 323)
        # first fault in descriptor order: TYPE in descriptor 0 before UTF8 in descriptor 1
        m = setb(dput(b, 0, DESC.NAME_OFF, "H", 1), 323, 0xFF)
        self.dir_reject(m, "TYPE", "name_placement")
        # UTF8 in descriptor 0 before TYPE in descriptor 1
        m = setb(dput(b, 1, DESC.NAME_OFF, "H", 3), 320, 0xFF)
        self.dir_reject(m, "UTF8", "name_utf8", 320)

    def test_step8_layouts(self):
        op = D([Tensor(4096, (4,), bytes(18), name="w", layout="Q4_K", block_size=18)])
        heap = 64 + 128
        self.assertEqual(op[heap:heap + 5], b"wQ4_K")
        self.dir_reject(dput(op, 0, DESC.LAYOUT_OFF, "H", 0), "TYPE", "layout_placement", 64 + 8)
        self.dir_reject(dput(op, 0, DESC.LAYOUT_LEN, "H", 5), "TYPE", "layout_past_heap", 64 + 10)
        self.dir_reject(setb(op, heap + 1, 0xFF), "UTF8", "layout_utf8", heap + 1)
        m = dput(dput(op, 0, DESC.LAYOUT_LEN, "H", 0), 0, DESC.LAYOUT_OFF, "H", 0xFFFF)
        self.dir_reject(m, "TYPE", "heap_length", 12)
        nl = D([Tensor(4096, (4,), bytes(18), layout="Q", block_size=18)])
        self.dir_reject(dput(D([f32v(1)]), 0, DESC.LAYOUT_OFF, "H", 0), "TYPE", "layout_off_absent")
        # layout names come after every tensor name
        two = D([Tensor(4096, (1,), b"x", name="a", layout="L", block_size=1),
                 Tensor("u8", (1,), b"y", name="b")])
        self.assertEqual(two[64 + 256:64 + 259], b"abL")
        self.assertIsNone(err("tensors", nl))

    def test_heap_with_no_names(self):
        m = put(put(self.e, HDR.NAME_BYTES, "I", 1), HDR.DIRECTORY_BYTES, "Q", 1) + bytes(64)
        self.dir_reject(m, "TYPE", "heap_length", 12)

    # step 9
    def test_step9_range(self):
        f = self.f
        self.dir_reject(dput(f, 0, DESC.BYTE_OFFSET, "Q", 1), "TYPE", "range_past_payload", 64 + 40)
        self.dir_reject(dput(f, 0, DESC.BYTE_OFFSET, "Q", K.U64_MAX), "LIMIT", "range_overflow", 64 + 32)
        self.dir_reject(dput(dput(f, 0, DESC.BYTE_OFFSET, "Q", 1), 0, DESC.BYTE_LENGTH, "Q", K.U64_MAX),
                        "LIMIT", "range_overflow")
        self.dir_reject(dput(f, 0, DESC.BYTE_LENGTH, "Q", K.U64_MAX), "TYPE", "range_past_payload")
        self.dir_reject(dput(f, 0, DESC.BYTE_LENGTH, "Q", 9), "TYPE", "range_past_payload")
        # a zero-length range past the payload is still outside it
        z = D([Tensor("u8", (0,), b"")])
        self.dir_reject(dput(z, 0, DESC.BYTE_OFFSET, "Q", 1), "TYPE", "range_past_payload")

    def test_step9_dtype(self):
        f = self.f
        self.dir_reject(dput(f, 0, DESC.DTYPE, "H", 0), "TYPE", "dtype_zero", 64)
        for code in (20, 100, 4095):
            self.dir_reject(dput(f, 0, DESC.DTYPE, "H", code), "TYPE", "dtype_reserved", 64)
        for code in (32768, 65535):
            self.dir_reject(dput(f, 0, DESC.DTYPE, "H", code), "TYPE", "dtype_range", 64)
        # the whole closed set, with widths
        for code, (name, width) in K.DTYPES.items():
            n = 3
            size = (n + 1) // 2 if width == 0 else n * width
            payload = b"\x01" * size if name != "bool" else b"\x01\x00\x01"
            if width == 0:
                payload = b"\x11\x01"
            with self.subTest(dtype=name):
                self.assertAccept("tensors", D([Tensor(code, (n,), payload)]))
                bad = D([Tensor(code, (n,), payload + b"\x00")], validate=False)
                self.dir_reject(bad, "TYPE", "length_mismatch", 64 + 40)

    def test_step9_rank_and_shape(self):
        f = self.f
        self.dir_reject(dput(f, 0, DESC.RANK, "B", 9), "TYPE", "rank", 64 + 2)
        self.dir_reject(dput(f, 0, DESC.RANK, "B", 255), "TYPE", "rank")
        for slot in range(1, 8):
            self.dir_reject(dput(f, 0, DESC.SHAPE + 8 * slot, "Q", 1), "TYPE", "shape_tail",
                            64 + 48 + 8 * slot)
        scalar = D([Tensor("f32", (), b"\x00\x00\x80\x3f")])
        self.dir_reject(dput(scalar, 0, DESC.SHAPE, "Q", 1), "TYPE", "shape_tail", 64 + 48)
        m = dput(dput(dput(f, 0, DESC.RANK, "B", 2), 0, DESC.SHAPE, "Q", 1 << 32),
                 0, DESC.SHAPE + 8, "Q", 1 << 32)
        self.dir_reject(m, "LIMIT", "shape_overflow")
        # a zero dimension makes the product 0, whatever the other dimensions are
        z = D([Tensor("f32", (0,), b"")])
        m = dput(dput(dput(z, 0, DESC.RANK, "B", 3), 0, DESC.SHAPE + 8, "Q", 1 << 40),
                 0, DESC.SHAPE + 16, "Q", 1 << 40)
        self.assertAccept("tensors", m)
        m = dput(dput(z, 0, DESC.RANK, "B", 2), 0, DESC.SHAPE + 8, "Q", 1 << 40)
        self.assertAccept("tensors", m)
        # n fits u64 but n * width does not
        self.dir_reject(dput(f, 0, DESC.SHAPE, "Q", 1 << 62), "LIMIT", "byte_size_overflow")
        self.dir_reject(dput(f, 0, DESC.SHAPE, "Q", 3), "TYPE", "length_mismatch")
        # rank 8 is legal
        r8 = D([Tensor("u8", (1,) * 8, b"\x05")])
        self.assertAccept("tensors", r8)

    def test_step9_opaque_rules(self):
        ok = D([Tensor(4096, (32,), bytes(36), layout="Q4_K", block_size=18)])
        self.assertAccept("tensors", ok)
        self.assertAccept("tensors", D([Tensor(32767, (), b"", layout="x", block_size=7)]))
        self.dir_reject(D([Tensor(4096, (32,), bytes(18), block_size=18)], validate=False),
                        "TYPE", "opaque_no_layout", 64 + 10)
        self.dir_reject(dput(ok, 0, DESC.BLOCK_SIZE, "I", 0), "TYPE", "opaque_block_size", 64 + 12)
        self.dir_reject(dput(ok, 0, DESC.BLOCK_SIZE, "I", 17), "TYPE", "opaque_block_multiple", 64 + 40)
        # shape is not checked against a width for opaque dtypes
        self.assertAccept("tensors", dput(ok, 0, DESC.SHAPE, "Q", 12345))

    def test_step9_non_opaque_layout_and_block(self):
        self.dir_reject(dput(self.f, 0, DESC.BLOCK_SIZE, "I", 4), "TYPE",
                        "block_size_non_opaque", 64 + 12)
        lay = D([Tensor("u8", (1,), b"x", layout="L")], validate=False)
        self.dir_reject(lay, "TYPE", "layout_non_opaque", 64 + 10)
        # a layout name on a non-opaque dtype is a step-9 fault: a UTF8 name in a later
        # descriptor (step 8) wins over it
        m = D([Tensor("u8", (1,), b"x", name="a", layout="L"), Tensor("u8", (1,), b"y", name="b")],
              validate=False)
        m = setb(m, 64 + 256 + 1, 0xFF)
        self.dir_reject(m, "UTF8", "name_utf8")

    def test_step9_overlap(self):
        two = self.two
        self.dir_reject(dput(two, 1, DESC.BYTE_OFFSET, "Q", 4), "TYPE", "overlap", 64 + 128 + 32)
        self.dir_reject(dput(two, 1, DESC.BYTE_OFFSET, "Q", 0), "TYPE", "overlap")
        # touching ranges do not overlap: that is a placement fault (step 10)
        self.dir_reject(dput(two, 1, DESC.BYTE_OFFSET, "Q", 8), "TYPE", "offset_not_canonical")
        # a zero-length range overlaps nothing
        z = D([f32v(2, payload=F32_2), Tensor("u8", (0,), b""), f32v(1)])
        self.dir_reject(dput(z, 1, DESC.BYTE_OFFSET, "Q", 4), "TYPE", "offset_not_canonical")

    def test_step9_descriptor_order_and_subrule_order(self):
        # descriptor 0's TYPE before descriptor 1's LIMIT
        m = dput(self.two, 0, DESC.SHAPE, "Q", 3)
        m = dput(dput(m, 1, DESC.RANK, "B", 2), 1, DESC.SHAPE + 8, "Q", 1 << 63)
        self.dir_reject(m, "TYPE", "length_mismatch", 64 + 40)
        # within a descriptor: range before dtype before shape
        m = dput(dput(self.f, 0, DESC.DTYPE, "H", 0), 0, DESC.BYTE_OFFSET, "Q", K.U64_MAX)
        self.dir_reject(m, "LIMIT", "range_overflow")
        m = dput(dput(dput(self.f, 0, DESC.DTYPE, "H", 0), 0, DESC.RANK, "B", 2), 0,
                 DESC.SHAPE + 8, "Q", 1 << 63)
        self.dir_reject(m, "TYPE", "dtype_zero")

    def test_step_order_across_steps(self):
        # step 8 UTF8 beats step 9 dtype
        m = dput(setb(self.named, 320, 0xFF), 1, DESC.DTYPE, "H", 0)
        self.dir_reject(m, "UTF8", "name_utf8")
        # step 9 LIMIT beats step 10/11 TYPE
        b = D([Tensor("bool", (2,), b"\x01\x00")])
        m = setb(b, 193, 2)
        self.dir_reject(m, "TYPE", "bool_byte")
        m = dput(dput(dput(m, 0, DESC.RANK, "B", 2), 0, DESC.SHAPE, "Q", 1 << 63), 0,
                 DESC.SHAPE + 8, "Q", 2)
        self.dir_reject(m, "LIMIT", "shape_overflow")
        # rank > 8 is step 9: a quant scheme 3 (step 11) on descriptor 0 does not hide it
        m = dput(self.two, 0, DESC.QUANT_SCHEME, "H", 3)
        self.dir_reject(m, "TYPE", "quant_scheme")
        m = dput(m, 1, DESC.RANK, "B", 9)
        self.dir_reject(m, "TYPE", "rank")

    # step 10
    def test_step10(self):
        self.dir_reject(dput(self.two, 1, DESC.BYTE_OFFSET, "Q", 56), "TYPE",
                        "offset_not_canonical", 64 + 128 + 32)
        self.dir_reject(setb(self.two, 320 + 8, 1), "TYPE", "gap_nonzero", 328)
        self.dir_reject(setb(self.two, 320 + 63, 1), "TYPE", "gap_nonzero", 383)
        # payload_bytes past the running end, even with zero bytes
        m = put(self.f, HDR.PAYLOAD_BYTES, "Q", 9) + b"\x00"
        self.dir_reject(m, "TYPE", "payload_bytes_not_canonical", 16)
        m = put(self.e, HDR.PAYLOAD_BYTES, "Q", 1) + b"\x00"
        self.dir_reject(m, "TYPE", "payload_bytes_not_canonical", 16)
        m = put(self.e, HDR.PAYLOAD_BYTES, "Q", 64) + bytes(64)
        self.dir_reject(m, "TYPE", "payload_bytes_not_canonical")
        # first tensor not at 0
        m = dput(put(self.f, HDR.PAYLOAD_BYTES, "Q", 72), 0, DESC.BYTE_OFFSET, "Q", 64) + bytes(64)
        self.dir_reject(m, "TYPE", "offset_not_canonical")

    # step 11
    def test_step11_bytes(self):
        b = D([Tensor("bool", (3,), b"\x01\x00\x01")])
        for v in (2, 0x80, 0xFF):
            self.dir_reject(setb(b, 194, v), "TYPE", "bool_byte", 194)
        for code in (16, 17, 18):
            u = D([Tensor(code, (3,), b"\x21\x03")])
            self.assertAccept("tensors", u)
            self.dir_reject(setb(u, 193, 0x13), "TYPE", "high_nibble", 193)
            even = D([Tensor(code, (4,), b"\x21\xf3")])
            self.assertAccept("tensors", even)

    def scales(self, **kw):
        data = dict(dtype="e2m1", shape=(32,), payload=bytes(16), quant_scheme=1,
                    quant_axis=0, group_size=32, scale_index=1)
        data.update(kw)
        return [Tensor(**data), Tensor("e8m0", (1,), b"\x7f")]

    def test_step11_quant(self):
        Q = 64 + DESC.QUANT_SCHEME
        ok = D(self.scales())
        self.assertAccept("tensors", ok)
        self.dir_reject(dput(ok, 0, DESC.QUANT_SCHEME, "H", 3), "TYPE", "quant_scheme", Q)
        # scheme 0 fields
        f = self.f
        self.dir_reject(dput(f, 0, DESC.QUANT_AXIS, "H", 0), "TYPE", "quant_none_axis", 64 + 18)
        self.dir_reject(dput(f, 0, DESC.GROUP_SIZE, "I", 1), "TYPE", "quant_none_group", 64 + 20)
        self.dir_reject(dput(f, 0, DESC.SCALE_INDEX, "I", 0), "TYPE", "quant_none_scale", 64 + 24)
        self.dir_reject(dput(f, 0, DESC.OUTER_INDEX, "I", 0), "TYPE", "quant_none_outer", 64 + 28)
        # scheme 1
        self.dir_reject(dput(ok, 0, DESC.QUANT_AXIS, "H", 1), "TYPE", "quant_axis", 64 + 18)
        self.dir_reject(dput(ok, 0, DESC.QUANT_AXIS, "H", 0xFFFF), "TYPE", "quant_axis")
        self.dir_reject(dput(ok, 0, DESC.GROUP_SIZE, "I", 0), "TYPE", "quant_group", 64 + 20)
        self.dir_reject(dput(ok, 0, DESC.SCALE_INDEX, "I", 0), "TYPE", "quant_scale_index", 64 + 24)
        self.dir_reject(dput(ok, 0, DESC.SCALE_INDEX, "I", 2), "TYPE", "quant_scale_index")
        self.dir_reject(dput(ok, 0, DESC.SCALE_INDEX, "I", 0xFFFFFFFF), "TYPE", "quant_scale_index")
        self.dir_reject(dput(ok, 0, DESC.GROUP_SIZE, "I", 16), "TYPE", "quant_scale_count", 64 + 24)
        self.dir_reject(dput(ok, 0, DESC.OUTER_INDEX, "I", 1), "TYPE", "quant_outer_index", 64 + 28)
        # group larger than the axis still needs ceil() = 1 scale
        self.assertAccept("tensors", dput(ok, 0, DESC.GROUP_SIZE, "I", 1000))
        # rank 0 with a scheme
        s0 = D([Tensor("f32", (), bytes(4), quant_scheme=1, quant_axis=0, group_size=1,
                       scale_index=1), Tensor("e8m0", (1,), b"\x7f")], validate=False)
        self.dir_reject(s0, "TYPE", "quant_rank", 64 + 2)
        # a multi-dimensional count: shape (4, 64), axis 1, group 32 -> 2 * 4 = 8 scales
        md = [Tensor("u8", (4, 64), bytes(256), quant_scheme=1, quant_axis=1, group_size=32,
                     scale_index=1), Tensor("e8m0", (8,), bytes(8))]
        self.assertAccept("tensors", D(md))
        md[1] = Tensor("e8m0", (2, 4), bytes(8))
        self.assertAccept("tensors", D(md))
        md[1] = Tensor("e8m0", (4,), bytes(4))
        self.dir_reject(D(md, validate=False), "TYPE", "quant_scale_count")
        # chains: a scale tensor that itself carries a scheme
        chain = D([Tensor("u8", (2,), b"ab", quant_scheme=1, quant_axis=0, group_size=2, scale_index=1),
                   Tensor("u8", (1,), b"c", quant_scheme=1, quant_axis=0, group_size=1, scale_index=2),
                   Tensor("u8", (1,), b"d")], validate=False)
        self.dir_reject(chain, "TYPE", "quant_scale_chain", 64 + 24)

    def outer(self, **kw):
        data = dict(dtype="e2m1", shape=(16,), payload=bytes(8), quant_scheme=2,
                    quant_axis=0, group_size=16, scale_index=1, outer_index=2)
        data.update(kw)
        return [Tensor(**data), Tensor("f8e4m3", (1,), b"\x38"), Tensor("f32", (), bytes(4))]

    def test_step11_outer(self):
        ok = D(self.outer())
        self.assertAccept("tensors", ok)
        for v in (0, 1, 3, 0xFFFFFFFF):
            self.dir_reject(dput(ok, 0, DESC.OUTER_INDEX, "I", v), "TYPE", "quant_outer_index", 64 + 28)
        ts = self.outer()
        ts[2] = Tensor("f64", (1,), bytes(8))
        self.dir_reject(D(ts, validate=False), "TYPE", "quant_outer_dtype")
        ts[2] = Tensor("f32", (2,), bytes(8))
        self.dir_reject(D(ts, validate=False), "TYPE", "quant_outer_count")
        ts = self.outer()
        ts.append(Tensor("u8", (1,), b"z"))
        ts[2] = Tensor("f32", (1,), bytes(4), quant_scheme=1, quant_axis=0, group_size=1, scale_index=3)
        self.dir_reject(D(ts, validate=False), "TYPE", "quant_outer_chain")

    def test_accepts_rich_directory(self):
        ts = [Tensor("f32", (2, 3), bytes(24), name="w"),
              Tensor(5000, (7,), bytes(10), name="q", layout="Q8", block_size=5),
              Tensor("bool", (0,), b"", name="empty"),
              Tensor("i4", (5,), b"\x12\x34\x05", name="nib", quant_scheme=2, quant_axis=0,
                     group_size=2, scale_index=4, outer_index=5),
              Tensor("e8m0", (3,), b"\x01\x02\x03", name="s"),
              Tensor("f32", (1,), bytes(4), name="o")]
        b = D(ts)
        self.assertEqual(K.decode("tensors", b), ts)
        self.assertEqual(K.encode("tensors", K.decode("tensors", b)), b)


# ---------------------------------------------------------------- generator and CLI


class GeneratorTests(unittest.TestCase):
    def run_main(self, *argv):
        out, errs = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(errs):
            rc = G.main(list(argv))
        return rc, out.getvalue(), errs.getvalue()

    def test_46_cases_in_table_order_with_results(self):
        cases = G.build_cases()
        self.assertEqual(len(cases), 46)
        self.assertEqual([(c["name"], c["expect"]) for c in cases], G.TABLE)
        self.assertEqual(G.verify(cases), [])

    def test_spec_bytes(self):
        by = {c["name"]: c["bytes"] for c in G.build_cases()}
        self.assertEqual(by["kiln-v2-empty"].hex(), K.EMPTY_DIRECTORY_HEX)
        self.assertEqual(len(by["kiln-v2-f32"]), 200)
        self.assertEqual(by["kiln-v2-f32"][-8:].hex(), "0000803f000000c0")
        self.assertTrue(by["kiln-v2-f32-negzero"].endswith(bytes.fromhex("00000080")))
        self.assertTrue(by["kiln-v2-f64-nan"].endswith(bytes.fromhex("010000000000f87f")))
        self.assertTrue(by["kiln-v2-bf16"].endswith(b"\x80\x3f"))
        self.assertTrue(by["kiln-v2-f16-named"].endswith(b"\x00\x3c"))
        self.assertTrue(by["kiln-v2-u4"].endswith(b"\x21\x03"))
        self.assertTrue(by["kiln-v2-f8-pair"].endswith(b"\x38" + bytes(63) + b"\x3c"))
        self.assertEqual(by["kiln-v2-framed"][8:16], struct.pack("<Q", 0xE58AADC7552F0D82))
        self.assertEqual(by["kiln-v2-in-struct"], struct.pack("<q", 7) + by["kiln-v2-f32"])
        self.assertEqual(by["kiln-v2-bad-version"][4], 1)
        self.assertEqual(struct.unpack_from("<I", by["kiln-v2-count-cap"], 8)[0], 16_777_217)
        self.assertEqual(by["kiln-list-struct-hostile"], struct.pack("<I", 16_777_216))
        self.assertIn(b"Q4_K", by["kiln-v2-opaque"])

    def test_committed_file_is_current(self):
        rc, out, errs = self.run_main("--check")
        self.assertEqual(rc, 0, errs)
        data = json.loads(G.DEFAULT_OUT.read_text())
        self.assertEqual(data["cap"], 16_777_216)
        self.assertEqual(len(data["cases"]), 46)
        for c in data["cases"]:
            self.assertEqual(set(c), {"name", "type", "framed", "hex", "expect", "note"})
            self.assertEqual(c["hex"], c["hex"].lower())
            e = K.validate(c["type"], bytes.fromhex(c["hex"]), framed=c["framed"])
            self.assertEqual("accept" if e is None else e.code, c["expect"], c["name"])

    def test_deterministic(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = Path(d, "a.json"), Path(d, "b.json")
            self.assertEqual(self.run_main("--out", str(a))[0], 0)
            self.assertEqual(self.run_main("--out", str(b))[0], 0)
            self.assertEqual(a.read_bytes(), b.read_bytes())
            self.assertTrue(a.read_bytes().endswith(b"}\n"))
            self.assertEqual(self.run_main("--out", str(a), "--check")[0], 0)
            a.write_bytes(a.read_bytes().replace(b'"accept"', b'"TYPE"', 1))
            self.assertEqual(self.run_main("--out", str(a), "--check")[0], 1)

    def _refuses(self, mutate, word):
        original = G.build_cases

        def patched():
            cases = original()
            mutate(cases)
            return cases

        with tempfile.TemporaryDirectory() as d:
            out = Path(d, "cases.json")
            G.build_cases = patched
            try:
                rc, _o, errs = self.run_main("--out", str(out))
            finally:
                G.build_cases = original
            self.assertNotEqual(rc, 0)
            self.assertFalse(out.exists())
            self.assertIn(word, errs)

    def test_refuses_wrong_expectation(self):
        def m(cases):
            for c in cases:
                if c["name"] == "kiln-v2-overlap":
                    c["expect"] = "LIMIT"
        self._refuses(m, "kiln-v2-overlap")

    def test_refuses_case_that_stops_failing(self):
        def m(cases):
            for c in cases:
                if c["name"] == "kiln-v2-dtype-zero":
                    c["bytes"] = c["base"]
        self._refuses(m, "kiln-v2-dtype-zero")

    def test_refuses_earlier_fault(self):
        def m(cases):
            for c in cases:
                if c["name"] == "kiln-v2-bool-byte":
                    c["bytes"] = setb(c["bytes"], 64 + 3, 0)  # still valid reserved
                    c["bytes"] = setb(c["bytes"], 64 + 2, 2)  # rank 2: a step-9 TYPE first
        self._refuses(m, "kiln-v2-bool-byte")

    def test_refuses_wrong_count(self):
        self._refuses(lambda cases: cases.pop(), "46")


class CheckOrderMatrixTests(unittest.TestCase):
    """spec/check-order-matrix.json: current, and every case holds on the reference."""

    def test_matrix_is_current_and_every_case_replays(self):
        r = subprocess.run([sys.executable, str(HERE / "gen_check_order.py"), "--check"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        data = json.loads(CO.DEFAULT_OUT.read_text())
        self.assertEqual(data["cap"], CAP)
        fields = {"name", "type", "framed", "hex", "expect", "offset", "rule", "rust_rule", "note",
                  "relation", "a_step", "b_step"}
        for c in data["cases"]:
            self.assertEqual(set(c), fields, c["name"])
            e = K.validate(c["type"], bytes.fromhex(c["hex"]), framed=c["framed"])
            self.assertIsNotNone(e, f"{c['name']}: accepted")
            self.assertEqual((e.code, e.offset, e.rule), (c["expect"], c["offset"], c["rule"]),
                             c["name"])
        self.assertGreater(len(data["cases"]), 2000)
        self.assertTrue(all(s["reason"] for s in data["skipped"]))

    def test_tables_parse_with_a_planter_for_every_rule(self):
        text = CO.SPEC.read_text(encoding="utf-8")
        rows = CO.parse_table(text, "directory")
        frozen = CO.parse_table(text, "frozen")
        self.assertEqual(len(rows), 66)
        self.assertEqual(len(frozen), 21)
        self.assertEqual([r.rule for r in rows.values() if r.unreachable], ["dir_size_overflow"])
        planted = {p.rule for p in CO.directory_planters()}
        self.assertEqual(planted, {r.rule for r in rows.values() if not r.unreachable})
        self.assertEqual(rows["overlap"].step, "9")
        self.assertEqual(rows["offset_not_canonical"].step, "10")
        order = CO.Order(rows)
        # payload_bytes_not_canonical runs after every descriptor's placement
        self.assertLess(order.key("gap_nonzero", 50), order.key("payload_bytes_not_canonical", None))
        self.assertLess(order.key("name_duplicate", 0), order.key("heap_length", None))

    def test_out_of_order_ranges_lose_to_a_later_step_9_fault(self):
        # u8[4] @64, u8[4] @0, f32[2^62, 8] @128: not an overlap; LIMIT at the third
        cases, _skipped, _d, _f = self.matrix()
        pinned = [c for c in cases if c["name"] == "pinned/out-of-order-ranges-then-shape-overflow"]
        self.assertEqual(len(pinned), 1)
        c = pinned[0]
        self.assertEqual((c["expect"], c["offset"], c["rule"]), ("LIMIT", 64 + 2 * 128 + 48, "shape_overflow"))
        for rule in ("shape_overflow", "range_overflow", "byte_size_overflow"):
            self.assertTrue(any(c["rule"] == rule and "offset_not_canonical.swap" in c["name"]
                                and c["b_step"] == "10" for c in cases), rule)

    def test_refuses_a_table_the_reference_disagrees_with(self):
        # Claim shape_tail is checked before rank: one descriptor with rank 9
        # and a nonzero slot 7 then expects shape_tail, the reference says rank.
        text = CO.SPEC.read_text(encoding="utf-8")
        rank = "| `rank` | `RankTooLarge` | 9 | 6 | yes | TYPE | |\n"
        tail = "| `shape_tail` | `ShapeTail` | 9 | 7 | yes | TYPE | |\n"
        self.assertIn(rank + tail, text)
        swapped = text.replace(rank + tail, tail.replace("| 7 |", "| 6 |") + rank.replace("| 6 |", "| 7 |"))
        with self.assertRaises(CO.MatrixError) as cm:
            CO.build(swapped)
        self.assertIn("kiln_ref gives", str(cm.exception))
        # a table row out of check order is refused before anything is built
        with self.assertRaises(CO.MatrixError):
            CO.build(text.replace(rank + tail, tail + rank))

    _cache = None

    @classmethod
    def matrix(cls):
        if cls._cache is None:
            cls._cache = CO.build()
        return cls._cache


class CliTests(unittest.TestCase):
    def run_cli(self, args, stdin):
        return subprocess.run([sys.executable, str(HERE / "kiln_ref.py")] + args, input=stdin,
                              capture_output=True, text=True, timeout=120)

    def test_validate(self):
        lines = [K.EMPTY_DIRECTORY_HEX, K.EMPTY_DIRECTORY_HEX + "00", "4b4c4e58", "zz", ""]
        r = self.run_cli(["validate", "--type", "tensors"], "\n".join(lines) + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "accept", "reject TRAILING 64 trailing", "reject FRAME 0 dir_magic",
            "error bad_hex", "reject EOF 0 dir_magic_eof"])

    def test_validate_framed_and_caps(self):
        t = "struct{id:i64,batch:tensors,}"
        framed = K.encode_frame(t, {"id": 1, "batch": []}).hex()
        r = self.run_cli(["validate", "--type", t, "--framed"], framed + "\n" + framed[:-2] + "\n")
        self.assertEqual(r.stdout.splitlines(), ["accept", "reject EOF 24 dir_header_eof"])
        r = self.run_cli(["validate", "--type", "list<u8>", "--byte-cap", "2", "--count-cap", "0"],
                         "03000000616263\n02000000610x\n")
        self.assertEqual(r.stdout.splitlines(), ["reject LIMIT 0 length_cap", "error bad_hex"])

    def test_bad_type(self):
        r = self.run_cli(["validate", "--type", "list<" * 65 + "u8" + ">" * 65], "")
        self.assertEqual(r.returncode, 2)
        self.assertIn("LIMIT", r.stderr)
        r = self.run_cli(["validate", "--type", "nope"], "")
        self.assertEqual(r.returncode, 2)

    def test_selftest(self):
        r = self.run_cli(["selftest"], "")
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
