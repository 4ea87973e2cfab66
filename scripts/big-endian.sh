#!/usr/bin/env bash
# The full kiln-nostd test suite, compiled for s390x-unknown-linux-gnu
# (big-endian) and run natively under qemu-user.
#
#   scripts/big-endian.sh                 # every test target, all features
#   scripts/big-endian.sh --test byte_order
#
# KILN_EXPECT_BIG_ENDIAN=1 makes tests/byte_order.rs assert
# cfg!(target_endian = "big"), proving the run really was big-endian.
# The differential test runs too: the s390x build of the core against the
# host's python3 reference (qemu-user starts host binaries natively).
# Doc tests are not run for a cross target (they would need -Zdoctest-xcompile).
# Needs: rustup target s390x-unknown-linux-gnu, gcc-s390x-linux-gnu,
# libc6-dev-s390x-cross, qemu-user (scripts/robustness-ci.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER=${CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER:-s390x-linux-gnu-gcc}
export CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_RUNNER=${CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_RUNNER:-"qemu-s390x -L /usr/s390x-linux-gnu"}
export KILN_EXPECT_BIG_ENDIAN=1
rustup target list --installed | grep -q '^s390x-unknown-linux-gnu$' || rustup target add s390x-unknown-linux-gnu
if [ $# -eq 0 ]; then set -- --lib --tests; fi
cargo test --no-fail-fast -p kiln-nostd --all-features --target s390x-unknown-linux-gnu "$@"
