"""kiln.safe_open: the context manager, tensor_info, get_slice, metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from conftest import GOLDENS


def golden_file(tmp_path: Path, name: str) -> Path:
    c = next(c for c in GOLDENS if c["name"] == name)
    p = tmp_path / f"{name}.kiln"
    p.write_bytes(c["bytes"])
    return p


def test_keys_metadata_get_tensor(tmp_path: Path) -> None:
    tensors = {"emb": np.arange(12, dtype=np.float32).reshape(3, 4), "bias": np.ones(4, np.float16)}
    p = tmp_path / "m.kiln"
    kn.save_file(tensors, p, {"format": "np"})
    with kiln.safe_open(p, framework="numpy") as f:
        assert f.keys() == ["bias", "emb"] and f.offset_keys() == ["bias", "emb"]
        assert len(f) == 2 and "emb" in f and "nope" not in f and list(f) == ["bias", "emb"]
        assert f.metadata() == {"format": "np"}
        e = f.get_tensor("emb")
        assert np.array_equal(e, tensors["emb"]) and not e.flags.writeable
        info = f.tensor_info("emb")
        assert (info.dtype, info.dtype_code, info.shape, info.byte_length, info.layout, info.quant) == ("f32", 2, (3, 4), 48, None, None)
        s = f.get_slice("emb")
        # get_dtype answers in safetensors' spelling (code written for safetensors reads it); .dtype keeps Kiln's
        assert s.get_shape() == [3, 4] and s.get_dtype() == "F32" and s.dtype == "f32" and len(s) == 3
        rows = s[1:3]
        assert np.array_equal(rows, tensors["emb"][1:3])
        assert np.shares_memory(rows, e)                           # a view of the same map: only those pages are read
        assert np.array_equal(s[:, 2], tensors["emb"][:, 2])
        with pytest.raises(KeyError):
            f.get_tensor("nope")
    with pytest.raises(ValueError, match="closed"):
        f.get_tensor("emb")
    assert np.array_equal(e, tensors["emb"])                       # handed-out views outlive the handle


def test_plain_directory_quant_and_opaque(tmp_path: Path) -> None:
    with kiln.safe_open(golden_file(tmp_path, "kiln-v2-scales-outer")) as f:
        assert f.metadata() is None
        quantized = [f.tensor_info(k) for k in f.keys() if f.tensor_info(k).quant is not None]
        assert quantized
        q = quantized[0].quant
        assert q is not None and q.scheme == 2 and q.scale in f and q.outer in f
        assert f.tensor_info(q.outer).dtype == "f32" and f.tensor_info(q.outer).shape in ((), (1,))
    with kiln.safe_open(golden_file(tmp_path, "kiln-v2-opaque")) as f:
        (k,) = f.keys()
        info = f.tensor_info(k)
        assert info.opaque and info.layout and info.block_size > 0
        raw = f.get_tensor(k)
        assert raw.dtype == np.uint8 and raw.shape == (info.byte_length,)


def test_rejected_files_and_bad_arguments(tmp_path: Path) -> None:
    p = golden_file(tmp_path, "kiln-v2-duplicate-name")
    with pytest.raises(kiln.KilnError) as e:
        kiln.safe_open(p)
    assert e.value.code == "TYPE" and e.value.rule == "DuplicateName"
    ok = golden_file(tmp_path, "kiln-v2-f32")
    for framework in ("mlx", "tf", "tensorflow", "paddle", "torchx"):
        with pytest.raises(ValueError, match="Kiln serves 'numpy' \\(or 'np'\\), 'pt' \\(or 'torch'\\) and 'flax'"):
            kiln.safe_open(ok, framework=framework)
    with pytest.raises(ValueError, match="only 'cpu'"):
        kiln.safe_open(ok, framework="np", device="cuda")
    with pytest.raises(FileNotFoundError):
        kiln.safe_open(tmp_path / "missing.kiln")


def test_framework_tests_fail_rather_than_skip_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest.require: a missing torch or jax skips locally, fails under CI=true (issue 43)."""
    from conftest import require

    monkeypatch.setenv("CI", "true")
    with pytest.raises(ImportError):
        require("kiln_no_such_framework")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        require("kiln_no_such_framework")
