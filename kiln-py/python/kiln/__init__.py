"""Kiln v2 for Python: model files with zero-copy NumPy views, every byte
checked by the Rust core (``kiln_nostd``) before an array is handed out.

>>> import numpy as np, kiln, kiln.numpy
>>> kiln.numpy.save_file({"w": np.ones((2, 3), np.float32)}, "m.kiln", {"author": "me"})
>>> kiln.validate("m.kiln")                       # Validated(kind='digests', digests_verified=True), or raises kiln.KilnError
>>> w = kiln.numpy.load_file("m.kiln")["w"]       # a read-only view of the memory map
>>> with kiln.open("m.kiln") as f:                # the front door: any Kiln file by content
...     f.metadata(), f.tensor_info("w").shape, f.get_slice("w")[1:]

PyTorch and JAX/Flax have :mod:`kiln.torch` and :mod:`kiln.flax` in the shapes
of ``safetensors.torch`` and ``safetensors.flax`` (tensors viewing a
copy-on-write map; JAX arrays imported from the map through DLPack), and
``safe_open(path, framework="pt")`` (or ``"np"``, ``"flax"``) serves each.
:func:`convert` is ``kiln convert`` (safetensors, GGUF, ONNX, ... to Kiln).

Sharded models (a manifest ``NAME.kiln`` and shards ``NAME-00001-of-0000N.kiln``
beside it) are written by ``kiln.numpy.save_file(..., max_shard_size="500MB")``
and open with the same calls: ``open``, ``load_file`` and ``safe_open`` take
the manifest's path, check the manifest, and map and check each shard against it
(the core's ``check_shard``) before any tensor of it is handed out.

Errors from the format are :class:`KilnError` with ``code`` (``FRAME``,
``LIMIT``, ``EOF``, ``TYPE``, ``UTF8``, ``TRAILING``, ``SCHEMA``, ``DIGEST``,
``SHARD``, ``PATH``), ``offset`` and ``rule``: the verdict ``kiln validate
--json`` prints for the same bytes; for a fault in a shard, ``file`` is the
shard's file name (and ``offset`` a byte offset in it) and ``tensor`` the
tensor at fault, where one is.
"""

from __future__ import annotations

import base64
import builtins
import mmap
import os
import stat
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _kiln
from ._kiln import DIGESTS_TYPE, MODEL_TYPE, ConvertError, KilnError, Some, TypeTextError

__all__ = [
    "MODEL_TYPE",
    "DIGESTS_TYPE",
    "DEFAULT_CAP",
    "KilnError",
    "ConvertError",
    "Converted",
    "TypeTextError",
    "Some",
    "TensorInfo",
    "QuantInfo",
    "SafeOpen",
    "TensorSlice",
    "validate",
    "Validated",
    "verify",
    "Release",
    "decode",
    "encode",
    "open",
    "safe_open",
    "DTYPE_NAMES",
    "SAFETENSORS_DTYPES",
    "FRAMEWORKS",
    "convert",
]

__version__ = "0.1.0"

#: The default count and byte cap (16,777,216), as in the CLI.
DEFAULT_CAP: int = _kiln.default_cap()

_DTYPE_TABLE = _kiln.dtype_table()  # the core's table, with the binding's safetensors column

#: Kiln dtype names by wire code (the closed set; opaque codes are 4096..32767).
DTYPE_NAMES: Dict[int, str] = {code: name for code, name, _ in _DTYPE_TABLE if code < 4096}

#: safetensors' dtype strings by Kiln wire code, where safetensors has the
#: dtype (``get_slice(...).get_dtype()`` answers with these; Kiln's name otherwise).
SAFETENSORS_DTYPES: Dict[int, str] = {code: st for code, _, st in _DTYPE_TABLE if st is not None}

#: Bytes, a buffer, or a path (``str`` or ``os.PathLike``; ``bytes`` are always data).
Data = Union[bytes, bytearray, memoryview, mmap.mmap, str, "os.PathLike[str]"]


def _is_path(data: object) -> bool:
    return isinstance(data, (str, os.PathLike))


