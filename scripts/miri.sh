#!/usr/bin/env bash
# Undefined-behaviour check: every test of kiln-nostd (unit and integration)
# under Miri, on x86_64 (little-endian) and s390x (big-endian). CI runs a
# seeded sample of the same tests within a time budget (scripts/budget.py);
# this runs them all (about 15 minutes per target on 2 cores).
#
#   scripts/miri.sh                                      # both targets
#   MIRI_TARGETS=s390x-unknown-linux-gnu scripts/miri.sh
#   scripts/miri.sh --write-costs                        # and refresh scripts/costs/
#
# Tests that spawn python3 are #[cfg_attr(miri, ignore)] (Miri cannot run a
# process); the proptest and incremental tests take fewer cases under cfg(miri).
# On s390x, KILN_EXPECT_BIG_ENDIAN=1 makes byte_order assert the run was big-endian.
# MIRIFLAGS: -Zmiri-deterministic-floats because the mx tests compare exact
# results of powi, which Miri otherwise perturbs on purpose; proptest needs
# getcwd for its failure persistence, hence -Zmiri-disable-isolation.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for target in ${MIRI_TARGETS:-x86_64-unknown-linux-gnu s390x-unknown-linux-gnu}; do
    python3 scripts/budget.py miri "$target" --full "$@" || status=1
done
exit $status
