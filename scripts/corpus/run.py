#!/usr/bin/env python3
"""Runs the real-model corpus (corpus.json) through Kiln and onnxruntime, and reports.

    scripts/corpus/run.py                       # the full corpus, from the cache (fetch.py first)
    scripts/corpus/run.py --subset              # the committed files in tests/corpus/
    scripts/corpus/run.py --json out.json --markdown [IDS...]
    scripts/corpus/run.py --no-web --no-large

For each file:
  convert   `kiln convert IN -o OUT.kiln` (ONNX: `--onnx-graph OUT.kiln.onnx` too)
  validate  `kiln validate OUT.kiln`
  metadata  GGUF: every key's value in the Kiln metadata (JSON) equals gguf-py's, floats bit
            for bit; no other key outside kiln.convert.*
  graph     ONNX: the written graph keeps the hand-off rule (docs/onnx.md, R1 and R2): nothing of a Kiln
            dtype left inline that no node reads as data (initializers, subgraph initializers,
            Constant values), the rest inline, external data only on initializers (main graph or
            subgraph, where they stand), `kiln.model` in
            metadata_props, the Kiln file's `kiln.convert.onnx_graph_sha256` the graph's SHA-256
  roundtrip `kiln convert OUT.kiln -o back.safetensors`; every tensor the Kiln file must hold is
            compared byte for byte with the original reader's values: onnx.numpy_helper.to_array
            for ONNX initializers, Constant-node values and subgraph initializers (the tensors the
            hand-off rule, docs/onnx.md R1, says the Kiln output holds: every initializer of a Kiln dtype,
            every Constant of a Kiln dtype not read as data), gguf.GGUFReader for GGUF,
            numpy.load for .npy/.npz; a tensor missing, extra or different fails the step.
  ort-py    ONNX only: onnxruntime (Python) on the original (InferenceSession) and on the
            converted graph (kiln.onnx.session), one thread, graph optimizations off, CPU; seeded
            inputs (numpy default_rng(0)), symbolic dims 1 unless the entry's `inputs` says;
            every output equal bit for bit.
  ort-web   the same in onnxruntime-web under Node (ort-web.mjs; wasm, one thread): the original
            vs createOnnxSession on the converted graph and Kiln bytes.
A runtime that cannot run the ORIGINAL is reported as `original fails: ...` and counts as a
failure unless the entry names why in `skip_ort_py` / `skip_ort_web` (shown in the table).
Exits 1 if any step of any file failed.

Environment: KILN_BIN (default $CARGO_TARGET_DIR/release/kiln, CARGO_TARGET_DIR default
target/), KILN_WASM_PKG (default kiln-wasm/pkg), KILN_ORT_WEB (onnxruntime-web's Node entry;
default: resolved from kiln-wasm/node_modules), KILN_CACHE (fetch.py's cache).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fetch  # noqa: E402

ROOT = fetch.ROOT
OK = "ok"
# The ONNX data types that have a Kiln dtype (notes R1) and their element width in bits.
KILN_BITS = {1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 16: 16,
             17: 8, 19: 8, 21: 4, 22: 4, 23: 4, 24: 8}
def read_as_data(model: Any) -> Tuple[Dict[str, int], int, set]:
    """Rule R1's reads: (name -> the payload limit under which it stays inline, for every input
    that shape inference reads as data (the operator table from kiln-onnx, walked here over
    every graph, subgraph and function) and every input of a node of another domain; the
    standard limit; every input of a standard-domain node that shape data propagates through,
    where int32/int64 tensors of rank 0 or 1 stay inline too)."""
    from kiln import _kiln

    table, standard, other, propagates = _kiln.onnx_reads_data()
    ops = dict(table)
    out: Dict[str, int] = {}
    anything: set = set()

    def node(n: Any) -> None:
        if n.domain in ("", "ai.onnx"):
            if n.op_type in propagates:
                anything.update(i for i in n.input if i)
            for i in ops.get(n.op_type, []):
                if i < len(n.input) and n.input[i]:
                    out[n.input[i]] = standard
        else:
            for name in n.input:
                if name and out.get(name) != standard:
                    out[name] = other
        for s in subgraphs_of(n):
            for m in s.node:
                node(m)

    for n in model.graph.node:
        node(n)
    for f in model.functions:
        for n in f.node:
            node(n)
    return out, standard, anything


def kiln_bin() -> str:
    env = os.environ.get("KILN_BIN")
    if env:
        return env
    return str(Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "release" / "kiln")


def wasm_pkg() -> Path:
    return Path(os.environ.get("KILN_WASM_PKG") or ROOT / "kiln-wasm" / "pkg")


def ort_web_module() -> Optional[str]:
    env = os.environ.get("KILN_ORT_WEB")
    if env:
        return env
    # The Node entry, as `import 'onnxruntime-web'` resolves it from kiln-wasm/ (its package.json pins it).
    r = subprocess.run(["node", "--input-type=module", "-e", "console.log(import.meta.resolve('onnxruntime-web'))"],
                       cwd=ROOT / "kiln-wasm", capture_output=True, text=True)
    if r.returncode != 0:
        return None
    url = r.stdout.strip()
    return url[len("file://"):] if url.startswith("file://") else None


# ---------------------------------------------------------------- the original readers' tensors


def payload_bytes(t: Any) -> int:
    n = 1
    for d in t.dims:
        n *= d
    bits = KILN_BITS[t.data_type]
    return (n + 1) // 2 if bits == 4 else n * bits // 8


def subgraphs_of(n: Any) -> Iterator[Any]:
    """Node n's subgraphs: each attribute's g, then its graphs."""
    for a in n.attribute:
        if a.HasField("g"):
            yield a.g
        yield from a.graphs


def subgraphs(g: Any) -> Iterator[Any]:
    """g's direct subgraphs, in the order of R3 (each node, each attribute, its g then graphs)."""
    for n in g.node:
        for a in n.attribute:
            if a.HasField("g"):
                yield a.g
            yield from a.graphs


