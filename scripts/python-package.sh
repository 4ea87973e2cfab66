#!/usr/bin/env bash
# The Python package as a user installs it (`pip install ./kiln-py`: maturin from
# PyPI builds the abi3 extension), its Rust format and lints, then its pytest
# suite (goldens, differential, round trips, CLI and npm interop, mypy --strict).
# Run after kiln-wasm/ci.sh: the interop test reads files with the built npm
# package. The cargo build goes to CARGO_TARGET_DIR (scripts/run-suites.py
# points it at the shared target directory outside the clone), so a rerun
# rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/target}
cargo fmt --manifest-path kiln-py/Cargo.toml --check
cargo clippy --manifest-path kiln-py/Cargo.toml --locked --all-targets -q -- -D warnings
PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check ./kiln-py
# The npm side of tests/test_onnx_agree.py (kiln-wasm/pkg, built before this) must be there.
KILN_REQUIRE_NPM=1 python3 -m pytest kiln-py/tests -q -p no:cacheprovider
