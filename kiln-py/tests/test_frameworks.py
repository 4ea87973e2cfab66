"""What every framework shares: safe_open's framework and device arguments,
kiln.convert (the CLI's converter), foreign files naming it, get_slice on
opaque and packed tensors, the README's dtype table, the benchmark's smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from conftest import REPO, require

torch = require("torch")
jax = require("jax")

GGUF = REPO / "tests" / "corpus" / "ppocr-cls-q8_0-q4_0.gguf"


@pytest.mark.parametrize("framework,kind", [("numpy", np.ndarray), ("np", np.ndarray), ("pt", "torch"),
                                            ("torch", "torch"), ("flax", "jax"), ("jax", "jax")])
def test_safe_open_serves_each_framework(tmp_path: Path, framework: str, kind: object) -> None:
    w = np.arange(24, dtype=np.float32).reshape(4, 6)
    p = tmp_path / "m.kiln"
    kn.save_file({"w": w, "b": np.ones(3, np.int64)}, p, {"format": framework}, max_shard_size=100)
    want = {"np": np.ndarray, "torch": torch.Tensor, "jax": jax.Array}
    with kiln.safe_open(p, framework=framework, device="cpu", verify=True) as f:
        assert f.framework in ("numpy", "torch", "jax") and f.metadata() == {"format": framework}
        assert len(f.shards) == 2 and f.keys() == ["b", "w"]
        t = f.get_tensor("w")
        assert isinstance(t, want["np"] if kind is np.ndarray else want[str(kind)])
        assert np.array_equal(np.asarray(t), w)
        part = f.get_slice("w")[1:3, ::2]
        assert isinstance(part, type(t)) or isinstance(part, jax.Array)
        assert np.array_equal(np.asarray(part), w[1:3, ::2])
        assert f.get_slice("w").get_dtype() == "F32" and f.get_slice("b").get_shape() == [3]
        assert not f.digests_verified                      # the shard of "b" is not opened yet
        assert np.array_equal(np.asarray(f.get_tensor("b")), np.ones(3, np.int64))
        assert f.digests_verified


def test_other_frameworks_and_devices_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kn.save_file({"w": np.ones(2, np.float32)}, p)
    for framework, name in (("mlx", "MLX"), ("tf", "TensorFlow"), ("tensorflow", "TensorFlow"), ("paddle", "PaddlePaddle")):
        with pytest.raises(ValueError, match=rf"'{framework}' \({name}\) is not supported: Kiln serves 'numpy'"):
            kiln.safe_open(p, framework=framework)
    for framework in ("np", "pt", "flax"):
        with pytest.raises(ValueError, match="device 'cuda:0' is not supported: only 'cpu'"):
            kiln.safe_open(p, framework=framework, device="cuda:0")
    with kiln.safe_open(p, framework="pt", device=torch.device("cpu")) as f:
        assert f.get_tensor("w").dtype == torch.float32


def test_convert_is_the_cli_converter(tmp_path: Path, kiln_cli: str) -> None:
    """kiln.convert writes what `kiln convert` writes, byte for byte, and refuses what it refuses."""
    out, cli_out = tmp_path / "m.kiln", tmp_path / "cli.kiln"
    done = kiln.convert(GGUF, out)
    subprocess.run([kiln_cli, "convert", str(GGUF), "-o", str(cli_out), "-q"], check=True)
    assert out.read_bytes() == cli_out.read_bytes()
    assert done.format == "gguf" and done.tensors > 0 and done.bytes == out.stat().st_size
    kiln.validate(out)
    sharded = tmp_path / "s" / "m.kiln"
    sharded.parent.mkdir()
    assert kiln.convert(GGUF, sharded, max_shard_size="20KB", fsync=False).tensors == done.tensors
    with kiln.safe_open(sharded) as f:
        assert len(f.shards) > 1
    with pytest.raises(ValueError, match="--max-shard-size"):
        kiln.convert(GGUF, tmp_path / "x.kiln", max_shard_size="lots")
    with pytest.raises(ValueError, match="GGUF"):
        kiln.convert(out, tmp_path / "x.gguf")          # no writer for .gguf (a usage fault)
    with pytest.raises(OSError):
        kiln.convert(tmp_path / "missing.safetensors", tmp_path / "x.kiln")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(GGUF.read_bytes()[:200])
    with pytest.raises(kiln.ConvertError) as e:
        kiln.convert(bad, tmp_path / "x.kiln")
    assert "bad.gguf" in str(e.value) and not (tmp_path / "x.kiln").exists()


def test_a_gguf_names_kiln_convert(tmp_path: Path) -> None:
    with pytest.raises(kiln.KilnError) as e:
        kiln.safe_open(GGUF, framework="flax")
    assert e.value.foreign == "gguf" and e.value.code == "FRAME"
    assert f"kiln.convert({str(GGUF)!r}, {str(GGUF.with_suffix('.kiln'))!r})" in "".join(e.value.__notes__)


def test_get_slice_on_opaque_raises_and_packed_rows_go_through_raw(tmp_path: Path) -> None:
    out = tmp_path / "m.kiln"
    kiln.convert(GGUF, out)
    with kiln.safe_open(out) as f:
        opaque = [k for k in f.keys() if f.tensor_info(k).opaque]
        assert opaque
        name = opaque[0]
        with pytest.raises(TypeError, match=rf"opaque blocks.*raw\('{name}'\)"):
            f.get_slice(name)[:1]
        assert f.raw(name).nbytes == f.tensor_info(name).byte_length
    p = tmp_path / "p.kiln"
    nib = np.arange(32, dtype=np.uint8)
    kn.save_file({"q4": kn.Packed("u4", nib, (8, 8)), "odd": kn.Packed("i4", nib[:8], (3, 5))}, p)
    with kiln.safe_open(p) as f:
        with pytest.raises(TypeError, match=r"nibbles.*raw\('q4'\), whose rows are the tensor's rows"):
            f.get_slice("q4")[:2]
        rows = f.raw("q4")[2:4]
        assert rows.shape == (2, 4) and not rows.flags.writeable
        assert np.array_equal(kn.unpack(rows, "u4", (2, 8)), kn.unpack(nib, "u4", (8, 8))[2:4])
        assert f.raw("odd").shape == (8,)                 # an odd row of nibbles: the bytes, 1-D


def test_the_readme_dtype_table_is_generated() -> None:
    r = subprocess.run([sys.executable, str(REPO / "kiln-py" / "scripts" / "dtype_table.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_core_dtype_has_an_entry_in_every_framework() -> None:
    import kiln.flax as kf
    import kiln.torch as kt

    names = {name for _, name, _ in kiln._kiln.dtype_table()}
    assert set(kt.NAMES) == names and set(kf.DTYPES) == names


def test_the_benchmark_smoke_run() -> None:
    require("safetensors")
    r = subprocess.run([sys.executable, str(REPO / "kiln-py" / "bench" / "frameworks.py"), "--smoke"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("x** |") == 4, r.stdout


def test_the_saving_benchmark_smoke_run() -> None:
    require("safetensors")
    r = subprocess.run([sys.executable, str(REPO / "kiln-py" / "bench" / "save_vs_safetensors.py"), "--smoke",
                        "--require"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    # numpy, torch and flax at 4 MiB and 1 MiB, three modes each
    assert r.stdout.count("x** |") == 18, r.stdout
