"""JAX arrays to and from Kiln model files, in the shape of ``safetensors.flax``.

The dicts are flat ``Dict[str, jax.Array]``, as ``safetensors.flax`` takes
and returns them. A nested pytree (Flax's ``{"params": {"Dense_0":
{"kernel": ...}}}``) is flattened on save with ``"."`` between the keys
(``"params.Dense_0.kernel"``; list and tuple items by their index), and
:func:`unflatten` nests a loaded dict again (as dicts). A key that itself
holds a ``"."`` inside a nested tree is refused (it could not come back).

Loading checks the whole file with the Rust core first (as
:func:`kiln.open`). JAX arrays are immutable, so each comes **from the
read-only memory map through DLPack**, without a copy, where JAX's CPU
client takes the buffer: f64, f32, f16, bf16, the f8 types, e8m0, the
integers and bool, whose payloads Kiln's writers align. JAX asks for the
unversioned DLPack protocol (``__dlpack__()`` without ``max_version``),
which has no read-only flag and so is refused for a read-only NumPy array;
:class:`ReadOnlyExport` exports the map's bytes unversioned then (JAX never
writes into an array it imported) and versioned, marked read-only, to a
caller that asks with ``max_version``. bf16, the f8 types and e8m0 are
``ml_dtypes`` types NumPy does not export: their bits go out under DLPack's
own code for the type (``kDLBfloat``, ``kDLFloat8_*``). The packed i4, u4
and e2m1 (JAX's ``int4``, ``uint4``, ``float4_e2m1fn``, one element per
byte) are unpacked: one copy each. (Where JAX declines a buffer, e.g. f64
without ``jax_enable_x64``, it copies, as ``jnp.asarray`` does.)
:func:`load_file` and :func:`load` copy tensors under :data:`SMALL` (256 KiB)
instead, all in one ``jax.device_put``: for a small tensor an import costs
more than the copy (``safe_open(...).get_tensor`` always imports).
Opaque tensors have no JAX dtype: they raise ``TypeError`` naming the raw
bytes accessor, ``kiln.safe_open(path).raw(name)``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from . import DTYPE_NAMES, TensorInfo, _checked_files, _kiln, _owner
from . import numpy as _kn

__all__ = ["save", "save_file", "load", "load_file", "flatten", "unflatten", "ReadOnlyExport", "DTYPES"]

_ml: Any = _kn._ml

#: The JAX dtype of each Kiln dtype (by the core's names; None: none, refused).
DTYPES: Dict[str, Optional[str]] = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "bool": "bool",
    "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32", "u32": "uint32",
    "i64": "int64", "u64": "uint64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "e8m0": "float8_e8m0fnu", "i4": "int4", "u4": "uint4", "e2m1": "float4_e2m1fn", "opaque": None,
}

# NumPy dtypes NumPy exports through DLPack; the ml_dtypes types it does not
# export go as their bits with DLPack's own code for the type (dlpack.h 1.1:
# kDLBfloat, kDLFloat8_e4m3fn, kDLFloat8_e5m2, kDLFloat8_e8m0fnu).
_DLPACK_KINDS = "biuf"
_DL_CODES = {"bfloat16": 4, "float8_e4m3fn": 10, "float8_e5m2": 12, "float8_e8m0fnu": 14}
_CPU = 1  # kDLCPU
# Where DLTensor.dtype.code sits in the two capsule structs (the DLPack ABI):
# DLManagedTensor starts with the DLTensor; DLManagedTensorVersioned with its
# version, manager_ctx, deleter and flags (32 bytes) first. In DLTensor the
# dtype follows data (8), device (8) and ndim (4).
_CODE_AT = {b"dltensor": 20, b"dltensor_versioned": 52}


def _set_code(capsule: Any, name: bytes, code: int) -> Any:
    """``capsule`` (a fresh, unconsumed DLPack capsule of a uint array) with
    its dtype code set to ``code`` (the bits stay): NumPy exports the bits,
    DLPack names the type."""
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ctypes.c_uint8.from_address(get(capsule, name) + _CODE_AT[name]).value = code
    return capsule


class ReadOnlyExport:
    """A read-only NumPy array offered through DLPack. Asked with
    ``max_version`` (DLPack 1.x), it exports the array itself, flagged
    read-only; asked without it (the unversioned protocol JAX uses, which
    has no read-only flag), it exports a writable alias of the same memory,
    which the importer must not write: JAX's arrays are immutable, and the
    map under them is read-only (a write would fault, not change the file).
    bf16 and the f8 types (ml_dtypes, which NumPy does not export) go as
    their bits under DLPack's code for the type."""

    def __init__(self, array: npt.NDArray[Any]) -> None:
        self.array = array
        self._code = _DL_CODES.get(array.dtype.name) if array.dtype.isbuiltin != 1 else None

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_CPU, 0)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
        array = self.array
        if self._code is not None:
            array = array.view(np.dtype(f"u{array.dtype.itemsize}"))
        if max_version is not None and max_version[0] >= 1:
            capsule = array.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
            return capsule if self._code is None else _set_code(capsule, b"dltensor_versioned", self._code)
        capsule = _Alias(array).writable().__dlpack__(stream=stream)
        return capsule if self._code is None else _set_code(capsule, b"dltensor", self._code)


