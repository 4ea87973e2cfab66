#!/usr/bin/env python3
"""Two ways to write a large file, alone: a populated shared map of a new file filled by copies
(kiln-py's large-file save before it streamed) against one `write` per array (the streamed save,
`ModelWriter::write_to`, and safetensors), 1 GiB in 256 arrays, fsync off and on, alternating,
medians of 4 (docs/performance.md, saving).

    python3 kiln-py/bench/write_paths.py [DIR]   # DIR: where to write (default: the temporary folder)
"""
import mmap
import os
import statistics
import sys
import tempfile
import time

import numpy as np

DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
BASE = np.random.default_rng(0).standard_normal(1 << 20, dtype=np.float32).astype(np.float16)
ARRAYS = [np.tile(BASE, 2) for _ in range(256)]  # 256 x 4 MiB = 1 GiB
TOTAL = sum(a.nbytes for a in ARRAYS)


def via_map(path: str, sync: bool) -> None:
    """A new file of TOTAL bytes, mapped shared and populated, filled by copies (kiln-py's large-file path)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    os.ftruncate(fd, TOTAL)
    m = mmap.mmap(fd, TOTAL, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    view = np.frombuffer(m, np.uint8)
    at = 0
    for a in ARRAYS:
        b = a.view(np.uint8)
        view[at:at + b.size] = b
        at += b.size
    del view
    if sync:
        m.flush()
        os.fsync(fd)
    m.close()
    os.close(fd)


def via_write(path: str, sync: bool) -> None:
    """One write per array from its own memory (safetensors' path)."""
    with open(path, "xb", buffering=0) as f:
        for a in ARRAYS:
            f.write(memoryview(a).cast("B"))
        if sync:
            os.fsync(f.fileno())


def main() -> None:
    for sync in (False, True):
        res: dict = {"map": [], "write": []}
        for i in range(4):
            order = [("map", via_map), ("write", via_write)]
            for name, f in order if i % 2 == 0 else order[::-1]:
                path = os.path.join(DIR, f".write_paths.{name}")
                t = time.perf_counter()
                f(path, sync)
                res[name].append(time.perf_counter() - t)
                os.unlink(path)
        medians = {k: f"{statistics.median(v):.3f} s" for k, v in res.items()}
        print("fsync" if sync else "no fsync", medians, flush=True)


if __name__ == "__main__":
    main()
