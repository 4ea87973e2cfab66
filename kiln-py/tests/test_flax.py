"""kiln.flax: round trips per dtype, safetensors as the oracle, nested pytrees,
sharded checkpoints, safe_open(framework="flax"), DLPack into JAX and NumPy."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from conftest import require

jax = require("jax")
ml_dtypes = require("ml_dtypes")
st_flax = require("safetensors.flax")
import jax.numpy as jnp  # noqa: E402
import kiln.flax as kf  # noqa: E402

jax.config.update("jax_enable_x64", True)   # f64, i64 and u64 stay themselves

DTYPES = [name for name, d in kf.DTYPES.items() if d is not None]


def sample(name: str, shape: tuple = (3, 8), seed: int = 0) -> Any:
    """A JAX array of Kiln dtype ``name``."""
    dt = np.dtype(getattr(ml_dtypes, kf.DTYPES[name], None) or kf.DTYPES[name])
    rng = np.random.default_rng(seed)
    if name == "bool":
        a = rng.integers(0, 2, shape).astype(bool)
    elif name in ("i4", "u4", "e2m1"):
        a = rng.integers(-8 if name == "i4" else 0, 8 if name == "i4" else 16, shape).astype(np.int8)
        a = a.astype(dt) if name != "e2m1" else (a & 0xF).astype(np.uint8).view(dt)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    else:
        a = rng.standard_normal(shape).astype(np.float32).astype(dt)
        if name == "e8m0":
            a = (rng.integers(0, 255, shape).astype(np.uint8)).view(dt)
    return jnp.asarray(a)


def same(a: Any, b: Any) -> bool:
    """Equal dtype, shape and values (bytes, so NaN payloads count; the 4-bit types by value)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.float4_e2m1fn)):
        return bool(np.array_equal(x.astype(np.float32), y.astype(np.float32)))
    return bool(np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8)))


@pytest.mark.parametrize("name", DTYPES)
def test_round_trip_every_dtype(tmp_path: Path, name: str) -> None:
    tensors = {"a": sample(name, (4, 6)), "b": sample(name, (5,), seed=1), "empty": sample(name, (0, 2))}
    p = tmp_path / "m.kiln"
    kf.save_file(tensors, p, {"k": "v"})
    back = kf.load_file(p)
    assert back.keys() == tensors.keys()
    for k in tensors:
        assert isinstance(back[k], jax.Array)
        assert back[k].dtype == tensors[k].dtype and same(back[k], tensors[k]), (name, k)
    again = kf.load(kf.save(tensors))
    assert all(same(again[k], tensors[k]) for k in tensors)
    with kiln.safe_open(p, framework="flax") as f:
        assert f.metadata() == {"k": "v"} and f.tensor_info("a").dtype == name
        if name in ("i4", "u4", "e2m1"):
            with pytest.raises(TypeError, match="raw"):
                f.get_slice("a")[1:]
            assert f.raw("a").shape == (4, 3)      # packed rows: through the raw bytes
        else:
            assert same(f.get_slice("a")[1:], tensors["a"][1:])


def test_safetensors_is_the_oracle(tmp_path: Path) -> None:
    names = ["f64", "f32", "f16", "bf16", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "bool"]
    tensors = {f"t.{n}": sample(n, (2, 3), seed=i) for i, n in enumerate(names)}
    sp, kp = tmp_path / "m.safetensors", tmp_path / "m.kiln"
    st_flax.save_file(tensors, str(sp))
    kf.save_file(tensors, kp)
    theirs, ours = st_flax.load_file(str(sp)), kf.load_file(kp)
    assert theirs.keys() == ours.keys()
    for k in tensors:
        assert theirs[k].dtype == ours[k].dtype and same(theirs[k], ours[k]), k
    kiln.convert(sp, tmp_path / "c.kiln")
    converted = kf.load_file(tmp_path / "c.kiln")
    assert all(same(converted[k], theirs[k]) for k in tensors)


