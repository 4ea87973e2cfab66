"""Running a converted model with onnxruntime, the Kiln files checked first.

``kiln convert model.onnx -o model.kiln --onnx-graph model.kiln.onnx`` writes
the graph with its weights as ONNX external data pointing into the Kiln
file (``location`` the Kiln file, or for a sharded output its shard;
``offset``/``length`` the tensor's payload bytes there; docs/onnx.md). :func:`session`
opens such a graph for onnxruntime only after checking the pair:

>>> import numpy as np, kiln.onnx
>>> sess = kiln.onnx.session("model.kiln.onnx")          # or "model.kiln", or an http(s) URL of the graph
>>> logits, = sess.run(None, {"x": np.zeros((1, 64), np.float32)})

1. The graph's bytes are read once and checked by the converter's own
   rules (the Rust crate ``kiln-onnx``; ``docs/onnx.md``, R1 to R3): an
   initializer (of the main graph or a subgraph) is either inline, and then
   rule R1 must keep it inline (a node reads it as data while the graph is
   resolved: a shape, axes, scales; or it is of a type Kiln cannot hold), or external data (``location``, ``offset``, ``length``, nothing
   else) whose location is a plain file name in the graph's folder; no
   other tensor anywhere in the model (a ``Constant``'s value, a sparse
   tensor, a function's node) may be external data, since the runtime would
   read that file unchecked. The graph must name its Kiln model
   (``metadata_props`` ``kiln.model``).
2. Each Kiln file named is opened without following a symbolic link,
   mapped once, and checked whole by kiln's validator with every SHA-256
   digest compared (``kiln validate``); a sharded model's manifest is
   checked with all its shards. A file without digests (a plain model file
   or a bare directory block) is refused: ``kiln convert`` always writes
   them, and without them nothing binds the weights the runtime gets to the
   file that was converted.
3. The Kiln model must record the graph's SHA-256
   (``kiln.convert.onnx_graph_sha256``), which binds the graph, inline
   initializers included, to the conversion; and each external
   initializer's ``offset`` and ``length`` must be exactly the payload range
   of the Kiln tensor of the same name, its ONNX type and dims that
   tensor's dtype and shape.
4. Only then is the session created, from the graph's bytes as checked
   (not the path) with every external initializer handed over from the
   checked mapping: an ``OrtValue`` viewing the map for each (no copy; for
   a model with 4-bit tensors, which an ``OrtValue`` cannot view from
   NumPy, the mapped files through
   ``SessionOptions.add_external_initializers_from_files_in_memory``,
   which onnxruntime copies from during session creation; initializers of
   subgraphs, whose external data onnxruntime would look for on disk, are
   copied from the checked maps into the graph handed over). onnxruntime
   therefore never opens a file itself, and nothing it reads was not
   checked: a file replaced after the check (``kiln convert`` and
   ``kiln.numpy.save_file`` replace files by renaming a new one into place)
   does not reach the session. A process writing *into* the same file
   while it is mapped would change the mapped pages (as for any memory map);
   ``copy=True`` reads each Kiln file into private memory before checking it,
   which closes that too at the cost of a copy.

A fault in a Kiln file raises :class:`kiln.KilnError` (as
:func:`kiln.validate`); a graph that does not match its Kiln files raises
:class:`GraphError`. Either way no session is created.

onnxruntime and onnx are optional dependencies (``pip install kiln-format[onnx]``);
``import kiln`` never needs them, and this module imports them only when
:func:`session` runs (onnx only for :attr:`CheckedGraph.model` and for a
graph with weights in subgraphs).
"""

from __future__ import annotations

import importlib
import mmap
import os
import posixpath
import shutil
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import DTYPE_NAMES, _kiln, _infos, _map_shard, _owner

__all__ = ["session", "check_graph", "GraphError", "CheckedGraph", "ONNX_TO_KILN", "GRAPH_DIGEST_KEY"]

#: Kiln dtype name by ONNX ``TensorProto.DataType`` code (the conversion's
#: table, from the converter itself; the bytes are identical, 4-bit types
#: packed low nibble first).
ONNX_TO_KILN: Dict[int, str] = dict(_kiln.onnx_dtypes())

# Bytes per element for the NumPy view handed to onnxruntime (0: 4-bit, packed).
_WIDTH = {"f64": 8, "i64": 8, "u64": 8, "f32": 4, "i32": 4, "u32": 4, "f16": 2, "bf16": 2,
          "i16": 2, "u16": 2, "i8": 1, "u8": 1, "bool": 1, "f8e4m3": 1, "f8e5m2": 1, "e8m0": 1,
          "i4": 0, "u4": 0, "e2m1": 0}
