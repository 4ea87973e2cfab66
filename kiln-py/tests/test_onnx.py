"""ONNX in and out: `kiln convert model.onnx` (every dtype of the table in each storage
form, the graph written back with `--onnx-graph`), refusals, hostile models, onnxruntime
on the converted digits MLP, and `kiln.onnx.session`.

The originals are written with the `onnx` package's own helpers and read back with its
own loader (`numpy_helper.to_array`, `onnx.load(..., load_external_data=True)`); the Kiln
side is read by kiln-py. Skipped when onnx or onnxruntime is not importable."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DIGITS_ONNX = REPO / "spec" / "examples" / "digits-mlp.onnx"
DIGITS_KILN = REPO / "spec" / "examples" / "digits-mlp.kiln"
CPU = ["CPUExecutionProvider"]

# The conversion's table: ONNX type -> Kiln dtype.
TABLE: List[Tuple[int, str]] = [
    (TP.FLOAT, "f32"), (TP.FLOAT16, "f16"), (TP.BFLOAT16, "bf16"), (TP.DOUBLE, "f64"),
    (TP.INT8, "i8"), (TP.INT16, "i16"), (TP.INT32, "i32"), (TP.INT64, "i64"),
    (TP.UINT8, "u8"), (TP.UINT16, "u16"), (TP.UINT32, "u32"), (TP.UINT64, "u64"),
    (TP.BOOL, "bool"), (TP.FLOAT8E4M3FN, "f8e4m3"), (TP.FLOAT8E5M2, "f8e5m2"),
    (TP.INT4, "i4"), (TP.UINT4, "u4"), (TP.FLOAT4E2M1, "e2m1"), (TP.FLOAT8E8M0, "e8m0"),
]
PACKED = {TP.INT4, TP.UINT4, TP.FLOAT4E2M1}
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def values(ty: int, shape: Tuple[int, ...], seed: int) -> np.ndarray:
    """Seeded values of ONNX type ``ty``, every bit pattern that is a finite value likely."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    npdt = helper.tensor_dtype_to_np_dtype(ty)
    if ty == TP.BOOL:
        a = rng.integers(0, 2, n).astype(bool)
    elif ty == TP.INT4:
        a = rng.integers(-8, 8, n).astype(npdt)
    elif ty == TP.UINT4:
        a = rng.integers(0, 16, n).astype(npdt)
    elif ty == TP.FLOAT4E2M1:
        a = (E2M1[rng.integers(0, 8, n)] * rng.choice([-1.0, 1.0], n)).astype(npdt)
    elif ty == TP.FLOAT8E8M0:
        a = rng.integers(0, 255, n).astype(np.uint8).view(npdt)  # 0xFF is NaN
    elif np.issubdtype(np.dtype(npdt), np.integer):
        info = np.iinfo(npdt)
        a = rng.integers(info.min, info.max, n, dtype=npdt, endpoint=True)
    else:  # floats: random bits, non-finite patterns replaced by zero
        width = np.dtype(npdt).itemsize
        bits = rng.integers(0, 1 << (8 * width), n, dtype=np.uint64 if width == 8 else np.int64)
        a = bits.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]).view(npdt)
        a = np.where(np.isfinite(a.astype(np.float64)), a, np.zeros(1, npdt))
    return a.reshape(shape)


# The nodes of the round-trip model: they read READ_AS_DATA's tensors as data (a Reshape's shape,
# a Gather's int32 index), which R1 keeps inline in the graph written; they take nothing else.
READERS = [helper.make_node("Reshape", ["x", "shape.i64"], ["y"]), helper.make_node("Gather", ["x", "index.i32"], ["z"])]
READ_AS_DATA = {"shape.i64", "index.i32"}


def initializers(typed: bool) -> List[Any]:
    """Every dtype of the table at [3, 5] (15 elements: odd, for the 4-bit types) and at
    [64, 32], plus scalars (rank 0) and empty tensors, all external data in the graph written
    (R1: no node reads them as data, whatever their size), and READ_AS_DATA's two, inline;
    inline raw_data, or the typed fields."""
    cases: List[Tuple[str, int, Tuple[int, ...]]] = [(f"t.{k}", ty, (3, 5)) for ty, k in TABLE]
    cases += [(f"big.{k}", ty, (64, 32)) for ty, k in TABLE]
    cases += [("scalar.f32", TP.FLOAT, ()), ("scalar.i4", TP.INT4, ()), ("scalar.bf16", TP.BFLOAT16, ()),
              ("empty.f32", TP.FLOAT, (0, 4)), ("empty.u4", TP.UINT4, (0,)), ("odd.e2m1", TP.FLOAT4E2M1, (7,))]
    cases += [("shape.i64", TP.INT64, (2,)), ("index.i32", TP.INT32, ())]
    out = []
    for i, (name, ty, shape) in enumerate(cases):
        a = values(ty, shape, seed=1000 + i)
        if typed:
            out.append(helper.make_tensor(name, ty, list(shape), a.reshape(-1), raw=False))
        else:
            t = numpy_helper.from_array(a, name)
            assert t.data_type == ty
            out.append(t)
    return out


