"""NumPy arrays to and from Kiln model files, in the shape of ``safetensors.numpy``.

Loading checks the whole file with the Rust core first. Arrays are
**read-only**: zero-copy views of the memory map (or of the buffer given to
:func:`load`) when the payload is aligned for its element type on a
little-endian host, copies otherwise. A view keeps the memory map open:
its base chain ends in a memoryview holding a buffer export of the map, so
the map cannot be closed (nor a ``bytearray`` given to :func:`load`
resized) under a live array. ``arr.copy()`` gives a writable array. Do not
modify or truncate a file while arrays viewing it are alive (as with any
memory map).

Dtypes on load:

============================  ==============================================
Kiln                          NumPy
============================  ==============================================
f64 f32 f16, i8..i64, u8..u64  the same, little-endian
bool                          ``bool`` (the core has checked every byte is 0 or 1)
bf16                          ``ml_dtypes.bfloat16``; without ml_dtypes ``uint16`` (the raw bits)
f8e4m3, f8e5m2                ``ml_dtypes.float8_e4m3fn``/``float8_e5m2``; without ml_dtypes ``uint8`` (the raw bits)
e8m0                          ``ml_dtypes.float8_e8m0fnu``; without ml_dtypes ``uint8`` (the raw bits)
i4, u4, e2m1 (packed)         1-D ``uint8`` of the wire bytes (two elements per byte, low nibble first); :func:`unpack`
opaque (4096..32767)          1-D ``uint8`` of the wire bytes; ``safe_open(...).tensor_info(name)`` has the layout
============================  ==============================================

The raw rule: a dtype NumPy cannot name loads as the unsigned integer of
its width holding the exact bits, and ``safe_open(...).tensor_info(name).dtype``
names the Kiln dtype. Saving accepts every dtype above (``ml_dtypes.int4``,
``uint4`` and ``float4_e2m1fn`` arrays are packed to i4/u4/e2m1; a
:class:`Packed` or :class:`Opaque` wraps wire bytes; :class:`Quantized`
adds block scales).

Tensors are written sorted by name (a dict of tensors is sorted by key, as
the spec's canonical layout requires), and the file is the model file
``kiln convert`` writes: frame, metadata, a SHA-256 digest per tensor,
directory, payloads at 4 KiB aligned file offsets (``digests=False``: the
plain record, without digests). ``save_file(..., max_shard_size="500MB")``
writes a sharded model when the payloads exceed that: the manifest at the
path given and the shards ``STEM-00001-of-0000N.kiln`` beside it, which
:func:`load_file` and :func:`kiln.safe_open` open through the manifest.

Sharded checkpoint in a few lines::

    kiln.numpy.save_file(tensors, "ckpt/model.kiln", max_shard_size="2GB")
    arrays = kiln.numpy.load_file("ckpt/model.kiln")          # every shard checked
    with kiln.safe_open("ckpt/model.kiln") as f:               # shards opened lazily
        w = f.get_slice("lm_head.weight")[:16]
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _kiln

__all__ = ["save", "save_file", "load", "load_file", "unpack", "Packed", "Opaque", "Quantized", "dtype_for", "has_ml_dtypes",
           "parse_size"]

_ml: Any
try:  # bf16 and f8 as real dtypes when ml_dtypes is installed
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    _ml = None

# The wire codes are the core's (kiln_nostd::DType, through _kiln.dtype_table());
# what this module adds is the NumPy side of each, by the core's dtype names.
_CODE = {name: code for code, name, _ in _kiln.dtype_table() if code < 4096}


def _by_code(by_name: Dict[str, Any]) -> Dict[int, Any]:
    return {_CODE[name]: v for name, v in by_name.items()}


_LE = _by_code({"f64": "<f8", "f32": "<f4", "f16": "<f2", "bool": "?", "i8": "i1", "u8": "u1", "i16": "<i2",
                "u16": "<u2", "i32": "<i4", "u32": "<u4", "i64": "<i8", "u64": "<u8"})
_ML_NAMES = _by_code({"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "e8m0": "float8_e8m0fnu"})
_RAW = _by_code({"bf16": "<u2", "f8e4m3": "u1", "f8e5m2": "u1", "e8m0": "u1"})
_PACKED = _by_code({"i4": "i4", "u4": "u4", "e2m1": "e2m1"})
_ML_PACKED = _by_code({"i4": "int4", "u4": "uint4", "e2m1": "float4_e2m1fn"})


def has_ml_dtypes() -> bool:
    """True when bf16/f8 load as ml_dtypes types (else as their raw bits)."""
    return _ml is not None


def _build_dtypes() -> Tuple[Any, ...]:
    out: List[Any] = [np.dtype("u1")] + [None] * len(_CODE)
    for code, name in _LE.items():
        out[code] = np.dtype(name)
    for code, name in _ML_NAMES.items():
        ml = getattr(_ml, name, None) if _ml is not None else None
        out[code] = np.dtype(ml) if ml is not None else np.dtype(_RAW[code])
    return tuple(out)


_DTYPES = _build_dtypes()


def _dtypes() -> Tuple[Any, ...]:
    return _DTYPES


def dtype_for(code: int) -> np.dtype[Any]:
    """The NumPy dtype a tensor of Kiln dtype ``code`` loads as."""
    if 1 <= code < len(_DTYPES) and _DTYPES[code] is not None:
        d: np.dtype[Any] = _DTYPES[code]
        return d
    return np.dtype("u1")


@dataclass(frozen=True)
class Packed:
    """Wire bytes of a packed tensor to save: ``dtype`` is ``"i4"``, ``"u4"``
    or ``"e2m1"``, ``data`` the ``uint8`` bytes (two elements per byte, low
    nibble first, ``ceil(prod(shape) / 2)`` bytes), ``shape`` the logical shape."""

    dtype: str
    data: Any
    shape: Tuple[int, ...]


@dataclass(frozen=True)
class Opaque:
    """Wire bytes of an opaque tensor to save: ``code`` in 4096..32767,
    ``layout`` its name, ``block_size`` the bytes per block."""

    code: int
    layout: str
    block_size: int
    data: Any
    shape: Tuple[int, ...]


@dataclass(frozen=True)
class Quantized:
    """A quantized tensor to save: ``data`` (an array, :class:`Packed` or
    :class:`Opaque`) holds the quantized elements, ``scale`` names the tensor
    of block scales (one per ``group_size`` elements along ``axis``) and
    ``outer``, when given, a one-element f32 tensor scaling them all
    (quantization scheme 2; scheme 1 without it). The scale tensors are
    entries of the same dict. ``safe_open(...).tensor_info(name).quant``
    reads the same fields back.

    MXFP4 weights: ``Quantized(Packed("e2m1", nibbles, (32, 64)),
    scale="w.scales", axis=1, group_size=32)`` beside an e8m0 ``w.scales``
    of shape (32, 2)."""

    data: Any
    scale: str
    axis: int
    group_size: int
    outer: Optional[str] = None


# Kiln code by NumPy (kind, itemsize), for the dtypes of other byte orders.
_TABLE = {(np.dtype(name).kind, np.dtype(name).itemsize): code for code, name in _LE.items()}


def _build_codes() -> Dict[Any, int]:
    """Kiln code by NumPy dtype for the native-order dtypes (the fast path);
    the packed nibble dtypes of ml_dtypes map to i4, u4 and e2m1."""
    codes: Dict[Any, int] = {}
    for code, name in _LE.items():
        codes[np.dtype(name).newbyteorder("=")] = code
    if _ml is not None:
        for code, name in list(_ML_NAMES.items()) + list(_ML_PACKED.items()):
            ml = getattr(_ml, name, None)
            if ml is not None:
                codes[np.dtype(ml)] = code
    return codes


_CODES = _build_codes()


def _code_of(dt: np.dtype[Any]) -> int:
    code = _CODES.get(dt)
    if code is not None:
        return code
    found = _TABLE.get((dt.kind, dt.itemsize))  # other byte orders
    if found is None:
        raise TypeError(f"Kiln has no dtype for NumPy {dt} (use an explicit conversion, or kiln.numpy.Packed/Opaque)")
    return found


_NATIVE_LE = sys.byteorder == "little"


def _wire_bytes(a: npt.NDArray[Any]) -> Any:
    """An object exporting the array's elements as little-endian bytes in C
    order (the array itself when it already is one: no copy)."""
    order = a.dtype.byteorder
    if order == ">" or (order == "=" and not _NATIVE_LE and a.dtype.itemsize > 1):
        a = a.astype(a.dtype.newbyteorder("<"))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    if a.dtype.kind in "biuf":
        return a  # NumPy exports these as their bytes
    return a.reshape(-1).view(np.uint8)  # ml_dtypes types have no buffer format


def _pack_nibbles(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    bits = np.ascontiguousarray(a).reshape(-1).view(np.uint8) & 0x0F
    if bits.size % 2:
        bits = np.concatenate([bits, np.zeros(1, np.uint8)])
    packed: npt.NDArray[Any] = bits[0::2] | (bits[1::2] << 4)
    return packed


_Quant = Optional[Tuple[int, int, str, Optional[str]]]
_SpecT = Tuple[str, int, Tuple[int, ...], Any, Optional[str], int, _Quant]


def _spec(name: str, value: Any) -> _SpecT:
    if isinstance(value, Quantized):
        if isinstance(value.data, Quantized):
            raise TypeError(f"{name}: a Quantized tensor holds an array, Packed or Opaque, not another Quantized")
        if not isinstance(value.scale, str) or not (value.outer is None or isinstance(value.outer, str)):
            raise TypeError(f"{name}: Quantized.scale and .outer name tensors of the same dict (str)")
        base = _spec(name, value.data)
        return base[:6] + ((int(value.axis), int(value.group_size), value.scale, value.outer),)
    if isinstance(value, Packed):
        codes = {v: k for k, v in _PACKED.items()}
        if value.dtype not in codes:
            raise ValueError(f"{name}: packed dtype must be i4, u4 or e2m1, not {value.dtype!r}")
        data = _wire_bytes(np.asarray(value.data, dtype=np.uint8))
        return (name, codes[value.dtype], tuple(int(d) for d in value.shape), data, None, 0, None)
    if isinstance(value, Opaque):
        data = _wire_bytes(np.asarray(value.data, dtype=np.uint8))
        return (name, int(value.code), tuple(int(d) for d in value.shape), data, value.layout, int(value.block_size), None)
    if not isinstance(value, (np.ndarray, np.generic)):
        raise TypeError(f"{name}: expected a numpy.ndarray, got {type(value).__name__}")
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    code = _code_of(a.dtype)
    if code in _PACKED:
        return (name, code, a.shape, _pack_nibbles(a), None, 0, None)
    return (name, code, a.shape, _wire_bytes(a), None, 0, None)


def _specs(tensors: Mapping[str, Any]) -> List[_SpecT]:
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a dict of name -> numpy.ndarray, not {type(tensors).__name__}")
    out = []
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name).__name__}")
        out.append(_spec(name, value))
    return out


def _tensor_specs(value: Any) -> Tuple[bool, List[_SpecT]]:
    """For ``kiln.encode`` of a ``tensors`` value: a dict (named, sorted) or a sequence (unnamed, in order)."""
    if isinstance(value, Mapping):
        return True, _specs(value)
    if isinstance(value, (list, tuple)):
        return False, [_spec(str(i), v) for i, v in enumerate(value)]
    raise TypeError(f"a tensors value must be a dict of arrays or a list of arrays, not {type(value).__name__}")


def _metadata(metadata: Optional[Mapping[str, str]]) -> List[Tuple[str, str]]:
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict of str -> str, not {type(metadata).__name__}")
    out = []
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"metadata must map str to str, got {type(k).__name__} -> {type(v).__name__}")
        out.append((k, v))
    return out


def parse_size(size: Union[int, str]) -> int:
    """Bytes from an int or a size string, in the project's one size grammar
    (as ``kiln convert --max-shard-size``): digits, then ``KB``/``MB``/``GB``
    (decimal, as the Hub writes ``"500MB"``), ``KiB``/``MiB``/``GiB`` (binary)
    or a bare ``K``/``M``/``G`` (binary); ``T`` likewise. A string is read by
    the converter's own parser (``kiln_convert::parse_size``)."""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f"a size is an int or a string such as '500MB', not {type(size).__name__}")
    if isinstance(size, int):
        n = size
    else:
        n = _kiln.parse_size(size)
    if n < 1 or n >= 1 << 64:
        raise ValueError(f"{size!r}: a size must be 1 byte to 2^64 - 1 bytes")
    return n


