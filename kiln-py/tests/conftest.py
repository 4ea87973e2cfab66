"""Shared fixtures: the repository, the golden cases, and the `kiln` CLI."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

# Hypothesis keeps its files out of the work tree.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "kiln-py-hypothesis"))

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "spec"
MODEL_TYPE = "struct{metadata:dict<str,str>,tensors:tensors,}"


def load_cases(path: Path) -> List[Dict[str, Any]]:
    cases: List[Dict[str, Any]] = json.loads(path.read_text())["cases"]
    for c in cases:
        c["bytes"] = bytes.fromhex(c["hex"])
    return cases


GOLDENS = load_cases(SPEC / "kiln-v2-cases.json")


def _find_cli() -> Optional[str]:
    env = os.environ.get("KILN_BIN")
    if env:
        return env
    if shutil.which("cargo") is None:
        return None
    # Builds (or finds up to date) the debug CLI, as `cargo test` leaves it.
    r = subprocess.run(["cargo", "build", "-q", "--locked", "-p", "kiln-cli"], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cargo build -p kiln-cli failed:\n{r.stderr}")
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    exe = target / "debug" / "kiln"
    return str(exe) if exe.exists() else None


_CLI: Dict[str, Optional[str]] = {}


@pytest.fixture(scope="session")
def kiln_cli() -> str:
    """Path of the `kiln` binary (KILN_BIN, or `cargo build -p kiln-cli`)."""
    if "path" not in _CLI:
        _CLI["path"] = _find_cli()
    path = _CLI["path"]
    if path is None:
        pytest.skip("no cargo and no KILN_BIN: the kiln CLI is not available")
    return path


def cli_validate(cli: str, files: List[Path], type_text: Optional[str] = None, framed: bool = False) -> List[Dict[str, Any]]:
    """`kiln validate --json` on each file (one process for all of them)."""
    cmd = [cli, "validate", "--json"]
    if type_text is not None:
        cmd += ["--type", type_text]
    if framed:
        cmd.append("--framed")
    r = subprocess.run(cmd + [str(f) for f in files], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert len(lines) == len(files), r.stdout
    return lines


def require(module: str) -> Any:
    """``module`` imported; where it is missing the test module is skipped,
    except under CI (``CI=true``), where the import error fails the run:
    CI never silently skips the framework tests (issue 43)."""
    if os.environ.get("CI") == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)