def model_of(inits: List[Any], nodes: Any = (), inputs: Any = (), outputs: Any = (), opset: int = 21) -> Any:
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-tests")
    m.ir_version = 10
    return m


def run(cli: str, *args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([cli, *[str(a) for a in args]], capture_output=True, text=True)


def convert(cli: str, src: Path, out: Path, graph: bool = True, *extra: Any) -> Path:
    g = out.with_name(out.name + ".onnx")
    args = [src, "-o", out, *extra] + (["--onnx-graph", g] if graph else [])
    r = run(cli, "convert", *args)
    assert r.returncode == 0, r.stderr
    return g


def kiln_bytes(path: Path) -> Dict[str, Tuple[kiln.TensorInfo, bytes]]:
    """Each tensor's info and payload bytes, read by kiln-py (the file validated whole first)."""
    kiln.validate(path)
    out = {}
    with kiln.safe_open(path, verify=True) as f:
        for name in f.keys():
            info = f.tensor_info(name)
            arr = f.get_tensor(name)
            out[name] = (info, np.ascontiguousarray(arr).tobytes())
    return out


def onnx_bytes(t: Any) -> Tuple[int, Tuple[int, ...], bytes]:
    """ONNX's own reading of an initializer: (type, dims, the bytes Kiln must hold)."""
    a = numpy_helper.to_array(t)
    if t.data_type in PACKED:
        nib = a.reshape(-1).view(np.uint8) & 0x0F
        if nib.size % 2:
            nib = np.append(nib, np.uint8(0))
        data = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
    else:
        data = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
    return t.data_type, tuple(t.dims), data


KILN_OF = dict(TABLE)


def check_kiln_holds(kiln_path: Path, originals: List[Any]) -> None:
    got = kiln_bytes(kiln_path)
    assert set(got) == {t.name for t in originals}
    for t in originals:
        ty, dims, want = onnx_bytes(t)
        info, data = got[t.name]
        assert (info.dtype, info.shape) == (KILN_OF[ty], dims), t.name
        assert info.byte_length == len(want), t.name
        assert data == want, f"{t.name} ({info.dtype}): the Kiln bytes differ from onnx's to_array"


def check_graph_holds(graph: Path, originals: List[Any], kiln_name: str, inline: Any) -> None:
    """The written graph, loaded by onnx with its external data, holds every initializer as the
    original: those named in `inline` inline (R1: a node reads them as data), the rest external
    data in the Kiln file; it names that file (kiln.model), whose metadata records the graph's
    SHA-256 (R2)."""
    bare = onnx.load(str(graph), load_external_data=False)
    assert {p.key: p.value for p in bare.metadata_props}["kiln.model"] == kiln_name
    meta = kiln.safe_open(graph.with_name(kiln_name)).metadata() or {}
    assert meta[kiln.onnx.GRAPH_DIGEST_KEY] == hashlib.sha256(graph.read_bytes()).hexdigest()
    for t in bare.graph.initializer:
        keys = {e.key: e.value for e in t.external_data}
        if t.name in inline:
            assert t.data_location != TP.EXTERNAL and not keys, t.name
        else:
            assert t.data_location == TP.EXTERNAL and keys["location"] == kiln_name, t.name
    loaded = onnx.load(str(graph), load_external_data=True)
    by_name = {t.name: t for t in loaded.graph.initializer}
    assert [t.name for t in loaded.graph.initializer] == [t.name for t in originals]
    for t in originals:
        a, b = numpy_helper.to_array(t), numpy_helper.to_array(by_name[t.name])
        assert a.dtype == b.dtype and a.shape == b.shape, t.name
        assert a.tobytes() == b.tobytes(), f"{t.name}: the graph's external data differs from the original"


@pytest.mark.parametrize("form", ["raw", "typed", "external"])
def test_every_dtype_round_trips(kiln_cli: str, tmp_path: Path, form: str) -> None:
    inits = initializers(typed=form == "typed")
    m = model_of(inits, READERS)
    src = tmp_path / "model.onnx"
    if form == "external":
        onnx.save(m, str(src), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="weights.bin", size_threshold=0)
        stored = onnx.load(str(src), load_external_data=False)
        assert sum(t.data_location == TP.EXTERNAL for t in stored.graph.initializer) >= len(TABLE)
    else:
        onnx.save(m, str(src))
        stored = onnx.load(str(src), load_external_data=False)
        field = "raw_data" if form == "raw" else None
        for t in stored.graph.initializer:
            if field and np.prod(t.dims) > 0:
                assert t.HasField(field), t.name
            if form == "typed":
                assert not t.raw_data, t.name
    originals = list(onnx.load(str(src)).graph.initializer)  # onnx's loader, external data included
    out = tmp_path / "model.kiln"
    graph = convert(kiln_cli, src, out)
    check_kiln_holds(out, originals)
    meta = kiln.safe_open(out).metadata() or {}
    assert meta["onnx.ir_version"] == "10" and meta["onnx.opset_import"] == "ai.onnx:21"
    assert meta["onnx.producer_name"] == "kiln-tests"
    check_graph_holds(graph, originals, "model.kiln", READ_AS_DATA)
    # kiln validate / inspect read the original too.
    assert run(kiln_cli, "validate", src).returncode == 0
    r = run(kiln_cli, "inspect", "--json", src)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensor_count"] == len(originals)


@pytest.mark.parametrize("ty, type_name", [(TP.STRING, "STRING"), (TP.COMPLEX64, "COMPLEX64"),
                                           (TP.FLOAT8E4M3FNUZ, "FLOAT8E4M3FNUZ")])
def test_refused_types_name_the_initializer(kiln_cli: str, tmp_path: Path, ty: int, type_name: str) -> None:
    if ty == TP.STRING:
        t = helper.make_tensor("bad.tensor", ty, [2], [b"a", b"bc"])
    elif ty == TP.COMPLEX64:
        t = helper.make_tensor("bad.tensor", ty, [2], [1 + 2j, 3 - 4j])
    else:
        t = numpy_helper.from_array(np.array([1.0, 2.0], np.float32).astype(ml_dtypes.float8_e4m3fnuz), "bad.tensor")
        assert t.data_type == ty
    ok = numpy_helper.from_array(np.ones(3, np.float32), "fine")
    src = tmp_path / "model.onnx"
    onnx.save(model_of([ok, t]), str(src))
    out = tmp_path / "model.kiln"
    r = run(kiln_cli, "convert", src, "-o", out)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "bad.tensor" in r.stderr and type_name in r.stderr, r.stderr
    assert not out.exists()


# --- hostile models -----------------------------------------------------------------------

RSS_CHILD = r"""
import json, resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": r.returncode, "stderr": r.stderr, "stdout": r.stdout,
                  "rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def run_rss(cli: str, *args: Any) -> Dict[str, Any]:
    """Runs the CLI under a small Python parent that reports the CLI's peak RSS (KiB): an
    upper bound, since on Linux an exec'd child's ru_maxrss starts from its parent's."""
    r = subprocess.run([sys.executable, "-c", RSS_CHILD, cli, *[str(a) for a in args]],
                       capture_output=True, text=True, check=True)
    out: Dict[str, Any] = json.loads(r.stdout)
    return out


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def external_model(location: str, offset: int = 0, length: int = 64) -> Any:
    t = TP(name="w", data_type=TP.FLOAT, dims=[16], data_location=TP.EXTERNAL)
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return model_of([t])


def hostile_cases(tmp: Path) -> Dict[str, Path]:
    """name -> a hostile .onnx in tmp/m/; every outside target exists and holds valid data."""
    folder = tmp / "m"
    (folder / "sub").mkdir(parents=True)
    weights = np.arange(16, dtype=np.float32).tobytes()  # 64 bytes: what each model asks for
    for p in (tmp / "x.bin", folder / "sub" / "x.bin", folder / "C:\\x", folder / "side.bin"):
        p.write_bytes(weights)
    cases: Dict[str, Any] = {}
    good = DIGITS_ONNX.read_bytes()
    cases["truncated"] = good[: len(good) // 2]
    # ModelProto.graph (7) claiming more bytes than the file holds.
    cases["length-past-end"] = varint(1 << 3) + varint(8) + varint(7 << 3 | 2) + varint(1 << 20) + b"\0" * 16
    # A packed float_data (TensorProto field 4) claiming 2^40 bytes, inside lengths that fit.
    tensor = varint(2 << 3) + varint(TP.FLOAT) + varint(4 << 3 | 2) + varint(1 << 40) + b"\0" * 8
    graph = field(5, tensor)
    cases["huge-packed-count"] = varint(1 << 3) + varint(8) + field(7, graph)
    for name, loc in (("dotdot", "../x.bin"), ("subdir", "sub/x.bin"), ("etc-passwd", "/etc/passwd"),
                      ("absolute", str(tmp / "x.bin")), ("drive", "C:\\x")):
        cases[name] = external_model(loc, 0, 64 if name != "etc-passwd" else 16)
    cases["offset-past-end"] = external_model("side.bin", 100, 64)
    cases["length-past-end-of-side-file"] = external_model("side.bin", 32, 64)
    paths = {}
    for name, body in cases.items():
        p = folder / f"{name}.onnx"
        p.write_bytes(body if isinstance(body, bytes) else body.SerializeToString())
        paths[name] = p
    return paths


def test_hostile_models_are_refused_with_small_memory(kiln_cli: str, tmp_path: Path) -> None:
    paths = hostile_cases(tmp_path)
    # The control: the same model pointing at a good side file converts.
    control = paths["offset-past-end"].with_name("control.onnx")
    control.write_bytes(external_model("side.bin", 0, 64).SerializeToString())
    assert run(kiln_cli, "convert", control, "-o", control.with_suffix(".kiln")).returncode == 0
    worst = 0
    for name, p in paths.items():
        out = p.with_suffix(".kiln")
        for cmd in (["convert", p, "-o", out], ["validate", p]):
            r = run_rss(kiln_cli, *cmd)
            message = (r["stdout"] + r["stderr"]).strip()  # validate's verdict is on stdout
            worst = max(worst, r["rss_kib"])
            print(f"{name:30} {cmd[0]:8} exit {r['rc']} peak RSS {r['rss_kib'] / 1024:.1f} MiB: "
                  f"{message.splitlines()[-1] if message else ''}")
            assert r["rc"] == 1, (name, cmd[0], r)
            assert "panicked" not in message, (name, message)
            assert str(p.name) in message, (name, message)
            if name in ("dotdot", "subdir", "etc-passwd", "absolute", "drive"):
                assert "location" in message, (name, message)
            assert r["rss_kib"] < 64 * 1024, (name, cmd[0], r["rss_kib"])
        assert not out.exists(), name
    print(f"worst peak RSS of the CLI over the hostile models: {worst / 1024:.1f} MiB")


# --- onnxruntime --------------------------------------------------------------------------


def digits() -> Dict[str, np.ndarray]:
    with kiln.safe_open(DIGITS_KILN) as f:
        return {k: np.array(f.get_tensor(k)) for k in f.keys()}


def forward_f64(t: Dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Our own forward pass, in f64, from the Kiln tensors."""
    w1, b1, w2, b2 = (t[k].astype(np.float64) for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))
    h = np.maximum(x.astype(np.float64) @ w1.T + b1, 0.0)
    return h @ w2.T + b2


def logits_of(sess: Any, x: np.ndarray) -> np.ndarray:
    (out,) = sess.run(["logits"], {"x": x})
    return np.asarray(out)


@pytest.fixture(scope="module")
def reference() -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(samples.x, samples.y, logits of the original digits-mlp.onnx in onnxruntime)."""
    t = digits()
    x, y = t["samples.x"], t["samples.y"]
    ours = forward_f64(t, x).argmax(axis=1)
    assert (ours == y).sum() == 32  # spec/examples/README.md: 32/32
    logits = logits_of(ort.InferenceSession(str(DIGITS_ONNX), providers=CPU), x)
    assert np.array_equal(logits.argmax(axis=1), ours)
    return x, y, logits


def test_converted_digits_runs_bit_identical(kiln_cli: str, tmp_path: Path, reference: Any) -> None:
    x, y, want = reference
    out = tmp_path / "digits.kiln"
    graph = convert(kiln_cli, DIGITS_ONNX, out)
    got = logits_of(ort.InferenceSession(str(graph), providers=CPU), x)
    assert got.tobytes() == want.tobytes()
    assert (got.argmax(axis=1) == y).sum() == 32
    # The Kiln file holds the weights of digits-mlp.kiln, byte for byte.
    t = digits()
    with kiln.safe_open(out, verify=True) as f:
        for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
            assert np.array(f.get_tensor(k)).tobytes() == t[k].tobytes()
            assert f.tensor_info(k).offset % 64 == 0


def test_external_data_and_sharded_outputs_run(kiln_cli: str, tmp_path: Path, reference: Any) -> None:
    x, _, want = reference
    src = tmp_path / "ext" / "digits.onnx"
    src.parent.mkdir()
    onnx.save(onnx.load(str(DIGITS_ONNX)), str(src), save_as_external_data=True, all_tensors_to_one_file=True,
              location="digits.weights", size_threshold=0)
    graph = convert(kiln_cli, src, src.with_name("digits.kiln"))
    assert logits_of(ort.InferenceSession(str(graph), providers=CPU), x).tobytes() == want.tobytes()
    assert logits_of(kiln.onnx.session(graph, providers=CPU), x).tobytes() == want.tobytes()

    sharded = tmp_path / "sharded" / "digits.kiln"
    sharded.parent.mkdir()
    graph = convert(kiln_cli, DIGITS_ONNX, sharded, True, "--max-shard-size", "4096")
    shards = sorted(p.name for p in sharded.parent.glob("digits-*-of-*.kiln"))
    assert len(shards) >= 2, shards
    locations = {e.value for t in onnx.load(str(graph), load_external_data=False).graph.initializer
                 for e in t.external_data if e.key == "location"}
    assert locations <= set(shards) and len(locations) >= 2, locations
    assert logits_of(ort.InferenceSession(str(graph), providers=CPU), x).tobytes() == want.tobytes()
    assert logits_of(kiln.onnx.session(graph, providers=CPU), x).tobytes() == want.tobytes()
    # The manifest's path: the whole sharded model checked, then the graph beside it.
    assert logits_of(kiln.onnx.session(sharded, providers=CPU), x).tobytes() == want.tobytes()


# --- kiln.onnx.session --------------------------------------------------------------------


@pytest.fixture
def converted(kiln_cli: str, tmp_path: Path) -> Path:
    out = tmp_path / "digits.kiln"
    convert(kiln_cli, DIGITS_ONNX, out)
    return out


def no_session(monkeypatch: Any) -> None:
    def fail(*a: Any, **k: Any) -> None:
        raise AssertionError("onnxruntime.InferenceSession was called for a refused model")

    monkeypatch.setattr(ort, "InferenceSession", fail)


def test_session_accepts_the_converted_digits(converted: Path, reference: Any) -> None:
    x, y, want = reference
    for target in (converted.with_name("digits.kiln.onnx"), converted, str(converted)):
        sess = kiln.onnx.session(target, providers=CPU)
        assert logits_of(sess, x).tobytes() == want.tobytes()
    sess = kiln.onnx.session(converted, providers=CPU, copy=True, sess_options=ort.SessionOptions())
    assert (logits_of(sess, x).argmax(axis=1) == y).sum() == 32


def test_session_never_opens_the_files_itself(converted: Path, reference: Any) -> None:
    """The weights come from the checked map: once the session exists the files can go."""
    x, _, want = reference
    sess = kiln.onnx.session(converted, providers=CPU)
    moved = converted.with_name("elsewhere")
    converted.rename(moved)
    assert logits_of(sess, x).tobytes() == want.tobytes()


def test_session_refuses_a_flipped_weight_byte(converted: Path, monkeypatch: Any) -> None:
    info = kiln.safe_open(converted).tensor_info("fc2.weight")
    data = bytearray(converted.read_bytes())
    data[info.offset + 5] ^= 0x01
    converted.write_bytes(bytes(data))
    no_session(monkeypatch)
    with pytest.raises(kiln.KilnError) as e:
        kiln.onnx.session(converted.with_name("digits.kiln.onnx"), providers=CPU)
    assert e.value.code == "DIGEST" and e.value.tensor == "fc2.weight" and e.value.file == "digits.kiln"


def record_graph(graph: Path, model: Path) -> None:
    """Records the graph's SHA-256 in its Kiln model in place of the one there (the same
    length: no byte of the file moves), as a conversion that wrote this graph would have."""
    old = (kiln.safe_open(model).metadata() or {})[kiln.onnx.GRAPH_DIGEST_KEY].encode()
    data = model.read_bytes()
    assert data.count(old) == 1
    model.write_bytes(data.replace(old, hashlib.sha256(graph.read_bytes()).hexdigest().encode()))


def write_graph(graph: Path, m: Any) -> None:
    """Writes a changed graph and records it in its Kiln model: only the change is refused."""
    graph.write_bytes(m.SerializeToString())
    record_graph(graph, graph.with_name({p.key: p.value for p in m.metadata_props}["kiln.model"]))


def edit_graph(graph: Path, name: str, **changes: str) -> None:
    m = onnx.load(str(graph), load_external_data=False)
    for t in m.graph.initializer:
        if t.name == name:
            for e in t.external_data:
                if e.key in changes:
                    e.value = changes[e.key]
    write_graph(graph, m)


def test_session_refuses_an_initializer_pointing_elsewhere(converted: Path, monkeypatch: Any) -> None:
    graph = converted.with_name("digits.kiln.onnx")
    original = graph.read_bytes()
    info = kiln.safe_open(converted).tensor_info("fc1.weight")
    no_session(monkeypatch)
    # Inside the file, the right length, but not the tensor's payload (fc1.bias and on).
    edit_graph(graph, "fc1.weight", offset=str(info.offset + 64))
    with pytest.raises(kiln.onnx.GraphError) as e:
        kiln.onnx.session(graph, providers=CPU)
    assert e.value.initializer == "fc1.weight" and "payload" in str(e.value)
    graph.write_bytes(original)
    m = onnx.load(str(graph), load_external_data=False)
    w2 = m.graph.initializer[2]
    assert w2.name == "fc2.weight" and list(w2.dims) == [10, 32] and w2.data_location == TP.EXTERNAL
    w2.dims[:] = [32, 10]  # 320 elements either way, another shape
    write_graph(graph, m)
    with pytest.raises(kiln.onnx.GraphError, match=r"is f32 \[32, 10\]; the Kiln tensor is f32 \[10, 32\]") as e:
        kiln.onnx.session(graph, providers=CPU)
    assert e.value.initializer == "fc2.weight"
    w2.dims[:] = [10, 32]
    w2.data_type = TP.INT32  # the same width, another type
    write_graph(graph, m)
    with pytest.raises(kiln.onnx.GraphError, match=r"is i32 \[10, 32\]; the Kiln tensor is f32"):
        kiln.onnx.session(graph, providers=CPU)

    for loc in ("../digits.kiln", "sub/digits.kiln", "/etc/passwd", str(converted), "C:\\digits.kiln"):
        graph.write_bytes(original)
        edit_graph(graph, "fc1.weight", location=loc)
        with pytest.raises(kiln.onnx.GraphError, match="location"):
            kiln.onnx.session(graph, providers=CPU)


def test_session_refuses_a_graph_without_its_kiln_model(monkeypatch: Any) -> None:
    """The original model: no kiln.model (R2), so no Kiln file vouches for its weights."""
    no_session(monkeypatch)
    with pytest.raises(kiln.onnx.GraphError, match=r"the graph names no Kiln model \(metadata_props kiln.model\)"):
        kiln.onnx.session(DIGITS_ONNX, providers=CPU)


def test_session_refuses_an_inline_initializer_r1_puts_in_kiln(converted: Path, monkeypatch: Any) -> None:
    """The conversion writes every weight of the digits MLP as external data, the biases too (no
    node reads them as data). fc1.weight (8,192 bytes) or fc1.bias (128 bytes) back inline in the
    converted graph, its digest recorded: refused by name (R1), whatever the size."""
    graph = converted.with_name("digits.kiln.onnx")
    original = onnx.load(str(graph), load_external_data=False)
    assert [t.data_location == TP.EXTERNAL for t in original.graph.initializer] == [True] * 4
    no_session(monkeypatch)
    for i, (name, size) in enumerate((("fc1.weight", 8192), ("fc1.bias", 128))):
        m = type(original)()
        m.CopyFrom(original)
        assert m.graph.initializer[i].name == name
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(digits()[name], name))
        write_graph(graph, m)
        with pytest.raises(kiln.onnx.GraphError) as e:
            kiln.onnx.session(graph, providers=CPU)
        assert e.value.initializer == name
        assert str(e.value) == (f'initializer "{name}" is stored in the graph ({size} bytes; no node reads it as data '
                                "while the graph is resolved): only what shape inference reads (a shape, axes, "
                                "scales, ...) or a type Kiln cannot hold stays in the graph; the rest must be "
                                "external data in the Kiln file")


def reshape_model() -> Any:
    """y = Reshape(x @ w, shape) + b: w [16, 32] and b [4] (16 bytes) f32 weights, external data
    once converted; shape int64 [2] = [8, 4], which a Reshape reads as data: inline (R1)."""
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([8, 4], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Reshape", ["h", "shape"], ["h4"]),
             helper.make_node("Add", ["h4", "b"], ["y"])]
    return model_of(inits, nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16])],
                    [helper.make_tensor_value_info("y", TP.FLOAT, [8, 4])])


