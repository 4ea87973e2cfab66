"""The package's annotations and stubs: `mypy --strict` passes on a usage file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_mypy_strict_on_a_usage_file(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    here = Path(__file__).parent
    # One cache for both runs, new for each test run: the second run reuses the first's analysis
    # of torch, JAX and NumPy (about 30 s of CPU each time) and nothing older can be read.
    mypy = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "mypy-cache")]
    r = subprocess.run(mypy + [str(here / "typing_usage.py")], capture_output=True, text=True, cwd=here)
    assert r.returncode == 0, r.stdout + r.stderr
    # The installed package itself (its annotations and the native module's stub).
    r = subprocess.run(mypy + ["-p", "kiln"], capture_output=True, text=True, cwd=here)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_package_is_typed() -> None:
    import kiln

    pkg = Path(kiln.__file__).parent
    assert (pkg / "py.typed").exists() and (pkg / "_kiln.pyi").exists()
