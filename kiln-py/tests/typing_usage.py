"""A typical user's script; `mypy --strict` must pass on it (test_typing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import numpy as np
import numpy.typing as npt

import kiln
import kiln.numpy


def roundtrip(path: Path) -> Dict[str, npt.NDArray[np.float32]]:
    tensors: Dict[str, npt.NDArray[np.float32]] = {"w": np.ones((2, 2), np.float32)}
    kiln.numpy.save_file(tensors, path, metadata={"author": "me"})
    blob: bytes = kiln.numpy.save(tensors)
    kiln.validate(blob)
    kiln.validate(path, kiln.DIGESTS_TYPE, framed=True)
    kiln.numpy.save_file(tensors, path, digests=False)
    kiln.validate(path, "struct{metadata:dict<str,str>,tensors:tensors,}", framed=True)
    loaded = kiln.numpy.load_file(path)
    same = kiln.numpy.load(blob)
    assert loaded.keys() == same.keys()
    return {k: v.astype(np.float32) for k, v in loaded.items()}


def front_door(path: Path) -> Optional[str]:
    try:
        with kiln.open(path, verify=True) as f:
            opened: kiln.SafeOpen = f
            return opened.keys()[0] if opened.keys() else None
    except kiln.KilnError as e:
        foreign: Optional[str] = e.foreign
        return foreign


def describe(path: Path) -> Optional[str]:
    try:
        with kiln.safe_open(path, framework="numpy") as f:
            meta: Optional[Dict[str, str]] = f.metadata()
            for name in f.keys():
                info: kiln.TensorInfo = f.tensor_info(name)
                shape: tuple[int, ...] = info.shape
                q: Optional[kiln.QuantInfo] = info.quant
                rows = f.get_slice(name)[:1]
                full = f.get_tensor(name)
                print(name, info.dtype, shape, info.offset, q, rows, full.nbytes)
            return None if meta is None else meta.get("author")
    except kiln.KilnError as e:
        shard: Optional[str] = e.file
        tensor: Optional[str] = e.tensor
        print(shard, tensor)
        code: str = e.code
        offset: int = e.offset
        rule: str = e.rule
        print(f"{code} at {offset}: {rule}")
        return None


def frozen() -> None:
    ty = "struct{id:i64,scores:list<f32>,}"
    b = kiln.encode({"id": 1, "scores": [0.5, 1.5]}, ty, framed=True)
    value = kiln.decode(b, ty, framed=True)
    print(value["scores"].sum())
    unpacked = kiln.numpy.unpack(np.zeros(2, np.uint8), "i4", (4,))
    print(unpacked.shape, kiln.Some(None).value, kiln.DEFAULT_CAP)


def quantized() -> bytes:
    nibbles = np.zeros(64, np.uint8)
    w = kiln.numpy.Quantized(kiln.numpy.Packed("e2m1", nibbles, (4, 32)), scale="w.s", axis=1, group_size=32)
    return kiln.numpy.save({"w": w, "w.s": np.ones((4, 1), np.float16)}, {"k": "v"}, sort=False)


def sharded(folder: Path) -> int:
    tensors = {f"w{i}": np.zeros(1024, np.float32) for i in range(4)}
    kiln.numpy.save_file(tensors, folder / "model.kiln", max_shard_size="8KiB")
    kiln.numpy.save_file(tensors, folder / "model.kiln", max_shard_size=8192)
    arrays = kiln.numpy.load_file(folder / "model.kiln", verify=True)
    with kiln.safe_open(folder / "model.kiln", verify=False) as f:
        names: list[str] = f.shards
        where: Optional[str] = f.tensor_info("w0").shard
        spelled: str = f.get_slice("w0").get_dtype()
        print(names, where, spelled)
    size: int = kiln.numpy.parse_size("500MB")
    return len(arrays) + size


def onnx_graph(folder: Path) -> int:
    import kiln.onnx

    checked: kiln.onnx.CheckedGraph = kiln.onnx.check_graph(folder / "model.kiln.onnx", copy=True)
    for name, file, offset, length, dtype, shape in checked.bindings:
        print(name, file, offset + length, dtype, len(shape))
    sess = kiln.onnx.session(folder / "model.kiln", providers=["CPUExecutionProvider"])
    try:
        kiln.onnx.session("https://example.com/model.kiln.onnx", timeout=5.0)
    except kiln.onnx.GraphError as e:
        print(e.initializer, e.file)
    return len(kiln.onnx.ONNX_TO_KILN) + len(sess.get_inputs())


def frameworks(folder: Path) -> int:
    import torch

    import kiln.flax
    import kiln.torch

    kiln.torch.save_file({"w": torch.ones(2)}, folder / "t.kiln", {"format": "pt"}, max_shard_size="1MB")
    tensors: Dict[str, torch.Tensor] = kiln.torch.load_file(folder / "t.kiln", verify=True)
    again: Dict[str, torch.Tensor] = kiln.torch.load(kiln.torch.save(tensors))
    model = torch.nn.Linear(2, 2)
    kiln.torch.save_model(model, folder / "m.kiln")
    missing, unexpected = kiln.torch.load_model(model, folder / "m.kiln", strict=False)
    kiln.flax.save_file({"p": {"w": np.ones(2, np.float32)}}, folder / "f.kiln")
    arrays = kiln.flax.load_file(folder / "f.kiln")
    tree: Dict[str, object] = kiln.flax.unflatten(arrays)
    done: kiln.Converted = kiln.convert(folder / "x.safetensors", folder / "x.kiln", max_shard_size="2GB")
    with kiln.safe_open(folder / "t.kiln", framework="pt") as f:
        raw = f.raw("w")
        print(f.framework, raw.nbytes, f.get_slice("w")[:1])
    try:
        kiln.convert(folder / "bad.gguf", folder / "y.kiln", fsync=False)
    except kiln.ConvertError as e:
        at: Optional[int] = e.offset
        print(at)
    return len(again) + len(missing) + len(unexpected) + len(tree) + done.tensors + len(done.notes)