# Kinds of model file that carry a SHA-256 digest per tensor.
_WITH_DIGESTS = ("digests", "shard", "signed")
#: The Kiln metadata key that records the graph's SHA-256 (rule R2).
GRAPH_DIGEST_KEY = "kiln.convert.onnx_graph_sha256"


class GraphError(ValueError):
    """The graph and its Kiln files are not a checked pair: an inline
    initializer that rule R1 puts in the Kiln file, external data that is
    not an initializer's or whose location is not a plain file name, an
    offset, length, type or shape that is not the Kiln tensor's, a Kiln file
    without digests, a graph whose SHA-256 is not the one its Kiln model
    records. ``initializer`` is
    the initializer at fault (None when the fault is not one initializer's)
    and ``file`` the Kiln file concerned, where one is."""

    def __init__(self, message: str, initializer: Optional[str] = None, file: Optional[str] = None) -> None:
        super().__init__(message)
        self.initializer = initializer
        self.file = file


@dataclass
class CheckedGraph:
    """What :func:`check_graph` accepted: the graph's bytes as checked, the
    folder it is in, and each Kiln file it names, checked, by file name (its
    bytes: a memory map, or ``bytes`` with ``copy=True``)."""

    graph: bytes
    folder: str
    files: Dict[str, Any]
    #: (initializer name, Kiln file, offset, length, Kiln dtype, shape), in graph order.
    bindings: List[Tuple[str, str, int, int, str, Tuple[int, ...]]]
    #: Every initializer as (name, "kiln" | "inline"), in rule R3's order.
    checked: List[Tuple[str, str]]
    #: The external initializers that are in subgraphs.
    in_subgraphs: List[str]
    #: The external initializers no node reads (a runtime drops them).
    unused: List[str]

    @property
    def model(self) -> Any:
        """The graph parsed by the ``onnx`` package (its external data not loaded)."""
        return _onnx().load_from_string(self.graph)


def _onnx() -> Any:
    """The ``onnx`` package, imported when first needed (an optional dependency)."""
    return importlib.import_module("onnx")


def _open_kiln(folder: str, name: str, copy: bool) -> Any:
    """The bytes of Kiln file ``name`` in ``folder``: a read-only map (or a
    private copy), opened without following a symbolic link."""
    path = os.path.join(folder, name)
    if copy:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except OSError as e:
            raise GraphError(f"{name}: cannot open the Kiln file ({e.strerror}; a symbolic link is not followed)",
                             file=name) from None
        try:
            import stat

            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise GraphError(f"{name}: not a regular file", file=name)
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read()
        finally:
            os.close(fd)
    mm = _map_shard(path)
    if mm is None:
        raise GraphError(f"{name}: cannot open the Kiln file (missing, not a regular file, or a symbolic link, "
                         "which is not followed)", file=name)
    return mm


def _graph_error(e: ValueError) -> GraphError:
    """The converter's refusal (``ValueError(message, initializer, file)``) as a GraphError."""
    message, initializer, file = (tuple(e.args) + (None, None, None))[:3]
    return GraphError(str(message), initializer, file)