def _map(path: Union[str, "os.PathLike[str]"], private: bool = False) -> Union[mmap.mmap, bytes]:
    """A read-only memory map of the file (``b""`` for an empty file, which
    cannot be mapped). The map stays open as long as any view of it lives.

    ``private``: a copy-on-write map instead (``MAP_PRIVATE``, writable):
    a write changes only this process's copy of that page, never the file
    nor another map of it (for frameworks without read-only tensors)."""
    with builtins.open(os.fspath(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY if private else mmap.ACCESS_READ)


def _map_shard(path: str, private: bool = False) -> Union[mmap.mmap, bytes, None]:
    """A read-only (``private``: copy-on-write) map of the shard file at
    ``path`` (a path inside the manifest's folder that the native half
    resolved), opened without following a symbolic link and only when it is
    a regular file; None when it cannot be opened (the shard is then missing)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size == 0:
            return b""
        return mmap.mmap(fd, 0, access=mmap.ACCESS_COPY if private else mmap.ACCESS_READ)
    except OSError:
        return None
    finally:
        os.close(fd)


def _close(mm: Any) -> None:
    if isinstance(mm, mmap.mmap):
        try:
            mm.close()
        except BufferError:
            pass  # arrays hold the map; it is unmapped when the last one dies


class _Shards:
    """A checked manifest and the shards opened so far (each mapped and
    checked against the manifest once, when first needed; ``private``: by
    copy-on-write maps, see :func:`_map`)."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], view: Any, private: bool = False) -> None:
        self.native = _kiln.Sharded(os.fspath(path), view)
        self.private = private
        self.names: List[str] = [name for name, _ in self.native.shards()]
        self.maps: Dict[int, Any] = {}
        self.views: Dict[int, Any] = {}
        self.rows: Dict[int, List[Any]] = {}
        self.infos: Dict[int, Dict[str, "TensorInfo"]] = {}

    def open(self, index: int, verify: bool) -> Any:
        """Shard ``index`` (1-based): its bytes, checked against the manifest."""
        if index not in self.views:
            path = self.native.resolve(index)
            mm = None if path is None else _map_shard(path, self.private)
            view = None if mm is None else _owner(mm)
            try:
                _, _, rows = self.native.check(index, view, verify)
            except BaseException:
                del view
                _close(mm)
                raise
            self.maps[index], self.views[index], self.rows[index] = mm, view, list(rows)
        return self.views[index]

    def info(self, index: int, verify: bool) -> Tuple[Any, Dict[str, "TensorInfo"]]:
        """Shard ``index``'s bytes and tensors, checked."""
        view = self.open(index, verify)
        if index not in self.infos:
            self.infos[index] = _infos(self.rows[index], self.names[index - 1])
        return view, self.infos[index]

    def close(self) -> None:
        maps, self.maps, self.views = self.maps, {}, {}
        for mm in maps.values():
            _close(mm)


def _checked_files(
    filename: Union[str, "os.PathLike[str]"], verify: bool, private: bool
) -> List[Tuple[Any, List[Tuple[Any, ...]]]]:
    """The checked tensor table of each file of the model at ``filename``
    (one model file, or every shard of a manifest in order, each checked
    against it), with the buffer it describes: what a bulk loader builds
    its tensors from. ``private``: copy-on-write maps. A foreign file's
    error names the converting call (:func:`_name_foreign`)."""
    view = _owner(_map(filename, private))
    if _kiln.kind(view) != "manifest":
        try:
            return [(view, list(_kiln.inspect(view, verify)[3]))]
        except KilnError as err:
            _name_foreign(err, filename)
            raise
    shards = _Shards(filename, view, private)
    try:
        return [(shards.open(index, verify), shards.rows[index]) for index in range(1, len(shards.names) + 1)]
    finally:
        shards.close()  # a map stays open while its buffer export (the view returned) lives


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
    verify: bool = True,
) -> Validated:
    """Checks ``data`` (bytes, bytearray, memoryview, mmap or a path) and
    returns what it found (:class:`Validated`: the form and whether every
    digest was compared), or raises :class:`KilnError` for the first broken
    rule.

    Without ``type_text`` this is ``kiln validate FILE``: a model file when
    the input starts like one (``KLN0`` and the schema hash of a plain,
    digests or shard record), with every digest compared unless ``verify``
    is false (``--no-verify-digests``); a manifest's path checks the whole
    sharded model (the manifest, then every shard in order: the first fault
    names its shard in ``file``; a manifest given as bytes is checked alone);
    anything else is one standalone directory block. ``type_text``/``framed``
    are ``--type``/``--framed``: ``"tensors"`` unframed is a directory block,
    anything else one Frozen value of that type (:class:`TypeTextError` for
    type text that is not canonical). The caps are ``--count-cap`` and
    ``--byte-cap``.
    """
    buf = _buffer(data)
    kind, digests_verified = _kiln.validate(buf, type_text, framed, count_cap, byte_cap, verify)
    if type_text is None and not framed and _check_shards(data, buf, verify):
        # Every shard hashed against its digests (a shard record always has them).
        digests_verified = verify
    return Validated(kind, digests_verified)


