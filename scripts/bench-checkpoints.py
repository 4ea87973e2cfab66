#!/usr/bin/env python3
"""Checkpoint conversion, side by side in one run (issues: real checkpoints, 41).

    python3 scripts/bench-checkpoints.py                 # 4 GiB, 4 shards (docs/performance.md's figures)
    python3 scripts/bench-checkpoints.py --single --gib 1   # one file + 200,000 tensors (docs/conversion.md)
    python3 scripts/bench-checkpoints.py --mib 64 --runs 1 --check   # the smoke size CI runs
    python3 scripts/bench-checkpoints.py --single --mib 64 --tensors 2000 --runs 1   # its --single part
    KILN=/path/to/kiln python3 scripts/bench-checkpoints.py ...   # that binary, not a fresh build

Writes a Hugging Face-layout checkpoint (4 safetensors shards and
model.safetensors.index.json, bf16/f32 tensors, by the real `safetensors`
writer), then, with a warm page cache, alternating runs of:

  convert   `kiln convert --no-fsync INDEX -o OUT/m.kiln` (digests included)
            against `sha256sum SHARDS` followed by `cat SHARDS > ONE`
            (read, hash and write once each; `cp` would time the kernel's
            copy_file_range, not a copy)
  validate  `kiln validate OUT/m.kiln` (every digest) against
            `sha256sum` over the same output files, as a throughput ratio

and prints medians and ratios. --single instead converts one safetensors
file of that size (random f32, 128 MiB tensors) and one of --tensors
one-element tensors (a many-tensor header; a sharded Kiln model out), each
with fsync (the default) and with --no-fsync, against `cat IN > OUT` and
`sha256sum IN` + `cat IN > OUT` (and both followed by `sync OUT`, the
fsync's counterpart), runs interleaved. --check fails (exit 1) when the ratios miss
the targets (convert within 1.3x, validate at least 0.8x sha256sum's
throughput); the smoke size only checks that everything runs.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kiln_binary() -> Path:
    if os.environ.get("KILN"):  # a binary built before (a shared target folder may be rebuilt meanwhile)
        return Path(os.environ["KILN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "kiln-cli"], cwd=ROOT, check=True)
    return target / "release" / "kiln"


def write_checkpoint(folder: Path, total: int, shards: int) -> list:
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    per_shard = total // shards
    weight_map, files, total_size = {}, [], 0
    rng = np.random.default_rng(7)
    for k in range(shards):
        name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {}
        left = per_shard
        i = 0
        while left > 0:
            n = min(left, 64 << 20)
            if i % 2 == 0:
                a = rng.integers(0, 1 << 16, n // 2, dtype=np.uint16).view(np.uint16)
                key = f"model.layers.{k}.{i}.weight"
            else:
                a = rng.standard_normal(n // 4, dtype=np.float32)
                key = f"model.layers.{k}.{i}.bias"
            tensors[key] = a
            left -= a.nbytes
            total_size += a.nbytes
            weight_map[key] = name
            i += 1
        save_file(tensors, str(folder / name))
        files.append(folder / name)
    index = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return files


def write_single(path: Path, total: int) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    per = 128 << 20
    n = max(1, total // per)
    tensors = {f"layers.{i}.weight": rng.integers(0, 1 << 31, min(per, total) // 4, dtype=np.uint32).view(np.float32)
               for i in range(n)}
    save_file(tensors, str(path), metadata={"format": "pt"})


def write_many(path: Path, count: int) -> None:
    """`count` one-element f32 tensors named like a mixture of experts' (the header by hand: fast)."""
    import struct

    parts = [f'"model.layers.{i // 1000:03d}.mlp.experts.{i:06d}.w":'
             f'{{"dtype":"F32","shape":[1],"data_offsets":[{4 * i},{4 * i + 4}]}}' for i in range(count)]
    head = ("{" + ",".join(parts) + "}").encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + bytes(4 * count))