def onnx_tensors(model: Any) -> List[Dict[str, Any]]:
    """Every initializer (main and subgraphs) and every Constant node's `value`, pre-order, each
    with where rule R1 puts it (`inline`) and whether the Kiln output must hold it (`expected`:
    every initializer of a Kiln dtype, and every Constant of a Kiln dtype that is not inline and
    not an output of its graph)."""
    from onnx import numpy_helper

    reads, standard, anything = read_as_data(model)
    out: List[Dict[str, Any]] = []

    def walk(g: Any, main: bool) -> None:
        outputs = {o.name for o in g.output}
        for t in g.initializer:
            out.append({"name": t.name, "kind": "initializer" if main else "subgraph initializer", "proto": t})
        for n in g.node:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1 \
                    and len(n.attribute) == 1 and n.attribute[0].name == "value":
                out.append({"name": n.output[0], "kind": "Constant" if main else "subgraph Constant",
                            "proto": n.attribute[0].t, "graph_output": n.output[0] in outputs})
        for s in subgraphs(g):
            walk(s, False)

    walk(model.graph, True)
    for e in out:
        t = e["proto"]
        e["kiln_dtype"] = t.data_type in KILN_BITS
        e["bytes"] = payload_bytes(t) if e["kiln_dtype"] else len(t.raw_data)
        limit = reads.get(e["name"])
        if t.data_type in (6, 7) and len(t.dims) <= 1 and e["name"] in anything:
            limit = standard
        e["inline"] = not e["kiln_dtype"] or (limit is not None and e["bytes"] < limit)
        constant = "Constant" in e["kind"]
        e["expected"] = e["kiln_dtype"] and (not constant or (not e["inline"] and not e.get("graph_output")))
        e["array"] = lambda t=t: numpy_helper.to_array(t)
    return out


def digest(b: Any) -> Tuple[int, str]:
    """(length, SHA-256) of a payload: tensors are compared by these, so that a 2 GiB one is
    never held twice."""
    m = memoryview(b).cast("B")
    return len(m), hashlib.sha256(m).hexdigest()


