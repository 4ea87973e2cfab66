#!/usr/bin/env python3
"""The two ways to write a large file that kiln-py chooses between, alone: a populated shared map of
a new file filled by copies (what `write_file` does from 32 MiB) against one `write` per array, 1 GiB
in 256 arrays, fsync off and on, alternating, medians of 4 (docs/performance.md, saving).

    python3 kiln-py/bench/write_paths.py [DIR]   # DIR: where to write (default: the temporary folder)
"""
import mmap
import os
import statistics
import sys
import tempfile
import time

import numpy as np
d = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
rng = np.random.default_rng(0)
base = rng.standard_normal(1 << 20, dtype=np.float32).astype(np.float16)
arrs = [np.tile(base, 2) for _ in range(256)]  # 256 x 4 MiB = 1 GiB
total = sum(a.nbytes for a in arrs)
def via_map(p, sync):
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    os.ftruncate(fd, total)
    m = mmap.mmap(fd, total, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    v = np.frombuffer(m, np.uint8)
    at = 0
    for a in arrs:
        b = a.view(np.uint8); v[at:at + b.size] = b; at += b.size
    del v
    if sync: m.flush(); os.fsync(fd)
    m.close(); os.close(fd)
def via_write(p, sync):
    with open(p, "xb", buffering=0) as f:
        for a in arrs: f.write(memoryview(a).cast("B"))
        if sync: os.fsync(f.fileno())
for sync in (False, True):
    res = {"map": [], "write": []}
    for i in range(4):
        for name, f in (("map", via_map), ("write", via_write)) if i % 2 == 0 else (("write", via_write), ("map", via_map)):
            p = os.path.join(d, name)
            t = time.perf_counter(); f(p, sync); res[name].append(time.perf_counter() - t); os.unlink(p)
    print("fsync" if sync else "no fsync", {k: round(statistics.median(v), 3) for k, v in res.items()}, flush=True)
