#!/usr/bin/env bash
# The robustness suites in full, locally (CI runs each on a time budget over a
# seeded sample; see scripts/test-all.sh):
#   1. Miri: every kiln-nostd test, x86_64 and s390x (scripts/miri.sh)
#   2. the whole kiln-nostd suite big-endian under qemu-s390x (scripts/big-endian.sh)
#   3. every fuzz target for FUZZ_SECONDS (default 60) s, convert_* half of it (fuzz/ci.sh)
# Each step prints its time; the script exits 1 if any failed. About 45 minutes
# on 2 cores. With --write-costs, steps 1 and 2 also rewrite the per-test
# seconds in scripts/costs/ that CI's samples are drawn against.
#
#   scripts/robustness-full.sh
#   FUZZ_SECONDS=600 scripts/robustness-full.sh --write-costs
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh apt rust cargo-fuzz python || exit 1
fail=0
step() {
    local name=$1 t0=$SECONDS
    shift
    echo "################ $name: $*"
    if "$@"; then echo "################ $name: ok ($((SECONDS - t0)) s)"; else echo "################ $name: FAILED ($((SECONDS - t0)) s)"; fail=1; fi
}
step miri scripts/miri.sh "$@"
step big-endian scripts/big-endian.sh "$@"
step fuzz fuzz/ci.sh "${FUZZ_SECONDS:-60}"
# Issue 24's bound on the full 500,000-name index (CI converts 20,000 names).
step rss-index env KILN_RSS_NAMES=500000 cargo test --release -p kiln-cli --test convert_hardening -- --nocapture p24
exit $fail
