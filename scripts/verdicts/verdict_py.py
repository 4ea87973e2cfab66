"""The Python front end of the cross-front-end verdict test (verdicts.py): one JSON line per
call and file. Argument: {name: path} as JSON."""

import json
import sys
from pathlib import Path

import kiln
import kiln.numpy


def opened(path):
    with kiln.open(path) as f:
        for k in f.keys():
            f.get_tensor(k)  # a manifest's shards are checked when first used


def safe_open(path):
    with kiln.safe_open(path) as f:
        for k in f.keys():
            f.get_tensor(k)


# (the row's call, given a path, the call)
CALLS = [
    ("kiln.validate", True, kiln.validate),
    ("kiln.open", True, opened),
    ("kiln.safe_open", True, safe_open),
    ("kiln.numpy.load_file", True, kiln.numpy.load_file),
    ("kiln.numpy.load", False, lambda path: kiln.numpy.load(Path(path).read_bytes())),
]

for name, path in json.loads(sys.argv[1]).items():
    for call, by_path, run in CALLS:
        try:
            run(path)
            v = {"ok": True}
        except kiln.KilnError as e:
            v = {"ok": False, "code": e.code, "offset": e.offset}
        print(json.dumps({"call": call, "by_path": by_path, "file": name, **v}))
