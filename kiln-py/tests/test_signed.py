"""kiln.verify against `kiln verify --json` (the Rust core through the CLI)
on the same files: the example model signed by `kiln sign` with a key made by
`openssl genpkey -algorithm ed25519`, each trust fault (another key, target
or version), and a flipped bit at every 61st byte of the signed file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import kiln

from conftest import REPO

EXAMPLE = REPO / "spec" / "examples" / "digits-mlp.model.kiln"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl")
    d = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("a", "b"):
        key, pub = d / f"{name}.pem", d / f"{name}.pub.pem"
        _openssl("genpkey", "-algorithm", "ed25519", "-out", str(key))
        _openssl("pkey", "-in", str(key), "-pubout", "-out", str(pub))
        out[name], out[name + ".pub"] = key, pub
    return out


@pytest.fixture(scope="module")
def signed(kiln_cli: str, keys: Dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("signed") / "model.kiln"
    cmd = [kiln_cli, "sign", "--key", str(keys["a"]), "--version", "5", "--target", "board-a", str(EXAMPLE), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def _cli(cli: str, pub: Path, files: List[Path], target: Optional[str], newer: Optional[int]) -> List[Dict[str, Any]]:
    cmd = [cli, "verify", "--json", "--pubkey", str(pub)]
    if target is not None:
        cmd += ["--target", target]
    if newer is not None:
        cmd += ["--newer-than", str(newer)]
    r = subprocess.run(cmd + [str(f) for f in files], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def _py(path: Path, pub: Path, target: Optional[str], newer: Optional[int]) -> Dict[str, Any]:
    try:
        rel = kiln.verify(path, pub.read_text(), target=target, newer_than=newer)
        return {"ok": True, "version": rel.version, "target": rel.target}
    except kiln.KilnError as e:
        return {"ok": False, "error": e.code, "rule": e.rule, "offset": e.offset}


def _same(cli: Dict[str, Any], py: Dict[str, Any]) -> None:
    assert cli["ok"] == py["ok"], (cli, py)
    if cli["ok"]:
        assert (cli["version"], cli["target"]) == (py["version"], py["target"])
    else:
        assert (cli["error"], cli["rule"], cli["offset"]) == (py["error"], py["rule"], py["offset"])


def test_the_signed_example_is_accepted_with_its_release(signed: Path, keys: Dict[str, Path]) -> None:
    rel = kiln.verify(signed, keys["a.pub"].read_text(), target="board-a", newer_than=4)
    assert (rel.version, rel.target) == (5, "board-a")
    der_key = kiln._public_key(keys["a.pub"].read_bytes())
    assert rel.key == der_key and rel.key_hex == der_key.hex()
    # The same key as raw bytes and as hex.
    assert kiln.verify(signed.read_bytes(), der_key) == rel
    assert kiln.verify(signed, der_key.hex()) == rel


@pytest.mark.parametrize(
    "key,target,newer,rule",
    [
        ("b.pub", None, None, "SignatureKey"),
        ("a.pub", "board-b", None, "ReleaseTarget"),
        ("a.pub", None, 5, "ReleaseVersion"),
        ("a.pub", None, None, None),
    ],
)
def test_trust_faults_agree_with_the_cli(
    kiln_cli: str, signed: Path, keys: Dict[str, Path], key: str, target: Optional[str], newer: Optional[int], rule: Optional[str]
) -> None:
    [cli] = _cli(kiln_cli, keys[key], [signed], target, newer)
    py = _py(signed, keys[key], target, newer)
    _same(cli, py)
    assert py.get("rule") == rule


def test_an_unsigned_model_is_not_signed(keys: Dict[str, Path]) -> None:
    with pytest.raises(kiln.KilnError) as e:
        kiln.verify(EXAMPLE, keys["a.pub"].read_text())
    assert (e.value.code, e.value.rule) == ("SIGNATURE", "NotSigned")


def test_flipped_bits_agree_with_the_cli(kiln_cli: str, signed: Path, keys: Dict[str, Path], tmp_path: Path) -> None:
    data = signed.read_bytes()
    files = []
    for at in range(0, len(data), 61):
        bad = bytearray(data)
        bad[at] ^= 0x04
        f = tmp_path / f"flip-{at}.kiln"
        f.write_bytes(bytes(bad))
        files.append(f)
    clis = _cli(kiln_cli, keys["a.pub"], files, "board-a", None)
    assert len(clis) == len(files)
    for f, cli in zip(files, clis):
        py = _py(f, keys["a.pub"], "board-a", None)
        _same(cli, py)
        assert not py["ok"], f


def test_keys_that_are_not_ed25519_public_keys(signed: Path) -> None:
    with pytest.raises(ValueError):
        kiln.verify(signed, b"\x01" * 31)
    with pytest.raises(ValueError):
        kiln.verify(signed, b"\x01" + b"\x00" * 31)  # the identity: of small order
    with pytest.raises(ValueError):
        kiln.verify(signed, "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n")
