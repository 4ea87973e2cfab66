"""The two ONNX sessions agree (docs/onnx.md): the same graphs through Python's
``kiln.onnx.check_graph`` (kiln-onnx's Rust) and the npm package's ``checkOnnxGraph``
(``kiln-wasm/test-support/onnx-check.mjs``) get the same verdict (accepted, or refused:
by the graph's check naming the same initializer, or by a Kiln file's check) and, when
accepted, the same R3 list. Each case also has its expected verdict, so that both
accepting (or refusing) the same wrong thing fails too. Rule R1's table (what each operator
reads as data, the two limits) is the same on both sides.

Inputs: graphs converted by the CLI from small models built here (plain, Constant
weights, subgraph weights, a sharded output, an inline shape), the same graphs changed (a
tampered inline shape, an inline weight or bias, tensors read as data at and past each limit
of R1, and the other refusals of R1 to R3), and,
when the folder exists, each ``.onnx`` of the real-model corpus (tests/corpus or
spec/corpus) converted. Without node or kiln-wasm/pkg this skips, unless
KILN_REQUIRE_NPM is set (scripts/python-package.sh sets it): then it fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from test_onnx import DIGITS_ONNX, convert, digits, field, if_model, model_of, record_graph, reshape_model  # noqa: E402

import kiln  # noqa: E402
import kiln.onnx  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "kiln-wasm" / "test-support" / "onnx-check.mjs"
PKG = Path(os.environ.get("KILN_WASM_PKG", REPO / "kiln-wasm" / "pkg"))

Verdict = Tuple[Any, ...]  # ("ok", R3 list) | ("graph", initializer or None) | ("kiln",)
OK = "ok"


@pytest.fixture(scope="module")
def node() -> str:
    exe = shutil.which("node")
    missing = "node" if exe is None else None if (PKG / "index.js").exists() else f"{PKG} (kiln-wasm/build.sh)"
    if missing is not None:
        message = f"the npm side of the agreement test needs {missing}"
        if os.environ.get("KILN_REQUIRE_NPM"):
            pytest.fail(message + " (KILN_REQUIRE_NPM is set)")
        pytest.skip(message)
    assert exe is not None
    return exe


def python_verdict(graph: Path) -> Verdict:
    try:
        return (OK, [list(c) for c in kiln.onnx.check_graph(graph).checked])
    except kiln.onnx.GraphError as e:
        return ("graph", e.initializer)
    except kiln.KilnError:
        return ("kiln",)


def js_verdict(node: str, graph: Path, files: List[Path]) -> Tuple[Verdict, str]:
    r = subprocess.run([node, str(CHECKER), str(graph), *map(str, files)], capture_output=True, text=True,
                       env={**os.environ, "KILN_WASM_PKG": str(PKG)})
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    if v["ok"]:
        return (OK, v["checked"]), ""
    return (("kiln",) if v["kind"] == "kiln" else ("graph", v["initializer"])), v["message"]


def kiln_files(graph: Path) -> List[Path]:
    """The Kiln files beside the graph (the model, or a manifest and its shards)."""
    return sorted(p for p in graph.parent.iterdir() if p.suffix == ".kiln")


# --- the cases ------------------------------------------------------------------------------


def bare(graph: Path) -> Any:
    return onnx.load(str(graph), load_external_data=False)


def rewrite(graph: Path, m: Any, record: bool = True) -> Path:
    """Writes the changed graph; records its digest in its Kiln model (only the change is judged)."""
    graph.write_bytes(m.SerializeToString() if not isinstance(m, bytes) else m)
    if record:
        record_graph(graph, graph.with_name("m.kiln"))
    return graph


def converted(tmp: Path, name: str, model: Any, *extra: str) -> Path:
    """`model` (a ModelProto, or an .onnx file) converted into tmp/name/m.kiln with its graph."""
    folder = tmp / name
    folder.mkdir()
    src = model if isinstance(model, Path) else tmp / f"{name}.onnx"
    if not isinstance(model, Path):
        src.write_bytes(model.SerializeToString())
    return convert(cli_path(), src, folder / "m.kiln", True, *extra)


_CLI: List[str] = []


def cli_path() -> str:
    return _CLI[0]


def constant_model() -> Any:
    rng = np.random.default_rng(3)
    big = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "big")
    nodes = [helper.make_node("Constant", [], ["w"], name="cw", value=big), helper.make_node("MatMul", ["x", "w"], ["y"])]
    return model_of([], nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16])],
                    [helper.make_tensor_value_info("y", TP.FLOAT, [1, 32])])


def external(t: Any, location: str, offset: int, length: int) -> Any:
    t.data_location = TP.EXTERNAL
    t.ClearField("raw_data")
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def nested(depth: int) -> Any:
    """A model whose If nodes nest `depth` subgraphs deep, a small initializer at the bottom."""
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"])], "leaf", [],
                          [helper.make_tensor_value_info("o0", TP.FLOAT, [4])],
                          [numpy_helper.from_array(np.ones(4, np.float32), "leaf.w")])
    for i in range(1, depth + 1):
        n = helper.make_node("If", ["cond"], [f"o{i}"], name=f"n{i}", then_branch=g)
        if i == depth:
            return model_of([], [n], [helper.make_tensor_value_info("cond", TP.BOOL, []),
                                      helper.make_tensor_value_info("x", TP.FLOAT, [4])],
                            [helper.make_tensor_value_info(f"o{i}", TP.FLOAT, [4])])
        g = helper.make_graph([n], f"g{i}", [], [helper.make_tensor_value_info(f"o{i}", TP.FLOAT, [4])])
    raise AssertionError("depth >= 1")


def g_twice(m: Any) -> bytes:
    """`m` with its first node's first attribute giving its graph (g) twice, on the wire."""
    attr = m.graph.node[0].attribute[0]
    node = type(m.graph.node[0])()
    node.CopyFrom(m.graph.node[0])
    del node.attribute[:]
    attrs = field(5, attr.SerializeToString() + field(6, attr.g.SerializeToString()))
    attrs += b"".join(field(5, a.SerializeToString()) for a in m.graph.node[0].attribute[1:])
    graph = type(m.graph)()
    graph.CopyFrom(m.graph)
    del graph.node[:]
    nodes = field(1, node.SerializeToString() + attrs) + b"".join(field(1, n.SerializeToString()) for n in m.graph.node[1:])
    top = type(m)()
    top.CopyFrom(m)
    top.ClearField("graph")
    return top.SerializeToString() + field(7, nodes + graph.SerializeToString())


