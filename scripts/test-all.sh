#!/usr/bin/env bash
# Every test of the project, on a fresh clone or a warm machine: installs what
# is missing (scripts/setup.sh), then runs each suite and reports which failed.
# This is the README's test command; CI runs it through .ci/run.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/setup.sh || { echo "setup failed" >&2; exit 1; }

failed=()
started=$(date +%s)
run() {
    local name=$1; shift
    local t0; t0=$(date +%s)
    echo; echo "=== $name: $*"
    if "$@"; then
        echo "=== $name: ok ($(( $(date +%s) - t0 )) s)"
    else
        echo "=== $name: FAILED ($(( $(date +%s) - t0 )) s)"
        failed+=("$name")
    fi
}

# Host workspace: format, lints, then every Rust test (unit, integration, doc, CLI).
run fmt cargo fmt --all --check
run clippy cargo clippy --workspace --all-targets --locked -- -D warnings
run clippy-features cargo clippy -p kiln-nostd --all-targets --all-features --locked -- -D warnings
run cargo-test cargo test --workspace --locked
run cargo-test-features cargo test -p kiln-nostd --all-features --locked
# The reference codec and the golden generator (the generator check also runs in cargo-test).
run python-reference python3 -m unittest discover -s spec/reference

# A 32-bit host: the core's whole suite (rules, properties, differential,
# incremental, ranged reading) where usize is 32 bits and the 64-bit-only
# fast paths are compiled out, so the 32-bit code paths run, not just build.
run i686 cargo test -p kiln-nostd --features alloc,derive,sha2,std --locked --target i686-unknown-linux-gnu

# The no_std core builds for the three targets of the design card, with and
# without defmt; the nopanic binary below links without any allocator.
for t in thumbv7em-none-eabihf thumbv6m-none-eabi wasm32-unknown-unknown; do
    run "no_std-$t" cargo build -p kiln-nostd --release --locked --target "$t"
done
run no_std-defmt cargo build -p kiln-nostd --release --locked --target thumbv7em-none-eabihf --features defmt

# Windows and macOS: the host crates (all but the wasm-only kiln-wasm), with
# their tests and benches, and kiln-nostd with every feature, must build there
# too. Checked, not run (no linker needed; see the README's Platforms note).
# Clippy is `cargo check` plus lints, so code behind #[cfg(windows)] and
# #[cfg(target_os = "macos")] is linted as well.
desktop_check() {
    cargo clippy --workspace --exclude kiln-wasm --all-targets --locked --target "$1" -- -D warnings &&
        cargo clippy -p kiln-nostd --all-targets --all-features --locked --target "$1" -- -D warnings
}
for t in x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin; do
    run "check-$t" desktop_check "$t"
done

# Firmware: the QEMU demo (and its defmt log, decoded) and the no-panic link
# proof (the core's API and every C entry point).
run firmware firmware-demo/ci.sh

# The C API: kiln.h current, libkiln.a for the host and Cortex-M, the C test
# program (ASan/UBSan) against the Rust verdicts, C++, the README example via
# CMake; then the C firmware demo built with CMake and run under QEMU.
run c-api kiln-c/ci.sh
run firmware-c firmware-c/ci.sh

# Browser: the npm package under Node, then the page in headless Chromium.
run wasm-and-web kiln-wasm/ci.sh

# The Python package as a user installs it (`pip install ./kiln-py`: maturin
# from PyPI builds the abi3 extension), its Rust lints, then its pytest suite
# (goldens, differential, round trips, CLI and npm interop, mypy --strict);
# after the npm package is built, so the interop test reads files with it.
# The cargo cache sits outside the clone, so a rerun rebuilds only what changed.
kiln_py() {
    local target="${KILN_PY_TARGET:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-py-target}"
    CARGO_TARGET_DIR="$target" cargo fmt --manifest-path kiln-py/Cargo.toml --check &&
        CARGO_TARGET_DIR="$target" cargo clippy --manifest-path kiln-py/Cargo.toml --locked --all-targets -q -- -D warnings &&
        CARGO_TARGET_DIR="$target" PIP_ROOT_USER_ACTION=ignore \
            python3 -m pip install -q --disable-pip-version-check ./kiln-py &&
        python3 -m pytest kiln-py/tests -q -p no:cacheprovider
}
run python-package kiln_py

# Hostile input: fuzz smoke runs, differential testing, Miri, big-endian, memory bounds.
run robustness scripts/robustness-ci.sh

echo
echo "total $(( $(date +%s) - started )) s"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all suites passed"
