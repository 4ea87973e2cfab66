"""Running a converted model with onnxruntime, the Kiln files checked first.

``kiln convert model.onnx -o model.kiln --onnx-graph model.kiln.onnx`` writes
the graph with every initializer as ONNX external data pointing into the
Kiln file (``location`` the Kiln file, or for a sharded output its shard;
``offset``/``length`` the tensor's payload bytes there). :func:`session`
opens such a graph for onnxruntime only after checking the pair:

>>> import numpy as np, kiln.onnx
>>> sess = kiln.onnx.session("model.kiln.onnx")          # or "model.kiln", or an http(s) URL of the graph
>>> logits, = sess.run(None, {"x": np.zeros((1, 64), np.float32)})

1. The graph is parsed with the ``onnx`` package, external data *not*
   loaded. Every initializer of the main graph must be external data
   (``location``, ``offset``, ``length``, nothing else) whose location is a
   plain file name in the graph's folder (no ``/``, ``\\``, ``:``, ``..``,
   absolute path or drive); no other tensor anywhere in the model (a
   ``Constant``'s value, a subgraph's initializer, a sparse initializer)
   may be external data, since the runtime would read that file unchecked.
2. Each Kiln file named is opened without following a symbolic link,
   mapped once, and checked whole by kiln's validator with every SHA-256
   digest compared (``kiln validate``). A file without digests (a plain
   model file or a bare directory block) is refused: ``kiln convert``
   always writes them, and without them nothing binds the weights the
   runtime gets to the file that was converted.
3. Each initializer's ``offset`` and ``length`` must be exactly the payload
   range of the Kiln tensor of the same name, and its ONNX type and dims
   that tensor's dtype and shape.
4. Only then is the session created, from the graph as parsed (bytes, not
   the path) with every initializer handed over from the checked mapping:
   an ``OrtValue`` viewing the map for each (no copy; for a model with
   4-bit tensors, which an ``OrtValue`` cannot view from NumPy, the mapped
   files through ``SessionOptions.add_external_initializers_from_files_in_memory``,
   which onnxruntime copies from during session creation). onnxruntime
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

onnxruntime and onnx are optional dependencies (``pip install kiln[onnx]``);
``import kiln`` never needs them, and this module imports them only when
:func:`session` runs.
"""

from __future__ import annotations

import importlib
import mmap
import os
import posixpath
import re
import shutil
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _kiln, _infos, _map_shard, _owner

__all__ = ["session", "check_graph", "GraphError", "CheckedGraph", "ONNX_TO_KILN"]

#: Kiln dtype name by ONNX ``TensorProto.DataType`` code (the conversion's
#: table; the bytes are identical, 4-bit types packed low nibble first).
ONNX_TO_KILN: Dict[int, str] = {
    1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 9: "bool",
    10: "f16", 11: "f64", 12: "u32", 13: "u64", 16: "bf16", 17: "f8e4m3", 19: "f8e5m2",
    21: "u4", 22: "i4", 23: "e2m1", 24: "e8m0",
}

# Bytes per element for the NumPy view handed to onnxruntime (0: 4-bit, packed).
_WIDTH = {"f64": 8, "i64": 8, "u64": 8, "f32": 4, "i32": 4, "u32": 4, "f16": 2, "bf16": 2,
          "i16": 2, "u16": 2, "i8": 1, "u8": 1, "bool": 1, "f8e4m3": 1, "f8e5m2": 1, "e8m0": 1,
          "i4": 0, "u4": 0, "e2m1": 0}
# Kinds of model file that carry a SHA-256 digest per tensor.
_WITH_DIGESTS = ("digests", "shard", "signed")
_DECIMAL = re.compile(r"(0|[1-9][0-9]{0,19})\Z")
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


class GraphError(ValueError):
    """The graph and its Kiln files are not a checked pair: an initializer
    that is not external data into a Kiln file beside the graph, a location
    that is not a plain file name, an offset, length, type or shape that is
    not the Kiln tensor's, a Kiln file without digests. ``initializer`` is
    the initializer at fault (None when the fault is not one initializer's)
    and ``file`` the Kiln file concerned, where one is."""

    def __init__(self, message: str, initializer: Optional[str] = None, file: Optional[str] = None) -> None:
        super().__init__(message)
        self.initializer = initializer
        self.file = file


@dataclass
class CheckedGraph:
    """What :func:`check_graph` accepted: the parsed model (its external
    data not loaded), the folder it is in, and each Kiln file it names,
    checked, by file name (its bytes: a memory map, or ``bytes`` with
    ``copy=True``)."""

    model: Any  # onnx.ModelProto
    folder: str
    files: Dict[str, Any]
    #: (initializer name, Kiln file, offset, length, Kiln dtype, shape), in graph order.
    bindings: List[Tuple[str, str, int, int, str, Tuple[int, ...]]]