def save(tensors: Dict[str, Any], metadata: Optional[Dict[str, str]] = None, *, sort: bool = True,
         digests: bool = True) -> bytes:
    """The model file of ``tensors`` and ``metadata`` as bytes (see :func:`save_file`)."""
    out = _kiln.save(_specs(tensors), _metadata(metadata), None, 4096, sort, digests)
    assert out is not None
    return out


def save_file(
    tensors: Dict[str, Any],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Dict[str, str]] = None,
    *,
    sort: bool = True,
    digests: bool = True,
    max_shard_size: Union[int, str, None] = None,
) -> None:
    """Writes ``tensors`` (name -> array) and string ``metadata`` as a Kiln
    model file: the file ``kiln convert`` writes, tensors sorted by name,
    a SHA-256 digest of each tensor's payload before the directory
    (``digests=False``: the plain record, as before digests existed),
    payloads at 4 KiB aligned file offsets. The core checks the bytes before
    they reach the file, which is written to a temporary name and renamed
    over ``filename`` (arrays still viewing the old file keep its bytes).
    With ``sort=False`` the tensors keep the dict's order (the spec lets the
    writer choose; e.g. the order a device uses them in, so a stream can be
    used as it arrives); names are still looked up by name either way.

    ``max_shard_size`` (bytes, or a size string such as ``"500MB"``,
    ``"2GiB"``: :func:`parse_size`): when the tensors' payloads exceed it
    (or their names do not fit one directory block), a sharded model is
    written: the manifest at ``filename`` and the shards
    ``STEM-00001-of-0000N.kiln`` beside it (STEM: ``filename`` without
    ``.kiln``), each holding tensors in order up to that many payload bytes
    (a larger tensor gets a shard of its own; a quantized tensor stays with
    its scale tensors). Every shard is written to a temporary file, fsynced
    and renamed into place, the manifest last; shards of an earlier save to
    this name with another count are removed after the new set is complete.
    Tensors whose names do not fit one directory block (65,535 bytes of
    names) are sharded the same way without ``max_shard_size``, as
    ``kiln convert`` does. Raises ``TypeError`` for a dtype Kiln does not have and
    :class:`kiln.KilnError` for anything a reader would reject."""
    limit = None if max_shard_size is None else parse_size(max_shard_size)
    _kiln.save(_specs(tensors), _metadata(metadata), os.fspath(filename), 4096, sort, digests, limit)