def _read_graph(path: str) -> bytes:
    """The graph file's bytes, read once (what is checked is what the runtime gets)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise GraphError(f"{path}: cannot read the graph ({e.strerror})") from None


def check_graph(path: Union[str, "os.PathLike[str]"], *, copy: bool = False) -> CheckedGraph:
    """Checks the graph at ``path`` and every Kiln file it names, as
    :func:`session` does before creating a session (steps 1 to 3 of the
    module's description), and returns what it checked. Raises
    :class:`kiln.KilnError` for a Kiln file that fails validation and
    :class:`GraphError` for a graph that does not match its files."""
    from . import validate

    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    graph = _read_graph(path)
    try:
        model_name, locations, externals, checked = _kiln.onnx_requirements(graph)
    except ValueError as e:
        raise _graph_error(e) from None

    files: Dict[str, Any] = {}
    tables: Dict[str, Dict[str, Tuple[int, Tuple[int, ...], int, int]]] = {}
    recorded: Optional[str] = None
    try:
        for location in list(locations) + ([model_name] if model_name not in locations else []):
            data = _open_kiln(folder, location, copy)
            files[location] = data
            view = _owner(data)
            kind = _kiln.kind(view)
            if kind == "manifest":
                if location != model_name:
                    raise GraphError(f"{location} is a manifest: the graph's initializers must point into its shards",
                                     file=location)
                try:
                    validate(os.path.join(folder, location), verify=True)  # the shards against it, digests included
                except _kiln.KilnError as e:
                    e.file = getattr(e, "file", None) or location
                    raise
                recorded = _kiln.Sharded(os.path.join(folder, location), view).metadata().get(GRAPH_DIGEST_KEY)
                del view
                continue
            try:
                # The validator of kiln.validate / `kiln validate`: every rule, every digest.
                _kiln.validate(view, None, False, _kiln.default_cap(), _kiln.default_cap(), True)
            except _kiln.KilnError as e:
                e.file = location
                raise
            if kind not in _WITH_DIGESTS:
                what = "a bare directory block" if kind is None else f"a {kind} model file"
                raise GraphError(f"{location} is {what} without SHA-256 digests: refused (kiln convert writes "
                                 "them; without them nothing ties the weights to the file converted)",
                                 file=location)
            meta, _, _, rows = _kiln.inspect(view, False)
            if location == model_name:
                recorded = (meta or {}).get(GRAPH_DIGEST_KEY)
            tables[location] = {i.name: (i.dtype_code, i.shape, i.offset, i.byte_length)
                                for i in _infos(list(rows), location).values()}
            del view
        try:
            _kiln.onnx_pair(graph, recorded, tables)
        except ValueError as e:
            raise _graph_error(e) from None
    except BaseException:
        for data in files.values():
            if isinstance(data, mmap.mmap):
                try:
                    data.close()
                except BufferError:
                    pass
        raise
    bindings = []
    for name, location, offset, length, _, _ in externals:
        code, shape, _, _ = tables[location][name]
        bindings.append((name, location, offset, length, DTYPE_NAMES[code], tuple(shape)))
    return CheckedGraph(graph=graph, folder=folder, files=files, bindings=bindings,
                        checked=[(str(n), str(how)) for n, how in checked], in_subgraphs=[e[0] for e in externals if e[4]],
                        unused=[e[0] for e in externals if not e[5]])


def _numpy_view(data: Any, offset: int, length: int, dtype: str, shape: Tuple[int, ...]) -> Any:
    """A read-only NumPy array over the payload (no copy), of an unsigned
    integer (or bool) dtype of the element's width; onnxruntime reinterprets it."""
    import numpy as np

    width = _WIDTH[dtype]
    np_dtype = {1: np.bool_ if dtype == "bool" else np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    count = length // width
    arr = np.frombuffer(data, dtype=np.dtype(np_dtype).newbyteorder("<"), count=count, offset=offset)
    return arr.reshape(shape)


def _fetch(url: str, dest: str, timeout: float) -> None:
    """Downloads ``url`` to the file ``dest``."""
    with urllib.request.urlopen(url, timeout=timeout) as r, open(dest, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)


def _download(url: str, timeout: float) -> Tuple[str, "tempfile.TemporaryDirectory[str]"]:
    """The graph at ``url`` and the Kiln files it names (fetched from the
    graph's base URL after their names passed the location rules; for a
    sharded model, the manifest and every shard), in a temporary folder;
    returns the graph's local path and the folder."""
    parts = urllib.parse.urlsplit(url)
    graph_name = posixpath.basename(urllib.parse.unquote(parts.path))
    if not graph_name or graph_name in (".", "..") or any(c in graph_name for c in "/\\:\0"):
        graph_name = "model.onnx"
    tmp = tempfile.TemporaryDirectory(prefix="kiln-onnx-")
    try:
        local = os.path.join(tmp.name, graph_name)
        _fetch(url, local, timeout)
        try:
            model_name, locations, _, _ = _kiln.onnx_requirements(_read_graph(local))
        except ValueError as e:
            raise _graph_error(e) from None
        names = [n for n in [model_name, *locations] if n != graph_name]
        fetched = set()
        while names:
            name = names.pop(0)
            if name in fetched:
                continue
            fetched.add(name)
            dest = os.path.join(tmp.name, name)
            _fetch(urllib.parse.urljoin(url, urllib.parse.quote(name)), dest, timeout)
            if name == model_name:
                with open(dest, "rb") as f:
                    head = f.read()
                if _kiln.kind(head) == "manifest":  # every shard, for the whole model's check
                    names.extend(n for n, _ in _kiln.Sharded(dest, head).shards())
        return local, tmp
    except BaseException:
        tmp.cleanup()
        raise


def _graph_of(target: str) -> str:
    """The graph for ``target``: a Kiln model file ``X.kiln`` means the graph ``X.kiln.onnx`` beside it."""
    if target.lower().endswith(".kiln"):
        return target + ".onnx"
    return target


def session(
    path_or_url: Union[str, "os.PathLike[str]"],
    *,
    providers: Optional[Sequence[Any]] = None,
    sess_options: Optional[Any] = None,
    copy: bool = False,
    timeout: float = 60.0,
) -> Any:
    """An ``onnxruntime.InferenceSession`` (typed ``Any``: onnxruntime ships
    no type information) for a graph written by
    ``kiln convert ... --onnx-graph``, created only after the graph and its
    Kiln files passed every check (the module's description).

    ``path_or_url``: the graph (``model.kiln.onnx``); a Kiln model file
    ``X.kiln`` (the graph is then ``X.kiln.onnx`` beside it; for a sharded
    model's manifest, the whole sharded model is also validated against the
    manifest); or an ``http://``/``https://`` URL of the graph, whose Kiln
    files are fetched from the same base URL into a temporary folder, which
    lives as long as the session. ``providers`` and ``sess_options`` go to
    ``InferenceSession`` (the initializers are added to ``sess_options``, so
    give each session its own). ``copy``: read each Kiln file into private
    memory instead of mapping it. ``timeout``: seconds for each download.

    Raises :class:`kiln.KilnError` for a Kiln file that fails validation
    (``file`` names it) and :class:`GraphError` for a graph that does not
    match its files; no session exists then. onnxruntime's own errors (an
    operator it does not have, ...) pass through.
    """
    ort: Any = importlib.import_module("onnxruntime")

    keep: List[Any] = []
    target = os.fspath(path_or_url) if not isinstance(path_or_url, str) else path_or_url
    scheme = urllib.parse.urlsplit(target).scheme.lower() if isinstance(target, str) else ""
    if scheme in ("http", "https"):
        graph, tmp = _download(target, timeout)
        keep.append(tmp)
    else:
        graph = _graph_of(target)
    checked = check_graph(graph, copy=copy)
    options = sess_options if sess_options is not None else ort.SessionOptions()
    graph_bytes = checked.graph
    bindings = checked.bindings
    if checked.in_subgraphs:
        # Subgraph initializers go to the runtime inline, copied from the
        # checked maps: given a graph as bytes, onnxruntime looks for their
        # external data on disk (relative to no folder) instead.
        inner = set(checked.in_subgraphs)
        data = {b[0]: bytes(_owner(checked.files[b[1]])[b[2]:b[2] + b[3]]) for b in bindings if b[0] in inner}
        try:
            graph_bytes = _kiln.onnx_with_inline(graph_bytes, data)
        except ValueError as e:
            raise _graph_error(e) from None
        bindings = [b for b in bindings if b[0] not in inner]
    packed = any(_WIDTH[b[4]] == 0 for b in bindings)
    if packed:
        # 4-bit tensors: the checked files themselves (onnxruntime copies the
        # ranges it needs out of these buffers while creating the session).
        names = list(checked.files)
        buffers = [_owner(checked.files[n]) for n in names]
        options.add_external_initializers_from_files_in_memory(names, buffers, [len(b) for b in buffers])
        keep.append(buffers)
    elif bindings:
        # onnxruntime drops an initializer nothing reads before it takes these
        # (and refuses one given for it): those are not handed over.
        used = [b for b in bindings if b[0] not in checked.unused]
        values = []
        for name, location, offset, length, dtype, shape in used:
            arr = _numpy_view(checked.files[location], offset, length, dtype, shape)
            values.append(ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr, _onnx_code(dtype)))
        options.add_external_initializers([b[0] for b in used], values)
        keep.append(values)
    keep.append(checked.files)
    sess = ort.InferenceSession(graph_bytes, sess_options=options, providers=providers)
    # The OrtValues view the maps: both live as long as the session.
    sess._kiln_keepalive = keep
    return sess


_KILN_TO_ONNX = {v: k for k, v in ONNX_TO_KILN.items()}


def _onnx_code(dtype: str) -> int:
    return _KILN_TO_ONNX[dtype]
