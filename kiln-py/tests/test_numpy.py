"""kiln.numpy: round trips of every dtype, ranks 0-8, zero-size dimensions,
zero-copy views of the memory map, the read-only flag, copies when misaligned,
and the model file layout save_file writes."""

from __future__ import annotations

import mmap
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import kiln
import kiln.numpy as kn

ml_dtypes = pytest.importorskip("ml_dtypes")

NATIVE = [np.float64, np.float32, np.float16, np.bool_, np.int8, np.uint8, np.int16, np.uint16,
          np.int32, np.uint32, np.int64, np.uint64]
ML = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu]
KILN_NAME = {np.float64: "f64", np.float32: "f32", np.float16: "f16", np.bool_: "bool", np.int8: "i8",
             np.uint8: "u8", np.int16: "i16", np.uint16: "u16", np.int32: "i32", np.uint32: "u32",
             np.int64: "i64", np.uint64: "u64", ml_dtypes.bfloat16: "bf16", ml_dtypes.float8_e4m3fn: "f8e4m3",
             ml_dtypes.float8_e5m2: "f8e5m2", ml_dtypes.float8_e8m0fnu: "e8m0"}


def sample(dtype: Any, shape: Any, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if len(shape) else 1
    d = np.dtype(dtype)
    if d == np.bool_:
        flat = rng.integers(0, 2, n).astype(bool)
    elif d.kind in "iu":
        info = np.iinfo(d)
        flat = rng.integers(info.min, info.max, n, dtype=d, endpoint=True)
    elif d.kind == "f":
        flat = rng.standard_normal(n).astype(d)
    else:  # ml_dtypes: any bit pattern except NaNs that do not compare equal
        flat = rng.integers(0, 4, n).astype(np.float32).astype(d)
    return flat.reshape(shape)


def mapped(a: np.ndarray) -> Any:
    """The object at the end of an array's base chain (arrays, then memoryviews)."""
    b: Any = a
    while isinstance(b, np.ndarray):
        b = b.base
    while isinstance(b, memoryview):
        b = b.obj
    return b


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", NATIVE + ML, ids=lambda d: KILN_NAME[d])
def test_round_trip_every_dtype(dtype: Any, tmp_path: Path) -> None:
    tensors = {f"r{rank}": sample(dtype, (2,) * rank, rank) for rank in range(9)}
    tensors["zero"] = np.zeros((3, 0, 2), dtype)
    tensors["odd"] = sample(dtype, (5, 7), 9)
    p = tmp_path / "m.kiln"
    kn.save_file(tensors, p)
    kiln.validate(p)
    back = kn.load_file(p)
    assert list(back) == sorted(tensors)
    for k, v in tensors.items():
        assert same(back[k], np.asarray(v)), k
    assert same(kn.load(p.read_bytes())["odd"], tensors["odd"])
    with kiln.safe_open(p) as f:
        assert f.tensor_info("odd").dtype == KILN_NAME[dtype]
        assert f.tensor_info("r0").shape == ()


def test_rank_nine_is_refused() -> None:
    with pytest.raises(kiln.KilnError) as e:
        kn.save({"x": np.zeros((1,) * 9, np.float32)})
    assert e.value.code == "LIMIT"


@pytest.mark.parametrize("mltype,kiln_name", [("int4", "i4"), ("uint4", "u4"), ("float4_e2m1fn", "e2m1")])
def test_packed_nibbles_round_trip(mltype: str, kiln_name: str, tmp_path: Path) -> None:
    dt = getattr(ml_dtypes, mltype)
    values = np.arange(7).astype(np.float32) if mltype == "float4_e2m1fn" else np.arange(7) - (3 if mltype == "int4" else 0)
    a = values.astype(dt).reshape(7)
    p = tmp_path / "p.kiln"
    kn.save_file({"q": a}, p)
    raw = kn.load_file(p)["q"]
    assert raw.dtype == np.uint8 and raw.shape == (4,)          # wire bytes, low nibble first
    with kiln.safe_open(p) as f:
        info = f.tensor_info("q")
    assert (info.dtype, info.shape, info.packed, info.byte_length) == (kiln_name, (7,), True, 4)
    un = kn.unpack(raw, info.dtype, info.shape)
    assert np.array_equal(un.astype(np.float32), a.astype(np.float32))
    # The Packed wrapper writes the same file.
    again = kn.save({"q": kn.Packed(kiln_name, raw, (7,))})
    assert again == p.read_bytes()


def test_opaque_round_trip() -> None:
    data = np.arange(36, dtype=np.uint8)
    b = kn.save({"blocks": kn.Opaque(4096, "q4_0", 18, data, (64,))})
    kiln.validate(b)
    raw = kn.load(b)["blocks"]
    assert same(raw, data)


def test_views_are_zero_copy_over_the_memory_map(tmp_path: Path) -> None:
    tensors = {"a": np.arange(1000, dtype=np.float32), "b": np.ones((3, 5), np.float64), "c": np.arange(7, dtype=np.int8)}
    p = tmp_path / "z.kiln"
    kn.save_file(tensors, p)
    arrays = kn.load_file(p)
    maps = {id(mapped(a)) for a in arrays.values()}
    assert len(maps) == 1                                      # one map for all
    mm = mapped(arrays["a"])
    assert isinstance(mm, mmap.mmap) and len(mm) == p.stat().st_size
    whole = np.frombuffer(mm, np.uint8)
    with kiln.safe_open(p) as f:
        for k, a in arrays.items():
            assert np.shares_memory(a, whole), k
            info = f.tensor_info(k)
            assert a.__array_interface__["data"][0] - whole.__array_interface__["data"][0] == info.offset
            assert info.offset % 64 == 0
        assert f.tensor_info("a").offset % 4096 == 0            # payloads at page offsets in the file
    assert not any(a.flags.writeable for a in arrays.values())
    with pytest.raises(ValueError):
        arrays["a"][0] = 1.0
    with pytest.raises(ValueError):
        arrays["a"].flags.writeable = True                      # a read-only map cannot be made writable


def test_views_keep_the_map_alive(tmp_path: Path) -> None:
    import gc

    p = tmp_path / "alive.kiln"
    kn.save_file({"w": np.arange(4096, dtype=np.int32)}, p)
    w = kn.load_file(p)["w"]
    gc.collect()
    mm = mapped(w)
    assert int(w[-1]) == 4095 and not mm.closed
    with pytest.raises(BufferError):
        mm.close()                                             # exported: cannot be unmapped under the view
    with kiln.safe_open(p) as f:
        v = f.get_tensor("w")
    assert int(v[-1]) == 4095                                  # close() left the map to the view
    # Saving over the path renames a new file in: the view keeps the old bytes.
    kn.save_file({"w": np.zeros(4096, np.int32)}, p)
    assert int(w[-1]) == 4095
    assert int(kn.load_file(p)["w"][-1]) == 0


def test_load_from_buffers_views_the_buffer() -> None:
    b = kn.save({"x": np.arange(16, dtype=np.float64)})
    x = kn.load(b)["x"]
    assert mapped(x) is b and not x.flags.writeable
    ba = bytearray(b)
    y = kn.load(ba)["x"]
    assert np.shares_memory(y, np.frombuffer(ba, np.uint8)) and not y.flags.writeable
    with pytest.raises(BufferError):
        ba.clear()                                             # cannot be resized under the view
    mv = memoryview(b)
    assert np.shares_memory(kn.load(mv)["x"], np.frombuffer(b, np.uint8))


def test_misaligned_buffers_get_copies() -> None:
    b = kn.save({"x": np.arange(16, dtype=np.float64), "y": np.arange(5, dtype=np.uint8)})
    shifted = bytearray(1) + bytearray(b)
    view = memoryview(shifted)[1:]                            # every payload 1 byte off its alignment
    out = kn.load(view)
    assert np.array_equal(out["x"], np.arange(16, dtype=np.float64))
    assert not np.shares_memory(out["x"], np.frombuffer(shifted, np.uint8))
    assert np.shares_memory(out["y"], np.frombuffer(shifted, np.uint8))   # bytes are never misaligned
    assert not out["x"].flags.writeable and not out["y"].flags.writeable


def test_inputs_any_layout_and_byte_order() -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    tensors: Dict[str, Any] = {
        "transposed": base.T,
        "strided": base[::2, ::3],
        "big": base.astype(">f4"),
        "scalar": np.int64(-5),
        "fortran": np.asfortranarray(base),
    }
    out = kn.load(kn.save(tensors))
    for k, v in tensors.items():
        assert np.array_equal(out[k], np.asarray(v)), k
        assert out[k].dtype == np.asarray(v).dtype.newbyteorder("="), k


def test_sorted_by_name_and_bytes_equal_save_file(tmp_path: Path) -> None:
    tensors = {"b": np.ones(2, np.float32), "a": np.zeros(3, np.int16), "é": np.ones(1, np.uint8), "Z": np.ones(1, np.uint8)}
    b = kn.save(tensors, {"k": "v"})
    with kiln.safe_open(_write(tmp_path, b)) as f:
        assert f.keys() == sorted(tensors, key=lambda s: s.encode())
    kn.save_file(tensors, tmp_path / "same.kiln", {"k": "v"})
    assert (tmp_path / "same.kiln").read_bytes() == b
    # Insertion order does not matter: the layout is canonical.
    assert kn.save(dict(reversed(list(tensors.items()))), {"k": "v"}) == b


def _write(tmp_path: Path, b: bytes) -> Path:
    p = tmp_path / "f.kiln"
    p.write_bytes(b)
    return p


def test_metadata_round_trip_and_padding_hidden(tmp_path: Path) -> None:
    meta = {"author": "kiln", "z": "", "ünï": "çødé", "kiln.convert.source_format": "npz"}
    p = tmp_path / "meta.kiln"
    kn.save_file({"w": np.ones(3, np.float32)}, p, meta)
    with kiln.safe_open(p) as f:
        assert f.metadata() == meta
        assert f.padding > 0 and (16 + f.directory_offset) >= 16
    with pytest.raises(ValueError, match="reserved"):
        kn.save({"w": np.ones(1)}, {"kiln.convert.pad": "  "})
    with pytest.raises(TypeError):
        kn.save({"w": np.ones(1)}, {"k": 1})  # type: ignore[dict-item]


def test_save_refuses_what_kiln_cannot_hold() -> None:
    for bad in (np.ones(2, np.complex64), np.array(["a"]), np.array([object()]), np.ones(2, np.longdouble)
                if np.dtype(np.longdouble).itemsize > 8 else np.ones(2, np.complex128), np.zeros(2, "M8[s]")):
        with pytest.raises(TypeError):
            kn.save({"x": bad})
    with pytest.raises(TypeError):
        kn.save({"x": [1.0, 2.0]})          # not an array
    with pytest.raises(TypeError):
        kn.save({1: np.ones(1)})            # type: ignore[dict-item]
    with pytest.raises(TypeError):
        kn.load("not-bytes.kiln")           # type: ignore[arg-type]


def test_unnamed_directory_keys_are_indexes() -> None:
    from conftest import GOLDENS

    f32 = next(c for c in GOLDENS if c["name"] == "kiln-v2-f32")
    out = kn.load(f32["bytes"])
    assert list(out) == ["0"] and out["0"].tolist() == [1.0, -2.0]


def test_empty_file_and_empty_model(tmp_path: Path) -> None:
    p = tmp_path / "empty.kiln"
    p.write_bytes(b"")
    with pytest.raises(kiln.KilnError) as e:
        kn.load_file(p)
    assert (e.value.code, e.value.offset) == ("EOF", 0)
    kn.save_file({}, p)
    assert kn.load_file(p) == {}
    with kiln.safe_open(p) as f:
        assert f.metadata() == {} and f.keys() == []


RAW_RULE = r'''
import sys
sys.modules["ml_dtypes"] = None          # as if ml_dtypes were not installed
import numpy as np, kiln, kiln.numpy as kn
assert not kn.has_ml_dtypes()
data = bytes.fromhex(sys.argv[1])
out = kn.load(data)
print({k: (str(v.dtype), v.shape, v.reshape(-1)[:2].tolist()) for k, v in out.items()})
'''


def test_without_ml_dtypes_bf16_and_f8_are_raw_bits() -> None:
    import ml_dtypes as ml

    tensors = {"bf": np.array([1.0, -2.0], ml.bfloat16), "e4": np.array([1.0, 0.5], ml.float8_e4m3fn),
               "e5": np.array([1.0, 2.0], ml.float8_e5m2), "e8": np.array([1.0, 4.0], ml.float8_e8m0fnu)}
    b = kn.save(tensors)
    r = subprocess.run([sys.executable, "-c", RAW_RULE, b.hex()], capture_output=True, text=True, check=True)
    got = eval(r.stdout)  # noqa: S307 - our own subprocess's repr
    assert got["bf"] == ("uint16", (2,), [0x3F80, 0xC000])
    assert got["e4"] == ("uint8", (2,), [tensors["e4"].view(np.uint8)[0], tensors["e4"].view(np.uint8)[1]])
    assert got["e5"][0] == "uint8" and got["e8"][0] == "uint8"


def test_empty_name_and_zero_dims_from_the_regressions() -> None:
    with pytest.raises(kiln.KilnError) as e:
        kn.save({"": np.ones(1, np.float32)})          # an empty name is no name: the reader's rule
    assert e.value.rule == "MissingName"
    from conftest import SPEC, load_cases

    case = next(c for c in load_cases(SPEC / "regressions" / "exact-element-count.json")
                if c["name"] == "zero-dim-after-overflowing-prefix")
    (arr,) = kn.load(case["bytes"]).values()
    assert arr.shape == (2, 2**40, 0) and arr.size == 0 and not arr.flags.writeable


def test_the_benchmark_script_runs() -> None:
    bench = Path(__file__).resolve().parents[1] / "bench" / "load_vs_safetensors.py"
    pytest.importorskip("safetensors")
    r = subprocess.run([sys.executable, str(bench), "--quick", "--repeats", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "| 8 tensors / 64 KiB |" in r.stdout


def test_the_sharded_benchmark_runs() -> None:
    bench = Path(__file__).resolve().parents[1] / "bench" / "sharded_load.py"
    pytest.importorskip("safetensors")
    r = subprocess.run([sys.executable, str(bench), "--quick", "--repeats", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "shards | 3.8 MiB |" in r.stdout and "safetensors / Kiln" in r.stdout