def test_shapes_stay_inline_and_run(kiln_cli: str, tmp_path: Path) -> None:
    """The converted reshape_model: the shape inline, w and the 16-byte b external data; the
    session's result bit-identical to the original's."""
    src = tmp_path / "reshape.onnx"
    onnx.save(reshape_model(), str(src))
    graph = convert(kiln_cli, src, tmp_path / "reshape.kiln")
    bare = onnx.load(str(graph), load_external_data=False)
    assert [(t.name, t.data_location == TP.EXTERNAL) for t in bare.graph.initializer] == [
        ("w", True), ("shape", False), ("b", True)]
    assert kiln.onnx.check_graph(graph).checked == [("w", "kiln"), ("shape", "inline"), ("b", "kiln")]
    x = np.random.default_rng(12).standard_normal((1, 16)).astype(np.float32)
    want = ort.InferenceSession(str(src), providers=CPU).run(None, {"x": x})[0]
    assert kiln.onnx.session(graph, providers=CPU).run(None, {"x": x})[0].tobytes() == want.tobytes()


def test_session_refuses_a_changed_inline_shape(kiln_cli: str, tmp_path: Path, monkeypatch: Any) -> None:
    """One bit of an inline initializer (the shape a Reshape reads) changed: the graph's SHA-256
    is not the one the Kiln model records (R2), so the change is refused though no Kiln tensor
    is involved."""
    src = tmp_path / "reshape.onnx"
    onnx.save(reshape_model(), str(src))
    graph = convert(kiln_cli, src, tmp_path / "reshape.kiln")
    m = onnx.load(str(graph), load_external_data=False)
    shape = m.graph.initializer[1]
    assert shape.name == "shape" and shape.data_location != TP.EXTERNAL and len(shape.raw_data) == 16
    before = hashlib.sha256(graph.read_bytes()).hexdigest()
    raw = bytearray(shape.raw_data)
    raw[0] ^= 0x01
    shape.raw_data = bytes(raw)
    graph.write_bytes(m.SerializeToString())
    after = hashlib.sha256(graph.read_bytes()).hexdigest()
    no_session(monkeypatch)
    with pytest.raises(kiln.onnx.GraphError) as e:
        kiln.onnx.session(graph, providers=CPU)
    assert str(e.value).startswith(f"the graph's SHA-256 is {after}; reshape.kiln records {before}: the graph was changed")
    assert e.value.file == "reshape.kiln"


