#!/usr/bin/env bash
# The Python package as a user installs it, its Rust format and lints, then its
# pytest suite (goldens, differential, round trips, CLI and npm interop, mypy
# --strict, the stub against the module).
#
#   scripts/python-package.sh          pip install ./kiln-py (maturin from PyPI builds it)
#   scripts/python-package.sh WHEEL    pip install WHEEL: CI passes the wheel that
#                                      scripts/python-wheel.sh built and audited, so the
#                                      tests run on what would be published, built once
# Run after kiln-wasm/ci.sh: the interop test reads files with the built npm
# package. The cargo build goes to CARGO_TARGET_DIR (scripts/run-suites.py
# points it at the shared target directory outside the clone), so a rerun
# rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/target}
cargo fmt --manifest-path kiln-py/Cargo.toml --check
cargo clippy --manifest-path kiln-py/Cargo.toml --locked --all-targets -q -- -D warnings
# The import name kiln has one owner: the last install first (pip would keep a wheel of the
# same version), and a distribution of the package's earlier name, kiln, whose files share the
# folder (kiln-py/README.md, "Beside the other kiln on PyPI").
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip uninstall -y -qq kiln kiln-format
python3 -m pip install -q "${1:-./kiln-py}"
# The npm side of tests/test_onnx_agree.py (kiln-wasm/pkg, built before this) must be there.
KILN_REQUIRE_NPM=1 python3 -m pytest kiln-py/tests -q -p no:cacheprovider