def single(kiln: Path, work: Path, total: int, count: int, runs: int) -> None:
    """One file in, with fsync and without, against cat and sha256sum + cat: medians and ratios."""
    big, many = work / "one.safetensors", work / "many.safetensors"
    write_single(big, total)
    write_many(many, count)
    out, copy = work / "out", work / "copy.bin"
    for src in (big, many):
        size = src.stat().st_size
        cases = {
            "kiln convert": [str(kiln), "convert", "-q", str(src), "-o", str(out / "m.kiln")],
            "kiln convert --no-fsync": [str(kiln), "convert", "-q", "--no-fsync", str(src), "-o", str(out / "m.kiln")],
            "cat IN > OUT": ["sh", "-c", 'cat "$0" > "$1"', str(src), str(copy)],
            "cat IN > OUT; sync OUT": ["sh", "-c", 'cat "$0" > "$1"; sync "$1"', str(src), str(copy)],
            "sha256sum IN; cat IN > OUT": ["sh", "-c", 'sha256sum "$0" >/dev/null; cat "$0" > "$1"', str(src), str(copy)],
            "sha256sum IN; cat IN > OUT; sync OUT":
                ["sh", "-c", 'sha256sum "$0" >/dev/null; cat "$0" > "$1"; sync "$1"', str(src), str(copy)],
        }
        times = {k: [] for k in cases}
        shards = 0
        for run in range(runs + 1):  # the first run warms the page cache and is not counted
            for name, cmd in cases.items():
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                copy.unlink(missing_ok=True)
                t = timed(cmd, stderr=subprocess.DEVNULL)  # notes (-q keeps them)
                if name.startswith("kiln"):
                    shards = len(list(out.iterdir()))
                if run:
                    times[name].append(t)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{src.name}: {size / (1 << 20):.1f} MiB, {runs} runs interleaved, medians, warm page cache"
              f" (kiln's output: {shards} file{'s' if shards > 1 else ''})")
        for name, t in med.items():
            print(f"  {name:38s} {t:8.3f} s")
        for kiln_case, base in (("kiln convert --no-fsync", ""), ("kiln convert", "; sync OUT")):
            for b in ("cat IN > OUT", "sha256sum IN; cat IN > OUT"):
                print(f"  {kiln_case} / {b + base}: {med[kiln_case] / med[b + base]:.2f}x")


def timed(cmd, **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=4.0, help="checkpoint size in GiB (default 4)")
    ap.add_argument("--mib", type=float, help="checkpoint size in MiB (overrides --gib)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", type=Path, help="work folder (default: a temporary folder)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio misses its target")
    ap.add_argument("--single", action="store_true", help="one file in (and a many-tensor one), not a sharded checkpoint")
    ap.add_argument("--tensors", type=int, default=200_000, help="--single: the many-tensor file's tensors")
    args = ap.parse_args()
    total = int((args.mib * (1 << 20)) if args.mib else args.gib * (1 << 30))
    kiln = kiln_binary()
    work = args.dir or Path(tempfile.mkdtemp(prefix="kiln-bench-"))
    try:
        if args.single:
            single(kiln, work, total, args.tensors, args.runs)
            return 0
        src = work / "hf"
        files = write_checkpoint(src, total, args.shards)
        index = src / "model.safetensors.index.json"
        out = work / "out"
        one = work / "one.bin"
        convert, baseline, validate, hashing = [], [], [], []
        for run in range(args.runs + 1):  # the first run warms the page cache and is not counted
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            c = timed([str(kiln), "convert", "--no-fsync", "-q", str(index), "-o", str(out / "m.kiln")])
            outputs = sorted(str(p) for p in out.iterdir())
            b = timed(["sha256sum", *map(str, files)])
            t = time.perf_counter()
            with open(one, "wb") as f:
                subprocess.run(["cat", *map(str, files)], check=True, stdout=f)
            b += time.perf_counter() - t
            v = timed([str(kiln), "validate", str(out / "m.kiln")])
            h = timed(["sha256sum", *outputs])
            if run:
                convert.append(c)
                baseline.append(b)
                validate.append(v)
                hashing.append(h)
        size = sum(p.stat().st_size for p in out.iterdir())
        med = statistics.median
        conv_ratio = med(convert) / med(baseline)
        val_ratio = med(hashing) / med(validate)  # throughput of validate relative to sha256sum
        print(f"checkpoint: {total / (1 << 30):.2f} GiB in {args.shards} shards; output {size / (1 << 30):.2f} GiB "
              f"({len(list(out.iterdir()))} files); {args.runs} runs, medians, warm page cache")
        print(f"kiln convert --no-fsync   {med(convert):8.3f} s")
        print(f"sha256sum + cat           {med(baseline):8.3f} s    convert / baseline = {conv_ratio:.2f}x (target <= 1.3x)")
        print(f"kiln validate             {med(validate):8.3f} s  {size / med(validate) / 1e9:6.2f} GB/s")
        print(f"sha256sum                 {med(hashing):8.3f} s  {size / med(hashing) / 1e9:6.2f} GB/s"
              f"    validate throughput / sha256sum = {val_ratio:.2f}x (target >= 0.8x)")
        if args.check and (conv_ratio > 1.3 or val_ratio < 0.8):
            print("bench-checkpoints: a ratio misses its target", file=sys.stderr)
            return 1
        return 0
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
