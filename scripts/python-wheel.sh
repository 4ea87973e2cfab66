#!/usr/bin/env bash
# The wheel PyPI would get: maturin builds kiln-py as one manylinux2014 x86_64 abi3 wheel for
# CPython 3.11 and later (zig links it against glibc 2.17's symbols: built on this Debian 12
# machine, glibc 2.36, it would otherwise need manylinux_2_34). Then:
#   - maturin's own manylinux audit (--auditwheel check): the build fails on a glibc symbol newer
#     than manylinux2014 allows or on a shared library the wheel would need from the system;
#   - abi3audit --strict: every CPython symbol it uses is in the stable ABI of its tag (3.11);
#   - scripts/wheel-smoke.py: auditwheel's verdict, then the wheel installed alone into a fresh
#     venv per CPython found (3.11 always), its dependencies from PyPI, and a save/load smoke.
# The wheel is left in target/wheels/; python-package installs it (scripts/python-package.sh WHEEL).
# The tools are pinned in scripts/setup.sh (part python).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/target}
out=target/wheels
rm -rf "$out"
mkdir -p "$out"
python3 -m maturin build --release --locked --zig --compatibility manylinux2014 --auditwheel check \
    --interpreter python3 --manifest-path kiln-py/Cargo.toml --out "$out"
wheels=("$out"/*.whl)
[ "${#wheels[@]}" -eq 1 ] || { echo "python-wheel: expected one wheel in $out, found: ${wheels[*]}" >&2; exit 1; }
python3 -m abi3audit --strict --verbose "${wheels[0]}"
python3 scripts/wheel-smoke.py "${wheels[0]}"