def test_session_refuses_a_kiln_file_without_digests(tmp_path: Path, monkeypatch: Any) -> None:
    import kiln.numpy

    w = np.ones((2, 3), np.float32)
    kiln.numpy.save_file({"w": w}, str(tmp_path / "m.kiln"), digests=False)
    info = kiln.safe_open(tmp_path / "m.kiln").tensor_info("w")
    t = TP(name="w", data_type=TP.FLOAT, dims=[2, 3], data_location=TP.EXTERNAL)
    for k, v in (("location", "m.kiln"), ("offset", str(info.offset)), ("length", str(info.byte_length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    m = model_of([t], [helper.make_node("Identity", ["w"], ["y"])], [],
                 [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])])
    helper.set_model_props(m, {"kiln.model": "m.kiln"})
    (tmp_path / "m.kiln.onnx").write_bytes(m.SerializeToString())
    sha = hashlib.sha256(m.SerializeToString()).hexdigest()
    kiln.numpy.save_file({"w": w}, str(tmp_path / "m.kiln"), metadata={kiln.onnx.GRAPH_DIGEST_KEY: sha},
                         digests=False)
    no_session(monkeypatch)
    with pytest.raises(kiln.onnx.GraphError, match="digests"):
        kiln.onnx.session(tmp_path / "m.kiln", providers=CPU)
    monkeypatch.undo()
    # With digests: the same graph runs (a small initializer may be external data too).
    kiln.numpy.save_file({"w": w}, str(tmp_path / "m.kiln"), metadata={kiln.onnx.GRAPH_DIGEST_KEY: sha})
    info2 = kiln.safe_open(tmp_path / "m.kiln").tensor_info("w")
    assert (info2.offset, info2.byte_length) == (info.offset, info.byte_length)
    (y,) = kiln.onnx.session(tmp_path / "m.kiln", providers=CPU).run(None, {})
    assert np.array_equal(y, w)


def test_session_refuses_other_external_tensors(converted: Path, monkeypatch: Any) -> None:
    """A Constant's value as external data would be read by the runtime unchecked."""
    graph = converted.with_name("digits.kiln.onnx")
    m = onnx.load(str(graph), load_external_data=False)
    value = TP(name="c", data_type=TP.FLOAT, dims=[1], data_location=TP.EXTERNAL)
    for k, v in (("location", "digits.kiln"), ("offset", "4096"), ("length", "4")):
        e = value.external_data.add()
        e.key, e.value = k, v
    m.graph.node.append(helper.make_node("Constant", [], ["c"], name="const", value=value))
    graph.write_bytes(m.SerializeToString())
    no_session(monkeypatch)
    with pytest.raises(kiln.onnx.GraphError, match="unchecked"):
        kiln.onnx.session(graph, providers=CPU)


def test_session_with_4_bit_initializers(kiln_cli: str, tmp_path: Path) -> None:
    """int4 weights (handed over as the checked file's bytes) dequantized by onnxruntime."""
    q = values(TP.INT4, (7,), seed=7)
    inits = [numpy_helper.from_array(q, "q"), numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    m = model_of(inits, [helper.make_node("DequantizeLinear", ["q", "s"], ["y"])], [],
                 [helper.make_tensor_value_info("y", TP.FLOAT, [7])])
    src = tmp_path / "q.onnx"
    onnx.save(m, str(src))
    want = ort.InferenceSession(str(src), providers=CPU).run(None, {})[0]
    assert np.array_equal(want, q.astype(np.float32) * 0.5)
    out = tmp_path / "q.kiln"
    graph = convert(kiln_cli, src, out)
    assert np.array_equal(ort.InferenceSession(str(graph), providers=CPU).run(None, {})[0], want)
    assert np.array_equal(kiln.onnx.session(out, providers=CPU).run(None, {})[0], want)


def if_model(n: int = 300) -> Any:
    """y = If(cond, then: x + a, else: x * b), a and b initializers of the branches ([n] f32:
    external data once converted, whatever n), x an outer-scope value."""
    rng = np.random.default_rng(5)
    a = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "then.a")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "else.b")
    out = [helper.make_tensor_value_info("y", TP.FLOAT, [n])]
    then = helper.make_graph([helper.make_node("Add", ["x", "then.a"], ["ya"])], "then", [],
                             [helper.make_tensor_value_info("ya", TP.FLOAT, [n])], [a])
    other = helper.make_graph([helper.make_node("Mul", ["x", "else.b"], ["yb"])], "else", [],
                              [helper.make_tensor_value_info("yb", TP.FLOAT, [n])], [b])
    node = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other)
    inputs = [helper.make_tensor_value_info("cond", TP.BOOL, []), helper.make_tensor_value_info("x", TP.FLOAT, [n])]
    return model_of([], [node], inputs, out)


