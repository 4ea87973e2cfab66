"""Files written by kiln.numpy.save_file open in the CLI and the npm package;
files from `kiln convert` open in Python with the same arrays."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from conftest import REPO, cli_validate

TENSORS: Dict[str, Any] = {
    "layers.0.weight": np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 7,
    "layers.0.bias": np.linspace(-1, 1, 64).astype(np.float16),
    "embed": np.arange(-50, 50, dtype=np.int8).reshape(10, 10),
    "mask": np.array([True, False, True]),
    "step": np.uint64(12345),
    "empty": np.zeros((0, 3), np.int32),
}
META = {"author": "kiln-py", "license": "MIT"}


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    p = tmp_path / "model.kiln"
    kn.save_file(TENSORS, p, META)
    return p


def test_save_file_passes_kiln_validate(kiln_cli: str, saved: Path) -> None:
    # save_file writes the digests record: a Frozen value of its type text, framed.
    assert cli_validate(kiln_cli, [saved], kiln.DIGESTS_TYPE, framed=True) == [{"file": str(saved), "ok": True}]
    (line,) = cli_validate(kiln_cli, [saved])
    assert line["file"] == str(saved) and line["ok"] is True and line["kind"] == "digests" and line["digests_verified"] is True
    r = subprocess.run([kiln_cli, "inspect", str(saved), "--json"], capture_output=True, text=True, check=True)
    assert set(TENSORS) <= set(r.stdout.replace('"', " ").split()) or all(k in r.stdout for k in TENSORS)


def test_a_broken_save_is_rejected_alike(kiln_cli: str, saved: Path, tmp_path: Path) -> None:
    b = bytearray(saved.read_bytes())
    with kiln.safe_open(saved) as f:
        b[f.directory_offset + 8] ^= 0xFF          # the block's tensor_count
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(bytes(b))
    (line,) = cli_validate(kiln_cli, [bad])
    with pytest.raises(kiln.KilnError) as e:
        kiln.validate(bad)
    assert (e.value.code, e.value.offset, e.value.rule) == (line["error"], line["offset"], line["rule"])


def test_kiln_convert_of_npz_and_safetensors_opens_in_python(kiln_cli: str, tmp_path: Path) -> None:
    plain = {k: np.asarray(v) for k, v in TENSORS.items()}
    npz = tmp_path / "in.npz"
    np.savez(npz, **plain)
    sources = [npz]
    try:
        import safetensors.numpy as stn

        st = tmp_path / "in.safetensors"
        stn.save_file(plain, str(st), metadata=META)
        sources.append(st)
    except ImportError:
        pass
    for src in sources:
        out = tmp_path / (src.name + ".kiln")
        subprocess.run([kiln_cli, "convert", str(src), "-o", str(out)], check=True, capture_output=True)
        kiln.validate(out)
        back = kn.load_file(out)
        assert sorted(back) == sorted(plain), src
        for k, v in plain.items():
            assert back[k].dtype == v.dtype and back[k].shape == v.shape and back[k].tobytes() == v.tobytes(), (src, k)
        with kiln.safe_open(out) as f:
            meta = f.metadata()
            assert meta is not None and meta["kiln.convert.source_format"] == src.suffix.lstrip(".")
            # convert keeps the input's payload offsets modulo 4 KiB (for file-to-file
            # copies), so npz payloads may sit misaligned in the file: those load as copies.
            assert all(f.tensor_info(k).offset >= f.directory_offset for k in f.keys())


@pytest.mark.parametrize("digests", [False, True])
def test_save_file_converts_to_safetensors(kiln_cli: str, tmp_path: Path, digests: bool) -> None:
    stn = pytest.importorskip("safetensors.numpy")
    saved = tmp_path / "model.kiln"
    kn.save_file(TENSORS, saved, META, digests=digests)
    out = tmp_path / "out.safetensors"
    r = subprocess.run([kiln_cli, "convert", str(saved), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    back = stn.load_file(str(out))
    for k, v in TENSORS.items():
        assert np.array_equal(back[k], np.asarray(v)), k


NODE_CHECK = r"""
import { readFileSync } from 'node:fs';
const kiln = await import('kiln-wasm');           // node_modules/kiln-wasm -> kiln-wasm/pkg
if (kiln.init) await kiln.init();
const [file, start] = [process.argv[2], Number(process.argv[3])];
const bytes = new Uint8Array(readFileSync(file));
const describe = (dir) => {
  const out = {};
  for (const t of dir.tensors()) out[t.name] = { shape: t.shape.map(Number), first: Number(t.shape.reduce((a, b) => a * Number(b), 1)) ? Number(t.view()[0]) : null };
  return out;
};
const result = { block: describe(kiln.parseDirectory(bytes.subarray(start))) };
if (kiln.parseModel) {                            // model files by content (spec/model-file.md)
  const m = kiln.parseModel(bytes);
  result.model = describe(m.tensors);
  result.metadata = Object.fromEntries(m.metadata);
  result.isModelFile = m.isModelFile;
}
console.log(JSON.stringify(result));
"""


def test_the_npm_package_reads_save_file_output(saved: Path, tmp_path: Path) -> None:
    pkg = REPO / "kiln-wasm" / "pkg"
    node = shutil.which("node")
    if node is None or not (pkg / "package.json").exists():
        pytest.skip("node or kiln-wasm/pkg (kiln-wasm/build.sh) is missing")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "kiln-wasm").symlink_to(pkg, target_is_directory=True)
    script = tmp_path / "check.mjs"
    script.write_text(NODE_CHECK)
    with kiln.safe_open(saved) as f:
        start = f.directory_offset
    r = subprocess.run([node, str(script), str(saved), str(start)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    views = [got["block"]] + ([got["model"]] if "model" in got else [])
    if "model" in got:
        assert got["isModelFile"] and got["metadata"] == META
    for view in views:
        for k, v in TENSORS.items():
            a = np.asarray(v)
            assert view[k]["shape"] == list(a.shape), k
            if a.size:
                first = a.reshape(-1)[:1]
                want = int(first.view(np.uint16)[0]) if a.dtype == np.float16 else float(first[0])  # f16: raw bits in JS
                assert view[k]["first"] == pytest.approx(want, rel=1e-6), k


EXAMPLE = REPO / "spec" / "examples" / "digits-mlp.model.kiln"


def _as_saved(f: Any, name: str, arr: Any) -> Any:
    """What to hand `save` to write tensor `name` of open file `f` again."""
    info = f.tensor_info(name)
    value = kn.Packed(info.dtype, arr, info.shape) if info.dtype in ("i4", "u4", "e2m1") else arr
    q = info.quant
    if q is None:
        return value
    return kn.Quantized(value, scale=q.scale, axis=q.axis, group_size=q.group_size, outer=q.outer)


def test_save_writes_the_model_the_firmware_demo_runs() -> None:
    """The firmware demo runs spec/examples/digits-mlp.model.kiln from flash
    under QEMU (32/32 in CI; firmware-demo/). Rebuilt from its arrays, its
    metadata and its MXFP4 copy's quantization, `save` writes that file
    byte for byte (in its tensor order, `sort=False`), so what Python writes
    is what the firmware reads."""
    pytest.importorskip("ml_dtypes")  # e8m0 scales save as e8m0 only as ml_dtypes arrays
    firmware = "\n".join(p.read_text() for p in (REPO / "firmware-demo" / "src").glob("*.rs"))
    assert EXAMPLE.name in firmware
    arrays = kn.load_file(EXAMPLE)
    with kiln.safe_open(EXAMPLE) as f:
        meta = f.metadata()
        assert meta is not None
        tensors = {k: _as_saved(f, k, arrays[k]) for k in f.keys()}
    assert any(isinstance(v, kn.Quantized) for v in tensors.values())
    # The example is rewritten with digests by the converter's issue; either record is save's.
    digests = kiln._kiln.kind(EXAMPLE.read_bytes()) != "plain"
    assert kn.save(tensors, meta, sort=False, digests=digests) == EXAMPLE.read_bytes()
    # Sorted (the default), the same tensors in another order: another file, same contents.
    resorted = kn.load(kn.save(tensors, meta))
    assert list(resorted) == sorted(tensors) and all(resorted[k].tobytes() == arrays[k].tobytes() for k in arrays)


def test_quantized_tensors_round_trip(tmp_path: Path) -> None:
    nibbles = np.arange(16, dtype=np.uint8).repeat(4)          # 128 e2m1 elements, 64 bytes
    tensors = {
        "w": kn.Quantized(kn.Packed("e2m1", nibbles, (4, 32)), scale="w.s", axis=1, group_size=32, outer="w.o"),
        "w.s": np.full((4, 1), 0.25, np.float16),              # one scale per 32 elements of a row
        "w.o": np.array([0.5], np.float32),
    }
    p = tmp_path / "q.kiln"
    kn.save_file(tensors, p)
    with kiln.safe_open(p) as f:
        q = f.tensor_info("w").quant
        assert q is not None and (q.scheme, q.axis, q.group_size, q.scale, q.outer) == (2, 1, 32, "w.s", "w.o")
        assert f.get_tensor("w").tobytes() == nibbles.tobytes()
    # The core checks what it writes: a group size that does not divide the axis is refused.
    bad = dict(tensors, w=kn.Quantized(kn.Packed("e2m1", nibbles, (4, 32)), scale="w.s", axis=1, group_size=24))
    with pytest.raises(kiln.KilnError):
        kn.save(bad)
    with pytest.raises(kiln.KilnError):
        kn.save(dict(tensors, w=kn.Quantized(nibbles, scale="missing", axis=0, group_size=32)))