@dataclass(frozen=True)
class Validated:
    """What :func:`validate` checked. ``kind``: ``"directory"`` (a plain
    directory block), a model file's record type (``"plain"``,
    ``"digests"``, ``"shard"``, ``"signed"``), ``"manifest"`` or ``"value"``
    (a Frozen value of ``type_text``). ``digests_verified``: every payload
    digest was hashed and matched (``kiln validate --json``'s
    ``digests_verified``): false with ``verify=False``, for a record without
    digests, and for a manifest given as bytes (its shards are files)."""

    kind: str
    digests_verified: bool


def _check_shards(data: Data, buf: Any, verify: bool) -> bool:
    """A manifest's path: every shard checked against the manifest, in order
    (True), else nothing (False)."""
    if not (_is_path(data) and _kiln.kind(buf) == "manifest"):
        return False
    shards = _Shards(data, buf)  # type: ignore[arg-type]
    try:
        for index in range(1, len(shards.names) + 1):
            shards.open(index, verify)
            shards.close()
    finally:
        shards.close()
    return True


@dataclass(frozen=True)
class Release:
    """What :func:`verify` accepted: the signed release and its signer."""

    #: The release version (an update carries a higher one than the model it replaces).
    version: int
    #: The device or product the model is for.
    target: str
    #: The signer's Ed25519 public key (32 bytes).
    key: bytes

    @property
    def key_hex(self) -> str:
        """The key as ``kiln validate`` and ``kiln verify`` show it."""
        return self.key.hex()


# An Ed25519 SubjectPublicKeyInfo (RFC 8410) is this DER prefix and the 32 key bytes.
_SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")


def _public_key(key: Union[bytes, str]) -> bytes:
    """32 raw bytes, 64 hex digits, or the PEM ``PUBLIC KEY`` that
    ``openssl pkey -pubout`` writes (text or bytes)."""
    text = key.decode("ascii", "replace") if isinstance(key, bytes) and key.startswith(b"-----") else key
    if isinstance(text, str) and "-----BEGIN PUBLIC KEY-----" in text:
        body = text.split("-----BEGIN PUBLIC KEY-----", 1)[1].split("-----END PUBLIC KEY-----", 1)[0]
        der = base64.b64decode("".join(body.split()), validate=True)
        if len(der) != 44 or not der.startswith(_SPKI_ED25519):
            raise ValueError("not an Ed25519 public key (SubjectPublicKeyInfo, RFC 8410)")
        return der[12:]
    if isinstance(text, str):
        raw = bytes.fromhex(text)
    else:
        raw = bytes(text)
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes (or 64 hex digits, or PEM)")
    return raw


