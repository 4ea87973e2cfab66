#!/usr/bin/env bash
# The full kiln-nostd test suite, compiled for s390x-unknown-linux-gnu
# (big-endian) and run natively under qemu-user. CI runs a seeded sample of it
# within a time budget (scripts/budget.py big-endian); this runs all of it.
#
#   scripts/big-endian.sh                  # every test target, all features
#   scripts/big-endian.sh --write-costs    # and refresh scripts/costs/big-endian.tsv
#
# KILN_EXPECT_BIG_ENDIAN=1 makes tests/byte_order.rs assert
# cfg!(target_endian = "big"), proving the run really was big-endian.
# The differential test runs too: the s390x build of the core against the
# host's python3 reference (qemu-user starts host binaries natively).
# Doc tests are not run for a cross target (they would need -Zdoctest-xcompile).
# Needs: rustup target s390x-unknown-linux-gnu, gcc-s390x-linux-gnu,
# libc6-dev-s390x-cross, qemu-user (scripts/setup.sh apt rust).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/budget.py big-endian --full "$@"