def expected_tensors(kind: str, path: Path, meta: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Tuple[int, str]], int, int]:
    """{name: digest of the bytes} the Kiln output must hold, and the original's weight count and
    bytes; for GGUF, `meta` gets each key's (value types, value) as gguf-py reads them."""
    if kind == "onnx":
        import onnx

        model = onnx.load(str(path))
        ts = onnx_tensors(model)
        want = {}
        for e in ts:
            if e["expected"]:
                if KILN_BITS[e["proto"].data_type] == 4:
                    raise RuntimeError(f"{e['name']}: 4-bit tensors are not compared by this harness yet")
                want[e["name"]] = digest(np.ascontiguousarray(e["array"]()))
        return want, len(ts), sum(e["bytes"] for e in ts)
    if kind == "gguf":
        import gguf

        r = gguf.GGUFReader(str(path))
        if meta is not None:
            # GGUF.version, GGUF.tensor_count and GGUF.kv_count are the reader's own, not keys.
            meta.update({k: ([t.name for t in f.types], f.contents()) for k, f in r.fields.items() if not k.startswith("GGUF.")})
        want = {t.name: digest(np.ascontiguousarray(t.data)) for t in r.tensors}
        return want, len(want), sum(n for n, _ in want.values())
    if kind == "npy":
        a = np.load(str(path), allow_pickle=False)
        want = {path.stem: digest(np.ascontiguousarray(a))}
        return want, 1, a.nbytes
    if kind == "npz":
        with np.load(str(path), allow_pickle=False) as z:
            want = {k: digest(np.ascontiguousarray(z[k])) for k in z.files}
        return want, len(want), sum(n for n, _ in want.values())
    raise RuntimeError(f"unknown kind {kind}")