def _onnx() -> Any:
    """The ``onnx`` package, imported when first needed (an optional dependency)."""
    return importlib.import_module("onnx")


def _plain_name(location: str) -> Optional[str]:
    """Why ``location`` is not a plain file name in the graph's folder, or None."""
    if not location:
        return "is empty"
    if any(c in location for c in "/\\:\0"):
        return "holds a path separator, a drive or a NUL"
    if location in (".", "..") or location.startswith(".."):
        return "leads out of the folder"
    if os.path.isabs(location) or posixpath.isabs(location):
        return "is an absolute path"
    return None


def _external(t: Any) -> Optional[Dict[str, str]]:
    """The external_data entries of TensorProto ``t`` as a dict (None: not external)."""
    if t.data_location != _EXTERNAL:
        return None
    out: Dict[str, str] = {}
    for e in t.external_data:
        if e.key in out:
            raise GraphError(f"initializer {t.name!r}: external_data key {e.key!r} given twice", t.name)
        out[e.key] = e.value
    return out


def _no_other_external(model: Any) -> None:
    """Refuses external data anywhere but the main graph's initializers."""

    def tensors_of_graph(g: Any, main: bool) -> Any:
        if not main:
            for t in g.initializer:
                yield t, f"initializer {t.name!r} of subgraph {g.name!r}"
        for s in g.sparse_initializer:
            yield s.values, f"sparse initializer {s.values.name!r}"
            yield s.indices, f"sparse initializer {s.values.name!r} (indices)"
        for node in g.node:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t, f"attribute {a.name!r} of node {node.name!r} ({node.op_type})"
                for t in a.tensors:
                    yield t, f"attribute {a.name!r} of node {node.name!r} ({node.op_type})"
                if a.HasField("sparse_tensor"):
                    yield a.sparse_tensor.values, f"attribute {a.name!r} of node {node.name!r}"
                    yield a.sparse_tensor.indices, f"attribute {a.name!r} of node {node.name!r}"
                for st in a.sparse_tensors:
                    yield st.values, f"attribute {a.name!r} of node {node.name!r}"
                    yield st.indices, f"attribute {a.name!r} of node {node.name!r}"
                subs = ([a.g] if a.HasField("g") else []) + list(a.graphs)
                for sub in subs:
                    yield from tensors_of_graph(sub, False)

    graphs = [model.graph] + [f for f in getattr(model, "functions", [])]
    for i, g in enumerate(graphs):
        if i == 0:
            found = tensors_of_graph(g, True)
        else:  # a FunctionProto: its nodes only
            found = (item for node in g.node for item in tensors_of_graph(_NodesOnly(node), True))
        for t, where in found:
            if t.data_location == _EXTERNAL:
                raise GraphError(f"{where} is external data: only the main graph's initializers may be "
                                 "(their Kiln files are checked; this would be read unchecked)")


class _NodesOnly:
    """A function's node seen as a graph holding just that node."""

    def __init__(self, node: Any) -> None:
        self.node = [node]
        self.initializer: List[Any] = []
        self.sparse_initializer: List[Any] = []
        self.name = ""


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


