"""The native module's stub (``kiln/_kiln.pyi``) against the module as built: mypy's stubtest
finds every name ``kiln._kiln`` exports that the stub lacks (or has and the module does not),
and every signature, class or constant that disagrees with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

HERE = Path(__file__).parent


def stubtest(env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    cmd = [sys.executable, "-m", "mypy.stubtest", "kiln._kiln", "--allowlist", str(HERE / "stubtest-allowlist.txt"),
           "--mypy-config-file", os.devnull]
    # From the tests' folder, so that the installed package is checked, not a source tree.
    return subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, env=env)


def test_stub_matches_the_native_module() -> None:
    r = stubtest()
    assert r.returncode == 0, r.stdout + r.stderr


def test_stubtest_sees_a_missing_name(tmp_path: Path) -> None:
    # The check is live: the stub without one of the module's functions fails it.
    import kiln

    stub = (Path(kiln.__file__).parent / "_kiln.pyi").read_text()
    assert "\ndef kind(" in stub
    (tmp_path / "kiln").mkdir()
    (tmp_path / "kiln" / "__init__.pyi").write_text("")
    (tmp_path / "kiln" / "_kiln.pyi").write_text(stub.replace("\ndef kind(", "\ndef _gone("))
    r = stubtest({**os.environ, "MYPYPATH": str(tmp_path)})  # mypy takes stubs on MYPYPATH first
    assert r.returncode != 0 and "kiln._kiln.kind is not present in stub" in r.stdout, r.stdout + r.stderr