def test_subgraph_initializers_external_where_they_stand_run(kiln_cli: str, tmp_path: Path) -> None:
    """Branch initializers of 1,200 bytes: external data in their own subgraph (not moved to the
    main graph), listed in R3's order, and the session's results bit-identical to the original's."""
    src = tmp_path / "if.onnx"
    onnx.save(if_model(), str(src))
    graph = convert(kiln_cli, src, tmp_path / "if.kiln")
    bare = onnx.load(str(graph), load_external_data=False)
    assert len(bare.graph.initializer) == 0
    branches = {a.name: a.g for a in bare.graph.node[0].attribute}
    for attr, name in (("then_branch", "then.a"), ("else_branch", "else.b")):
        (t,) = branches[attr].initializer
        assert t.name == name and t.data_location == TP.EXTERNAL
    checked = kiln.onnx.check_graph(graph)
    assert checked.checked == [("else.b", "kiln"), ("then.a", "kiln")]  # attributes sorted by name (onnx.helper)
    assert sorted(checked.in_subgraphs) == ["else.b", "then.a"]
    original = ort.InferenceSession(str(src), providers=CPU)
    sess = kiln.onnx.session(graph, providers=CPU)
    x = np.random.default_rng(9).standard_normal(300).astype(np.float32)
    for cond in (True, False):
        feed = {"cond": np.array(cond), "x": x}
        want = original.run(None, feed)[0]
        assert sess.run(None, feed)[0].tobytes() == want.tobytes(), cond


