#!/usr/bin/env python3
"""Loading into PyTorch and JAX: kiln.torch / kiln.flax against
safetensors.torch / safetensors.flax, side by side in one run, on the same
tensors (saved once by each library).

Each run loads the whole file (``load_file(path)``; Kiln with
``verify=False``, safetensors has no digests) and touches one element of
every tensor (so a lazy loader pays for what it defers). Both files are in
the page cache (each is loaded once before timing); runs alternate between
the libraries; the figure is the median, the ratio safetensors / Kiln
(higher: Kiln faster). RssAnon growth is the process's anonymous memory
after the load and touch, less before (file-backed map pages are not
anonymous; a copy is), as a share of the file.

    nice -n 15 python3 kiln-py/bench/frameworks.py            # 1 GiB of 300 tensors, and 10,000 small ones
    python3 kiln-py/bench/frameworks.py --smoke               # 4 MiB and 500 tensors: seconds (CI)
    python3 kiln-py/bench/frameworks.py --dtype bf16          # the checkpoints in bf16 (f16 by default)
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

try:
    import jax
    import safetensors
    import safetensors.flax as stf
    import safetensors.torch as stt
    import torch
except ImportError as e:  # pragma: no cover
    sys.exit(f"this benchmark needs torch, jax and safetensors: {e}")

import kiln.flax as kf
import kiln.torch as kt


def rss_anon() -> int:
    """The process's RssAnon in bytes (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def checkpoint(total: int, count: int, dtype: torch.dtype) -> Dict[str, Any]:
    """``count`` tensors of ``dtype`` holding ``total`` bytes together, rows of 1,024 elements where they fit."""
    per = max(1, total // count // dtype.itemsize)
    cols = 1024 if per >= 1024 else per
    rows = max(1, per // cols)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(rows * cols, generator=g).to(dtype)
    return {f"layers.{i}.weight": base.view(rows, cols).clone() for i in range(count)}


def touch_torch(d: Dict[str, Any]) -> float:
    return float(sum(t.view(-1)[0].item() for t in d.values() if t.numel()))


def touch_jax(d: Dict[str, Any]) -> float:
    # np.asarray of a CPU jax.Array is a view of its buffer: one element read per tensor
    return float(sum(float(np.asarray(a).reshape(-1)[0]) for a in d.values() if a.size))


def measure(load: Callable[[], Dict[str, Any]], touch: Callable[[Dict[str, Any]], float]) -> Tuple[float, int]:
    gc.collect()
    before = rss_anon()
    t0 = time.perf_counter()
    d = load()
    touch(d)
    elapsed = time.perf_counter() - t0
    grown = rss_anon() - before
    del d
    gc.collect()
    return elapsed, grown


def compare(label: str, ours: Callable[[], Dict[str, Any]], theirs: Callable[[], Dict[str, Any]],
            touch: Callable[[Dict[str, Any]], float], runs: int, size: int) -> Dict[str, Any]:
    ours(), theirs()  # the page cache warm, imports and first-call costs paid
    a: List[Tuple[float, int]] = []
    b: List[Tuple[float, int]] = []
    for _ in range(runs):
        a.append(measure(ours, touch))
        b.append(measure(theirs, touch))
    ka, sa = statistics.median(t for t, _ in a), statistics.median(t for t, _ in b)
    kr, sr = max(r for _, r in a), max(r for _, r in b)
    row = {"case": label, "kiln_s": ka, "safetensors_s": sa, "ratio": sa / ka,
           "kiln_rss_anon": kr, "safetensors_rss_anon": sr, "file": size}
    print(f"| {label} | {ka * 1e3:.1f} ms | {sa * 1e3:.1f} ms | **{sa / ka:.2f}x** | "
          f"{kr / 2**20:.1f} MiB ({100 * kr / size:.2f}%) | {sr / 2**20:.1f} MiB ({100 * sr / size:.1f}%) |", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="4 MiB in 300 tensors and 500 small tensors, 3 runs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16", "f32"])
    ap.add_argument("--check", action="store_true", help="exit 1 when a target ratio is missed (not with --smoke)")
    ap.add_argument("--only", choices=["big", "small"], help="one of the two checkpoints")
    args = ap.parse_args()
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    big, small = (4 << 20, 500) if args.smoke else (1 << 30, 10_000)
    runs = 3 if args.smoke else args.runs
    print(f"torch {torch.__version__}, jax {jax.__version__}, safetensors {safetensors.__version__}, "
          f"numpy {np.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; {args.dtype}, {runs} runs, medians")
    print("| case | Kiln | safetensors | safetensors / Kiln | Kiln RssAnon growth | safetensors RssAnon growth |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("KILN_BENCH_DIR")) as tmp:
        cases = [(300, big), (small, small * 256)]
        cases = cases[:1] if args.only == "big" else cases[1:] if args.only == "small" else cases
        for count, total in cases:
            tensors = checkpoint(total, count, dtype)
            kp, sp = Path(tmp) / "m.kiln", Path(tmp) / "m.safetensors"
            kt.save_file(tensors, kp)   # 10,000 names exceed one directory block: a manifest and shards
            stt.save_file(tensors, str(sp))
            del tensors
            files = sorted(Path(tmp).glob("m*.kiln"))
            size = sum(f.stat().st_size for f in files)
            shards = f" in {len(files) - 1} shards" if len(files) > 1 else ""
            what = f"{count:,} tensors, {size / 2**20:.1f} MiB{shards}"
            rows.append(compare(f"torch, {what}", lambda: kt.load_file(kp), lambda: stt.load_file(str(sp)),
                                touch_torch, runs, size))
            rows.append(compare(f"flax, {what}", lambda: kf.load_file(kp), lambda: stf.load_file(str(sp)),
                                touch_jax, runs, size))
            for f in files + [sp]:
                f.unlink()
    if args.check and not args.smoke and not args.only:
        targets = [1.0, 5.0, 1.0, 1.0]  # torch 1 GiB, flax 1 GiB, torch 10,000, flax 10,000
        missed = [r["case"] for r, t in zip(rows, targets) if r["ratio"] < t]
        # RssAnon: the 1 GiB torch row (a payload copy would show there; 10,000 tensors' own headers are
        # more than 2% of their 2.4 MiB file in any loader)
        missed += [r["case"] + " RssAnon" for r in rows[:1] if r["kiln_rss_anon"] > 0.02 * r["file"]]
        if missed:
            print("missed:", ", ".join(missed), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
