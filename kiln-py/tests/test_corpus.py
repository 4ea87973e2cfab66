"""The committed real-model corpus (tests/corpus/, listed in scripts/corpus/corpus.json): files
that other projects ship in their PyPI and npm packages (Paddle2ONNX OCR models, silero-vad's
spox graph with its weights in If branches, an onnx "light" model, an int8 QDQ model, a llama.cpp
vocabulary GGUF, NumPy files, a quantized GGUF of real weights), each through
scripts/corpus/run.py's check_model: `kiln convert` (ONNX: `--onnx-graph`), `kiln validate`,
the round trip to safetensors against the original reader's values, and for ONNX onnxruntime
(Python, and onnxruntime-web under Node) on the original and the converted graph, bit for bit.

Nothing here is skipped: onnx, onnxruntime, gguf, Node, onnxruntime-web (kiln-wasm's npm
install) and the npm package (kiln-wasm/build.sh) are required, and a missing one fails.
The full corpus (one model with over 2 GiB of external data among it) is local: scripts/corpus/README.md."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict

import gguf  # noqa: F401  (required: the GGUF reader of the comparison)
import onnx  # noqa: F401
import onnxruntime  # noqa: F401
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "corpus"))
import fetch  # noqa: E402
import run  # noqa: E402

DOC = fetch.load()
SUBSET = [e for e in DOC["files"] if e["committed"]]


def test_subset_is_small_permissive_and_as_listed() -> None:
    """The committed copies are the listed bytes, a few MB in all, under permissive licences."""
    assert len(SUBSET) >= 8
    kinds = {e["kind"] for e in SUBSET}
    assert {"onnx", "gguf", "npy", "npz"} <= kinds
    assert sum(e["size"] for e in SUBSET) < 6 * 1024 * 1024
    for e in SUBSET:
        assert set(e["licence"].split(" AND ")) <= {"MIT", "Apache-2.0", "BSD-3-Clause", "ISC"}, e["id"]
        assert fetch.check(e, fetch.path_of(e, subset=True)) is None
    listed = {fetch.file_name(e) for e in SUBSET}
    on_disk = {p.name for p in fetch.COMMITTED.iterdir() if p.is_file() and p.suffix not in (".md",)}
    assert on_disk == listed, "tests/corpus/ holds exactly the committed entries (and its README)"


@pytest.mark.parametrize("entry", SUBSET, ids=[e["id"] for e in SUBSET])
def test_corpus_file(entry: Dict[str, Any], kiln_cli: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_BIN", kiln_cli)
    row = run.check_model(entry, fetch.path_of(entry, subset=True), tmp_path, web=True)
    bad = {k: v for k, v in row["steps"].items() if not (v == run.OK or v.startswith("n/a"))}
    assert not bad, f"{entry['id']}: {bad}"
    if entry["kind"] == "onnx":
        # Every weight of the original is a Kiln tensor or, under 1,024 bytes, inline (R1).
        assert row["kiln_tensors"] == row["expected_tensors"]