def test_constant_weights_are_lifted_and_run(kiln_cli: str, tmp_path: Path) -> None:
    """Every Constant that no node reads as data becomes an initializer of its output's name,
    external data into the Kiln file, whatever its size (2,048 bytes, 16 bytes); a Constant a
    Reshape reads as its shape stays a node. Results bit-identical."""
    rng = np.random.default_rng(3)
    big = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "big")
    small = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "small")
    flat = numpy_helper.from_array(np.array([1, 32], np.int64), "flat")
    nodes = [helper.make_node("Constant", [], ["w"], name="cw", value=big),
             helper.make_node("Constant", [], ["s"], name="cs", value=small),
             helper.make_node("Constant", [], ["f"], name="cf", value=flat),
             helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Reshape", ["h", "shape"], ["h4"]),
             helper.make_node("Add", ["h4", "s"], ["a"]),
             helper.make_node("Reshape", ["a", "f"], ["y"])]
    shape = numpy_helper.from_array(np.array([8, 4], np.int64), "shape")
    m = model_of([shape], nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16])],
                 [helper.make_tensor_value_info("y", TP.FLOAT, [1, 32])])
    src = tmp_path / "const.onnx"
    onnx.save(m, str(src))
    out = tmp_path / "const.kiln"
    graph = convert(kiln_cli, src, out)
    bare = onnx.load(str(graph), load_external_data=False)
    assert [n.op_type for n in bare.graph.node] == ["Constant", "MatMul", "Reshape", "Add", "Reshape"]
    assert bare.graph.node[0].output == ["f"]
    assert [(t.name, t.data_location == TP.EXTERNAL) for t in bare.graph.initializer] == [
        ("shape", False), ("w", True), ("s", True)]
    with kiln.safe_open(out) as f:
        assert np.array_equal(f.get_tensor("w"), numpy_helper.to_array(big))
        assert np.array_equal(f.get_tensor("s"), numpy_helper.to_array(small))
    assert kiln.onnx.check_graph(graph).checked == [("shape", "inline"), ("w", "kiln"), ("s", "kiln")]
    x = rng.standard_normal((1, 16)).astype(np.float32)
    want = ort.InferenceSession(str(src), providers=CPU).run(None, {"x": x})[0]
    assert kiln.onnx.session(graph, providers=CPU).run(None, {"x": x})[0].tobytes() == want.tobytes()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a: Any) -> None:
        pass


def test_session_from_a_url(converted: Path, reference: Any, monkeypatch: Any) -> None:
    x, _, want = reference
    served = converted.parent / "www"
    served.mkdir()
    for name in ("digits.kiln", "digits.kiln.onnx"):
        shutil.copy(converted.with_name(name), served / name)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}/"
        sess = kiln.onnx.session(base + "digits.kiln.onnx", providers=CPU)
        assert logits_of(sess, x).tobytes() == want.tobytes()
        # A changed byte on the server is refused before a session exists.
        data = bytearray((served / "digits.kiln").read_bytes())
        data[kiln.safe_open(served / "digits.kiln").tensor_info("fc1.bias").offset] ^= 0x80
        (served / "digits.kiln").write_bytes(bytes(data))
        no_session(monkeypatch)
        with pytest.raises(kiln.KilnError) as e:
            kiln.onnx.session(base + "digits.kiln.onnx", providers=CPU)
        assert e.value.code == "DIGEST" and e.value.tensor == "fc1.bias"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_importing_kiln_does_not_import_onnxruntime() -> None:
    code = "import sys, kiln, kiln.numpy; import kiln.onnx; print('onnxruntime' in sys.modules, 'onnx' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.devnull and "/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]
