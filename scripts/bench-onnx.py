#!/usr/bin/env python3
"""onnxruntime session creation: an ONNX model with inline weights against the graph
`kiln convert --onnx-graph` writes (weights as external data in the Kiln file).

    python3 scripts/bench-onnx.py              # ~200 MiB of f32 weights (the README's figures)
    python3 scripts/bench-onnx.py --smoke      # 8 MiB: the smoke run CI does (seconds)

Writes, in a temporary folder, a chain of MatMul -> Relu layers with seeded random f32
weights (`onnx.save`, weights inline as raw_data), converts it with
`kiln convert model.onnx -o model.kiln --onnx-graph model.kiln.onnx`, then measures in a
fresh Python process each time (warm page cache; best of --runs for the time, the peak
RSS of that process: VmHWM on Linux, else ru_maxrss; and its RSS right after the session
is created, VmRSS):

  original          onnxruntime.InferenceSession("model.onnx")
  converted         onnxruntime.InferenceSession("model.kiln.onnx") (the runtime reads model.kiln)
  kiln.onnx.session kiln.onnx.session("model.kiln.onnx"): model.kiln mapped and validated,
                    every SHA-256 digest compared, the bindings checked, the weights handed
                    to onnxruntime from the checked map

and one inference on the same input in each, whose output must be bit-identical across
the three. Each process imports numpy, onnxruntime, kiln and onnx before the clock
starts (importing onnx, which kiln.onnx needs, is timed and printed apart); the RSS of
such a process that creates no session is printed as the baseline. KILN_BIN names the kiln binary (default: a release
build with cargo).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time, hashlib
import numpy as np, onnxruntime as ort, kiln, kiln.onnx
t0 = time.perf_counter()
import onnx  # kiln.onnx.session parses the graph with it; imported once by any user of it
import_onnx = time.perf_counter() - t0
side, path, width = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
t0 = time.perf_counter()
if side == "baseline":
    sess = None
elif side == "kiln.onnx.session":
    sess = kiln.onnx.session(path, providers=["CPUExecutionProvider"], sess_options=opts)
else:
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
seconds = time.perf_counter() - t0
def now_kib():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
after_creation = now_kib()
digest = None
if sess is not None:
    x = np.linspace(-1.0, 1.0, width, dtype=np.float32).reshape(1, width)
    (y,) = sess.run(None, {"x": x})
    digest = hashlib.sha256(np.ascontiguousarray(y).tobytes()).hexdigest()
def status_kib(key):
    try:
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return None
# VmHWM: this process image's own peak (ru_maxrss would keep the forking parent's).
peak = status_kib("VmHWM:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "import_onnx": import_onnx, "rss_kib": peak, "rss_now_kib": after_creation,
                  "output": digest}))
"""


def kiln_binary() -> str:
    env = os.environ.get("KILN_BIN")
    if env:
        return env
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    subprocess.run(["cargo", "build", "-q", "--release", "--locked", "-p", "kiln-cli"], cwd=ROOT, check=True)
    return str(target / "release" / "kiln")


