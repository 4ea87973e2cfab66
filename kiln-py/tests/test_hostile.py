"""Hostile inputs: every entry point raises KilnError (never crashes, never
allocates for a count the bytes cannot hold). The loops run in a child
process, so a crash fails the test instead of killing pytest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r'''
import json, os, random, resource, struct, sys, tempfile
import numpy as np
import kiln, kiln.numpy as kn

cases = json.load(open(sys.argv[1]))["cases"]
seeds = [bytes.fromhex(c["hex"]) for c in cases]
MODEL = kiln.MODEL_TYPE
model_hash = struct.pack("<Q", kiln._kiln.MODEL_HASH)
frame = b"KLN0\0\0\0\0" + model_hash

def header(count=0, names=0, payload=0, directory=None, flags=2):
    h = bytearray(64)
    h[0:4] = b"KLNT"; h[4] = 2; h[5] = flags
    struct.pack_into("<IIQQ", h, 8, count, names, payload, count * 128 + names if directory is None else directory)
    return bytes(h)

hostile = [
    header(count=0xFFFFFFFF),                         # 2^32-1 tensors in 64 bytes
    header(count=16_777_216),                         # at the cap, no bytes behind it
    header(names=0xFFFFFFFF),                         # a 4 GiB heap
    header(count=1, payload=2**64 - 1),               # 2^64-byte payload
    header(count=1, payload=2**63, directory=128),
    frame + struct.pack("<I", 0xFFFFFFFF),            # metadata claiming 2^32-1 entries
    frame + struct.pack("<II", 1, 0xFFFFFFFF),        # a 4 GiB key
    frame + struct.pack("<I", 0) + header(count=0xFFFFFFFF),
    b"", b"K", b"KLNT", b"KLN0", frame, frame[:15],
]
typed = [("list<str>", struct.pack("<I", 0xFFFFFFFF)), ("list<struct{id:u32,name:str,}>", struct.pack("<I", 0x7FFFFFFF)),
         ("dict<str,list<f64>>", struct.pack("<II", 0xFFFFFF, 0xFFFFFFFF)), ("list<list<list<u8>>>", b"\xff\xff\xff\xff" * 3),
         ("tensors", header(count=0xFFFFFFFF)), (MODEL, frame + struct.pack("<I", 0xFFFFFFFF))]

def expect_kiln_error(f, *a):
    try:
        f(*a)
    except kiln.KilnError as e:
        assert e.code in ("FRAME", "LIMIT", "EOF", "TYPE", "UTF8", "TRAILING", "SCHEMA", "DIGEST"), e
        return 1
    except ValueError as e:            # a valid file NumPy cannot hold (a dimension >= 2^63)
        assert "dimension" in str(e) or "too big" in str(e), repr(e)
        return 0
    return 0

rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
fd, path = tempfile.mkstemp(suffix=".kiln"); os.close(fd)
rejected = 0
for b in hostile:
    for _ in range(50):
        rejected += expect_kiln_error(kiln.validate, b)
        rejected += expect_kiln_error(kn.load, b)
    open(path, "wb").write(b)
    rejected += expect_kiln_error(kn.load_file, path)
    rejected += expect_kiln_error(kiln.safe_open, path)
for ty, b in typed:
    for _ in range(50):
        rejected += expect_kiln_error(kiln.decode, b, ty)
        rejected += expect_kiln_error(kiln.decode, b, ty)
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

# Mutated goldens and mutated model files through every reader.
rng = random.Random(7)
base = seeds + [kn.save({"w": np.ones((3, 4), np.float32), "b": np.array([True, False])}, {"m": "x"})]
n = 0
for i in range(int(sys.argv[2])):
    x = bytearray(rng.choice(base))
    for _ in range(rng.randint(1, 4)):
        if x and rng.random() < 0.7:
            x[rng.randrange(len(x))] = rng.randrange(256)
        elif x:
            del x[rng.randrange(len(x)):]
    x = bytes(x)
    for f in (kiln.validate, kn.load):
        try:
            r = f(x)
        except (kiln.KilnError, ValueError):
            pass
    open(path, "wb").write(x)
    try:
        with kiln.safe_open(path) as h:
            for k in h.keys():
                h.get_tensor(k); h.tensor_info(k); h.raw(k)
                if not (h.tensor_info(k).packed or h.tensor_info(k).opaque):
                    h.get_slice(k)[...]
    except (kiln.KilnError, ValueError):
        pass
    n += 1
os.unlink(path)
print(json.dumps({"rejected": rejected, "rss_growth_kib": rss1 - rss0, "mutated": n}))
'''


def test_hostile_inputs_raise_kiln_error_without_memory_growth(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "spec" / "kiln-v2-cases.json"), "3000"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"child died ({r.returncode}):\n{r.stderr[-3000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # 14 hostile buffers x (100 + 2) and 6 typed x 100 calls: every one a KilnError.
    assert out["rejected"] == 14 * 102 + 6 * 100, out
    # Claims of gigabytes cost nothing: peak RSS grows by less than 16 MiB over ~2,000 calls.
    assert out["rss_growth_kib"] < 16 * 1024, out
    assert out["mutated"] == 3000
