"""kiln.decode / kiln.encode: Frozen values to Python objects and back."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kiln

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spec" / "reference"))
import kiln_ref  # noqa: E402

CASES = [
    ("bool", True),
    ("i8", -128), ("u8", 255), ("i16", -30000), ("u16", 65535), ("i32", -2**31), ("u32", 2**32 - 1),
    ("i64", -2**63), ("u64", 2**64 - 1), ("int", 2**63 - 1), ("uint", 0),
    ("f32", 1.5), ("f64", -0.0), ("str", "héllo ✓"),
    ("opt<str>", None), ("opt<str>", "x"), ("opt<opt<i8>>", kiln.Some(None)), ("opt<opt<i8>>", kiln.Some(3)),
    ("list<str>", ["a", "", "b"]),
    ("dict<str,i32>", {"b": 2, "a": 1, "é": 3}),
    ("struct{id:i64,name:str,tags:dict<str,str>,}", {"id": 7, "name": "n", "tags": {"k": "v"}}),
    ("list<struct{x:f64,y:opt<u8>,}>", [{"x": 1.0, "y": None}, {"x": 2.0, "y": 4}]),
]


@pytest.mark.parametrize("ty,value", CASES, ids=[f"{t}={v!r}" for t, v in CASES])
def test_round_trip_and_agrees_with_the_reference(ty: str, value: Any) -> None:
    for framed in (False, True):
        b = kiln.encode(value, ty, framed)
        assert kiln.decode(b, ty, framed) == value
        # The independent reference codec reads the same bytes.
        assert kiln_ref.validate(ty, b, framed) is None


@pytest.mark.parametrize("ty,np_dtype", [("list<f32>", "<f4"), ("list<f64>", "<f8"), ("list<i16>", "<i2"),
                                          ("list<u64>", "<u8"), ("list<int>", "<i8"), ("list<bool>", "?"),
                                          ("list<u8>", "u1")])
def test_numeric_lists_are_numpy_views(ty: str, np_dtype: str) -> None:
    values = np.arange(10).astype(np_dtype)
    b = kiln.encode(values, ty)
    out = kiln.decode(b, ty)
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(np_dtype) and not out.flags.writeable
    assert np.array_equal(out, values)
    if out.dtype.itemsize <= 4:  # 4 bytes after the count word: aligned for <= 4-byte elements
        assert np.shares_memory(out, np.frombuffer(b, np.uint8))
    # Python sequences encode the same bytes.
    assert kiln.encode(values.tolist(), ty) == b
    assert kiln.encode(values, ty) == kiln_ref.encode(ty, [kiln_ref.F32.from_float(v) if ty == "list<f32>" else
                                                           kiln_ref.F64.from_float(v) if ty == "list<f64>" else
                                                           (bool(v) if ty == "list<bool>" else int(v)) for v in values.tolist()])


def test_tensors_in_a_struct() -> None:
    ty = "struct{step:u32,weights:tensors,}"
    value = {"step": 3, "weights": {"w": np.ones((2, 2), np.float32), "b": np.zeros(2, np.int8)}}
    b = kiln.encode(value, ty, framed=True)
    kiln.validate(b, ty, framed=True)
    out = kiln.decode(b, ty, framed=True)
    assert out["step"] == 3 and list(out["weights"]) == ["b", "w"]
    assert np.array_equal(out["weights"]["w"], value["weights"]["w"])
    unnamed = kiln.decode(kiln.encode({"step": 1, "weights": [np.ones(3)]}, ty), ty)
    assert list(unnamed["weights"]) == ["0"]


def test_encode_refuses_bad_values() -> None:
    with pytest.raises(OverflowError):
        kiln.encode(256, "u8")
    with pytest.raises(OverflowError):
        kiln.encode([1, -1], "list<u32>")
    with pytest.raises(OverflowError):
        kiln.encode(np.array([1, 300], np.int64), "list<u8>")   # unsafe cast: checked element by element
    with pytest.raises(TypeError):
        kiln.encode(1.5, "i32")
    with pytest.raises(TypeError):
        kiln.encode("abc", "list<str>")
    with pytest.raises(KeyError):
        kiln.encode({"id": 1}, "struct{id:i64,name:str,}")
    with pytest.raises(KeyError):
        kiln.encode({"id": 1, "name": "x", "extra": 2}, "struct{id:i64,name:str,}")
    with pytest.raises(TypeError):
        kiln.encode({1: 2}, "dict<str,i32>")
    with pytest.raises(kiln.TypeTextError) as e:
        kiln.encode(1, "list<u8")
    assert e.value.code == "TYPE"
    with pytest.raises(kiln.TypeTextError):
        kiln.decode(b"", "struct{a:i8,a:i8,}")


def test_struct_from_attributes_and_nan_bits() -> None:
    from dataclasses import dataclass

    @dataclass
    class P:
        x: float
        name: str

    b = kiln.encode(P(math.nan, "p"), "struct{x:f64,name:str,}")
    out = kiln.decode(b, "struct{x:f64,name:str,}")
    assert math.isnan(out["x"]) and out["name"] == "p"


def test_decode_errors_are_kiln_errors() -> None:
    with pytest.raises(kiln.KilnError) as e:
        kiln.decode(b"\x05\x00\x00\x00ab", "str")
    assert e.value.code == "EOF" and e.value.rule == "ByteLengthPastEnd" and e.value.offset <= 6
    with pytest.raises(kiln.KilnError) as e:
        kiln.decode(kiln.encode(1, "u8", framed=True), "i8", framed=True)
    assert e.value.code == "SCHEMA"
    with pytest.raises(kiln.KilnError) as e:
        kiln.decode(b"\x01\x02", "u8")
    assert e.value.code == "TRAILING"