def write_model(path: Path, mib: float, width: int) -> int:
    """A chain of MatMul(x, W_i) -> Relu layers, W_i f32 [width, width], about ``mib`` MiB."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    per = width * width * 4
    layers = max(1, round(mib * (1 << 20) / per))
    rng = np.random.default_rng(20250101)
    inits, nodes, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) / np.float32(np.sqrt(width))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"layers.{i}.weight"))
        nodes.append(helper.make_node("MatMul", [prev, f"layers.{i}.weight"], [f"h{i}"]))
        out = "y" if i == layers - 1 else f"r{i}"
        nodes.append(helper.make_node("Relu", [f"h{i}"], [out]))
        prev = out
    graph = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="kiln-bench")
    onnx.save(model, str(path))
    return layers


def measure(side: str, path: Path, width: int, runs: int) -> dict:
    results = []
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-c", CHILD, side, str(path), str(width)], capture_output=True,
                           text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if r.returncode != 0:
            raise SystemExit(f"{side}: the child failed:\n{r.stderr}")
        results.append(json.loads(r.stdout))
    best = min(results, key=lambda d: d["seconds"])
    outputs = {d["output"] for d in results}
    assert len(outputs) == 1, (side, outputs)
    return {"seconds": best["seconds"], "rss_kib": statistics.median(d["rss_kib"] for d in results),
            "output": best["output"], "import_onnx": best["import_onnx"],
            "rss_now_kib": statistics.median(d["rss_now_kib"] or 0 for d in results)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=float, default=200.0, help="weights in MiB (default 200)")
    ap.add_argument("--smoke", action="store_true", help="8 MiB, 1 run: that everything runs and agrees")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per side (best time, median RSS)")
    ap.add_argument("--width", type=int, default=2048, help="each weight is [width, width] f32")
    a = ap.parse_args()
    if a.smoke:
        a.mib, a.runs, a.width = 8.0, 1, 512
    try:
        import onnx
        import onnxruntime

        import kiln.onnx  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"bench-onnx: {e}; it needs onnx, onnxruntime (scripts/setup.sh python) and kiln-py"
                         " (pip install ./kiln-py)") from None
    kiln = kiln_binary()

    with tempfile.TemporaryDirectory(prefix="kiln-bench-onnx-") as tmp:
        folder = Path(tmp)
        original = folder / "model.onnx"
        t0 = time.perf_counter()
        layers = write_model(original, a.mib, a.width)
        written = time.perf_counter() - t0
        out, graph = folder / "model.kiln", folder / "model.kiln.onnx"
        t0 = time.perf_counter()
        subprocess.run([kiln, "convert", "--quiet", str(original), "-o", str(out), "--onnx-graph", str(graph)],
                       check=True, stderr=subprocess.DEVNULL)
        converted = time.perf_counter() - t0
        sizes = {p.name: p.stat().st_size for p in (original, out, graph)}
        print(f"model: {layers} MatMul+Relu layers, f32 [{a.width}, {a.width}] weights, "
              f"{sizes['model.onnx'] / (1 << 20):.1f} MiB model.onnx (written in {written:.2f} s); "
              f"kiln convert --onnx-graph {converted:.2f} s -> model.kiln {sizes['model.kiln'] / (1 << 20):.1f} MiB"
              f" + model.kiln.onnx {sizes['model.kiln.onnx']:,} bytes")
        print(f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, Python "
              f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, one intra-op thread; {a.runs} fresh process(es)"
              " per side, warm page cache")
        base = measure("baseline", original, a.width, 1)
        rows = [("original (inline weights)", measure("original", original, a.width, a.runs)),
                ("converted graph + model.kiln", measure("converted", graph, a.width, a.runs)),
                ("kiln.onnx.session (checked)", measure("kiln.onnx.session", graph, a.width, a.runs))]
    first = rows[0][1]
    print(f"\nbaseline (imports, no session): peak RSS {base['rss_kib'] / 1024:.1f} MiB;"
          f" `import onnx` took {base['import_onnx'] * 1000:.0f} ms (not in the times below)\n")
    print(f"| {'side':30} | {'session creation':>16} | {'peak RSS':>10} | {'RSS after':>10} |"
          f" {'time / original':>15} | {'peak / original':>15} |")
    print(f"|{'-' * 32}|{'-' * 17}:|{'-' * 11}:|{'-' * 11}:|{'-' * 16}:|{'-' * 16}:|")
    for name, r in rows:
        print(f"| {name:30} | {r['seconds'] * 1000:13.1f} ms | {r['rss_kib'] / 1024:6.1f} MiB |"
              f" {r['rss_now_kib'] / 1024:6.1f} MiB | {r['seconds'] / first['seconds']:14.2f}x |"
              f" {r['rss_kib'] / first['rss_kib']:14.2f}x |")
    outputs = {r["output"] for _, r in rows}
    if len(outputs) != 1:
        print(f"FAILED: the outputs differ: {[(n, r['output']) for n, r in rows]}")
        return 1
    print("\noutputs: bit-identical on all three sides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