def _leaf_floats(v: Any, dtype: Any) -> bytes:
    """Floats compared by their bits at the source width; the converter writes NaN and the
    infinities as the strings "NaN", "inf", "-inf"."""
    special = {"NaN": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
    flat = v if isinstance(v, list) else [v]
    return np.array([special.get(x, x) if isinstance(x, str) else x for x in flat], dtype=dtype).tobytes()


def compare_gguf_metadata(meta: Dict[str, Any], kiln_meta: Dict[str, str]) -> str:
    """Every GGUF key is a Kiln metadata key whose JSON value is gguf-py's value (floats bit for
    bit at their width); no other key outside the converter's kiln.convert.* namespace."""
    floats = {"FLOAT32": np.float32, "FLOAT64": np.float64}
    missing, differ = [], []
    for k, (types, value) in meta.items():
        if k not in kiln_meta:
            missing.append(k)
            continue
        got = json.loads(kiln_meta[k])
        leaf = types[-1]
        same = _leaf_floats(got, floats[leaf]) == _leaf_floats(value, floats[leaf]) if leaf in floats else got == value
        if not same:
            differ.append(k)
    extra = [k for k in kiln_meta if k not in meta and not k.startswith("kiln.convert.")]
    if missing or differ or extra:
        return (f"fail: of {len(meta)} GGUF keys {len(missing)} missing {missing[:1]}, {len(differ)} differ {differ[:1]}, "
                f"{len(extra)} extra {extra[:1]}")
    return OK


def safetensors_digests(path: Path) -> Dict[str, Tuple[int, str]]:
    """{name: digest of the payload} of a safetensors file (the format's 8-byte length, JSON header, data):
    dtype-agnostic, so bf16, f8 and the U8 records of opaque tensors compare alike. A sharded
    output (the converter writes one for a sharded Kiln model) is read through its index."""
    index = path.with_name(path.name + ".index.json")
    if not path.exists() and index.exists():
        out: Dict[str, Tuple[int, str]] = {}
        for shard in sorted(set(json.loads(index.read_text())["weight_map"].values())):
            out.update(safetensors_digests(path.with_name(shard)))
        return out
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        n = int.from_bytes(m[:8], "little")
        header = json.loads(m[8:8 + n])
        header.pop("__metadata__", None)
        base = 8 + n
        view = memoryview(m)
        try:
            return {k: digest(view[base + v["data_offsets"][0]:base + v["data_offsets"][1]]) for k, v in header.items()}
        finally:
            view.release()


def inline_left(graph: Path) -> Tuple[int, int, List[str]]:
    """(count, payload bytes) of tensors still stored in the written graph: initializers that are
    not external data (main and subgraphs) and Constant-node values; and the hand-off rule's
    breaches: a tensor of a Kiln dtype that no node reads as data left inline, an initializer
    read as data (under its limit) or of a type Kiln cannot hold made external, external data on anything but an
    initializer (of the main graph or a subgraph) (R1); no `kiln.model` in metadata_props (R2)."""
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    count = total = 0
    breaches: List[str] = []
    for e in onnx_tensors(model):
        t = e["proto"]
        if t.data_location == onnx.TensorProto.EXTERNAL:
            if e["kind"] not in ("initializer", "subgraph initializer"):
                breaches.append(f"{e['kind']} {e['name']!r} is external data")
            elif e["inline"]:
                breaches.append(f"initializer {e['name']!r} ({e['bytes']} bytes) is external data, not inline")
            continue
        count += 1
        total += e["bytes"]
        if not e["inline"] and not e.get("graph_output"):
            breaches.append(f"{e['kind']} {e['name']!r} ({e['bytes']} bytes) is inline")
    if not any(p.key == "kiln.model" for p in model.metadata_props):
        breaches.append("no kiln.model in metadata_props")
    return count, total, breaches


# ---------------------------------------------------------------- inputs and onnxruntime


def make_inputs(model_path: Path, entry: Dict[str, Any]) -> Dict[str, np.ndarray]:
    """Seeded inputs: the graph's inputs that are not initializers, in order; symbolic dims from
    the entry's `inputs` (else 1); `values` fixes an input's value (a sample rate)."""
    import onnx
    from onnx import helper

    model = onnx.load(str(model_path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    shapes = entry.get("inputs", {})
    values = entry.get("values", {})
    feeds: Dict[str, np.ndarray] = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        shape = shapes.get(i.name) or [d.dim_value if d.dim_value > 0 else 1 for d in tt.shape.dim]
        if i.name in values:
            feeds[i.name] = np.array(values[i.name], dtype=dt).reshape(shape)
        elif dt.kind == "f":
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            feeds[i.name] = rng.integers(0, 2, shape).astype(dt)
        else:
            feeds[i.name] = rng.integers(0, 4, shape).astype(dt)
    return feeds


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    return text[:300]


def ort_options() -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return so


def compare_outputs(a: Dict[str, Tuple[str, Tuple[int, ...], str]], b: Dict[str, Tuple[str, Tuple[int, ...], str]]) -> str:
    if list(a) != list(b):
        return f"fail: outputs {list(a)} vs {list(b)}"
    diff = [k for k in a if a[k] != b[k]]
    if diff:
        k = diff[0]
        return f"fail: {len(diff)} of {len(a)} outputs differ (first {k!r}: {a[k][:2]} vs {b[k][:2]})"
    return OK


def ort_py(original: Path, graph: Path, feeds: Dict[str, np.ndarray]) -> str:
    import kiln.onnx
    import onnxruntime as ort

    def outs(sess: Any) -> Dict[str, Tuple[str, Tuple[int, ...], str]]:
        names = [o.name for o in sess.get_outputs()]
        res = sess.run(names, feeds)
        # Bit for bit: dtype, shape and the raw bytes (NaNs of equal bits compare equal).
        return {n: (str(r.dtype), tuple(r.shape), hashlib.sha256(np.ascontiguousarray(r).tobytes()).hexdigest())
                for n, r in zip(names, res)}

    try:
        a = outs(ort.InferenceSession(str(original), sess_options=ort_options(), providers=["CPUExecutionProvider"]))
    except Exception as e:  # noqa: BLE001  (the runtime's own error, reported)
        return f"original fails: {_short(e)}"
    try:
        b = outs(kiln.onnx.session(str(graph), sess_options=ort_options(), providers=["CPUExecutionProvider"]))
    except Exception as e:  # noqa: BLE001
        return f"fail: {_short(e)}"
    return compare_outputs(a, b)


ORT_WEB_TYPES = {"float32": "float32", "float64": "float64", "int8": "int8", "uint8": "uint8", "int16": "int16",
                 "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
                 "bool": "bool", "float16": "float16"}


def ort_web(original: Path, graph: Path, kiln_file: Path, feeds: Dict[str, np.ndarray], work: Path) -> str:
    module = ort_web_module()
    if module is None:
        return "fail: onnxruntime-web not found (npm install in kiln-wasm/, or set KILN_ORT_WEB)"
    if not (wasm_pkg() / "index.js").exists():
        return f"fail: no kiln-wasm package at {wasm_pkg()} (kiln-wasm/build.sh, or set KILN_WASM_PKG)"
    inputs = []
    for i, (name, a) in enumerate(feeds.items()):
        f = work / f"input{i}.bin"
        f.write_bytes(np.ascontiguousarray(a).tobytes())
        inputs.append({"name": name, "type": ORT_WEB_TYPES[str(a.dtype)], "dims": list(a.shape), "file": str(f)})
    job = work / "ort-web.json"
    job.write_text(json.dumps({"original": str(original), "graph": str(graph), "kiln": str(kiln_file),
                               "pkg": str(wasm_pkg()), "ortModule": module, "inputs": inputs}))
    r = subprocess.run(["node", str(HERE / "ort-web.mjs"), str(job)], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return f"fail: node exited {r.returncode}: {r.stderr.strip().splitlines()[-1:] }"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    o, c = res["original"], res["converted"]
    if not o["ok"]:
        return f"original fails: {o['error'][:300]}"
    if not c["ok"]:
        return f"fail: {c['error'][:300]}"
    key = lambda d: {k: (v["type"], tuple(v["dims"]), v["sha256"]) for k, v in d["outputs"].items()}  # noqa: E731
    return compare_outputs(key(o), key(c))


# ---------------------------------------------------------------- one model


def cli(*args: str) -> Tuple[bool, str]:
    r = subprocess.run([kiln_bin(), *args], capture_output=True, text=True)
    if r.returncode == 0:
        return True, r.stderr
    last = [ln for ln in r.stderr.strip().splitlines() if ln] or [f"exit {r.returncode}"]
    return False, last[-1][:400]


def check_model(entry: Dict[str, Any], path: Path, work: Path, web: bool = True) -> Dict[str, Any]:
    """Every step for one corpus file; returns the row (verdicts are 'ok', 'n/a ...', or a reason)."""
    row: Dict[str, Any] = {k: entry.get(k) for k in ("id", "kind", "package", "path", "producer", "licence", "committed")}
    row["package"] = entry.get("package") or f"generated ({entry['generated']} of {entry.get('from') or '-'})"
    row["file"] = path.name
    row["size"] = path.stat().st_size
    steps: Dict[str, str] = {}
    row["steps"] = steps
    t0 = time.monotonic()
    kind = entry["kind"]
    meta: Dict[str, Any] = {}
    try:
        want, row["orig_tensors"], row["orig_bytes"] = expected_tensors(kind, path, meta)
    except Exception as e:  # noqa: BLE001
        steps["read"] = f"fail: the original reader: {_short(e)}"
        want = None
    out = work / (path.name + ".kiln")
    graph = work / (path.name + ".kiln.onnx")
    args = [str(path), "-o", str(out)] + (["--onnx-graph", str(graph)] if kind == "onnx" else [])
    ok, msg = cli("convert", *args)
    steps["convert"] = OK if ok else f"fail: {msg}"
    if ok:
        import kiln

        with kiln.safe_open(str(out)) as f:
            names = list(f.keys())
            row["kiln_tensors"] = len(names)
            row["kiln_bytes"] = sum(f.tensor_info(n).byte_length for n in names)
            kiln_meta = f.metadata() or {}
        if kind == "gguf" and want is not None:
            steps["metadata"] = compare_gguf_metadata(meta, kiln_meta)
        ok_v, msg = cli("validate", str(out))
        steps["validate"] = OK if ok_v else f"fail: {msg}"
        back = work / (path.name + ".back.safetensors")
        ok_b, msg = cli("convert", str(out), "-o", str(back))
        if not ok_b:
            steps["roundtrip"] = f"fail: {msg}"
        elif want is not None:
            got = safetensors_digests(back)
            missing = [k for k in want if k not in got]
            extra = [k for k in got if k not in want]
            differ = [k for k in want if k in got and got[k] != want[k]]
            if missing or extra or differ:
                parts = [f"{len(missing)} missing" + (f" (e.g. {missing[0]!r})" if missing else ""),
                         f"{len(extra)} extra" + (f" (e.g. {extra[0]!r})" if extra else ""),
                         f"{len(differ)} differ" + (f" (e.g. {differ[0]!r})" if differ else "")]
                steps["roundtrip"] = f"fail: of {len(want)} expected tensors " + ", ".join(parts)
            else:
                steps["roundtrip"] = OK
            row["expected_tensors"] = len(want)
        if kind == "onnx":
            row["inline_tensors"], row["inline_bytes"], breaches = inline_left(graph)
            with kiln.safe_open(str(out)) as f:
                recorded = (f.metadata() or {}).get("kiln.convert.onnx_graph_sha256")
            if recorded != hashlib.sha256(graph.read_bytes()).hexdigest():
                breaches.append(f"{out.name}'s kiln.convert.onnx_graph_sha256 is {recorded}, not the graph's SHA-256")
            steps["graph"] = OK if not breaches else f"fail: {len(breaches)} breaches of the hand-off rule: " + "; ".join(breaches[:3])
    if kind == "onnx":
        feeds = make_inputs(path, entry)
        for step, skip_key, fn in (("ort_py", "skip_ort_py", lambda: ort_py(path, graph, feeds)),
                                   ("ort_web", "skip_ort_web", lambda: ort_web(path, graph, out, feeds, work))):
            if entry.get(skip_key):
                steps[step] = f"n/a: {entry[skip_key]}"
            elif step == "ort_web" and not web:
                steps[step] = "n/a: --no-web"
            elif not ok:
                steps[step] = "fail: not converted"
            else:
                steps[step] = fn()
    else:
        steps["ort_py"] = steps["ort_web"] = "n/a"
    row["seconds"] = round(time.monotonic() - t0, 1)
    row["ok"] = all(v == OK or v.startswith("n/a") for v in steps.values())
    return row


# ---------------------------------------------------------------- the table


def _mib(n: Optional[int]) -> str:
    if n is None:
        return "-"
    return f"{n / 1048576:.2f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def _verdict(v: Optional[str]) -> str:
    if v is None:
        return "-"
    return v if len(v) <= 90 else v[:87] + "..."


def markdown(rows: List[Dict[str, Any]]) -> str:
    head = ["id", "package", "file", "producer", "licence", "size", "weights (original)", "weights in Kiln",
            "inline left in graph", "convert", "graph (R1, R2)", "round trip", "ORT py", "ORT web"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["steps"]
        cells = [r["id"] + (" (committed)" if r.get("committed") else ""), r["package"], r["file"], r.get("producer") or "",
                 r.get("licence") or "", _mib(r["size"]),
                 f"{r.get('orig_tensors', '-')} / {_mib(r.get('orig_bytes'))}",
                 f"{r.get('kiln_tensors', '-')} / {_mib(r.get('kiln_bytes'))}",
                 f"{r['inline_tensors']} / {_mib(r['inline_bytes'])}" if "inline_bytes" in r else "n/a",
                 _verdict(s.get("convert")) + ("" if s.get("validate") in (None, OK) else f"; validate {_verdict(s['validate'])}"),
                 _verdict(s.get("graph", "n/a")), _verdict(s.get("roundtrip")), _verdict(s.get("ort_py")), _verdict(s.get("ort_web"))]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subset", action="store_true", help="the committed files in tests/corpus/")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print the markdown table")
    ap.add_argument("--no-web", action="store_true", help="skip onnxruntime-web (reported as n/a)")
    ap.add_argument("--no-large", action="store_true", help="skip entries marked large")
    ap.add_argument("--keep", type=Path, help="keep the converted files in this folder")
    ap.add_argument("ids", nargs="*")
    a = ap.parse_args()
    if not Path(kiln_bin()).exists():
        print(f"run: no kiln binary at {kiln_bin()} (cargo build --release -p kiln-cli, or set KILN_BIN)", file=sys.stderr)
        return 2
    doc = fetch.load()
    entries = [e for e in doc["files"] if (not a.ids or e["id"] in a.ids)
               and (not a.subset or e["committed"]) and not (a.no_large and e.get("large"))]
    rows = []
    for e in entries:
        path = fetch.path_of(e, subset=a.subset)
        problem = fetch.check(e, path)
        if problem:
            rows.append({"id": e["id"], "package": e.get("package", "generated"), "file": path.name, "size": None,
                         "steps": {"fetch": f"fail: {problem} (run scripts/corpus/fetch.py)"}, "ok": False})
            print(f"FAIL {e['id']}: {problem}", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="kiln-corpus-") as tmp:
            work = Path(tmp)
            row = check_model(e, path, work, web=not a.no_web)
            if a.keep:
                a.keep.mkdir(parents=True, exist_ok=True)
                for p in work.glob("*.kiln*"):
                    shutil.copy2(p, a.keep / p.name)
        rows.append(row)
        bad = {k: v for k, v in row["steps"].items() if not (v == OK or v.startswith("n/a"))}
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {e['id']} ({row['seconds']} s)" + "".join(f"\n     {k}: {v}" for k, v in bad.items()),
              file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    if a.markdown:
        print(markdown(rows))
    failed = [r["id"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
