"""kiln.open, the front door (issue 42): any Kiln file by content through the
host crate's checks; safe_open is kiln.open behind safetensors' signature; a
fault names its shard and tensor; a foreign file keeps the Kiln verdict and
names its format and the command that converts it."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.numpy as kn

TENSORS = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(5, np.int64), "c": np.zeros(3, np.float16)}


def test_a_model_file_opens_by_name(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kn.save_file(TENSORS, p, {"author": "me"})
    with kiln.open(p) as f:
        assert isinstance(f, kiln.SafeOpen)
        assert f.keys() == ["a", "b", "c"] and f.metadata() == {"author": "me"}
        np.testing.assert_array_equal(f.get_tensor("a"), TENSORS["a"])
    with kiln.open(p, verify=True) as f:  # every digest compared too
        assert f.shards == []


def test_digests_verified_says_whether_every_payload_was_hashed(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kn.save_file(TENSORS, p)
    with kiln.open(p) as f:  # ruling 6: a map is not hashed unless asked
        assert f.digests_verified is False
    with kiln.open(p, verify=True) as f:
        assert f.digests_verified is True
    kn.save_file(TENSORS, p, digests=False)
    with kiln.open(p, verify=True) as f:  # nothing to compare in a plain record
        assert f.digests_verified is False
    folder = tmp_path / "s"
    folder.mkdir()
    kn.save_file(TENSORS, folder / "s.kiln", max_shard_size=40)
    with kiln.open(folder / "s.kiln", verify=True) as f:
        assert len(f.shards) > 1 and f.digests_verified is False  # shards open when first used
        for k in f.keys():
            f.get_tensor(k)
        assert f.digests_verified is True


def test_a_flipped_payload_byte_is_found_with_verify_and_names_the_tensor(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kn.save_file(TENSORS, p)
    with kiln.open(p) as f:
        at = f.tensor_info("b").offset
    data = bytearray(p.read_bytes())
    data[at] ^= 1
    p.write_bytes(bytes(data))
    with kiln.open(p) as f:  # ruling 6: a map is not hashed unless asked
        assert f.get_tensor("b")[0] != 1
    with pytest.raises(kiln.KilnError) as e:
        kiln.open(p, verify=True)
    assert (e.value.code, e.value.offset, e.value.file, e.value.tensor) == ("DIGEST", at, None, "b")
    assert e.value.foreign is None
    assert str(e.value) == f"DIGEST at byte {at} (tensor b): {e.value.description}"


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kn.save_file(TENSORS, p)
    p.write_bytes(p.read_bytes()[:-3])
    with pytest.raises(kiln.KilnError) as e:
        kiln.open(p)
    assert e.value.code == "EOF" and e.value.file is None


def test_a_sharded_model_names_its_missing_renamed_or_linked_out_shard(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    big = {f"t{i}": np.full((256,), i, np.float32) for i in range(4)}
    p = folder / "model.kiln"
    kn.save_file(big, p, max_shard_size="1KiB")
    shards = sorted(folder.glob("model-*-of-*.kiln"))
    assert len(shards) == 4
    with kiln.open(p) as f:
        assert f.shards == [s.name for s in shards]
        np.testing.assert_array_equal(f.get_tensor("t2"), big["t2"])
    shards[1].rename(folder / "renamed.kiln")
    with kiln.open(p) as f:  # shards are opened when first used
        f.get_tensor("t0")
        with pytest.raises(kiln.KilnError) as e:
            f.get_tensor("t1")
    assert (e.value.code, e.value.rule, e.value.file) == ("SHARD", "ShardMissing", shards[1].name)
    if hasattr(os, "symlink"):
        outside = tmp_path / "elsewhere.kiln"
        (folder / "renamed.kiln").rename(outside)
        os.symlink(outside, shards[1])
        with kiln.open(p) as f, pytest.raises(kiln.KilnError) as e:
            f.get_tensor("t1")
        assert (e.value.rule, e.value.file) == ("ShardMissing", shards[1].name)
        shards[1].unlink()
        outside.rename(shards[1])
    data = bytearray(shards[2].read_bytes())
    with kiln.open(p) as f:
        at = f.tensor_info("t2").offset
    data[at] ^= 1
    shards[2].write_bytes(bytes(data))
    with kiln.open(p, verify=True) as f, pytest.raises(kiln.KilnError) as e:
        f.get_tensor("t2")
    assert (e.value.code, e.value.offset, e.value.file, e.value.tensor) == ("DIGEST", at, shards[2].name, "t2")


def test_a_foreign_file_keeps_the_kiln_verdict_and_names_its_format(tmp_path: Path) -> None:
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    p = tmp_path / "w.safetensors"
    p.write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")
    for opener in (kiln.open, kiln.safe_open):
        with pytest.raises(kiln.KilnError) as e:
            opener(p)
        assert (e.value.code, e.value.offset, e.value.foreign) == ("FRAME", 0, "safetensors")
        assert str(e.value) == "FRAME at byte 0: the directory magic is not KLNT"
        notes = getattr(e.value, "__notes__", None)
        if notes is not None:  # Python 3.11+
            out = p.with_suffix(".kiln")
            assert notes == [f"{p} (safetensors): not a Kiln file; convert it with `kiln convert {p} -o {out}`; "
                             f"in Python: kiln.convert({str(p)!r}, {str(out)!r})"]
