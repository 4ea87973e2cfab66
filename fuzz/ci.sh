#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with the seeds and the
# dictionary, and prints the executions per target. The converter targets
# (convert_*, which write files on every run) get FUZZ_CONVERT_SECONDS each
# (default: half of SECONDS), so the five of them add 2.5 minutes to a 60 s run.
#
#   fuzz/ci.sh 60             # CI smoke run
#   fuzz/ci.sh 300 writer     # one target
#   FUZZ_CONVERT_SECONDS=300 fuzz/ci.sh 300 convert_npy
#
# Seeds (fuzz/seeds/<target>, committed) are copied into fuzz/corpus/<target>
# (gitignored), which libFuzzer grows. A finding is written to
# fuzz/artifacts/<target>/ and makes the script exit 1 after the remaining
# targets ran. Needs nightly and cargo-fuzz (scripts/robustness-ci.sh installs them).
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
CONVERT_SECONDS=${FUZZ_CONVERT_SECONDS:-$(( SECONDS_PER_TARGET / 2 ))}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  mapfile -t TARGETS < <(cargo +nightly fuzz list)
fi
JOBS=${FUZZ_JOBS:-1}   # >1: libFuzzer -jobs/-workers (parallel processes)
RSS_MB=${FUZZ_RSS_MB:-2048}
LOGDIR=fuzz/logs
mkdir -p "$LOGDIR"
cargo +nightly fuzz build || exit 2
status=0
summary=()
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  if [ -d "fuzz/seeds/$t" ]; then cp -n fuzz/seeds/"$t"/* "fuzz/corpus/$t/" 2>/dev/null || true; fi
  log="$LOGDIR/$t.log"
  secs=$SECONDS_PER_TARGET
  [[ $t == convert_* ]] && secs=$CONVERT_SECONDS
  echo "== $t: ${secs}s"
  parallel=()
  if [ "$JOBS" -gt 1 ]; then parallel=(-jobs="$JOBS" -workers="$JOBS"); fi
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -dict=fuzz/kiln.dict -rss_limit_mb="$RSS_MB" \
    -timeout=10 -print_final_stats=1 "${parallel[@]}" >"$log" 2>&1
  rc=$?
  # With -jobs, each worker's stats are in ./fuzz-N.log.
  execs=$(grep -h 'stat::number_of_executed_units' "$log" fuzz-*.log 2>/dev/null | awk '{s+=$2} END {print s+0}')
  rm -f fuzz-*.log
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
  corpus=$(ls "fuzz/corpus/$t" | wc -l)
  if [ $rc -ne 0 ]; then
    status=1
    summary+=("$t: FAILED (exit $rc) after $execs executions; see $log and fuzz/artifacts/$t/")
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -5
  else
    summary+=("$t: $execs executions, $cov, corpus $corpus, no finding")
  fi
done
echo "== fuzz summary (${SECONDS_PER_TARGET}s per target, ${CONVERT_SECONDS}s per convert_* target)"
printf '%s\n' "${summary[@]}"
exit $status