def load(data: Union[bytes, bytearray, memoryview], *, verify: bool = False) -> Dict[str, npt.NDArray[Any]]:
    """The tensors of a model file or plain directory held in ``data``, as
    read-only arrays viewing ``data`` (see the module docs; a ``bytearray``
    cannot be resized while they live). Unnamed tensors
    get their index as key ("0", "1", ...). ``verify=True`` compares every
    payload with its digest (a view reads no payload otherwise)."""
    if isinstance(data, (str, os.PathLike)):
        raise TypeError("load() takes bytes; use load_file() for a path")
    from . import _owner

    _, arrays = _kiln.load_arrays(_owner(data), _DTYPES, verify)
    return arrays


def load_file(filename: Union[str, "os.PathLike[str]"], *, verify: bool = False) -> Dict[str, npt.NDArray[Any]]:
    """The tensors of a Kiln file, as read-only views of a memory map.

    A manifest's path loads the whole sharded model: the manifest is checked,
    then every shard, in order, is mapped and checked against it (the core's
    ``check_shard``) before its arrays are made; the first fault raises
    :class:`kiln.KilnError` with ``file`` the shard's name. ``verify=True``
    also hashes every payload against its digest (DIGEST, with ``tensor``
    named). It is off by default because this loader reads no payload: the
    arrays are views of the map, paged in when used (the rule of
    ``spec/model-file.md``: hashing is one flag where a reader would read
    nothing; ``kiln.validate`` and ``kiln validate`` verify by default)."""
    from . import _buffer, _name_foreign, _Shards

    buf = _buffer(filename)
    if _kiln.kind(buf) != "manifest":
        try:
            _, arrays = _kiln.load_arrays(buf, _DTYPES, verify)
        except _kiln.KilnError as err:
            _name_foreign(err, filename)
            raise
        return arrays
    shards = _Shards(filename, buf)
    out: Dict[str, npt.NDArray[Any]] = {}
    try:
        for index in range(1, len(shards.names) + 1):
            view = shards.open(index, verify)
            _, arrays = _kiln.load_arrays(view, _DTYPES, False)
            out.update(arrays)
    finally:
        shards.close()  # the arrays keep their maps alive
    return out


