"""Kiln v2 for Python: model files with zero-copy NumPy views, every byte
checked by the Rust core (``kiln_nostd``) before an array is handed out.

>>> import numpy as np, kiln, kiln.numpy
>>> kiln.numpy.save_file({"w": np.ones((2, 3), np.float32)}, "m.kiln", {"author": "me"})
>>> kiln.validate("m.kiln")                       # None, or raises kiln.KilnError
>>> w = kiln.numpy.load_file("m.kiln")["w"]       # a read-only view of the memory map
>>> with kiln.safe_open("m.kiln") as f:
...     f.metadata(), f.tensor_info("w").shape, f.get_slice("w")[1:]

Errors from the format are :class:`KilnError` with ``code`` (``FRAME``,
``LIMIT``, ``EOF``, ``TYPE``, ``UTF8``, ``TRAILING``, ``SCHEMA``), ``offset``
and ``rule``: the verdict ``kiln validate --json`` prints for the same bytes.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _kiln
from ._kiln import MODEL_TYPE, KilnError, Some, TypeTextError

__all__ = [
    "MODEL_TYPE",
    "DEFAULT_CAP",
    "KilnError",
    "TypeTextError",
    "Some",
    "TensorInfo",
    "QuantInfo",
    "SafeOpen",
    "TensorSlice",
    "validate",
    "decode",
    "encode",
    "safe_open",
    "DTYPE_NAMES",
]

__version__ = "0.1.0"

#: The default count and byte cap (16,777,216), as in the CLI.
DEFAULT_CAP: int = _kiln.default_cap()

#: Kiln dtype names by wire code (the closed set; opaque codes are 4096..32767).
DTYPE_NAMES: Dict[int, str] = {
    1: "f64", 2: "f32", 3: "f16", 4: "bf16", 5: "f8e4m3", 6: "f8e5m2", 7: "bool",
    8: "i8", 9: "u8", 10: "i16", 11: "u16", 12: "i32", 13: "u32", 14: "i64",
    15: "u64", 16: "i4", 17: "u4", 18: "e2m1", 19: "e8m0",
}

#: Bytes, a buffer, or a path (``str`` or ``os.PathLike``; ``bytes`` are always data).
Data = Union[bytes, bytearray, memoryview, mmap.mmap, str, "os.PathLike[str]"]


def _is_path(data: object) -> bool:
    return isinstance(data, (str, os.PathLike))


def _map(path: Union[str, "os.PathLike[str]"]) -> Union[mmap.mmap, bytes]:
    """A read-only memory map of the file (``b""`` for an empty file, which
    cannot be mapped). The map stays open as long as any view of it lives."""
    with open(os.fspath(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _owner(data: Any) -> Any:
    """What arrays will view: ``bytes`` as they are, anything else as a flat
    byte memoryview. (The native module builds arrays with ``frombuffer``,
    which holds a buffer export for each array's life: while an array lives,
    a map cannot be closed nor a bytearray resized under it.)"""
    if isinstance(data, bytes):
        return data
    mv = memoryview(data)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


def _buffer(data: Data) -> Any:
    if isinstance(data, (str, os.PathLike)):
        return _owner(_map(data))
    return _owner(data)


def validate(
    data: Data,
    type_text: Optional[str] = None,
    framed: bool = False,
    *,
    count_cap: int = 16_777_216,
    byte_cap: int = 16_777_216,
) -> None:
    """Checks ``data`` (bytes, bytearray, memoryview, mmap or a path) and
    returns None, or raises :class:`KilnError` for the first broken rule.

    Without ``type_text`` this is ``kiln validate FILE``: a model file when
    the input starts like one (``KLN0`` and the model record's schema hash),
    else one standalone directory block. ``type_text``/``framed`` are
    ``--type``/``--framed``: ``"tensors"`` unframed is a directory block,
    anything else one Frozen value of that type (:class:`TypeTextError` for
    type text that is not canonical). The caps are ``--count-cap`` and
    ``--byte-cap``.
    """
    _kiln.validate(_buffer(data), type_text, framed, count_cap, byte_cap)


def decode(data: Data, type_text: str, framed: bool = False) -> Any:
    """Checks ``data`` as one Frozen value of ``type_text`` (behind the
    16-byte frame when ``framed``) and returns it as Python objects:

    - ``bool``, integers and ``int``/``uint`` -> ``int`` or ``bool``; ``f32``/``f64`` -> ``float``; ``str`` -> ``str``
    - ``list<T>`` of a fixed-width number or bool -> a read-only 1-D NumPy
      array viewing ``data`` (a copy when misaligned); other lists -> ``list``
    - ``opt<T>`` -> None or the value (``Some(value)`` when T is itself an opt)
    - ``dict<str,V>`` and ``struct{...}`` -> ``dict`` (fields in order)
    - ``tensors`` -> ``dict`` of arrays as :func:`kiln.numpy.load` gives them
    """
    from .numpy import _dtypes

    return _kiln.decode(_buffer(data), type_text, _dtypes(), framed)


def encode(value: Any, type_text: str, framed: bool = False) -> bytes:
    """The canonical encoding of ``value`` as ``type_text`` (behind the frame
    when ``framed``), the inverse of :func:`decode`: dict keys are sorted,
    integers range-checked (``OverflowError``), structs taken from a dict
    with exactly the fields (or an object's attributes), numeric lists from
    sequences or NumPy arrays, ``tensors`` from ``dict[str, ndarray]``
    (sorted by name) or a list of arrays (unnamed). The core's reader checks
    the result before it is returned (``KilnError`` if a reader with the
    default caps would reject it)."""
    from .numpy import _tensor_specs

    return _kiln.encode(value, type_text, _tensor_specs, framed)


@dataclass(frozen=True)
class QuantInfo:
    """Quantization metadata of a scheme 1 or 2 tensor (Kiln does not apply it)."""

    scheme: int
    axis: int
    group_size: int
    scale: str
    outer: Optional[str]


@dataclass(frozen=True)
class TensorInfo:
    """What the directory says about one tensor.

    ``dtype`` is the Kiln name (``"f32"``, ``"i4"``, ``"opaque"``), ``shape``
    the logical shape, ``offset`` the absolute byte offset of the payload in
    the file and ``byte_length`` its length. Packed (``i4``, ``u4``,
    ``e2m1``) and opaque tensors load as 1-D ``uint8`` arrays of their wire
    bytes: ``shape``, ``layout`` and ``block_size`` here say how to read
    them (:func:`kiln.numpy.unpack` unpacks nibbles).
    """

    name: str
    index: int
    dtype: str
    dtype_code: int
    shape: Tuple[int, ...]
    offset: int
    byte_length: int
    layout: Optional[str]
    block_size: int
    quant: Optional[QuantInfo]

    @property
    def packed(self) -> bool:
        """True for the nibble dtypes (two elements per byte, low nibble first)."""
        return self.dtype_code in (16, 17, 18)

    @property
    def opaque(self) -> bool:
        """True for opaque codes (4096..32767): a foreign block layout."""
        return self.dtype_code >= 4096


def _infos(rows: List[Tuple[Any, ...]]) -> Dict[str, TensorInfo]:
    keys = [str(i) if r[0] is None else r[0] for i, r in enumerate(rows)]
    out: Dict[str, TensorInfo] = {}
    for i, (name, code, shape, offset, length, layout, block_size, quant) in enumerate(rows):
        q = None
        if quant is not None:
            scheme, axis, group, scale, outer = quant
            q = QuantInfo(scheme, axis, group, keys[scale], None if outer is None else keys[outer])
        out[keys[i]] = TensorInfo(
            name=keys[i], index=i, dtype=DTYPE_NAMES.get(code, "opaque"), dtype_code=code,
            shape=tuple(shape), offset=offset, byte_length=length, layout=layout,
            block_size=block_size, quant=q,
        )
    return out


class TensorSlice:
    """A lazily read tensor: ``shape``/``dtype`` without touching the
    payload, ``slice[rows]`` a view that reads only the pages it covers."""

    def __init__(self, handle: "SafeOpen", name: str) -> None:
        self._handle = handle
        self._info = handle.tensor_info(name)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._info.shape

    @property
    def dtype(self) -> str:
        return self._info.dtype

    def get_shape(self) -> List[int]:
        """The logical shape (as safetensors' ``get_shape``)."""
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The Kiln dtype name."""
        return self._info.dtype

    def __len__(self) -> int:
        return self._info.shape[0] if self._info.shape else 0

    def __getitem__(self, index: Any) -> Any:
        return self._handle.get_tensor(self._info.name)[index]


class SafeOpen:
    """A checked, memory-mapped Kiln file (see :func:`safe_open`)."""

    def __init__(self, filename: Union[str, "os.PathLike[str]"], framework: str = "numpy", device: str = "cpu") -> None:
        if framework not in ("numpy", "np"):
            raise ValueError(f"framework {framework!r} is not supported (only 'numpy')")
        if device != "cpu":
            raise ValueError(f"device {device!r} is not supported (only 'cpu')")
        self._mm: Any = _map(filename)
        self._view: Any = _owner(self._mm)
        meta, padding, dir_offset, rows = _kiln.inspect(self._view)
        self._meta: Optional[Dict[str, str]] = meta
        self.padding: int = padding
        self.directory_offset: int = dir_offset
        self._info = _infos(rows)

    def __enter__(self) -> "SafeOpen":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drops the file. Arrays already handed out stay valid: each keeps
        the memory map alive (a buffer export held through its ``base``)."""
        mm, self._mm, self._view = self._mm, None, None
        if isinstance(mm, mmap.mmap):
            try:
                mm.close()
            except BufferError:
                pass  # arrays hold the map; it is unmapped when the last one dies

    def _open(self) -> Any:
        if self._view is None:
            raise ValueError("the file is closed")
        return self._view

    def keys(self) -> List[str]:
        """Tensor names in directory order (sorted, for files from save_file)."""
        return list(self._info)

    def offset_keys(self) -> List[str]:
        """Tensor names in payload order (the same as :meth:`keys` in Kiln)."""
        return list(self._info)

    def __contains__(self, name: object) -> bool:
        return name in self._info

    def __len__(self) -> int:
        return len(self._info)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._info))

    def metadata(self) -> Optional[Dict[str, str]]:
        """The model file's metadata (without the padding key), or None for a plain directory."""
        return None if self._meta is None else dict(self._meta)

    def tensor_info(self, name: str) -> TensorInfo:
        """dtype, shape, offset, length, layout and quantization of ``name``."""
        try:
            return self._info[name]
        except KeyError:
            raise KeyError(f"no tensor named {name!r}") from None

    def get_tensor(self, name: str) -> Any:
        """The tensor as a read-only NumPy array (a view of the memory map when aligned)."""
        from .numpy import _dtypes

        i = self.tensor_info(name)
        return _kiln.make_array(self._open(), i.dtype_code, list(i.shape), i.offset, i.byte_length, _dtypes())

    def get_slice(self, name: str) -> TensorSlice:
        """A :class:`TensorSlice`: index it to read part of the tensor."""
        self._open()
        return TensorSlice(self, name)


def safe_open(filename: Union[str, "os.PathLike[str]"], framework: str = "numpy", device: str = "cpu") -> SafeOpen:
    """Opens a Kiln file (model file or plain directory) by memory map and
    checks every rule before returning; use as a context manager. Raises
    :class:`KilnError` for a rejected file."""
    return SafeOpen(filename, framework, device)
