"""Digests and sharded models (spec/model-file.md, issue 24): save_file(...,
max_shard_size=...) read back by load_file, safe_open and kiln.validate, the
same answers as safetensors on the same tensors, and every tampering
rejected with the shard named."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from conftest import cli_validate


def checkpoint() -> Dict[str, Any]:
    rng = np.random.default_rng(7)
    t: Dict[str, Any] = {
        "embed.weight": rng.standard_normal((64, 32)).astype(np.float16),
        "layers.0.attn.q.weight": rng.standard_normal((32, 32)).astype(np.float32),
        "layers.0.attn.k.weight": rng.standard_normal((32, 32)).astype(np.float32),
        "layers.0.mlp.up.weight": rng.standard_normal((48, 32)).astype(np.float64),
        "layers.0.norm.weight": np.linspace(-1, 1, 32, dtype=np.float32),
        "position_ids": np.arange(128, dtype=np.int64).reshape(1, 128),
        "mask": rng.integers(0, 2, (7, 5)).astype(np.bool_),
        "counts": rng.integers(0, 2**16, (9,), dtype=np.uint16),
        "bytes": rng.integers(-128, 128, (33,), dtype=np.int8),
        "step": np.array(12345, dtype=np.int32),         # rank 0
        "empty": np.zeros((0, 3), np.uint32),             # zero elements
        "lm_head.weight": rng.standard_normal((64, 32)).astype(np.float16),
    }
    return t


META = {"architecture": "tiny", "license": "MIT"}


def shard_files(folder: Path, stem: str = "model") -> List[Path]:
    return sorted(folder.glob(f"{stem}-*-of-*.kiln"))


@pytest.fixture()
def sharded(tmp_path: Path) -> Path:
    p = tmp_path / "model.kiln"
    kn.save_file(checkpoint(), p, META, max_shard_size="8KiB")
    return p


def test_round_trip_bit_exact_through_load_file_and_safe_open(sharded: Path) -> None:
    tensors = checkpoint()
    shards = shard_files(sharded.parent)
    assert len(shards) >= 3 and kiln._kiln.kind(sharded.read_bytes()) == "manifest"
    n = len(shards)
    assert [s.name for s in shards] == [f"model-{i:05}-of-{n:05}.kiln" for i in range(1, n + 1)]
    assert all(kiln._kiln.kind(s.read_bytes()) == "shard" for s in shards)
    for verify in (False, True):
        back = kn.load_file(sharded, verify=verify)
        assert sorted(back) == sorted(tensors)
        for k, v in tensors.items():
            assert back[k].dtype == v.dtype and back[k].shape == v.shape and back[k].tobytes() == v.tobytes(), k
            assert not back[k].flags.writeable
    assert kiln.validate(sharded) == kiln.Validated("manifest", True)  # every shard hashed
    assert kiln.validate(sharded, verify=False) == kiln.Validated("manifest", False)
    assert kiln.validate(sharded.read_bytes()) == kiln.Validated("manifest", False)  # alone: no shard read
    with kiln.safe_open(sharded, verify=True) as f:
        assert f.metadata() == META and sorted(f.keys()) == sorted(tensors) and len(f) == len(tensors)
        assert f.shards == [s.name for s in shards]
        for k, v in tensors.items():
            s = f.get_slice(k)
            assert s.get_shape() == list(v.shape) and s.dtype == kiln.DTYPE_NAMES[f.tensor_info(k).dtype_code]
            got = f.get_tensor(k)
            assert got.dtype == v.dtype and got.tobytes() == v.tobytes(), k
            info = f.tensor_info(k)
            assert info.shard in f.shards and info.byte_length == v.nbytes
            assert (sharded.parent / info.shard).read_bytes()[info.offset:info.offset + info.byte_length] == v.tobytes()
        assert np.array_equal(f.get_slice("embed.weight")[3:9, 2:], tensors["embed.weight"][3:9, 2:])


def test_shards_open_lazily_and_are_checked_first(sharded: Path) -> None:
    shards = shard_files(sharded.parent)
    last = shards[-1]
    last.unlink()                                         # only the last shard is missing
    with kiln.safe_open(sharded) as f:
        first = next(k for k in f.keys() if f.get_slice(k).get_shape() is not None)
        f.get_tensor(first)                               # shard 1 opens and is checked alone
        f.get_slice(f.keys()[-1]).get_dtype()             # the manifest's facts: nothing opened
        with pytest.raises(kiln.KilnError) as e:
            f.get_tensor(f.keys()[-1])
        assert (e.value.code, e.value.rule, e.value.file, e.value.offset) == ("SHARD", "ShardMissing", last.name, 0)
    with pytest.raises(kiln.KilnError) as e:
        kn.load_file(sharded)
    assert e.value.file == last.name and last.name in str(e.value)


def test_cli_reads_what_save_file_shards(kiln_cli: str, sharded: Path) -> None:
    (line,) = cli_validate(kiln_cli, [sharded])
    if not line["ok"] and line.get("kind") != "manifest":
        pytest.skip("this kiln CLI does not read manifests yet")
    assert line["ok"], line
    r = subprocess.run([kiln_cli, "inspect", str(sharded)], capture_output=True, text=True)
    assert r.returncode == 0 and all(k in r.stdout for k in checkpoint()), r.stdout + r.stderr


# ---- the same answers as safetensors ---------------------------------------------------------

INDEXINGS: List[Any] = [
    (), slice(None), 0, -1, slice(1, 3), slice(None, 2), slice(-3, None), slice(2, 2), Ellipsis,
    (slice(None), 0), (slice(None), slice(1, 4)), (0, slice(None)), (slice(1, 3), slice(0, 2)),
    (Ellipsis, 0), (Ellipsis, slice(1, 2)), (-1, -1), (slice(0, 1), Ellipsis),
]


def test_the_same_answers_as_safetensors(tmp_path: Path) -> None:
    stn = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open as st_open

    tensors = checkpoint()
    kp, sp = tmp_path / "model.kiln", tmp_path / "model.safetensors"
    kn.save_file(tensors, kp, META, max_shard_size="8KiB")
    stn.save_file(tensors, str(sp), metadata=META)
    ours, theirs = kn.load_file(kp), stn.load_file(str(sp))
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        assert ours[k].dtype == theirs[k].dtype and np.array_equal(ours[k], theirs[k]) and ours[k].tobytes() == theirs[k].tobytes()
    compared = 0
    with kiln.safe_open(kp) as f, st_open(str(sp), framework="np") as g:
        assert sorted(f.keys()) == sorted(g.keys()) and f.metadata() == g.metadata()
        for k in g.keys():
            a, b = f.get_slice(k), g.get_slice(k)
            assert a.get_dtype() == b.get_dtype() and a.get_shape() == b.get_shape(), k
            assert f.get_tensor(k).tobytes() == g.get_tensor(k).tobytes(), k
            for ix in INDEXINGS:
                try:
                    want = b[ix]
                except Exception:                         # an indexing safetensors refuses for this rank
                    continue
                got = a[ix]
                assert np.asarray(got).shape == np.asarray(want).shape and np.array_equal(got, want), (k, ix)
                compared += 1
    assert compared >= 126


def test_get_dtype_spelling_matches_safetensors_for_every_shared_dtype(tmp_path: Path) -> None:
    stn = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open as st_open

    table = kiln._kiln.dtype_table()
    codes = {code for code, _, _ in table}
    assert set(range(1, 20)) <= codes and 4096 in codes     # every core dtype has its row
    assert {c: n for c, n, _ in table if c < 4096} == kiln.DTYPE_NAMES
    ml = pytest.importorskip("ml_dtypes")
    arrays = {name: np.zeros(4, dt) for name, dt in [
        ("f64", np.float64), ("f32", np.float32), ("f16", np.float16), ("bool", np.bool_),
        ("i8", np.int8), ("u8", np.uint8), ("i16", np.int16), ("u16", np.uint16), ("i32", np.int32),
        ("u32", np.uint32), ("i64", np.int64), ("u64", np.uint64)]}
    kp, sp = tmp_path / "d.kiln", tmp_path / "d.safetensors"
    kn.save_file(arrays, kp)
    stn.save_file(arrays, str(sp))
    with kiln.safe_open(kp) as f, st_open(str(sp), framework="np") as g:
        for k in arrays:
            assert f.get_slice(k).get_dtype() == g.get_slice(k).get_dtype(), k
            assert f.get_slice(k).dtype == k and f.tensor_info(k).dtype == k      # Kiln's names stay
    # The dtypes NumPy cannot write through safetensors.numpy: the strings safetensors' Dtype has.
    assert [kiln.SAFETENSORS_DTYPES[c] for c in (4, 5, 6, 19)] == ["BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0"]
    packed = {"q": kn.Packed("i4", np.zeros(2, np.uint8), (4,)), "e": kn.Packed("e2m1", np.zeros(2, np.uint8), (4,)),
              "o": kn.Opaque(4096, "q4_0", 18, np.zeros(18, np.uint8), (32,)),
              "b": np.zeros(2, ml.bfloat16)}
    kn.save_file(packed, kp)
    with kiln.safe_open(kp) as f:
        assert [f.get_slice(k).get_dtype() for k in ("q", "e", "o", "b")] == ["i4", "e2m1", "opaque", "BF16"]


# ---- tampering -------------------------------------------------------------------------------


def equal_shards(folder: Path, stem: str = "model", seed: int = 0) -> Path:
    """Three shards of the same length (one f32 tensor of 4 KiB each)."""
    rng = np.random.default_rng(seed)
    p = folder / f"{stem}.kiln"
    kn.save_file({f"w{i}": rng.standard_normal(1024).astype(np.float32) for i in range(3)}, p, max_shard_size=4096)
    assert len(shard_files(folder, stem)) == 3
    return p


def rejected(path: Path, verify: bool = False) -> kiln.KilnError:
    with pytest.raises(kiln.KilnError) as e:
        kn.load_file(path, verify=verify)
    with pytest.raises(kiln.KilnError) as v:
        kiln.validate(path, verify=verify)
    assert (v.value.code, v.value.rule, v.value.file, v.value.offset) == (e.value.code, e.value.rule, e.value.file, e.value.offset)
    return e.value


def test_a_flipped_payload_byte_is_caught_with_verify(tmp_path: Path) -> None:
    p = equal_shards(tmp_path)
    s2 = shard_files(tmp_path)[1]
    b = bytearray(s2.read_bytes())
    b[-5] ^= 0x01                                         # passes every structural rule
    s2.write_bytes(bytes(b))
    e = rejected(p, verify=True)
    assert (e.code, e.rule, e.file, e.tensor) == ("DIGEST", "PayloadDigest", s2.name, "w1")
    assert f"of {s2.name} (tensor w1)" in str(e)
    kn.load_file(p)                                       # a map reads no payload: verify is the flag
    with kiln.safe_open(p, verify=True) as f:
        f.get_tensor("w0")
        with pytest.raises(kiln.KilnError) as lazy:
            f.get_tensor("w1")
        assert lazy.value.file == s2.name and lazy.value.tensor == "w1"


def test_missing_cut_swapped_and_foreign_shards(tmp_path: Path) -> None:
    p = equal_shards(tmp_path)
    s1, s2, s3 = shard_files(tmp_path)
    keep = {s: s.read_bytes() for s in (s1, s2, s3)}

    def restore() -> None:
        for s, b in keep.items():
            s.write_bytes(b)

    s2.unlink()
    e = rejected(p)
    assert (e.code, e.rule, e.file, e.offset) == ("SHARD", "ShardMissing", s2.name, 0)
    restore()
    s3.write_bytes(keep[s3][:-1])                         # cut by one byte
    e = rejected(p)
    assert (e.code, e.rule, e.file, e.offset) == ("SHARD", "ShardLength", s3.name, len(keep[s3]) - 1)
    restore()
    s1.write_bytes(keep[s2])                              # two shards swapped
    s2.write_bytes(keep[s1])
    e = rejected(p)
    assert (e.code, e.rule, e.file) == ("SHARD", "ShardIndex", s1.name)
    restore()
    other = tmp_path / "other"
    other.mkdir()
    equal_shards(other, seed=1)                           # the same shapes, another model
    shutil.copyfile(shard_files(other)[2], s3)
    e = rejected(p)
    assert (e.code, e.rule, e.file) == ("SHARD", "ShardModel", s3.name)
    restore()
    kiln.validate(p)


def test_a_symlink_out_of_the_folder_is_a_missing_shard(tmp_path: Path) -> None:
    inner = tmp_path / "ckpt"
    inner.mkdir()
    p = equal_shards(inner)
    s2 = shard_files(inner)[1]
    outside = tmp_path / "elsewhere.kiln"
    s2.rename(outside)
    s2.symlink_to(outside)
    e = rejected(p)
    assert (e.code, e.rule, e.file) == ("SHARD", "ShardMissing", s2.name)
    s2.unlink()                                           # a link inside the folder is followed
    (inner / "real.kiln").write_bytes(outside.read_bytes())
    s2.symlink_to("real.kiln")
    kiln.validate(p)


def renamed_shard(manifest: bytes, old: str, new: bytes) -> bytes:
    """The manifest with shard name `old` replaced (its length word too: a
    manifest holds no offsets, and the model id covers only its tensor table)."""
    o = old.encode()
    at = manifest.index(struct.pack("<I", len(o)) + o)
    return manifest[:at] + struct.pack("<I", len(new)) + new + manifest[at + 4 + len(o):]


@pytest.mark.parametrize("name", [b"a/b.kiln", b"..", b".", b"a\x00b.kiln", b"/etc/passwd", b"..\\x.kiln",
                                  b"../model-00002-of-00003.kiln", b"c:x", b"", b"x" * 256])
def test_shard_names_that_are_not_plain_file_names(tmp_path: Path, name: bytes) -> None:
    p = equal_shards(tmp_path)
    s2 = shard_files(tmp_path)[1]
    p.write_bytes(renamed_shard(p.read_bytes(), s2.name, name))
    for opener in (kn.load_file, kiln.safe_open, kiln.validate):
        with pytest.raises(kiln.KilnError) as e:
            opener(p)
        assert (e.value.code, e.value.rule, e.value.file) == ("PATH", "ShardName", None), opener


def test_a_repeated_shard_name(tmp_path: Path) -> None:
    p = equal_shards(tmp_path)
    s1, s2, _ = shard_files(tmp_path)
    p.write_bytes(renamed_shard(p.read_bytes(), s2.name, s1.name.encode()))
    with pytest.raises(kiln.KilnError) as e:
        kiln.safe_open(p)
    assert (e.value.code, e.value.rule) == ("PATH", "ShardNameRepeated")


# ---- digests, the plain record, writing --------------------------------------------------------


def test_digests_by_default_and_the_plain_record(tmp_path: Path) -> None:
    t = {"w": np.arange(10, dtype=np.float32)}
    p = tmp_path / "m.kiln"
    kn.save_file(t, p)
    assert kiln._kiln.kind(p.read_bytes()) == "digests" and kiln._kiln.kind(kn.save(t)) == "digests"
    kn.save_file(t, p, digests=False)
    plain = p.read_bytes()
    assert kiln._kiln.kind(plain) == "plain" and plain == kn.save(t, digests=False)
    assert plain[8:16] == struct.pack("<Q", kiln._kiln.MODEL_HASH)
    assert np.array_equal(kn.load_file(p, verify=True)["w"], t["w"])       # nothing to compare: still loads
    assert kiln.validate(p) == kiln.Validated("plain", False)             # nothing compared
    b = bytearray(kn.save(t))
    b[-1] ^= 0x40
    kn.load(bytes(b))
    with pytest.raises(kiln.KilnError) as e:
        kn.load(bytes(b), verify=True)
    assert (e.value.code, e.value.tensor, e.value.file) == ("DIGEST", "w", None)
    with pytest.raises(kiln.KilnError):
        kiln.validate(bytes(b))
    assert kiln.validate(bytes(b), verify=False) == kiln.Validated("digests", False)
    assert kiln.validate(kn.save(t)) == kiln.Validated("digests", True)


def test_a_model_under_the_limit_is_one_file_and_stale_shards_go(tmp_path: Path) -> None:
    p = tmp_path / "model.kiln"
    t = {f"w{i}": np.full(1024, i, np.float32) for i in range(4)}
    kn.save_file(t, p, max_shard_size="1GB")
    assert kiln._kiln.kind(p.read_bytes()) == "digests" and shard_files(tmp_path) == []
    kn.save_file(t, p, max_shard_size=4096)
    assert len(shard_files(tmp_path)) == 4
    unrelated = tmp_path / "model-1-of-2.kiln"            # not a name save_file writes: kept
    unrelated.write_bytes(b"x")
    kn.save_file(t, p, max_shard_size=8192)
    assert [s.name for s in shard_files(tmp_path)] == ["model-00001-of-00002.kiln", "model-00002-of-00002.kiln", "model-1-of-2.kiln"]
    assert sorted(kn.load_file(p)) == sorted(t)
    kn.save_file(t, p)
    assert [s.name for s in shard_files(tmp_path)] == ["model-1-of-2.kiln"]
    with pytest.raises(ValueError):
        kn.save_file(t, p, max_shard_size=4096, digests=False)                # shards always carry digests


def test_quantized_tensors_stay_with_their_scales(tmp_path: Path) -> None:
    nibbles = np.arange(16, dtype=np.uint8).repeat(4)
    t = {
        "a": np.zeros(1024, np.float32),
        "w": kn.Quantized(kn.Packed("e2m1", nibbles, (4, 32)), scale="w.s", axis=1, group_size=32, outer="w.o"),
        "w.o": np.array([0.5], np.float32),
        "w.s": np.full((4, 1), 0.25, np.float16),
        "z": np.zeros(1024, np.float32),
    }
    p = tmp_path / "q.kiln"
    kn.save_file(t, p, max_shard_size=64)
    with kiln.safe_open(p) as f:
        assert len(f.shards) == 3
        assert f.tensor_info("w").shard == f.tensor_info("w.s").shard == f.tensor_info("w.o").shard
        q = f.tensor_info("w").quant
        assert q is not None and (q.scheme, q.scale, q.outer) == (2, "w.s", "w.o")
        assert f.get_tensor("w").tobytes() == nibbles.tobytes()


def test_size_grammar() -> None:
    assert [kn.parse_size(s) for s in ("500MB", "2GB", "1KB", "1KiB", "3MiB", "1GiB", "4K", "2M", "1G", "123", " 7 kb ")] == [
        500 * 10**6, 2 * 10**9, 1000, 1024, 3 << 20, 1 << 30, 4096, 2 << 20, 1 << 30, 123, 7000]
    assert kn.parse_size(4096) == 4096
    for bad in ("", "MB", "1.5GB", "-1", "1XB", "0", 0, -5):
        with pytest.raises(ValueError):
            kn.parse_size(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kn.parse_size(1.5)  # type: ignore[arg-type]


def test_errors_keep_their_fields_for_single_files() -> None:
    with pytest.raises(kiln.KilnError) as e:
        kiln.validate(b"KLNT")
    assert e.value.file is None and e.value.tensor is None and e.value.code == "EOF"