class _Alias:
    """An ``__array_interface__`` over another array's memory, claiming it
    writable; it holds that array (and so the map) alive while any view of
    it lives."""

    def __init__(self, array: npt.NDArray[Any]) -> None:
        self.keep = array
        self.__array_interface__ = {
            "data": (array.ctypes.data, False), "shape": array.shape, "typestr": array.dtype.str,
            "strides": array.strides, "version": 3,
        }

    def writable(self) -> npt.NDArray[Any]:
        return np.asarray(self)


def _to_jax(arr: npt.NDArray[Any], info: Optional[TensorInfo]) -> jax.Array:
    """A loaded NumPy array as a JAX array: zero-copy through DLPack where
    JAX takes it, else one copy (see the module docs). ``info``: the
    tensor's facts (None for a slice of a dense tensor)."""
    if info is not None and info.opaque:
        raise TypeError(f"{info.name}: JAX has no dtype for an opaque tensor ({info.layout}); read its wire bytes "
                        f"with kiln.safe_open(path).raw({info.name!r})")
    if info is not None and info.packed:
        if _ml is None:
            raise TypeError(f"{info.name}: a packed {info.dtype} tensor loads into JAX through ml_dtypes, "
                            "which is not installed")
        unpacked = _kn.unpack(arr, info.dtype, info.shape)
        return jnp.asarray(unpacked.view(getattr(_ml, str(DTYPES[info.dtype]))))
    # NumPy's own dtypes (isbuiltin 1; ml_dtypes' are user types: 2) of the kinds DLPack carries, or a coded ml_dtypes type
    dlpack = arr.dtype.isbuiltin == 1 and arr.dtype.kind in _DLPACK_KINDS or arr.dtype.name in _DL_CODES
    if dlpack and arr.size and arr.flags.c_contiguous:
        try:
            imported: jax.Array = jax.dlpack.from_dlpack(ReadOnlyExport(arr))
            return imported
        except (BufferError, TypeError, ValueError, RuntimeError):
            pass  # not taken (alignment, a JAX without it): the copy below
    return jnp.asarray(arr)


#: Tensors smaller than this are copied, all in one ``jax.device_put`` of
#: the list, instead of each imported through DLPack: an import costs
#: about as much as copying 256 KiB (measured: kiln-py/README.md).
SMALL = 256 << 10


def _jax_arrays(view: Any, rows: List[Tuple[Any, ...]], out: Dict[str, Any], small: List[Tuple[str, Any]]) -> None:
    """The arrays of one checked file's table into ``out`` (in order; the
    small ones are left in ``small`` for one batched copy)."""
    for i, (name, code, shape, offset, length, layout, block_size, _) in enumerate(rows):
        key = str(i) if name is None else name
        arr = _kiln.make_array(view, code, list(shape), offset, length, _kn._DTYPES)
        if code >= 4096 or DTYPE_NAMES.get(code) in ("i4", "u4", "e2m1"):
            info = TensorInfo(name=key, index=i, dtype=DTYPE_NAMES.get(code, "opaque"), dtype_code=code,
                              shape=tuple(shape), offset=offset, byte_length=length, layout=layout,
                              block_size=block_size, quant=None)
            out[key] = _to_jax(arr, info)
        elif arr.nbytes < SMALL:
            out[key] = None  # its place in the order
            small.append((key, arr))
        else:
            out[key] = _to_jax(arr, None)


