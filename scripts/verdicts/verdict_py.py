"""The Python front end of the cross-front-end verdict test (verdicts.py): one JSON line per
call and file. Argument: {name: path} as JSON."""

import json
import sys
from pathlib import Path

import kiln
import kiln.flax
import kiln.numpy
import kiln.torch


def opened(path):
    with kiln.open(path) as f:
        for k in f.keys():
            f.get_tensor(k)  # a manifest's shards are checked when first used
        return {"digests_checked": f.digests_verified}


def safe_open(path):
    with kiln.safe_open(path) as f:
        for k in f.keys():
            f.get_tensor(k)
        return {"digests_checked": f.digests_verified}


# (the call, given a path, the call: None, or what it reports beside the verdict); a call named
# "X as ROW" is judged by ROW's cells (the flax loaders share the torch loaders' row)
CALLS = [
    ("kiln.validate", True, lambda path: {"digests_checked": kiln.validate(path).digests_verified}),
    ("kiln.open", True, opened),
    ("kiln.safe_open", True, safe_open),
    ("kiln.numpy.load_file", True, lambda path: kiln.numpy.load_file(path) and None),
    ("kiln.numpy.load", False, lambda path: kiln.numpy.load(Path(path).read_bytes()) and None),
    ("kiln.torch.load_file", True, lambda path: kiln.torch.load_file(path) and None),
    ("kiln.torch.load", False, lambda path: kiln.torch.load(Path(path).read_bytes()) and None),
    ("kiln.flax.load_file as kiln.torch.load_file", True, lambda path: kiln.flax.load_file(path) and None),
    ("kiln.flax.load as kiln.torch.load", False, lambda path: kiln.flax.load(Path(path).read_bytes()) and None),
]

for name, path in json.loads(sys.argv[1]).items():
    for call, by_path, run in CALLS:
        try:
            v = {"ok": True, **(run(path) or {})}
        except kiln.KilnError as e:
            v = {"ok": False, "code": e.code, "offset": e.offset}
        call, _, row = call.partition(" as ")
        print(json.dumps({"call": call, "row": row or call, "by_path": by_path, "file": name, **v}))
