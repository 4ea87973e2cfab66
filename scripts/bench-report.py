#!/usr/bin/env python3
"""Prints criterion results as docs/performance.md's tables: time per item and the
ratio against the baseline measured in the same run.

    cargo bench -p kiln-nostd --bench directory && scripts/bench-report.py directory
    cargo bench -p kiln-nostd --bench frozen && scripts/bench-report.py frozen
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"


def estimate(*parts):
    path = ROOT.joinpath(*parts, "new", "estimates.json")
    return json.loads(path.read_text())["median"]["point_estimate"]


def directory():
    group = "parse_iterate_lookup"
    print("| tensors | kiln (scratch) ns/tensor | kiln (no scratch) ns/tensor | safetensors ns/tensor | safetensors / kiln |")
    print("|---:|---:|---:|---:|---:|")
    for n in (1, 100, 10000):
        k = estimate(group, "kiln_scratch", str(n)) / n
        q = estimate(group, "kiln_no_scratch", str(n)) / n
        s = estimate(group, "safetensors", str(n)) / n
        print(f"| {n:,} | {k:,.1f} | {q:,.1f} | {s:,.1f} | {s / k:.1f}x |")
    phases = [("parse_indexed", "parse (with the name table)"), ("iterate", "iterate"), ("lookup", "look up every name")]
    if all((ROOT / "phases" / p / "new").exists() for p, _ in phases):
        print()
        print("| phase, 10,000 tensors | ns/tensor |")
        print("|---|---:|")
        for p, what in phases:
            print(f"| {what} | {estimate('phases', p) / 10000:,.1f} |")


def frozen():
    group = ROOT / "decode_record"
    base = {name: estimate("decode_record", name) for name in ("postcard_owned", "bincode_owned")}
    print("| decoder | ns per record | postcard / this | bincode / this |")
    print("|---|---:|---:|---:|")
    for d in sorted(p.name for p in group.iterdir() if (p / "new").exists()):
        t = estimate("decode_record", d)
        print(f"| {d} | {t:,.0f} | {base['postcard_owned'] / t:.1f}x | {base['bincode_owned'] / t:.1f}x |")


if __name__ == "__main__":
    {"directory": directory, "frozen": frozen}[sys.argv[1] if len(sys.argv) > 1 else "directory"]()
