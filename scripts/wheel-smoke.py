#!/usr/bin/env python3
"""A built wheel of kiln-py as a user gets it from PyPI (scripts/python-wheel.sh runs this):

    scripts/wheel-smoke.py target/wheels/kiln_format-*.whl

Checks its name and tags (distribution kiln-format, cp311-abi3, manylinux2014 x86_64), asks
auditwheel (`auditwheel show --json`) that it is manylinux_2_17 with no external library, then
for each CPython 3.11+ found (python3; python3.12 and python3.13 on PATH or in pyenv) makes a fresh venv,
installs the wheel alone (NumPy from PyPI), and runs SMOKE there from an empty folder, so that
the installed package, not a source tree, is what imports.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DIST = "kiln-format"
TAG = "cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64"

# Run by the venv's interpreter: argv[1] is the venv's folder.
SMOKE = r"""
import importlib.metadata as md, mmap, os, sys
import numpy as np, kiln, kiln.numpy
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(kiln.__file__).startswith(venv + os.sep), kiln.__file__
assert md.version("kiln-format") == kiln.__version__, (md.version("kiln-format"), kiln.__version__)
assert md.packages_distributions()["kiln"] == ["kiln-format"], md.packages_distributions()["kiln"]
shipped = {str(f) for f in md.files("kiln-format")}
assert {"kiln/py.typed", "kiln/_kiln.pyi"} <= shipped, sorted(shipped)
assert any(f.startswith("kiln/_kiln.") and f.endswith(".abi3.so") for f in shipped), sorted(shipped)
w = np.arange(12, dtype=np.float32).reshape(3, 4)
kiln.numpy.save_file({"w": w, "b": np.ones(4, np.int64)}, "m.kiln", {"by": "smoke"})
kiln.validate("m.kiln")
got = kiln.numpy.load_file("m.kiln")
assert got["w"].dtype == np.float32 and (got["w"] == w).all() and not got["w"].flags.writeable
with kiln.safe_open("m.kiln", framework="numpy") as f:
    assert f.metadata()["by"] == "smoke" and (f.get_slice("w")[1:, :2] == w[1:, :2]).all()
# The buffer protocol (PyObject_GetBuffer, stable ABI since 3.11): bytes, bytearray, memoryview, mmap.
raw = open("m.kiln", "rb").read()
with open("m.kiln", "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
    for data in (raw, bytearray(raw), memoryview(raw), mm):
        kiln.validate(data)
assert kiln.decode(bytearray(kiln.encode(["a", "bc"], "list<str>")), "list<str>") == ["a", "bc"]
print(f"smoke ok: Python {sys.version.split()[0]}, kiln-format {kiln.__version__}, NumPy {np.__version__}")
"""


def run(cmd, **kw):
    print("$", " ".join("SMOKE" if c is SMOKE else str(c) for c in cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def interpreters():
    """python3 (3.11+, required), then the newer CPythons that happen to be installed (on PATH,
    or among pyenv's versions, which this machine kind has)."""
    found = [shutil.which("python3")]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for v in ("3.12", "3.13"):
        cands = [shutil.which(f"python{v}")] + sorted(map(str, pyenv.glob(f"{v}.*/bin/python{v}")))
        exe = next((c for c in cands if c and subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0), None)
        print(f"python{v}: {exe or 'not installed here, not smoke-tested'}")
        if exe:
            found.append(exe)
    return found


def main():
    wheel = Path(sys.argv[1]).resolve()
    name, version, *tags = wheel.stem.split("-")
    assert name == DIST.replace("-", "_") and "-".join(tags) == TAG, f"{wheel.name}: want {DIST} tagged {TAG}"
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"{name}-{version}.dist-info/METADATA").decode()
    assert f"Name: {DIST}\n" in meta and "Requires-Python: >=3.11\n" in meta, meta[:400]
    show = json.loads(run([sys.executable, "-m", "auditwheel", "show", "--json", str(wheel)],
                          capture_output=True, text=True).stdout)
    assert show["overall_tag"] == "manylinux_2_17_x86_64" and not show["external_libs"], show
    print(f"auditwheel: {show['overall_tag']}, glibc symbols {show['versioned_symbols'].get('libc.so.6')}")
    for exe in interpreters():
        with tempfile.TemporaryDirectory(prefix="kiln-wheel-") as tmp:
            venv = Path(tmp) / "venv"
            run([exe, "-m", "venv", venv])
            py = venv / "bin" / "python"
            run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel])
            work = Path(tmp) / "work"
            work.mkdir()
            run([py, "-c", SMOKE, venv], cwd=work)
    print("wheel ok")


if __name__ == "__main__":
    main()
