#!/usr/bin/env bash
# Every test of the project, on a fresh clone or a warm machine. This is the
# README's test command; CI runs it through .ci/run.
#
# scripts/run-suites.py does the work: it installs what is missing (the parts
# of scripts/setup.sh, each just before the first suite that needs it), runs
# the suites side by side on the two cores with each one's output in
# target/test-logs/, and ends with a table of suite, verdict and seconds
# against the budget (45 minutes on a new machine, 20 on a warm one). Miri,
# the big-endian suite and fuzzing run a seeded sample within a time budget
# (KILN_SEED=N replays one); scripts/robustness-full.sh runs them in full.
#
#   scripts/test-all.sh                     # everything
#   scripts/test-all.sh --only cargo-test   # one suite and the setup it needs
#   scripts/test-all.sh --list              # the suites
set -uo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/run-suites.py "$@"