def cases(tmp: Path) -> Dict[str, Tuple[Path, Any]]:
    """name -> (graph, the expected verdict: ("ok", R3 list) or a refusal)."""
    out: Dict[str, Tuple[Path, Any]] = {}
    digits_list = [["fc1.weight", "kiln"], ["fc1.bias", "kiln"], ["fc2.weight", "kiln"], ["fc2.bias", "kiln"]]
    reshape_list = [["w", "kiln"], ["shape", "inline"], ["b", "kiln"]]

    def digits_graph(name: str) -> Path:
        return converted(tmp, name, DIGITS_ONNX)

    out["plain"] = (digits_graph("plain"), (OK, digits_list))
    out["constant-weights"] = (converted(tmp, "constant", constant_model()), (OK, [["w", "kiln"]]))
    out["subgraph-weights"] = (converted(tmp, "subgraph", if_model()), (OK, [["else.b", "kiln"], ["then.a", "kiln"]]))
    out["sharded"] = (converted(tmp, "sharded", DIGITS_ONNX, "--max-shard-size", "4096"), (OK, digits_list))
    out["nested-30"] = (converted(tmp, "nested30", nested(30)), (OK, [["leaf.w", "kiln"]]))
    out["inline-shape"] = (converted(tmp, "reshape", reshape_model()), (OK, reshape_list))

    # R2: an inline shape changed, the digest not recorded again.
    g = converted(tmp, "tampered", reshape_model())
    m = bare(g)
    m.graph.initializer[1].raw_data = bytes([m.graph.initializer[1].raw_data[0] ^ 1]) + m.graph.initializer[1].raw_data[1:]
    out["tampered-digest"] = (rewrite(g, m, record=False), ("graph", None))
    # R1: fc1.weight (8,192 bytes) or fc1.bias (128 bytes) inline, recorded: no node reads them as data.
    for i, name in enumerate(("fc1.weight", "fc1.bias")):
        g = digits_graph(f"inline-{name}")
        m = bare(g)
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(digits()[name], name))
        out[f"inline-{name}"] = (rewrite(g, m), ("graph", name))

    def read_as_data(name: str, extra: Any, node: Any, listed: bool = True) -> None:
        """The digits graph with `extra` inline and `node` (reading it) added: accepted when listed."""
        g = digits_graph(name)
        m = bare(g)
        m.graph.initializer.append(extra)
        m.graph.node.append(node)
        out[name] = (rewrite(g, m), (OK, digits_list + [[extra.name, "inline"]]) if listed else ("graph", extra.name))

    # Read as data by a standard operator (by the table: a Reshape's shape, a Resize's scales): under 65,536 bytes.
    def i64(n: int) -> Any:
        return numpy_helper.from_array(np.zeros(n, np.int64), "extra")

    reshape = helper.make_node("Reshape", ["logits", "extra"], ["r"])
    read_as_data("shape-65528-bytes", i64(8191), reshape)
    read_as_data("shape-65536-bytes", i64(8192), reshape, listed=False)
    read_as_data("scales-f32", numpy_helper.from_array(np.ones(4, np.float32), "extra"),
                 helper.make_node("Resize", ["logits", "", "extra"], ["r"]))
    read_as_data("shape-ai-onnx", i64(200), helper.make_node("Reshape", ["logits", "extra"], ["r"], domain="ai.onnx"))
    read_as_data("reshape-data", numpy_helper.from_array(np.ones(4, np.float32), "extra"),
                 helper.make_node("Reshape", ["extra", "logits"], ["r"]), listed=False)
    # An int32/int64 tensor of rank 0 or 1 taken by any standard operator (a Gather's indices); not of rank 2.
    gather = helper.make_node("Gather", ["logits", "extra"], ["r"])
    read_as_data("gather-indices", numpy_helper.from_array(np.array([1], np.int64), "extra"), gather)
    read_as_data("gather-int32-scalar", numpy_helper.from_array(np.array(1, np.int32), "extra"), gather)
    read_as_data("gather-rank-2", numpy_helper.from_array(np.array([[1]], np.int64), "extra"), gather, listed=False)
    # An input of another domain's operator: under 1,024 bytes.
    ms = helper.make_node("MatMulNBits", ["logits", "q", "extra"], ["r"], domain="com.microsoft")
    read_as_data("other-domain-1020-bytes", numpy_helper.from_array(np.zeros(255, np.float32), "extra"), ms)
    read_as_data("other-domain-1024-bytes", numpy_helper.from_array(np.zeros(256, np.float32), "extra"), ms, listed=False)
    # A read in a function's body counts (names are the model's).
    g = digits_graph("read-in-function")
    m = bare(g)
    m.graph.initializer.append(i64(2))
    m.functions.append(helper.make_function("local", "F", ["a"], ["o"], [helper.make_node("Reshape", ["a", "extra"], ["o"])],
                                            [helper.make_opsetid("", 21)]))
    out["read-in-function"] = (rewrite(g, m), (OK, digits_list + [["extra", "inline"]]))
    # Offsets with leading zeros: the same number, accepted by both.
    g = digits_graph("zeros")
    m = bare(g)
    for e in m.graph.initializer[0].external_data:
        if e.key == "offset":
            e.value = "000" + e.value
    out["offset-leading-zeros"] = (rewrite(g, m), (OK, digits_list))
    # A negative dimension on an external initializer, recorded.
    g = digits_graph("negative")
    m = bare(g)
    m.graph.initializer[2].dims[:] = [-10, -32]
    out["negative-dim"] = (rewrite(g, m), ("graph", "fc2.weight"))
    # ... and on an inline one of a type Kiln cannot hold.
    g = digits_graph("negative-string")
    m = bare(g)
    m.graph.initializer.append(helper.make_tensor("vocab", TP.STRING, [2], [b"a", b"b"]))
    m.graph.initializer[-1].dims[:] = [-2]
    out["negative-dim-string"] = (rewrite(g, m), ("graph", "vocab"))
    # Another shape, the same bytes: named by both (after the files are checked).
    g = digits_graph("shape")
    m = bare(g)
    m.graph.initializer[2].dims[:] = [32, 10]
    out["other-shape"] = (rewrite(g, m), ("graph", "fc2.weight"))
    # A location leading out of the folder.
    g = digits_graph("location")
    m = bare(g)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "../m.kiln"
    out["location-outside"] = (rewrite(g, m), ("graph", "fc1.weight"))
    # External data of a type Kiln cannot hold.
    g = digits_graph("string-ext")
    m = bare(g)
    m.graph.initializer.append(external(helper.make_tensor("s", TP.STRING, [1], [b"x"]), "m.kiln", 0, 1))
    m.graph.initializer[-1].ClearField("string_data")
    out["external-string"] = (rewrite(g, m), ("graph", "s"))
    # External data on a Constant's value, a sparse initializer, a function's subgraph.
    g = digits_graph("constant-ext")
    m = bare(g)
    value = external(numpy_helper.from_array(np.zeros(4, np.float32), "c"), "m.kiln", 0, 16)
    m.graph.node.append(helper.make_node("Constant", [], ["c"], name="const", value=value))
    out["external-constant"] = (rewrite(g, m), ("graph", None))
    g = digits_graph("sparse-ext")
    m = bare(g)
    values = external(numpy_helper.from_array(np.zeros(2, np.float32), "sv"), "m.kiln", 0, 8)
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0, 3], np.int64), "si"), [8]))
    out["external-sparse"] = (rewrite(g, m), ("graph", "sv"))
    g = digits_graph("function-ext")
    m = bare(g)
    branch = helper.make_graph([helper.make_node("Identity", ["fw"], ["fo"])], "fb", [],
                               [helper.make_tensor_value_info("fo", TP.FLOAT, [4])],
                               [external(numpy_helper.from_array(np.zeros(4, np.float32), "fw"), "m.kiln", 0, 16)])
    fn = helper.make_function("local", "F", ["c"], ["o"], [helper.make_node("If", ["c"], ["o"], then_branch=branch)],
                              [helper.make_opsetid("", 21)])
    m.functions.append(fn)
    out["external-in-function"] = (rewrite(g, m), ("graph", "fw"))
    # A function's inline initializers are left as they are (not held to R1, not listed).
    g = digits_graph("function-inline")
    m = bare(g)
    branch = helper.make_graph([helper.make_node("Identity", ["fw"], ["fo"])], "fb", [],
                               [helper.make_tensor_value_info("fo", TP.FLOAT, [300])],
                               [numpy_helper.from_array(np.zeros(300, np.float32), "fw")])
    m.functions.append(helper.make_function("local", "F", ["c"], ["o"], [helper.make_node("If", ["c"], ["o"], then_branch=branch)],
                                            [helper.make_opsetid("", 21)]))
    out["inline-in-function"] = (rewrite(g, m), (OK, digits_list))
    # R2's key: missing, given twice.
    g = digits_graph("no-model")
    m = bare(g)
    del m.metadata_props[:]
    out["no-kiln-model"] = (rewrite(g, m, record=False), ("graph", None))
    g = digits_graph("model-twice")
    m = bare(g)
    m.metadata_props.add(key="kiln.model", value="m.kiln")
    out["kiln-model-twice"] = (rewrite(g, m), ("graph", None))
    # Nesting: 31 deep; a second g in one attribute.
    g = converted(tmp, "nested31", nested(30))
    m = bare(g)
    inner = m.graph.node[0]
    wrapped = helper.make_graph([inner], "g31", [], [helper.make_tensor_value_info(inner.output[0], TP.FLOAT, [4])])
    del m.graph.node[:]
    m.graph.node.append(helper.make_node("If", ["cond"], ["o31"], name="n31", then_branch=wrapped))
    out["nested-31"] = (rewrite(g, m), ("graph", None))
    g = converted(tmp, "twice", if_model())
    out["g-twice"] = (rewrite(g, g_twice(bare(g))), ("graph", None))
    # Two faults: the one checked first decides (the same order on both sides).
    g = digits_graph("two-faults")
    m = bare(g)
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(digits()["fc1.weight"], "fc1.weight"))
    m.graph.initializer[2].dims[:] = [-10, -32]
    out["oversize-then-negative"] = (rewrite(g, m), ("graph", "fc1.weight"))
    del m.metadata_props[:]
    out["no-model-and-oversize"] = (rewrite(g.with_name("other.kiln.onnx"), m, record=False), ("graph", None))
    # A flipped weight byte in the Kiln file: its check refuses it.
    g = digits_graph("flipped")
    model = g.with_name("m.kiln")
    info = kiln.safe_open(model).tensor_info("fc2.weight")
    data = bytearray(model.read_bytes())
    data[info.offset + 3] ^= 0x10
    model.write_bytes(bytes(data))
    out["flipped-weight-byte"] = (g, ("kiln",))
    return out


