"""The streamed save: files of 32 MiB and more are written from the arrays'
memory (the head and directory, one write per tensor, the digest table last)
instead of being built in memory. The file is the one ``kiln.numpy.save``
builds, byte for byte, and a save that fails leaves no file behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from kiln import _kiln

ml_dtypes = pytest.importorskip("ml_dtypes")

DTYPES = [np.float64, np.float32, np.float16, np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
          np.uint32, np.int64, np.uint64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def arrays(elements: int) -> Dict[str, Any]:
    """One array per dtype (odd lengths: the payloads need gaps), plus an empty one and a scalar."""
    rng = np.random.default_rng(1)
    out: Dict[str, Any] = {}
    for i, d in enumerate(DTYPES):
        raw = rng.integers(0, 256, (elements + i) * np.dtype(d).itemsize, dtype=np.uint8)
        a = raw.view(np.uint8 if d == np.bool_ else d)
        out[f"t{i:02}.{np.dtype(d).name}"] = (raw & 1).view(np.bool_) if d == np.bool_ else a
    out["empty"] = np.zeros((0, 3), np.float32)
    out["scalar"] = np.array(7, np.int32)
    return out


def streamed(tensors: Dict[str, Any], path: Path, metadata: Dict[str, str], digests: bool, sort: bool = True) -> bytes:
    """The file the streamed path writes (``stream_min=0``: every size streams)."""
    _kiln.save(kn._specs(tensors), kn._metadata(metadata), os.fspath(path), 4096, sort, digests, None, 0)
    return path.read_bytes()


@pytest.mark.parametrize("digests", [True, False])
@pytest.mark.parametrize("elements", [0, 1, 1000])
def test_a_streamed_file_is_the_file_save_builds(tmp_path: Path, digests: bool, elements: int) -> None:
    tensors = arrays(elements)
    meta = {"author": "kiln", "zz": "after the padding key"}
    assert streamed(tensors, tmp_path / "m.kiln", meta, digests) == kn.save(tensors, meta, digests=digests)
    assert streamed({}, tmp_path / "e.kiln", {}, digests) == kn.save({}, digests=digests)
    unsorted = dict(reversed(list(tensors.items())))
    assert (streamed(unsorted, tmp_path / "u.kiln", {}, digests, sort=False)
            == kn.save(unsorted, sort=False, digests=digests))


def test_a_large_save_streams_and_verifies(tmp_path: Path) -> None:
    # Over the 32 MiB from which save_file streams, and over the 8 MiB from which digests are
    # computed on threads: the file is still save's, and its digests verify.
    tensors = arrays(2_300_000)
    p = tmp_path / "big.kiln"
    kn.save_file(tensors, p, {"k": "v"})
    assert p.stat().st_size >= 32 << 20
    assert p.read_bytes() == kn.save(tensors, {"k": "v"})
    v = kiln.validate(p.read_bytes())
    assert (v.kind, v.digests_verified) == ("digests", True)
    back = kn.load_file(p, verify=True)
    for k, v in tensors.items():
        assert back[k].tobytes() == v.tobytes()
    assert [f.name for f in tmp_path.iterdir()] == ["big.kiln"]


FAILING_SAVE = textwrap.dedent("""
    import os, resource, signal, sys
    import numpy as np
    import kiln.numpy as kn
    # Writes past 16 MiB fail with EFBIG (the signal that would end the process is ignored).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
    path = sys.argv[1]
    tensors = {f"w{i}": np.full(4 << 20, i, np.uint8) for i in range(10)}
    try:
        kn.save_file(tensors, path)
    except OSError as e:
        print("OSError", path in str(e), "too large" in str(e))
    else:
        print("saved")
""")


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    # A 40 MiB save whose writes fail from 16 MiB on: the save raises OSError naming the
    # path, the temporary file is removed, and the file that was there stays as it was.
    target = tmp_path / "m.kiln"
    old = kn.save({"old": np.ones(3, np.float32)})
    target.write_bytes(old)
    out = subprocess.run([sys.executable, "-c", FAILING_SAVE, os.fspath(target)], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["OSError", "True", "True"], out  # EFBIG: "File too large"
    assert [f.name for f in tmp_path.iterdir()] == ["m.kiln"]
    assert target.read_bytes() == old
    target.unlink()
    out = subprocess.run([sys.executable, "-c", FAILING_SAVE, os.fspath(target)], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "OSError"
    assert list(tmp_path.iterdir()) == []