def verify(
    data: Data,
    public_key: Union[bytes, str],
    *,
    target: Optional[str] = None,
    newer_than: Optional[int] = None,
) -> Release:
    """``kiln verify --pubkey KEY FILE``: checks a signed model file (or the
    signed manifest of a sharded model) against the trusted Ed25519
    ``public_key`` (32 bytes, hex, or PEM as ``openssl pkey -pubout``
    writes it): its key, its release (``target``: the name it must carry;
    ``newer_than``: the version it must be above, so an older one is a
    rollback), the signature over every byte but the payloads, then every
    digest and rule, so one changed byte anywhere fails it. A manifest's
    path also checks every shard against the manifest, in order. Returns the
    accepted :class:`Release`; raises :class:`KilnError` (code
    ``"SIGNATURE"`` and its rule for a wrong key, target, version or
    signature, or an unsigned model: ``"NotSigned"``)."""
    key = _public_key(public_key)
    buf = _buffer(data)
    version, name, signer = _kiln.verify_signed(buf, key, target, newer_than)
    _check_shards(data, buf, True)
    return Release(version, name, signer)


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
    the file and ``byte_length`` its length. In a sharded model, ``shard``
    is the file name of the shard that holds it, and ``index`` and
    ``offset`` are in that shard's file (None: the file opened). Packed (``i4``, ``u4``,
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
    shard: Optional[str] = None

    @property
    def packed(self) -> bool:
        """True for the nibble dtypes (two elements per byte, low nibble first)."""
        return self.dtype in ("i4", "u4", "e2m1")

    @property
    def opaque(self) -> bool:
        """True for opaque codes (4096..32767): a foreign block layout."""
        return self.dtype_code >= 4096


def _infos(rows: List[Tuple[Any, ...]], shard: Optional[str] = None) -> Dict[str, TensorInfo]:
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
            block_size=block_size, quant=q, shard=shard,
        )
    return out


def _manifest_infos(rows: List[Tuple[Any, ...]], names: List[str]) -> Dict[str, TensorInfo]:
    """The manifest's tensor table as infos before their shards are opened
    (``offset`` -1, ``index`` the position in the shard)."""
    out: Dict[str, TensorInfo] = {}
    within: Dict[int, int] = {}
    for name, shard, code, shape, length, layout, block_size, quant in rows:
        q = None if quant is None else QuantInfo(*quant)
        i = within.get(shard, 0)
        within[shard] = i + 1
        out[name] = TensorInfo(
            name=name, index=i, dtype=DTYPE_NAMES.get(code, "opaque"), dtype_code=code,
            shape=tuple(shape), offset=-1, byte_length=length, layout=layout,
            block_size=block_size, quant=q, shard=names[shard - 1],
        )
    return out


class TensorSlice:
    """A lazily read tensor: ``shape``/``dtype`` without touching the
    payload, ``slice[rows]`` a view that reads only the pages it covers."""

    def __init__(self, handle: "SafeOpen", name: str) -> None:
        self._handle = handle
        self._info = handle._entry(name)  # in a sharded model: the manifest's facts, no shard opened

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
        """The dtype as safetensors' ``get_dtype`` spells it where safetensors
        has the dtype (``"F32"``, ``"BF16"``, ``"I64"``, ``"BOOL"``,
        ``"F8_E4M3"``, ...: :data:`SAFETENSORS_DTYPES`), Kiln's name where it
        has none (``"i4"``, ``"u4"``, ``"e2m1"``, ``"opaque"``). ``.dtype`` and
        :class:`TensorInfo` keep Kiln's names."""
        return SAFETENSORS_DTYPES.get(self._info.dtype_code, self._info.dtype)

    def __len__(self) -> int:
        return self._info.shape[0] if self._info.shape else 0

    def __getitem__(self, index: Any) -> Any:
        """Part of the tensor, in the handle's framework (NumPy and torch: a
        view; JAX: the part copied into a new array). A packed (``i4``,
        ``u4``, ``e2m1``) or opaque tensor raises ``TypeError``: its
        elements are not whole bytes, so slice its wire bytes instead
        (:meth:`SafeOpen.raw`: a packed tensor's rows are rows there)."""
        info = self._info
        if info.packed or info.opaque:
            raise TypeError(
                f"get_slice({info.name!r}): a {info.dtype} tensor cannot be indexed by element (its elements are "
                f"{'opaque blocks' if info.opaque else 'nibbles'}); read its wire bytes with raw({info.name!r})"
                + ("" if info.opaque else ", whose rows are the tensor's rows")
            )
        return self._handle._part(info.name, index)


#: ``framework=`` values :func:`safe_open` takes (safetensors' spellings), by the framework they serve.
FRAMEWORKS: Dict[str, str] = {"numpy": "numpy", "np": "numpy", "pt": "torch", "torch": "torch", "flax": "jax", "jax": "jax"}