def corpus_cases(tmp: Path) -> Dict[str, Tuple[Path, Any]]:
    """The committed real-model corpus, converted (each must be accepted)."""
    out: Dict[str, Tuple[Path, Any]] = {}
    for folder in (REPO / "tests" / "corpus", REPO / "spec" / "corpus"):
        for src in sorted(folder.glob("**/*.onnx")) if folder.is_dir() else []:
            out[f"corpus:{src.relative_to(REPO)}"] = (converted(tmp, f"corpus-{len(out)}", src), OK)
    return out


def test_the_table_is_the_same(node: str) -> None:
    """R1's tables (operator -> the input positions read as data; the operators shape data
    propagates through) and its two limits: kiln-onnx's (through kiln-py) and the npm
    package's (its onnx module's READS_DATA, PROPAGATES, INLINE_LIMIT, OTHER_DOMAIN_LIMIT)."""
    r = subprocess.run([node, str(CHECKER), "--table"], capture_output=True, text=True,
                       env={**os.environ, "KILN_WASM_PKG": str(PKG)})
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    table, inline_limit, other_limit, propagates = kiln._kiln.onnx_reads_data()
    assert (inline_limit, other_limit) == (65536, 1024)  # docs/onnx.md
    assert [[op, list(positions)] for op, positions in table] == js["reads_data"]
    assert (js["inline_limit"], js["other_domain_limit"]) == (inline_limit, other_limit)
    assert sorted(propagates) == sorted(js["propagates"]) and "Gather" in propagates
    assert len(table) >= 30 and ("Reshape", [1]) in [(op, list(p)) for op, p in table]


def test_python_and_npm_sessions_agree(kiln_cli: str, node: str, tmp_path: Path) -> None:
    _CLI[:] = [kiln_cli]
    all_cases = {**cases(tmp_path), **corpus_cases(tmp_path)}
    failures = []
    for name, (graph, want) in all_cases.items():
        py = python_verdict(graph)
        js, message = js_verdict(node, graph, kiln_files(graph))
        expected_ok = want == OK and py[0] == OK  # corpus: accepted, whatever its list
        print(f"{name:24} python {py[0]:5} {py[1:] if py[0] != OK else len(py[1])}  npm {js[0]:5} "
              f"{js[1:] if js[0] != OK else len(js[1])}  {message[:90]}")
        if py != js:
            failures.append(f"{name}: python {py}, npm {js} ({message})")
        elif not (expected_ok or py == want):
            failures.append(f"{name}: both {py}, expected {want}")
    assert not failures, "\n".join(failures)
