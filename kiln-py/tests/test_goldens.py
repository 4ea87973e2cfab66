"""Every golden case, check-order case and regression through `kiln.validate`:
the same verdict (code, offset, rule) as the Rust core through the CLI and
the recorded expectation."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

import kiln
import kiln.numpy
from conftest import GOLDENS, SPEC, cli_validate, load_cases

Verdict = Optional[Tuple[str, int, str]]


def verdict(data: Any, type_text: Optional[str] = None, framed: bool = False) -> Verdict:
    try:
        kiln.validate(data, type_text, framed)
    except kiln.KilnError as e:
        return (e.code, e.offset, e.rule)
    return None


def test_there_are_46_goldens() -> None:
    assert len(GOLDENS) == 46
    assert sum(c["expect"] == "accept" for c in GOLDENS) == 17


@pytest.mark.parametrize("case", GOLDENS, ids=[c["name"] for c in GOLDENS])
def test_golden_expectation(case: Dict[str, Any]) -> None:
    v = verdict(case["bytes"], case["type"], case["framed"])
    if case["expect"] == "accept":
        assert v is None, v
    else:
        assert v is not None and v[0] == case["expect"], v
        assert 0 <= v[1] <= len(case["bytes"])
    # Every buffer type and a path give the same verdict.
    b = case["bytes"]
    for data in (bytearray(b), memoryview(b)):
        assert verdict(data, case["type"], case["framed"]) == v


def test_goldens_match_the_cli(kiln_cli: str, tmp_path: Path) -> None:
    """One `kiln validate --json` run per (type, framed) group: code, offset and rule agree."""
    groups: Dict[Tuple[str, bool], List[Tuple[Dict[str, Any], Path]]] = {}
    for c in GOLDENS:
        p = tmp_path / f"{c['name']}.kiln"
        p.write_bytes(c["bytes"])
        groups.setdefault((c["type"], c["framed"]), []).append((c, p))
    checked = 0
    for (ty, framed), items in groups.items():
        lines = cli_validate(kiln_cli, [p for _, p in items], ty, framed)
        for (c, p), line in zip(items, lines):
            ours = verdict(p, ty, framed)  # by path: the file is memory-mapped
            if line["ok"]:
                assert ours is None, (c["name"], ours)
            else:
                assert ours == (line["error"], line["offset"], line["rule"]), (c["name"], line)
                with pytest.raises(kiln.KilnError) as err:
                    kiln.validate(p, ty, framed)
                assert str(err.value) == line["message"]
            checked += 1
    assert checked == 46


@pytest.mark.parametrize("case", [c for c in GOLDENS if c["type"] == "tensors"], ids=lambda c: c["name"])
def test_untyped_validate_reads_directories(case: Dict[str, Any]) -> None:
    """Without a type (`kiln validate FILE`): a plain directory block is checked as one."""
    assert verdict(case["bytes"]) == verdict(case["bytes"], "tensors")


@pytest.mark.parametrize("case", [c for c in GOLDENS if c["type"] == "tensors" and c["expect"] == "accept"],
                         ids=lambda c: c["name"])
def test_accepted_directories_load(case: Dict[str, Any]) -> None:
    arrays = kiln.numpy.load(case["bytes"])
    assert all(isinstance(a, np.ndarray) and not a.flags.writeable for a in arrays.values())


# Rules whose offset the Rust core takes from another field than the reference
# (spec/kiln-v2.md section 15); tests/tests/check_order.rs allows the same.
OFFSET_CHOICES = {"HeaderTruncated", "DirectoryTruncated", "BlockTruncated", "HeapHole", "OpaqueBlockSize",
                  "NameWithoutFlag", "LayoutOnDenseDtype", "QuantFieldsOnPlain", "QuantAxis"}


def test_check_order_matrix() -> None:
    """spec/check-order-matrix.json: every pair of faults gives the verdict the
    spec's rule tables order first: code, the core's rule id, and the offset."""
    cases = load_cases(SPEC / "check-order-matrix.json")
    assert len(cases) > 2000
    for c in cases:
        v = verdict(c["bytes"], c["type"], c["framed"])
        assert v is not None and (v[0], v[2]) == (c["expect"], c["rust_rule"]), (c["name"], v)
        assert v[1] == c["offset"] or v[2] in OFFSET_CHOICES, (c["name"], v)
        assert v[1] <= len(c["bytes"])


def test_regressions() -> None:
    files = sorted((SPEC / "regressions").glob("*.json"))
    assert files
    n = 0
    for f in files:
        for c in load_cases(f):
            v = verdict(c["bytes"], c["type"], c["framed"])
            if c["expect"] == "accept":
                assert v is None, (f.name, c["name"], v)
            else:
                assert v is not None and v[0] == c["expect"], (f.name, c["name"], v)
            n += 1
    assert n >= 19


def test_frozen_goldens_decode() -> None:
    for c in GOLDENS:
        if c["expect"] == "accept" and c["type"] != "tensors":
            kiln.decode(c["bytes"], c["type"], c["framed"])
        elif c["type"] != "tensors":
            with pytest.raises(kiln.KilnError) as e:
                kiln.decode(c["bytes"], c["type"], c["framed"])
            assert e.value.code == c["expect"]