# Frameworks safetensors serves that Kiln does not (named in the refusal).
_NOT_SERVED = {"mlx": "MLX", "tf": "TensorFlow", "tensorflow": "TensorFlow", "paddle": "PaddlePaddle"}


def _framework(framework: str, device: Any = "cpu") -> str:
    """The framework ``framework`` names (``"numpy"``, ``"torch"`` or
    ``"jax"``), after checking that ``device`` is the CPU."""
    served = "'numpy' (or 'np'), 'pt' (or 'torch') and 'flax' (or 'jax')"
    if not isinstance(framework, str) or framework not in FRAMEWORKS:
        which = _NOT_SERVED.get(framework) if isinstance(framework, str) else None
        what = f"{framework!r} ({which})" if which else repr(framework)
        raise ValueError(f"framework {what} is not supported: Kiln serves {served}")
    if str(device) != "cpu":
        raise ValueError(f"device {device!r} is not supported: only 'cpu' (move tensors after loading, e.g. .to('cuda'))")
    return FRAMEWORKS[framework]


class SafeOpen:
    """A checked, memory-mapped Kiln file or sharded model (see :func:`open`),
    serving tensors as ``framework`` makes them (:func:`safe_open`)."""

    def __init__(
        self,
        filename: Union[str, "os.PathLike[str]"],
        framework: str = "numpy",
        device: str = "cpu",
        *,
        verify: bool = False,
    ) -> None:
        self.framework = _framework(framework, device)
        self._verify = bool(verify)
        # torch has no read-only tensors: its tensors view a copy-on-write map.
        private = self.framework == "torch"
        self._mm: Any = _map(filename, private)
        self._view: Any = _owner(self._mm)
        self._shards: Optional[_Shards] = None
        self._bases: Dict[int, Any] = {}  # torch: a uint8 tensor over each map, by shard (0: the file)
        try:
            self._kind: Optional[str] = _kiln.kind(self._view)
            if self._kind == "manifest":
                shards = _Shards(filename, self._view, private)
                self._shards = shards
                self._meta: Optional[Dict[str, str]] = shards.native.metadata()
                self.padding: int = 0
                self.directory_offset: int = 0
                table = shards.native.table()
                self._info = _manifest_infos(list(table), shards.names)
                self._shard_of: Dict[str, int] = {row[0]: int(row[1]) for row in table}
            else:
                meta, padding, dir_offset, rows = _kiln.inspect(self._view, self._verify)
                self._meta = meta
                self.padding = padding
                self.directory_offset = dir_offset
                self._info = _infos(rows)
        except BaseException:
            self.close()
            raise

    @property
    def digests_verified(self) -> bool:
        """True when every payload of the model has been hashed and matched its
        digest: with ``verify=True``, for a file with digests at open; for a
        sharded model once every shard has been opened (each is checked when
        first used). False without ``verify`` (ruling 6: a map reads no payload)
        and for a file that carries no digests (docs/verification.md)."""
        if not self._verify:
            return False
        if self._shards is not None:
            return len(self._shards.views) == len(self._shards.names)
        return self._kind in ("digests", "shard", "signed")

    def __enter__(self) -> "SafeOpen":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drops the file (and the shards' maps). Arrays already handed out
        stay valid: each keeps its memory map alive (a buffer export held
        through its ``base``)."""
        mm, self._mm, self._view = self._mm, None, None
        self._bases = {}
        _close(mm)
        if self._shards is not None:
            self._shards.close()

    def _open(self) -> Any:
        if self._view is None:
            raise ValueError("the file is closed")
        return self._view

    @property
    def shards(self) -> List[str]:
        """The shard file names of a sharded model, in order ([] for one file)."""
        return [] if self._shards is None else list(self._shards.names)

    def keys(self) -> List[str]:
        """Tensor names in directory order (sorted, for files from save_file;
        shard by shard for a sharded model)."""
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

    def _entry(self, name: str) -> TensorInfo:
        try:
            return self._info[name]
        except KeyError:
            raise KeyError(f"no tensor named {name!r}") from None

    def _located(self, name: str) -> Tuple[Any, TensorInfo, int]:
        """The buffer holding ``name``, its info there and the buffer's key
        (its shard's number; 0: the file): for a sharded model its shard,
        opened and checked the first time it is needed."""
        info = self._entry(name)
        view = self._open()
        if self._shards is None:
            return view, info, 0
        index = self._shard_of[name]
        shard_view, infos = self._shards.info(index, self._verify)
        return shard_view, infos[name], index

    def tensor_info(self, name: str) -> TensorInfo:
        """dtype, shape, offset, length, layout and quantization of ``name``
        (in a sharded model this opens and checks its shard: ``offset`` is
        in that shard's file, named by ``shard``)."""
        return self._located(name)[1]

    def _array(self, name: str) -> Any:
        """``name`` as the read-only NumPy array :mod:`kiln.numpy` makes."""
        from .numpy import _dtypes

        view, i, _ = self._located(name)
        return _kiln.make_array(view, i.dtype_code, list(i.shape), i.offset, i.byte_length, _dtypes())

    def get_tensor(self, name: str) -> Any:
        """The tensor in this handle's framework: NumPy, a read-only array (a
        view of the memory map when aligned); torch, a tensor viewing the
        copy-on-write map (:mod:`kiln.torch`); JAX, an array (:mod:`kiln.flax`:
        from the map through DLPack where JAX takes it, else one copy)."""
        if self.framework == "numpy":
            return self._array(name)
        if self.framework == "torch":
            from .torch import _tensor

            view, info, key = self._located(name)
            if key not in self._bases:
                from .torch import _base

                self._bases[key] = _base(view)
            return _tensor(self._bases[key], info)
        from .flax import _to_jax

        return _to_jax(self._array(name), self._entry(name))

    def _part(self, name: str, index: Any) -> Any:
        """``get_slice(name)[index]`` for a tensor of whole-byte elements."""
        if self.framework == "jax":
            from .flax import _to_jax

            return _to_jax(self._array(name)[index], None)
        return self.get_tensor(name)[index]

    def raw(self, name: str) -> Any:
        """The wire bytes of ``name`` as a read-only NumPy ``uint8`` array
        viewing the map, in every framework: the way to the bytes of a
        tensor no framework has a dtype for (opaque blocks, and packed
        nibbles where the framework has no packed type). A packed tensor
        (``i4``, ``u4``, ``e2m1``, two elements per byte, low nibble first)
        whose last dimension is even comes shaped ``(*shape[:-1], shape[-1] // 2)``,
        so ``raw(name)[rows]`` slices rows; anything else is 1-D."""
        import numpy as np

        view, i, _ = self._located(name)
        out = np.frombuffer(view, np.uint8, count=i.byte_length, offset=i.offset)
        out.flags.writeable = False
        if i.packed and i.shape and i.shape[-1] % 2 == 0:
            out = out.reshape(i.shape[:-1] + (i.shape[-1] // 2,))
        return out

    def get_slice(self, name: str) -> TensorSlice:
        """A :class:`TensorSlice`: index it to read part of the tensor."""
        self._open()
        return TensorSlice(self, name)


def open(path: Union[str, "os.PathLike[str]"], *, verify: bool = False) -> SafeOpen:
    """The front door: opens the Kiln file at ``path`` by memory map, whatever
    ``kiln convert`` or the writers made of it (a model file, signed model,
    plain directory, or the manifest of a sharded model), and checks every
    rule before returning; use as a context manager. Raises
    :class:`KilnError` for a rejected file.

    A manifest opens the sharded model: the manifest is checked whole here;
    each shard, looked up in the manifest's folder only (a symbolic link out
    of it is never followed), is mapped and checked against it (the core's
    ``check_shard``: length, model id, position, tensors, prefix digest, its
    own rules) the first time one of its tensors is asked for, so a missing
    or foreign shard raises then, with ``file`` naming it and ``tensor`` the
    tensor at fault. ``verify=True`` also hashes every payload against its
    digest (the file's, or each shard's as it is opened); a memory map reads
    no payload otherwise, so it is off by default (ruling 6:
    ``docs/verification.md``).

    A format ``kiln convert`` reads (safetensors, GGUF, ONNX, ...) is
    refused with the Kiln verdict (``FRAME`` at byte 0), its ``foreign``
    attribute the format's name and, from Python 3.11, a note with the
    command that converts it. The checks are the host crate's
    (``kiln-host``), the same the CLI runs."""
    return _open(path, "numpy", "cpu", verify)


def _open(path: Union[str, "os.PathLike[str]"], framework: str, device: Any, verify: bool) -> SafeOpen:
    try:
        return SafeOpen(path, framework, device, verify=verify)
    except KilnError as err:
        _name_foreign(err, path)
        raise


def _name_foreign(err: KilnError, path: Union[str, "os.PathLike[str]"]) -> None:
    """Sets ``err.foreign`` (None for a Kiln file) and notes the converting command."""
    found = None
    if err.file is None and err.offset == 0:
        try:
            found = _kiln.foreign(os.fspath(path), _owner(_map(path)))
        except OSError:
            found = None
    err.foreign = None if found is None else found[0]
    if found is not None and hasattr(err, "add_note"):
        note = found[1]
        if "kiln convert" in note:
            src = os.fspath(path)
            note += f"; in Python: kiln.convert({src!r}, {os.path.splitext(src)[0] + '.kiln'!r})"
        err.add_note(note)


@dataclass(frozen=True)
class Converted:
    """What :func:`convert` did."""

    #: The input's format (``"safetensors"``, ``"gguf"``, ``"onnx"``, ``"kiln"``, ...).
    format: str
    #: Tensors written.
    tensors: int
    #: Bytes written (a sharded output: all its files).
    bytes: int
    #: What was not carried as-is (``kiln convert`` prints these as notes).
    notes: List[str]


def convert(
    src: Union[str, "os.PathLike[str]"],
    dst: Union[str, "os.PathLike[str]"],
    *,
    max_shard_size: Union[int, str, None] = None,
    to: Optional[str] = None,
    from_format: Optional[str] = None,
    fsync: bool = True,
) -> Converted:
    """``kiln convert SRC -o DST``, in this process: the CLI's own converter
    (the Rust ``kiln-convert`` crate, with the command's defaults and size
    grammar), so a file converts, and is refused, exactly as with the command
    (docs/conversion.md). ``src``: a safetensors, GGUF, ONNX, HK, ``.npy``/
    ``.npz`` or Kiln file, a Hugging Face index or folder, a gguf-split set
    or a Kiln manifest; ``dst``: a ``.kiln`` (or ``.safetensors``) path.
    ``max_shard_size`` (``--max-shard-size``: bytes or ``"500MB"``),
    ``to`` (``--to``: ``"auto"``, ``"record"``, ``"tensors"`` or
    ``"safetensors"``), ``from_format``
    (``--from``), ``fsync=False`` (``--no-fsync``). Raises
    :class:`ConvertError` for an input that cannot be converted (with
    ``offset`` where the reader stopped), ``ValueError`` for a usage fault,
    ``OSError`` for an I/O one; nothing is left at ``dst`` then."""
    size = None if max_shard_size is None else str(max_shard_size)
    fmt, tensors, written, notes = _kiln.convert(os.fspath(src), os.fspath(dst), max_shard_size=size, to=to,
                                                  from_format=from_format, fsync=fsync)
    return Converted(fmt, tensors, written, list(notes))


def safe_open(
    filename: Union[str, "os.PathLike[str]"],
    framework: str = "numpy",
    device: str = "cpu",
    *,
    verify: bool = False,
) -> SafeOpen:
    """safetensors' ``safe_open`` for Kiln files: :func:`open` (every rule
    checked at open, by memory map; a sharded model through its manifest;
    ``verify=True`` hashes the payloads), serving tensors to ``framework``:
    ``"numpy"`` or ``"np"`` (read-only arrays viewing the map), ``"pt"`` or
    ``"torch"`` (tensors viewing a copy-on-write map: :mod:`kiln.torch`),
    ``"flax"`` or ``"jax"`` (arrays: :mod:`kiln.flax`). ``device`` must be
    ``"cpu"``; another framework (``"mlx"``, ``"tf"``, ``"paddle"``, ...)
    or device raises ``ValueError`` naming what is served."""
    _framework(framework, device)
    return _open(filename, framework, device, verify)
