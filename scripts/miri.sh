#!/usr/bin/env bash
# Undefined-behaviour check: the core's unit and property tests under Miri,
# on x86_64 (little-endian) and s390x (big-endian).
#
#   scripts/miri.sh                              # both targets
#   MIRI_TARGETS=s390x-unknown-linux-gnu scripts/miri.sh
#
# The reduced set (a few minutes per target on 2 cores):
#   --lib            unit tests of every module (directory, names, quant, frozen, hk, mx, ...)
#   rules            one test per directory rule
#   regressions      the GGUF bug classes (directory, Frozen, HK)
#   byte_order       views refused or correct, byte-swapped copies, writer = golden bytes
#   directory_props  proptest, 8 cases per property under cfg(miri)
#   frozen           Frozen rulings, typed API, views
#   incremental      the incremental validator against Parser (a sample under cfg(miri))
#   model            model files: metadata, the Frozen reader's verdicts, the writer
# Left out: frozen_props (400 proptest cases, not reduced under Miri, and
# one test spawns python3), differential (spawns python3), alloc_bounds
# (a counting global allocator over 10,000-tensor directories: too slow
# interpreted; it has no unsafe of its own beyond forwarding to System).
#
# On s390x, KILN_EXPECT_BIG_ENDIAN=1 makes byte_order assert the run was big-endian.
# MIRIFLAGS: -Zmiri-deterministic-floats because the mx tests compare exact
# results of powi, which Miri otherwise perturbs on purpose; proptest needs
# getcwd for its failure persistence, hence -Zmiri-disable-isolation.
set -euo pipefail
cd "$(dirname "$0")/.."
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-deterministic-floats -Zmiri-disable-isolation}"
TARGETS=${MIRI_TARGETS:-"x86_64-unknown-linux-gnu s390x-unknown-linux-gnu"}
FEATURES=${MIRI_FEATURES:-alloc,derive,sha2}

rustup +nightly component list --installed | grep -q '^miri' || rustup +nightly component add miri rust-src
status=0
for target in $TARGETS; do
  start=$(date +%s)
  echo "== miri on $target"
  big=0
  case $target in s390x-*|powerpc-*|powerpc64-*|mips-*|mips64-*|sparc64-*) big=1 ;; esac
  if KILN_EXPECT_BIG_ENDIAN=$big cargo +nightly miri test --no-fail-fast -p kiln-nostd --features "$FEATURES" --target "$target" \
      --lib --test rules --test regressions --test byte_order --test directory_props --test frozen --test incremental --test model; then
    echo "== miri on $target: ok ($(( $(date +%s) - start ))s)"
  else
    echo "== miri on $target: FAILED ($(( $(date +%s) - start ))s)"
    status=1
  fi
done
exit $status
