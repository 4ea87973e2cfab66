"""PyTorch tensors to and from Kiln model files, in the shape of ``safetensors.torch``.

Loading checks the whole file with the Rust core first (the same checks as
:func:`kiln.open`), then hands out tensors that **view a copy-on-write
private map** of the file (``mmap`` ``ACCESS_COPY``, ``MAP_PRIVATE``):
no payload byte is copied or read at load; a page is read when a tensor
uses it. PyTorch has no read-only tensors, so a write to a loaded tensor is
allowed and lands in this process's private copy of that page only: it
never reaches the file, nor another load of it, nor another process. The
core's checks ran on exactly the bytes the tensors view (the same map). As
with any memory map, do not truncate or rewrite the file in place while
tensors view it (:func:`save_file` writes a new file and renames it, which
is safe).

Dtypes (the table in ``kiln-py/README.md``; :data:`DTYPES`): f64, f32,
f16, bf16, bool, the integers (u16/u32/u64 as torch's ``uint16``...),
f8e4m3 (``float8_e4m3fn``), f8e5m2, e8m0 (``float8_e8m0fnu``) and e2m1 as
``float4_e2m1fn_x2`` (two elements per byte, the first in the low nibble,
as torch's ``c10/util/Float4_e2m1fn_x2.h`` defines it: Kiln's bytes, so
the tensor's last dimension is half the logical one; a
logical last dimension that is odd is refused). i4, u4 and opaque tensors
have no torch dtype: loading them raises ``TypeError`` naming the raw-bytes
accessor, ``kiln.safe_open(path).raw(name)``.

Shared tensors follow safetensors (https://huggingface.co/docs/safetensors/torch_shared_tensors):
:func:`save_file` refuses tensors that share memory; :func:`save_model`
keeps one name of each shared (tied) group, records each dropped name in
the metadata as ``{dropped: kept}``, and writes ``{"format": "pt"}``;
:func:`load_model` loads that file back into a model whose tied
parameters share storage again.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import numpy as np
import torch

from . import TensorInfo, _checked_files, _framework, _infos, _kiln, _owner
from . import numpy as _kn

__all__ = ["save", "save_file", "load", "load_file", "save_model", "load_model", "NAMES", "DTYPES"]

#: The torch dtype of each Kiln dtype, by the core's names and torch's
#: (None: torch has none; refused, with the raw-bytes accessor named).
#: e2m1 is torch's packed ``float4_e2m1fn_x2`` (two per byte, low nibble first).
NAMES: Dict[str, Optional[str]] = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "bool": "bool",
    "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32", "u32": "uint32",
    "i64": "int64", "u64": "uint64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "e8m0": "float8_e8m0fnu", "e2m1": "float4_e2m1fn_x2", "i4": None, "u4": None, "opaque": None,
}

#: :data:`NAMES` as this torch's dtypes (None also where this torch version lacks one).
DTYPES: Dict[str, Optional[torch.dtype]] = {k: None if v is None else getattr(torch, v, None) for k, v in NAMES.items()}

_NAMES = {code: name for code, name, _ in _kiln.dtype_table()}
_BY_CODE: Dict[int, Optional[torch.dtype]] = {code: DTYPES[name] for code, name in _NAMES.items() if code < 4096}
_CODE_OF: Dict[torch.dtype, int] = {d: code for code, d in _BY_CODE.items() if d is not None}
_E2M1 = next(code for code, name in _NAMES.items() if name == "e2m1")
_X2 = DTYPES["e2m1"]


def _base(view: Any) -> torch.Tensor:
    """A ``uint8`` tensor over the whole of ``view`` (a writable buffer: the
    copy-on-write map, or a private copy of bytes), sharing its memory."""
    if len(view) == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(view, dtype=torch.uint8)


def _tensor(base: torch.Tensor, info: TensorInfo) -> torch.Tensor:
    """Tensor ``info`` as a view of ``base`` (see :func:`_make`)."""
    return _make(base, info.name, info.dtype_code, info.shape, info.offset, info.byte_length)


def _make(base: torch.Tensor, name: str, code: int, shape: Tuple[int, ...], offset: int, length: int) -> torch.Tensor:
    """The tensor ``name`` (Kiln dtype ``code``, ``shape``) whose payload is
    ``length`` bytes at ``offset`` of ``base``, as a view of ``base``; a
    copy only when the payload is not aligned for its element type."""
    dtype = _BY_CODE.get(code)
    if code == _E2M1 and dtype is not None:
        if not shape or shape[-1] % 2:
            raise TypeError(f"{name}: an e2m1 tensor of shape {list(shape)} has no float4_e2m1fn_x2 shape "
                            f"(the last dimension must be even); read its wire bytes with raw({name!r})")
        shape = shape[:-1] + (shape[-1] // 2,)
    if dtype is None:
        kiln_name = _NAMES.get(code, "opaque")
        who = "torch" if kiln_name in ("i4", "u4", "opaque") else f"torch {torch.__version__}"
        raise TypeError(f"{name}: {who} has no dtype for Kiln's {kiln_name}; read its wire bytes with "
                        f"kiln.safe_open(path).raw({name!r}) (kiln-py/README.md, the dtype table)")
    if sys.byteorder != "little" and dtype.itemsize > 1:  # pragma: no cover - no big-endian CI host
        raise TypeError(f"{name}: kiln.torch maps little-endian payloads on little-endian hosts only")
    part = base[offset:offset + length]
    if offset % dtype.itemsize:
        part = part.clone()  # unaligned (not a file Kiln's writers make): one copy
    return part.view(dtype).view(shape)


def load_file(filename: Union[str, "os.PathLike[str]"], device: Union[str, Any] = "cpu", *,
              verify: bool = False) -> Dict[str, torch.Tensor]:
    """The tensors of a Kiln file (or a sharded model's manifest: every shard
    checked against it, in order), as tensors viewing a copy-on-write map
    (see the module docs). ``device`` must be ``"cpu"``. ``verify=True``
    also hashes every payload against its digest (reading every byte). A
    foreign file raises :class:`kiln.KilnError` with a note naming
    :func:`kiln.convert`."""
    _framework("pt", device)
    out: Dict[str, torch.Tensor] = {}
    for view, rows in _checked_files(filename, verify, True):
        base = _base(view)
        for i, (name, code, shape, offset, length, *_) in enumerate(rows):
            key = str(i) if name is None else name
            out[key] = _make(base, key, code, shape, offset, length)
    return out


def load(data: Union[bytes, bytearray, memoryview], *, verify: bool = False) -> Dict[str, torch.Tensor]:
    """The tensors of a model file held in ``data``, as ``safetensors.torch.load``:
    the bytes are copied once into memory the tensors then view (writable,
    independent of ``data``), and checked there."""
    if isinstance(data, (str, os.PathLike)):
        raise TypeError("load() takes bytes; use load_file() for a path")
    buf = bytearray(data)
    _, _, _, rows = _kiln.inspect(_owner(buf), verify)
    base = _base(buf)
    return {name: _tensor(base, info) for name, info in _infos(rows).items()}


# --- saving ---------------------------------------------------------------


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except (NotImplementedError, RuntimeError):  # meta tensors
        return 0


def _end_ptr(t: torch.Tensor) -> int:
    return int(t.data_ptr()) + t.nelement() * t.element_size()


def _shared_groups(tensors: Dict[str, torch.Tensor]) -> List[Set[str]]:
    """Names whose tensors overlap in memory, grouped (safetensors' rule:
    the same storage and overlapping byte ranges)."""
    by_storage: Dict[Tuple[Any, int, int], Set[str]] = defaultdict(set)
    for name, t in tensors.items():
        if t.device.type != "meta" and _storage_ptr(t) != 0 and t.untyped_storage().nbytes() != 0:
            by_storage[(t.device, _storage_ptr(t), t.untyped_storage().nbytes())].add(name)
    groups: List[Set[str]] = []
    for names in sorted(by_storage.values(), key=sorted):
        areas = sorted((int(tensors[n].data_ptr()), _end_ptr(tensors[n]), n) for n in names)
        last_stop = -1
        for start, stop, name in areas:
            if start >= last_stop:
                groups.append({name})
            else:
                groups[-1].add(name)
            last_stop = max(last_stop, stop)
    return groups


def _is_complete(t: torch.Tensor) -> bool:
    return bool(t.data_ptr() == _storage_ptr(t) and t.nelement() * t.element_size() == t.untyped_storage().nbytes())


def _duplicates(tensors: Dict[str, torch.Tensor], preferred: Optional[Set[str]] = None) -> Dict[str, List[str]]:
    """For each group of shared tensors: the name kept (one covering the
    whole storage; a preferred one first, then the first by name) and the
    names dropped, as ``safetensors.torch`` chooses them."""
    out: Dict[str, List[str]] = {}
    for group in _shared_groups(tensors):
        if len(group) < 2:
            continue
        complete = {n for n in group if _is_complete(tensors[n])}
        if not complete:
            raise RuntimeError(f"tensors {sorted(group)} share memory and none covers the whole storage: "
                               "refusing to save or load them (save contiguous copies instead)")
        keep = sorted((preferred or set()) & complete or complete)[0]
        out[keep] = [n for n in sorted(group) if n != keep]
    return out


def _spec(name: str, t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise ValueError(f"{name}: a sparse tensor cannot be saved (make it dense with .to_dense())")
    if not t.is_contiguous():
        raise ValueError(f"{name}: a non-contiguous tensor cannot be saved (call .contiguous() first)")
    code = _CODE_OF.get(t.dtype)
    if code is None:
        raise TypeError(f"{name}: Kiln has no dtype for torch.{str(t.dtype).split('.')[-1]}")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    shape = tuple(int(d) for d in t.shape)
    if code == _E2M1:
        shape = shape[:-1] + (2 * shape[-1],) if shape else (2,)
    if sys.byteorder != "little" and t.element_size() > 1:  # pragma: no cover - no big-endian CI host
        raise TypeError(f"{name}: kiln.torch saves on little-endian hosts only")
    wire = t.reshape(-1).view(torch.uint8).numpy() if t.nelement() else np.zeros(0, np.uint8)
    return (name, code, shape, wire, None, 0, None)


def _specs(tensors: Dict[str, torch.Tensor]) -> List[Any]:
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of name -> torch.Tensor, not {type(tensors).__name__}")
    for name in tensors:
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name).__name__}")
    shared = [sorted(g) for g in _shared_groups(tensors) if len(g) > 1]
    if shared:
        raise RuntimeError(f"some tensors share memory, which would duplicate it on disk and load as separate "
                           f"tensors: {shared}; save a model with kiln.torch.save_model (it keeps one name of each "
                           "group: https://huggingface.co/docs/safetensors/torch_shared_tensors)")
    return [_spec(name, t) for name, t in tensors.items()]


def save(tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None, *,
         digests: bool = True) -> bytes:
    """The model file of ``tensors`` (contiguous CPU tensors; others are
    moved to the CPU) and ``metadata`` as bytes (see :func:`save_file`)."""
    out = _kiln.save(_specs(tensors), _kn._metadata(metadata), None, 4096, True, digests)
    assert out is not None
    return out


def save_file(tensors: Dict[str, torch.Tensor], filename: Union[str, "os.PathLike[str]"],
              metadata: Optional[Dict[str, str]] = None, *, digests: bool = True,
              max_shard_size: Union[int, str, None] = None) -> None:
    """Writes ``tensors`` as :func:`kiln.numpy.save_file` does (the file
    ``kiln convert`` writes: sorted, a digest per tensor, 4 KiB aligned
    payloads; ``max_shard_size``: a sharded model), from the tensors' own
    memory (no copy but the write). Tensors that share memory are refused
    (``RuntimeError``, as safetensors: use :func:`save_model`), as are
    non-contiguous (``ValueError``) and dtypes Kiln has not (``TypeError``)."""
    limit = None if max_shard_size is None else _kn.parse_size(max_shard_size)
    _kiln.save(_specs(tensors), _kn._metadata(metadata), os.fspath(filename), 4096, True, digests, limit)


def save_model(model: torch.nn.Module, filename: Union[str, "os.PathLike[str]"],
               metadata: Optional[Dict[str, str]] = None, force_contiguous: bool = True, *,
               max_shard_size: Union[int, str, None] = None) -> None:
    """``safetensors.torch.save_model``: the model's ``state_dict`` with one
    name kept of each group of shared (tied) tensors, each dropped name
    recorded in the metadata as ``{dropped: kept}`` (unless the caller's
    metadata has that key), and ``"format": "pt"`` unless given."""
    state = model.state_dict()
    meta = dict(metadata or {})
    meta.setdefault("format", "pt")
    for kept, dropped in _duplicates(state).items():
        for name in dropped:
            meta.setdefault(name, kept)
            del state[name]
    if force_contiguous:
        state = {k: v.contiguous() for k, v in state.items()}
    save_file(state, filename, meta, max_shard_size=max_shard_size)


def load_model(model: torch.nn.Module, filename: Union[str, "os.PathLike[str]"], strict: bool = True,
               device: Union[str, Any] = "cpu", *, verify: bool = False) -> Tuple[List[str], List[str]]:
    """``safetensors.torch.load_model``: loads the file into ``model``
    (``load_state_dict`` copies the values into the model's parameters),
    counting the model's tied names the file dropped as present. Returns
    (missing, unexpected) names; with ``strict`` either raises
    ``RuntimeError``."""
    state = load_file(filename, device, verify=verify)
    dups = _duplicates(model.state_dict(), set(state))
    missing_keys, unexpected_keys = model.load_state_dict(state, strict=False)
    missing, unexpected = set(missing_keys), list(unexpected_keys)
    for dropped in dups.values():
        for name in dropped:
            if name in missing:
                missing.remove(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append("missing keys: " + ", ".join(f'"{k}"' for k in sorted(missing)))
        if unexpected:
            parts.append("unexpected keys: " + ", ".join(f'"{k}"' for k in sorted(unexpected)))
        raise RuntimeError(f"Error(s) in loading state_dict for {model.__class__.__name__}: " + "; ".join(parts))
    return sorted(missing), unexpected