def test_zero_copy_through_dlpack(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    w = (np.arange(1 << 16, dtype=np.float32) % 1000).reshape(256, 256)
    f8 = {n: np.asarray(sample(n, (64,))) for n in ("f8e4m3", "f8e5m2", "e8m0")}
    kn.save_file({"w": w, "h": w.astype(np.float16), "b": np.ones(4, ml_dtypes.bfloat16), **f8}, p)
    with kiln.safe_open(p, framework="jax") as f:
        for name in ("w", "h"):
            a = f.get_tensor(name)
            assert a.unsafe_buffer_pointer() == f.raw(name).ctypes.data, name   # the map's bytes: no copy
            assert np.array_equal(np.asarray(a), w if name == "w" else w.astype(np.float16))
        b = f.get_tensor("b")     # an ml_dtypes type: its bits under DLPack's kDLBfloat
        assert b.dtype == jnp.bfloat16 and b.unsafe_buffer_pointer() == f.raw("b").ctypes.data
        assert np.array_equal(np.asarray(b), np.ones(4, ml_dtypes.bfloat16))
        for name in ("f8e4m3", "f8e5m2", "e8m0"):
            a = f.get_tensor(name)
            assert a.unsafe_buffer_pointer() == f.raw(name).ctypes.data, name
            assert same(a, jnp.asarray(kn.load_file(p)[name]))
    # DLPack into NumPy: the versioned protocol keeps the read-only flag
    arr = kn.load_file(p)["w"]
    assert not arr.flags.writeable
    back = np.from_dlpack(kf.ReadOnlyExport(arr))
    assert np.shares_memory(back, arr) and not back.flags.writeable
    # the unversioned one (what JAX asks for) is refused by NumPy for a read-only array, served by the export
    with pytest.raises(BufferError):
        arr.__dlpack__()
    capsule = kf.ReadOnlyExport(arr).__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    got = jax.dlpack.from_dlpack(kf.ReadOnlyExport(arr))
    assert got.unsafe_buffer_pointer() == arr.ctypes.data
    del arr, back


def test_nested_pytrees_flatten_with_dots(tmp_path: Path) -> None:
    params = {"params": {"Dense_0": {"kernel": jnp.ones((2, 3)), "bias": jnp.zeros(3)},
                         "blocks": [{"w": jnp.full((2,), 2.0)}, {"w": jnp.full((2,), 3.0)}]}}
    p = tmp_path / "m.kiln"
    kf.save_file(params, p)
    flat = kf.load_file(p)
    assert sorted(flat) == ["params.Dense_0.bias", "params.Dense_0.kernel", "params.blocks.0.w", "params.blocks.1.w"]
    nested = kf.unflatten(flat)
    assert same(nested["params"]["Dense_0"]["kernel"], params["params"]["Dense_0"]["kernel"])
    assert same(nested["params"]["blocks"]["1"]["w"], params["params"]["blocks"][1]["w"])
    assert kf.flatten({"a.b": jnp.ones(1)}).keys() == {"a.b"}     # a flat dict as it is
    with pytest.raises(ValueError, match="separator"):
        kf.flatten({"a": {"b.c": jnp.ones(1)}})
    with pytest.raises(ValueError, match="prefix"):
        kf.unflatten({"a": 1, "a.b": 2})


def test_sharded_checkpoints(tmp_path: Path) -> None:
    tensors: Dict[str, Any] = {f"layers.{i}.weight": jnp.full((64, 64), i, dtype=jnp.bfloat16) for i in range(6)}
    p = tmp_path / "model.kiln"
    kf.save_file(tensors, p, {"format": "flax"}, max_shard_size="20KB")
    with kiln.safe_open(p, framework="flax", verify=True) as f:
        assert len(f.shards) == 3 and f.metadata() == {"format": "flax"}
        assert same(f.get_slice("layers.5.weight")[:2, 3:], tensors["layers.5.weight"][:2, 3:])
        assert f.get_slice("layers.5.weight").get_dtype() == "BF16"
    back = kf.load_file(p, verify=True)
    assert all(same(back[k], tensors[k]) for k in tensors)


def test_opaque_tensors_are_refused_with_the_raw_accessor(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kn.save_file({"q8.weight": kn.Opaque(4096, "gguf.q8_0", 34, np.arange(272, dtype=np.uint8), (4, 64))}, p)
    with pytest.raises(TypeError, match=r"raw\('q8.weight'\)"):
        kf.load_file(p)
    with kiln.safe_open(p, framework="flax") as f:
        assert np.array_equal(f.raw("q8.weight"), np.arange(272, dtype=np.uint8))


def test_arrays_outlive_the_handle_and_donation_leaves_the_file(tmp_path: Path) -> None:
    """An array imported from the read-only map keeps the map alive; donating it
    to a jitted function (XLA may reuse a donated buffer) neither faults nor
    changes the file."""
    import gc

    p = tmp_path / "m.kiln"
    w = np.arange(4096, dtype=np.float32)
    kn.save_file({"w": w}, p)
    before = p.read_bytes()
    with kiln.safe_open(p, framework="flax") as f:
        a = f.get_tensor("w")
    gc.collect()
    assert np.array_equal(np.asarray(a), w)
    doubled = jax.jit(lambda x: x * 2, donate_argnums=0)(kf.load_file(p)["w"])
    assert np.array_equal(np.asarray(doubled), w * 2)
    assert p.read_bytes() == before and np.array_equal(np.asarray(kf.load_file(p)["w"]), w)
