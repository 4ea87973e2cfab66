#!/usr/bin/env python3
"""Loading a sharded checkpoint: ``kiln.numpy.load_file`` of a sharded Kiln
model (the manifest; every shard mapped and checked against it) against
``safetensors.numpy.load_file`` over the same checkpoint's shards (the Hub
layout: one ``.safetensors`` per shard holding the same tensors, and
``model.safetensors.index.json``), side by side in one run.

The same tensors (an LLM-like f16 layout) are written in both layouts, the
Kiln shards by ``save_file(..., max_shard_size=...)`` and the safetensors
shards with exactly the tensors of each Kiln shard. Every file is read once
before timing (warm page cache). Each run loads the whole model and touches
one element of every tensor (so a lazy loader pays for what it defers);
runs alternate between the loaders and the figures are medians. Kiln is
timed twice: as ``load_file`` runs by default (structure, shard binding and
prefix digests checked; payloads mapped, not read) and with
``verify=True`` (every payload hashed against its SHA-256 digest). The
ratio is safetensors / Kiln (higher: Kiln faster).

    python3 kiln-py/bench/sharded_load.py             # 1 GiB, 4 shards (the README's figures)
    python3 kiln-py/bench/sharded_load.py --quick     # 4 MiB, a smoke run (the test suite runs it)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_vs_safetensors import fmt_b, fmt_t, llm_like, timed, touch  # noqa: E402

import kiln  # noqa: E402
import kiln.numpy as kn  # noqa: E402

try:
    import safetensors
    import safetensors.numpy as stn
except ImportError:  # pragma: no cover
    sys.exit("pip install safetensors to run this benchmark")


def write_both(tensors: Dict[str, np.ndarray], shards: int, d: Path) -> Dict[str, Any]:
    total = sum(a.nbytes for a in tensors.values())
    manifest = d / "model.kiln"
    kn.save_file(tensors, manifest, max_shard_size=-(-total // shards))
    with kiln.safe_open(manifest) as f:
        names = f.shards
        groups: Dict[str, List[str]] = {n: [] for n in names}
        for k in f.keys():
            info = f.tensor_info(k)
            assert info.shard is not None
            groups[info.shard].append(k)
    st_files = []
    weight_map = {}
    for i, n in enumerate(names, 1):
        st = d / f"model-{i:05}-of-{len(names):05}.safetensors"
        stn.save_file({k: tensors[k] for k in groups[n]}, str(st))
        st_files.append(st)
        weight_map.update({k: st.name for k in groups[n]})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    return {"manifest": manifest, "kiln_shards": [d / n for n in names], "st_shards": st_files}


def st_load(files: List[Path]) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {}
    for f in files:
        out.update(stn.load_file(str(f)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 MiB, few runs (a smoke test)")
    ap.add_argument("--size", type=int, default=0, help="checkpoint bytes (default 1 GiB; 4 MiB with --quick)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory)")
    args = ap.parse_args()
    size = args.size or ((4 << 20) if args.quick else (1 << 30))
    repeats = args.repeats or (3 if args.quick else 7)
    print(f"kiln {kiln.__version__}, safetensors {safetensors.__version__}, numpy {np.__version__}, "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs", flush=True)
    tensors = llm_like(size)
    nbytes = sum(a.nbytes for a in tensors.values())
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        files = write_both(tensors, args.shards, Path(tmp))
        manifest, st_files = files["manifest"], files["st_shards"]
        # Warm the page cache and check both loaders agree, bit for bit.
        a, b = kn.load_file(manifest, verify=True), st_load(st_files)
        assert sorted(a) == sorted(b) == sorted(tensors)
        assert all(a[k].tobytes() == b[k].tobytes() for k in a)
        del a, b
        times: Dict[str, List[float]] = {"kiln": [], "kiln_verify": [], "st": []}
        for _ in range(repeats):
            times["kiln"].append(timed(lambda: touch(kn.load_file(manifest))))
            times["kiln_verify"].append(timed(lambda: touch(kn.load_file(manifest, verify=True))))
            times["st"].append(timed(lambda: touch(st_load(st_files))))
        med = {k: statistics.median(v) for k, v in times.items()}
    label = f"{len(tensors)} tensors (LLM-like f16), {len(files['kiln_shards'])} shards"
    print(f"  {label}, {fmt_b(nbytes)}: load_file {fmt_t(med['kiln'])}, verify=True {fmt_t(med['kiln_verify'])}, "
          f"safetensors {fmt_t(med['st'])} ({repeats} runs)")
    print()
    print("| checkpoint | bytes | Kiln `load_file` | Kiln `verify=True` | safetensors, shard by shard "
          "| **safetensors / Kiln** | **safetensors / Kiln verify** |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| {label} | {fmt_b(nbytes)} | {fmt_t(med['kiln'])} | {fmt_t(med['kiln_verify'])} | {fmt_t(med['st'])} | "
          f"**{med['st'] / med['kiln']:.1f}x** | **{med['st'] / med['kiln_verify']:.2f}x** |")


if __name__ == "__main__":
    main()
