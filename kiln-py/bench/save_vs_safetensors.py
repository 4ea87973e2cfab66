#!/usr/bin/env python3
"""Saving: kiln.numpy / kiln.torch / kiln.flax ``save_file`` against
safetensors.numpy / .torch / .flax ``save_file``, side by side in one run, on
the same tensors.

Modes (digests on, Kiln's default, unless the row says otherwise):

* ``fsync``: each side's ``save_file`` then ``os.fsync`` of the written file,
  so both pay for the bytes reaching the disk (Kiln also keeps its write to a
  temporary name and rename; safetensors writes the file in place);
* ``no fsync``: ``save_file`` alone (the bytes end in the page cache);
* ``digests=False``: Kiln without its SHA-256 per tensor, no fsync.

Every timed save writes a new file (the previous one is removed untimed).
Sides alternate, the first side switching every round; the figure is the
median of the rounds, the ratio Kiln / safetensors (lower: Kiln faster).
The 10,000-tensor checkpoint is sharded by Kiln (its names exceed one
directory block), and a sharded save always fsyncs its shards and carries
digests: its ``no fsync`` row compares Kiln's fsynced save with safetensors'
unsynced one, and it has no ``digests=False`` row.

    nice -n 15 python3 kiln-py/bench/save_vs_safetensors.py           # 1 GiB, 1 MiB and 10,000 tensors
    python3 kiln-py/bench/save_vs_safetensors.py --smoke              # 4 MiB and 1 MiB, seconds (CI)
    python3 kiln-py/bench/save_vs_safetensors.py --frameworks numpy   # one framework

A framework that is not installed is named and skipped (``--require`` makes
that an error: the smoke test passes it).
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

try:
    import safetensors
    import safetensors.numpy as stn
except ImportError:  # pragma: no cover
    sys.exit("pip install safetensors to run this benchmark")

import kiln
import kiln.numpy as kn

Saver = Callable[[Dict[str, Any], Path], None]


def checkpoint(total: int, count: int) -> Dict[str, np.ndarray]:
    """``count`` f16 tensors holding ``total`` bytes together, rows of 1,024 elements where they fit."""
    per = max(1, total // count // 2)
    cols = 1024 if per >= 1024 else per
    rows = max(1, per // cols)
    rng = np.random.default_rng(0)
    base = rng.standard_normal(rows * cols, dtype=np.float32).astype(np.float16).reshape(rows, cols)
    return {f"layers.{i}.weight": base.copy() for i in range(count)}


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def frameworks(wanted: List[str], require: bool) -> List[Tuple[str, Callable[[Dict[str, np.ndarray]], Any],
                                                                  Callable[..., None], Callable[..., None]]]:
    """(name, convert a numpy dict to the framework's, kiln save_file, safetensors save_file) per framework."""
    out: List[Tuple[str, Callable[[Dict[str, np.ndarray]], Any], Callable[..., None], Callable[..., None]]] = []
    for name in wanted:
        try:
            if name == "numpy":
                out.append((name, lambda d: d, kn.save_file, stn.save_file))
            elif name == "torch":
                import safetensors.torch as stt
                import torch

                import kiln.torch as kt

                out.append((name, lambda d: {k: torch.from_numpy(v) for k, v in d.items()}, kt.save_file,
                            stt.save_file))
            elif name == "flax":
                import jax.numpy as jnp
                import safetensors.flax as stf

                import kiln.flax as kf

                out.append((name, lambda d: {k: jnp.asarray(v) for k, v in d.items()}, kf.save_file,
                            stf.save_file))
        except ImportError as e:
            if require:
                raise
            print(f"{name}: skipped ({e})", flush=True)
    return out


def timed(f: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def remove(tmp: Path) -> None:
    for f in tmp.iterdir():
        f.unlink()


def compare(tmp: Path, ours: Callable[[Path], None], theirs: Callable[[Path], None], rounds: int) -> Tuple[float, float]:
    """Median seconds of ``ours`` and ``theirs``, each writing a fresh file in ``tmp``, alternating."""
    a: List[float] = []
    b: List[float] = []
    kp, sp = tmp / "m.kiln", tmp / "m.safetensors"
    for i in range(rounds + 1):  # round 0 warms up (first-call costs), not counted
        order = [(ours, kp, a), (theirs, sp, b)]
        for f, p, into in order if i % 2 == 0 else order[::-1]:
            remove(tmp)
            t = timed(lambda: f(p))
            if i:
                into.append(t)
    remove(tmp)
    return statistics.median(a), statistics.median(b)


def fmt_t(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="4 MiB and 1 MiB, 2 rounds")
    ap.add_argument("--rounds", type=int, default=0, help="rounds per row (default 5 at 1 GiB, 15 below)")
    ap.add_argument("--frameworks", default="numpy,torch,flax")
    ap.add_argument("--require", action="store_true", help="a framework that is not installed is an error")
    ap.add_argument("--only", choices=["1GiB", "1MiB", "10000"], help="one checkpoint")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target ratio is missed (not with --smoke)")
    args = ap.parse_args()
    sizes = [("4 MiB, 300 tensors", 300, 4 << 20), ("1 MiB, 8 tensors", 8, 1 << 20)] if args.smoke else [
        ("1 GiB, 300 tensors", 300, 1 << 30), ("1 MiB, 8 tensors", 8, 1 << 20),
        ("10,000 tensors, 2.4 MiB", 10_000, 10_000 * 256)]
    if args.only:
        sizes = [s for s in sizes if s[0].replace(",", "").replace(" ", "").startswith(args.only)]
    fws = frameworks(args.frameworks.split(","), args.require)
    print(f"kiln {kiln.__version__}, safetensors {safetensors.__version__}, numpy {np.__version__}, "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average at start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; medians", flush=True)
    print("| framework | checkpoint | mode | rounds | Kiln | safetensors | **Kiln / safetensors** | target |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    missed = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("KILN_BENCH_DIR")) as d:
        tmp = Path(d)
        for label, count, total in sizes:
            base = checkpoint(total, count)
            rounds = args.rounds or (2 if args.smoke else 5 if total >= 256 << 20 else 15)
            for fw, convert, ksave, ssave in fws:
                tensors = convert(base)

                def k_sync(p: Path, ksave: Callable[..., None] = ksave, tensors: Any = tensors) -> None:
                    ksave(tensors, p)
                    fsync_path(p)

                def s_sync(p: Path, ssave: Callable[..., None] = ssave, tensors: Any = tensors) -> None:
                    ssave(tensors, str(p))
                    fsync_path(p)

                modes: List[Tuple[str, Callable[[Path], None], Callable[[Path], None], float]] = [
                    ("fsync", k_sync, s_sync, 1.0),
                    ("no fsync", lambda p, ksave=ksave, tensors=tensors: ksave(tensors, p),
                     lambda p, ssave=ssave, tensors=tensors: ssave(tensors, str(p)), 1.2),
                ]
                if count < 10_000:
                    modes.append(("digests=False, no fsync",
                                  lambda p, ksave=ksave, tensors=tensors: ksave(tensors, p, digests=False),
                                  lambda p, ssave=ssave, tensors=tensors: ssave(tensors, str(p)), 0.0))
                for mode, ours, theirs, target in modes:
                    k, s = compare(tmp, ours, theirs, rounds)
                    ok = "" if not target else ("met" if k / s <= target else "**missed**")
                    if target and k / s > target and count < 10_000:
                        missed.append(f"{fw} {label} {mode}")
                    print(f"| {fw} | {label} | {mode} | {rounds} | {fmt_t(k)} | {fmt_t(s)} | **{k / s:.2f}x** | "
                          f"{f'<= {target}x {ok}' if target else ''} |", flush=True)
                del tensors
    print(f"load average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.check and not args.smoke and missed:
        print("missed:", ", ".join(missed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