def _batched(out: Dict[str, Any], small: List[Tuple[str, Any]]) -> Dict[str, jax.Array]:
    if small:
        for (key, _), arr in zip(small, jax.device_put([a for _, a in small])):
            out[key] = arr
    return out


def load_file(filename: Union[str, "os.PathLike[str]"], *, verify: bool = False) -> Dict[str, jax.Array]:
    """The tensors of a Kiln file (or a sharded model's manifest: every
    shard checked against it, in order) as JAX arrays: imported from the
    map through DLPack (see the module docs), except tensors under
    :data:`SMALL` bytes, copied in one batch. ``verify=True`` also hashes
    every payload against its digest. A foreign file raises
    :class:`kiln.KilnError` with a note naming :func:`kiln.convert`."""
    out: Dict[str, Any] = {}
    small: List[Tuple[str, Any]] = []
    for view, rows in _checked_files(filename, verify, False):
        _jax_arrays(view, rows, out, small)
    return _batched(out, small)


def load(data: Union[bytes, bytearray, memoryview], *, verify: bool = False) -> Dict[str, jax.Array]:
    """The tensors of a model file held in ``data`` as JAX arrays (viewing
    ``data`` where zero-copy applies: keep it unchanged while they live)."""
    view = _owner(data)
    out: Dict[str, Any] = {}
    small: List[Tuple[str, Any]] = []
    _jax_arrays(view, list(_kiln.inspect(view, verify)[3]), out, small)
    return _batched(out, small)


def flatten(tree: Mapping[str, Any], sep: str = ".") -> Dict[str, Any]:
    """A nested pytree of arrays (dicts, lists, tuples) as a flat dict, keys
    joined with ``sep``; a flat dict is returned as it is."""
    out: Dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        items: Any
        if isinstance(node, Mapping):
            items = node.items()
        elif isinstance(node, (list, tuple)):
            items = ((str(i), v) for i, v in enumerate(node))
        else:
            out[prefix] = node
            return
        for key, value in items:
            if not isinstance(key, str):
                raise TypeError(f"{prefix or 'the tree'}: keys must be str, not {type(key).__name__}")
            nested = isinstance(value, (Mapping, list, tuple)) or bool(prefix)
            if sep in key and nested:
                raise ValueError(f"key {key!r} under {prefix or 'the root'} holds {sep!r}, the separator: "
                                 "it could not be unflattened")
            walk(f"{prefix}{sep}{key}" if prefix else key, value)

    walk("", tree)
    return out


def unflatten(flat: Mapping[str, Any], sep: str = ".") -> Dict[str, Any]:
    """Nests a flat dict again by ``sep`` (lists come back as dicts keyed ``"0"``, ``"1"``, ...)."""
    out: Dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, last = key.split(sep)
        for p in parents:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise ValueError(f"{key!r}: {p!r} is both an array and a prefix")
            node = child
        if last in node:
            raise ValueError(f"{key!r}: also a prefix of other keys")
        node[last] = value
    return out


def _numpy(tensors: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, value in flatten(tensors).items():
        if isinstance(value, (_kn.Packed, _kn.Opaque, _kn.Quantized)):
            out[name] = value
        else:
            out[name] = np.asarray(value)  # a CPU jax.Array: a view of its buffer
    return out


def save(tensors: Mapping[str, Any], metadata: Optional[Dict[str, str]] = None, *, digests: bool = True) -> bytes:
    """The model file of ``tensors`` (a flat dict or a nested pytree of
    ``jax.Array``) and ``metadata`` as bytes (see :func:`save_file`)."""
    return _kn.save(_numpy(tensors), metadata, digests=digests)


def save_file(tensors: Mapping[str, Any], filename: Union[str, "os.PathLike[str]"],
              metadata: Optional[Dict[str, str]] = None, *, digests: bool = True,
              max_shard_size: Union[int, str, None] = None) -> None:
    """Writes ``tensors`` (a flat dict or a nested pytree of ``jax.Array``,
    flattened with ``"."``) as :func:`kiln.numpy.save_file` does; JAX's
    int4, uint4 and float4_e2m1fn are packed to Kiln's i4, u4 and e2m1."""
    _kn.save_file(_numpy(tensors), filename, metadata, digests=digests, max_shard_size=max_shard_size)

