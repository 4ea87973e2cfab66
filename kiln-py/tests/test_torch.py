"""kiln.torch: round trips per dtype, safetensors as the oracle, shared tensors,
sharded checkpoints, safe_open(framework="pt"), copy-on-write semantics."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import kiln
import kiln.numpy as kn
from conftest import require

torch = require("torch")
st_torch = require("safetensors.torch")
import kiln.torch as kt  # noqa: E402  (after torch: the module imports it)

# Every Kiln dtype torch has, by the core's names (the module's table).
DENSE = [name for name, d in kt.DTYPES.items() if d is not None]


def sample(name: str, shape: tuple = (3, 8), seed: int = 0) -> Any:
    """A tensor of Kiln dtype ``name`` with every byte pattern the dtype allows."""
    dtype = kt.DTYPES[name]
    g = torch.Generator().manual_seed(seed)
    if name == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point and dtype.itemsize >= 2:
        return torch.randn(shape, generator=g).to(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = torch.randint(0, 256, (n,), generator=g, dtype=torch.int16).to(torch.uint8)
    if name == "e8m0":
        raw[raw == 255] = 127  # 0xFF is e8m0's NaN
    return raw.view(dtype).view(shape)


def same(a: Any, b: Any) -> bool:
    """Equal dtype, shape and bytes (NaN payloads included)."""
    return bool(a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


@pytest.mark.parametrize("name", DENSE)
def test_round_trip_every_dtype(tmp_path: Path, name: str) -> None:
    shape = (4, 6) if name == "e2m1" else (3, 5)
    tensors = {"a": sample(name, shape), "b": sample(name, (7,), seed=1),
               "empty": sample(name, (0, 4))}
    p = tmp_path / "m.kiln"
    kt.save_file(tensors, p, {"k": "v"})
    back = kt.load_file(p)
    assert back.keys() == tensors.keys()
    for k in tensors:
        assert same(back[k], tensors[k]), (name, k)
    assert all(same(v, tensors[k]) for k, v in kt.load(kt.save(tensors)).items())
    with kiln.safe_open(p, framework="pt") as f:
        assert f.metadata() == {"k": "v"}
        info = f.tensor_info("a")
        assert info.dtype == name
        if name == "e2m1":  # the logical shape: two elements per byte
            assert info.shape == (4, 12) and same(f.get_tensor("a"), tensors["a"])
        else:
            assert info.shape == (3, 5)
            assert same(f.get_slice("a")[1:], tensors["a"][1:])


def test_safetensors_is_the_oracle(tmp_path: Path) -> None:
    """The same dict saved by safetensors and by Kiln loads equal, from either,
    and kiln.convert of safetensors' file gives Kiln's tensors again."""
    names = [n for n in DENSE if n != "e2m1" and (n != "e8m0" or hasattr(torch, "float8_e8m0fnu"))]
    tensors = {f"t.{n}": sample(n, (2, 3), seed=i) for i, n in enumerate(names)}
    sp, kp, cp = tmp_path / "m.safetensors", tmp_path / "m.kiln", tmp_path / "c.kiln"
    st_torch.save_file(tensors, str(sp), {"format": "pt"})
    kt.save_file(tensors, kp, {"format": "pt"})
    theirs, ours = st_torch.load_file(str(sp)), kt.load_file(kp)
    assert theirs.keys() == ours.keys() == tensors.keys()
    assert all(same(theirs[k], ours[k]) for k in tensors)
    done = kiln.convert(sp, cp)
    assert (done.format, done.tensors) == ("safetensors", len(tensors))
    converted = kt.load_file(cp)
    assert all(same(converted[k], theirs[k]) for k in tensors)
    with kiln.safe_open(cp, framework="torch") as f:
        assert f.metadata()["format"] == "pt"                 # and the converter's own keys


def test_a_safetensors_file_names_kiln_convert(tmp_path: Path) -> None:
    sp = tmp_path / "m.safetensors"
    st_torch.save_file({"w": torch.ones(2)}, str(sp))
    for load in (kt.load_file, kn.load_file, lambda p: kiln.safe_open(p, framework="pt")):
        with pytest.raises(kiln.KilnError) as e:
            load(sp)
        assert e.value.foreign == "safetensors"
        assert f"kiln.convert({str(sp)!r}, {str(tmp_path / 'm.kiln')!r})" in "".join(e.value.__notes__)


def test_tensors_view_a_copy_on_write_map(tmp_path: Path) -> None:
    w = torch.arange(4096, dtype=torch.float32)
    p = tmp_path / "m.kiln"
    kt.save_file({"w": w, "b": torch.ones(3)}, p)
    before = p.read_bytes()
    first, second = kt.load_file(p), kt.load_file(p)
    # Zero copy: the tensors of one load lie in one map, at their payloads' distance.
    with kiln.safe_open(p) as f:
        gap = f.tensor_info("w").offset - f.tensor_info("b").offset
    assert first["w"].data_ptr() - first["b"].data_ptr() == gap
    first["w"][0] = 42.0          # allowed: PyTorch has no read-only tensors
    first["w"].mul_(2)
    assert first["w"][0] == 84.0 and first["w"][1] == 2.0
    assert second["w"][0] == 0.0 and second["w"][1] == 1.0   # another load: untouched
    assert p.read_bytes() == before                          # the file: untouched
    assert kt.load_file(p)["w"][0] == 0.0
    kiln.validate(p)                                         # digests still match
    del first
    gc.collect()
    assert torch.equal(second["w"], w)


def test_tensors_outlive_the_handle_and_a_replaced_file(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    kt.save_file({"w": torch.ones(1024)}, p)
    with kiln.safe_open(p, framework="pt") as f:
        w = f.get_tensor("w")
        part = f.get_slice("w")[:4]
    kt.save_file({"w": torch.zeros(1024)}, p)   # written to a new file, renamed over
    gc.collect()
    assert torch.equal(w, torch.ones(1024)) and torch.equal(part, torch.ones(4))
    assert part.data_ptr() == w.data_ptr()      # a slice is a view


def test_shared_tensors_as_safetensors_documents(tmp_path: Path) -> None:
    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight

    torch.manual_seed(0)
    model = Tied()
    with pytest.raises(RuntimeError, match="share memory.*save_model"):
        kt.save_file(model.state_dict(), tmp_path / "x.kiln")
    kp, sp = tmp_path / "m.kiln", tmp_path / "m.safetensors"
    kt.save_model(model, kp)
    st_torch.save_model(model, str(sp))
    with kiln.safe_open(kp, framework="pt") as f, st_open(sp) as g:
        assert f.keys() == sorted(g.keys()) == ["embed.weight"]
        assert f.metadata() == dict(g.metadata() or {}, format="pt")   # {"head.weight": "embed.weight"} and the format
    fresh = Tied()
    missing, unexpected = kt.load_model(fresh, kp)
    assert (missing, unexpected) == ([], [])
    assert torch.equal(fresh.head.weight, model.embed.weight)
    assert fresh.head.weight.data_ptr() == fresh.embed.weight.data_ptr()   # still tied
    # safetensors' loader reads Kiln's save and ours reads safetensors' converted
    st_back = Tied()
    kiln.convert(sp, tmp_path / "c.kiln")
    assert kt.load_model(st_back, tmp_path / "c.kiln") == ([], [])
    assert torch.equal(st_back.embed.weight, model.embed.weight)

    class Untied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)

    with pytest.raises(RuntimeError, match='missing keys: "head.weight"'):
        kt.load_model(Untied(), kp)
    assert kt.load_model(Untied(), kp, strict=False) == (["head.weight"], [])


def st_open(p: Path) -> Any:
    from safetensors import safe_open

    return safe_open(str(p), framework="pt")


def test_sharded_checkpoints(tmp_path: Path) -> None:
    tensors: Dict[str, Any] = {f"layers.{i}.weight": torch.full((64, 64), float(i), dtype=torch.bfloat16)
                               for i in range(6)}
    p = tmp_path / "ckpt" / "model.kiln"
    p.parent.mkdir()
    kt.save_file(tensors, p, {"format": "pt"}, max_shard_size="20KB")
    with kiln.safe_open(p, framework="pt", verify=True) as f:
        assert len(f.shards) == 3 and f.metadata() == {"format": "pt"}
        assert same(f.get_slice("layers.4.weight")[:2], tensors["layers.4.weight"][:2])
    back = kt.load_file(p, verify=True)
    assert back.keys() == tensors.keys() and all(same(back[k], tensors[k]) for k in tensors)
    # A changed payload byte in a shard: named by verify=True
    shard = p.parent / f.shards[1]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(kiln.KilnError) as e:
        kt.load_file(p, verify=True)
    assert (e.value.code, e.value.file) == ("DIGEST", shard.name)


def test_dtypes_torch_has_not_name_the_raw_accessor(tmp_path: Path) -> None:
    p = tmp_path / "m.kiln"
    nib = np.arange(8, dtype=np.uint8)
    kn.save_file({"q": kn.Packed("i4", nib, (4, 4)), "e": kn.Packed("e2m1", nib[:3], (5,)),
                  "o": kn.Opaque(4096, "gguf.q8_0", 34, np.zeros(272, np.uint8), (4, 64))}, p)
    with kiln.safe_open(p, framework="pt") as f:
        for name in ("q", "e", "o"):
            with pytest.raises(TypeError, match=rf"raw\('{name}'\)"):
                f.get_tensor(name)
        assert np.array_equal(f.raw("q"), nib.reshape(4, 2)) and np.array_equal(f.raw("q")[1:3], nib.reshape(4, 2)[1:3])
    with pytest.raises(TypeError, match=r"e: an e2m1 tensor of shape \[5\] has no float4_e2m1fn_x2 shape"):
        kt.load_file(p)
    kn.save_file({"q": kn.Packed("i4", nib, (4, 4))}, p)
    with pytest.raises(TypeError, match=r"q: torch has no dtype for Kiln's i4; read its wire bytes with kiln.safe_open\(path\).raw\('q'\)"):
        kt.load_file(p)


def test_save_refuses_what_safetensors_refuses(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="non-contiguous"):
        kt.save({"t": torch.ones(4, 4).t()})
    with pytest.raises(TypeError, match="complex64"):
        kt.save({"c": torch.ones(2, dtype=torch.complex64)})
    with pytest.raises(ValueError, match="only 'cpu'"):
        kt.load_file(tmp_path / "x.kiln", device="cuda")


def test_e2m1_is_torchs_x2_byte_for_byte(tmp_path: Path) -> None:
    """Kiln's e2m1 (first element in the low nibble) is torch's float4_e2m1fn_x2 (val1:val0, MSB to LSB)."""
    ml_dtypes = require("ml_dtypes")
    if kt.DTYPES["e2m1"] is None:
        pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2")
    values = np.array([[0.5, 1.0, 1.5, -2.0]], dtype=ml_dtypes.float4_e2m1fn)   # codes 1, 2, 3, 0xC
    p = tmp_path / "m.kiln"
    kn.save_file({"e": values}, p)
    t = kt.load_file(p)["e"]
    assert t.dtype == torch.float4_e2m1fn_x2 and t.shape == (1, 2)
    assert t.view(torch.uint8).tolist() == [[0x21, 0xC3]]