def check_graph(path: Union[str, "os.PathLike[str]"], *, copy: bool = False) -> CheckedGraph:
    """Checks the graph at ``path`` and every Kiln file it names, as
    :func:`session` does before creating a session (steps 1 to 3 of the
    module's description), and returns what it checked. Raises
    :class:`kiln.KilnError` for a Kiln file that fails validation and
    :class:`GraphError` for a graph that does not match its files."""
    onnx = _onnx()

    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf's DecodeError, OSError
        raise GraphError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    _no_other_external(model)

    wanted: List[Tuple[Any, str, int, int]] = []
    for t in model.graph.initializer:
        ext = _external(t)
        if ext is None:
            raise GraphError(f"initializer {t.name!r} is not external data (it is stored in the graph, "
                             "so no Kiln file holds it)", t.name)
        if t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data or t.uint64_data \
                or t.string_data:
            raise GraphError(f"initializer {t.name!r} is external data and also holds data in the graph", t.name)
        if set(ext) != {"location", "offset", "length"}:
            raise GraphError(f"initializer {t.name!r}: external_data keys {sorted(ext)}; "
                             "exactly location, offset and length are expected", t.name)
        location = ext["location"]
        why = _plain_name(location)
        if why is not None:
            raise GraphError(f"initializer {t.name!r}: external data location {location!r} {why}; "
                             "it must be a file in the graph's own folder", t.name, location)
        for key in ("offset", "length"):
            if not _DECIMAL.match(ext[key]):
                raise GraphError(f"initializer {t.name!r}: external data {key} {ext[key]!r} is not a decimal "
                                 "number", t.name, location)
        wanted.append((t, location, int(ext["offset"]), int(ext["length"])))

    files: Dict[str, Any] = {}
    tables: Dict[str, Dict[str, Any]] = {}
    try:
        for _, location, _, _ in wanted:
            if location in files:
                continue
            data = _open_kiln(folder, location, copy)
            files[location] = data
            view = _owner(data)
            kind = _kiln.kind(view)
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
            _, _, _, rows = _kiln.inspect(view, False)
            tables[location] = _infos(list(rows), location)
            del view

        bindings = []
        for t, location, offset, length in wanted:
            info = tables[location].get(t.name)
            if info is None:
                raise GraphError(f"initializer {t.name!r}: {location} holds no tensor of that name", t.name, location)
            dtype = ONNX_TO_KILN.get(t.data_type)
            if dtype is None or dtype != info.dtype:
                onnx_name = onnx.TensorProto.DataType.Name(t.data_type) if t.data_type in \
                    onnx.TensorProto.DataType.values() else str(t.data_type)
                raise GraphError(f"initializer {t.name!r} is {onnx_name}; the Kiln tensor is {info.dtype}",
                                 t.name, location)
            dims = tuple(int(d) for d in t.dims)
            if dims != info.shape:
                raise GraphError(f"initializer {t.name!r} has dims {list(dims)}; the Kiln tensor's shape is "
                                 f"{list(info.shape)}", t.name, location)
            if (offset, length) != (info.offset, info.byte_length):
                raise GraphError(f"initializer {t.name!r}: external data [{offset}, +{length}) is not the Kiln "
                                 f"tensor's payload [{info.offset}, +{info.byte_length}) in {location}",
                                 t.name, location)
            bindings.append((t.name, location, offset, length, dtype, dims))
    except BaseException:
        for data in files.values():
            if isinstance(data, mmap.mmap):
                try:
                    data.close()
                except BufferError:
                    pass
        raise
    return CheckedGraph(model=model, folder=folder, files=files, bindings=bindings)


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
    graph's base URL after their names passed the location rules), in a
    temporary folder; returns the graph's local path and the folder."""
    onnx = _onnx()

    parts = urllib.parse.urlsplit(url)
    graph_name = posixpath.basename(urllib.parse.unquote(parts.path)) or "model.onnx"
    if _plain_name(graph_name) is not None:
        graph_name = "model.onnx"
    tmp = tempfile.TemporaryDirectory(prefix="kiln-onnx-")
    try:
        local = os.path.join(tmp.name, graph_name)
        _fetch(url, local, timeout)
        try:
            model = onnx.load(local, load_external_data=False)
        except Exception as e:
            raise GraphError(f"{url}: not an ONNX model ({type(e).__name__}: {e})") from None
        names = []
        for t in model.graph.initializer:
            ext = _external(t) or {}
            loc = ext.get("location")
            if loc is None or _plain_name(loc) is not None:
                continue  # check_graph refuses it, naming the initializer
            if loc not in names and loc != graph_name:
                names.append(loc)
        for name in names:
            _fetch(urllib.parse.urljoin(url, urllib.parse.quote(name)), os.path.join(tmp.name, name), timeout)
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
        if graph != target:
            from . import validate

            mm = _map_shard(os.path.abspath(target))
            try:
                manifest = mm is not None and _kiln.kind(_owner(mm)) == "manifest"
            finally:
                if isinstance(mm, mmap.mmap):
                    mm.close()
            if manifest:
                validate(target)  # the shards against the manifest, digests included
    checked = check_graph(graph, copy=copy)
    options = sess_options if sess_options is not None else ort.SessionOptions()
    packed = any(_WIDTH[b[4]] == 0 for b in checked.bindings)
    if packed:
        # 4-bit tensors: the checked files themselves (onnxruntime copies the
        # ranges it needs out of these buffers while creating the session).
        names = list(checked.files)
        buffers = [_owner(checked.files[n]) for n in names]
        options.add_external_initializers_from_files_in_memory(names, buffers, [len(b) for b in buffers])
        keep.append(buffers)
    elif checked.bindings:
        values = []
        for name, location, offset, length, dtype, shape in checked.bindings:
            arr = _numpy_view(checked.files[location], offset, length, dtype, shape)
            values.append(ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr, _onnx_code(dtype)))
        options.add_external_initializers([b[0] for b in checked.bindings], values)
        keep.append(values)
    keep.append(checked.files)
    model_bytes = checked.model.SerializeToString()
    sess = ort.InferenceSession(model_bytes, sess_options=options, providers=providers)
    # The OrtValues view the maps: both live as long as the session.
    sess._kiln_keepalive = keep
    return sess


_KILN_TO_ONNX = {v: k for k, v in ONNX_TO_KILN.items()}


def _onnx_code(dtype: str) -> int:
    return _KILN_TO_ONNX[dtype]
