"""Property tests (hypothesis): random tensor dicts and metadata round-trip
through save/load byte for byte; random Frozen values through encode/decode."""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import kiln  # noqa: E402
import kiln.numpy as kn  # noqa: E402

DTYPES = [np.float64, np.float32, np.float16, np.bool_, np.int8, np.uint8, np.int16, np.uint16,
          np.int32, np.uint32, np.int64, np.uint64]
try:
    import ml_dtypes

    DTYPES += [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu]
except ImportError:  # pragma: no cover
    pass

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
shapes = st.lists(st.integers(0, 3), min_size=0, max_size=8).map(tuple)


@st.composite
def arrays(draw: Any) -> np.ndarray:
    dt = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(shapes)
    n = int(np.prod(shape)) if shape else 1
    raw = draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
    a = np.frombuffer(raw, np.uint8).copy()
    if dt == np.bool_:
        a &= 1                                            # only 0 and 1 are bools
    return a.view(dt).reshape(shape)


@settings(max_examples=150, deadline=None, database=None)
@given(st.dictionaries(names, arrays(), max_size=6), st.dictionaries(names.filter(lambda k: k != kiln._kiln.PAD_KEY),
                                                                     st.text(max_size=20), max_size=3))
def test_save_load_round_trip(tensors: Dict[str, np.ndarray], meta: Dict[str, str]) -> None:
    b = kn.save(tensors, meta)
    kiln.validate(b)
    back = kn.load(b)
    assert list(back) == sorted(tensors, key=lambda s: s.encode())
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and back[k].tobytes() == v.tobytes()
        assert not back[k].flags.writeable
    assert kn.save(dict(reversed(list(tensors.items()))), meta) == b   # canonical: order does not matter


FROZEN = st.one_of(
    st.tuples(st.just("list<i32>"), st.lists(st.integers(-2**31, 2**31 - 1), max_size=20)),
    st.tuples(st.just("dict<str,f64>"), st.dictionaries(names, st.floats(allow_nan=False), max_size=5)),
    st.tuples(st.just("list<opt<str>>"), st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=5)),
    st.tuples(st.just("struct{a:u8,b:list<str>,c:opt<u64>,}"),
              st.fixed_dictionaries({"a": st.integers(0, 255), "b": st.lists(st.text(max_size=4), max_size=4),
                                     "c": st.one_of(st.none(), st.integers(0, 2**64 - 1))})),
)


def plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


@settings(max_examples=150, deadline=None, database=None)
@given(FROZEN, st.booleans())
def test_frozen_round_trip(case: Any, framed: bool) -> None:
    ty, value = case
    b = kiln.encode(value, ty, framed)
    assert plain(kiln.decode(b, ty, framed)) == value
    assert kiln.encode(kiln.decode(b, ty, framed), ty, framed) == b