def unpack(packed: npt.NDArray[Any], dtype: str, shape: Sequence[int]) -> npt.NDArray[Any]:
    """Unpacks the wire bytes of an ``i4``/``u4``/``e2m1`` tensor into one
    element per byte: ``int8`` for i4, ``uint8`` for u4, and for e2m1
    ``ml_dtypes.float4_e2m1fn`` (or the ``uint8`` codes without ml_dtypes)."""
    raw = np.asarray(packed, dtype=np.uint8).reshape(-1)
    count = int(np.prod(np.asarray(shape, dtype=np.int64))) if len(shape) else 1
    if raw.size != (count + 1) // 2:
        raise ValueError(f"{raw.size} bytes do not hold {count} packed elements")
    nib = np.empty(raw.size * 2, np.uint8)
    nib[0::2] = raw & 0x0F
    nib[1::2] = raw >> 4
    nib = nib[:count]
    if dtype == "i4":
        out: npt.NDArray[Any] = ((nib.astype(np.int8) << 4) >> 4).astype(np.int8)
    elif dtype == "u4":
        out = nib
    elif dtype == "e2m1":
        ml = getattr(_ml, "float4_e2m1fn", None) if _ml is not None else None
        out = nib.view(ml) if ml is not None else nib
    else:
        raise ValueError(f"dtype must be i4, u4 or e2m1, not {dtype!r}")
    return out.reshape(tuple(shape))
