#!/usr/bin/env python3
"""Load and save time of kiln.numpy against safetensors.numpy, side by side in
one run, on the same tensors.

load: ``load_file(path)`` and then touching one element of every tensor (so a
lazy loader pays for what it defers), against ``safetensors.numpy.load_file``
plus the same touch. Both files are in the page cache (each is loaded once
before timing). save: ``save_file`` of the same dict, against
``safetensors.numpy.save_file``. Runs alternate between the two libraries;
the figure is the median of the runs, and the ratio is safetensors / kiln
for load (higher: Kiln faster) and kiln / safetensors for save (lower: Kiln
faster).

    python3 kiln-py/bench/load_vs_safetensors.py            # docs/performance.md's three cases
    python3 kiln-py/bench/load_vs_safetensors.py --quick    # small sizes (a smoke run)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

import kiln
import kiln.numpy as kn

try:
    import safetensors
    import safetensors.numpy as stn
except ImportError:  # pragma: no cover
    sys.exit("pip install safetensors to run this benchmark")


def llm_like(total_bytes: int, layers: int = 29) -> Dict[str, np.ndarray]:
    """An LLM-like f16 layout: embedding, per layer attention (q,k,v,o), MLP
    (gate, up, down) and two norms, a final norm and the head: 10 tensors per
    layer + 3 = 293 tensors for 29 layers."""
    # Parameters: 2*V*d + layers*(4*d*d + 3*d*f + 2*d) + d with f = 4*d and V = 8*d.
    d = 64
    while True:
        nd = d + 64
        params = 2 * 8 * nd * nd + layers * (4 * nd * nd + 12 * nd * nd + 2 * nd) + nd
        if params * 2 > total_bytes:
            break
        d = nd
    f, v = 4 * d, 8 * d
    rng = np.random.default_rng(0)

    def t(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32).astype(np.float16)

    out = {"model.embed_tokens.weight": t(v, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out[p + f"self_attn.{name}.weight"] = t(d, d)
        out[p + "mlp.gate_proj.weight"] = t(f, d)
        out[p + "mlp.up_proj.weight"] = t(f, d)
        out[p + "mlp.down_proj.weight"] = t(d, f)
        out[p + "input_layernorm.weight"] = t(d)
        out[p + "post_attention_layernorm.weight"] = t(d)
        out[p + "self_attn.rotary.inv_freq"] = t(d // 2)
    out["model.norm.weight"] = t(d)
    out["lm_head.weight"] = t(v, d)
    return out


def small(count: int, total_bytes: int) -> Dict[str, np.ndarray]:
    per = max(4, total_bytes // count // 4)
    rng = np.random.default_rng(1)
    return {f"t.{i}": rng.standard_normal(per, dtype=np.float32) for i in range(count)}


def touch(arrays: Dict[str, np.ndarray]) -> float:
    s = 0.0
    for a in arrays.values():
        if a.size:
            s += float(a.reshape(-1)[0])
    return s


def timed(f: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def run_case(label: str, tensors: Dict[str, np.ndarray], repeats: int, workdir: Path) -> Dict[str, Any]:
    kp, sp = workdir / "m.kiln", workdir / "m.safetensors"
    kn.save_file(tensors, kp)
    stn.save_file(tensors, str(sp))
    nbytes = sum(a.nbytes for a in tensors.values())
    # Warm the page cache and check both loaders agree.
    a, b = kn.load_file(kp), stn.load_file(str(sp))
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    del a, b
    kload: List[float] = []
    sload: List[float] = []
    ksave: List[float] = []
    ssave: List[float] = []
    for _ in range(repeats):
        kload.append(timed(lambda: touch(kn.load_file(kp))))
        sload.append(timed(lambda: touch(stn.load_file(str(sp)))))
    save_repeats = max(1, repeats // 3) if nbytes > 256 << 20 else repeats
    for _ in range(save_repeats):
        out_k, out_s = workdir / "out.kiln", workdir / "out.safetensors"
        ksave.append(timed(lambda: kn.save_file(tensors, out_k)))
        ssave.append(timed(lambda: stn.save_file(tensors, str(out_s))))
        out_k.unlink()
        out_s.unlink()
    kp.unlink()
    sp.unlink()
    med = statistics.median
    return {
        "case": label, "tensors": len(tensors), "bytes": nbytes,
        "kiln_load": med(kload), "st_load": med(sload), "load_ratio": med(sload) / med(kload),
        "kiln_save": med(ksave), "st_save": med(ssave), "save_ratio": med(ksave) / med(ssave),
        "runs": (repeats, save_repeats),
    }


def fmt_t(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.2f} s"


def fmt_b(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, few runs (a smoke test)")
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory)")
    args = ap.parse_args()
    if args.quick:
        cases: List[Tuple[str, Callable[[], Dict[str, np.ndarray]]]] = [
            ("8 tensors / 64 KiB", lambda: small(8, 64 << 10)),
            ("300 tensors (LLM-like) / 4 MiB", lambda: llm_like(4 << 20)),
            ("1,000 tensors", lambda: small(1000, 1 << 20)),
        ]
        repeats = args.repeats or 3
    else:
        cases = [
            ("8 tensors / 1 MiB", lambda: small(8, 1 << 20)),
            ("293 tensors (LLM-like f16) / 1 GiB", lambda: llm_like(1 << 30)),
            ("10,000 tensors / 40 MiB", lambda: small(10_000, 40 << 20)),
        ]
        repeats = args.repeats or 9
    print(f"kiln {kiln.__version__}, safetensors {safetensors.__version__}, numpy {np.__version__}, "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for label, make in cases:
            rows.append(run_case(label, make(), repeats, Path(d)))
            r = rows[-1]
            print(f"  {label}: load {fmt_t(r['kiln_load'])} vs {fmt_t(r['st_load'])} ({r['load_ratio']:.1f}x), "
                  f"save {fmt_t(r['kiln_save'])} vs {fmt_t(r['st_save'])} ({r['save_ratio']:.2f}x)", flush=True)
    print()
    print("| case | bytes | load: Kiln | load: safetensors | **safetensors / Kiln** | save: Kiln | save: safetensors | **Kiln / safetensors** |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {fmt_b(r['bytes'])} | {fmt_t(r['kiln_load'])} | {fmt_t(r['st_load'])} | "
              f"**{r['load_ratio']:.1f}x** | {fmt_t(r['kiln_save'])} | {fmt_t(r['st_save'])} | **{r['save_ratio']:.2f}x** |")


if __name__ == "__main__":
    main()
