#!/usr/bin/env bash
# Runs every fuzz target with the seeds and the dictionary, and prints the
# executions per target.
#
#   fuzz/ci.sh --budget 150   # CI: every target, 150 s in all (convert_* half a share each)
#   fuzz/ci.sh 60             # every target 60 s, convert_* 30 s (scripts/robustness-full.sh)
#   fuzz/ci.sh 300 writer     # one target
#   FUZZ_CONVERT_SECONDS=300 fuzz/ci.sh 300 convert_npy
#
# The converter targets (convert_*, which write files on every run) get half
# the time of the others (FUZZ_CONVERT_SECONDS). libFuzzer's -seed is derived
# from KILN_SEED (default: the commit), printed, and differs per target, so each
# run explores differently and KILN_SEED=N replays a run's seeds. Seeds
# (fuzz/seeds/<target>, committed) are copied into fuzz/corpus/<target>
# (gitignored), which libFuzzer grows. A finding is written to
# fuzz/artifacts/<target>/ and makes the script exit 1 after the remaining
# targets ran. The build goes to CARGO_TARGET_DIR when it is set. Needs nightly
# and cargo-fuzz (scripts/setup.sh rust cargo-fuzz).
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET=
if [ "${1:-}" = --budget ]; then BUDGET=$2; shift 2; set -- 0 "$@"; fi
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  mapfile -t TARGETS < <(cargo +nightly fuzz list)
fi
if [ -n "$BUDGET" ]; then
  # Shares: 2 for a target, 1 for a convert_* target; the budget split by shares.
  shares=0
  for t in "${TARGETS[@]}"; do [[ $t == convert_* ]] && shares=$((shares + 1)) || shares=$((shares + 2)); done
  SECONDS_PER_TARGET=$(( 2 * BUDGET / shares ))
  [ "$SECONDS_PER_TARGET" -ge 2 ] || SECONDS_PER_TARGET=2
fi
CONVERT_SECONDS=${FUZZ_CONVERT_SECONDS:-$(( SECONDS_PER_TARGET / 2 ))}
[ "$CONVERT_SECONDS" -ge 1 ] || CONVERT_SECONDS=1
SEED=${KILN_SEED:-$(git rev-parse HEAD 2>/dev/null | cut -c1-8 | sed 's/^/0x/')}
SEED=$(( ${SEED:-$(date +%s)} ))
JOBS=${FUZZ_JOBS:-1}   # >1: libFuzzer -jobs/-workers (parallel processes)
RSS_MB=${FUZZ_RSS_MB:-2048}
LOGDIR=fuzz/logs
mkdir -p "$LOGDIR"
dir_args=()
[ -n "${CARGO_TARGET_DIR:-}" ] && dir_args=(--target-dir "$CARGO_TARGET_DIR")
echo "== fuzz: KILN_SEED=$SEED; ${#TARGETS[@]} targets: ${TARGETS[*]}"
echo "== fuzz: ${SECONDS_PER_TARGET} s per target, ${CONVERT_SECONDS} s per convert_* target"
cargo +nightly fuzz build "${dir_args[@]}" || exit 2
status=0
summary=()
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  if [ -d "fuzz/seeds/$t" ]; then cp -n fuzz/seeds/"$t"/* "fuzz/corpus/$t/" 2>/dev/null || true; fi
  log="$LOGDIR/$t.log"
  secs=$SECONDS_PER_TARGET
  [[ $t == convert_* ]] && secs=$CONVERT_SECONDS
  # libFuzzer's seed: a 31-bit value from the run's seed and the target's position.
  i=$(( ${i:-0} + 1 ))
  tseed=$(( (SEED * 31 + i * 1000003) % 2147483647 + 1 ))
  echo "== $t: ${secs}s, -seed=$tseed"
  parallel=()
  if [ "$JOBS" -gt 1 ]; then parallel=(-jobs="$JOBS" -workers="$JOBS"); fi
  cargo +nightly fuzz run "${dir_args[@]}" "$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -seed="$tseed" -dict=fuzz/kiln.dict -rss_limit_mb="$RSS_MB" \
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
echo "== fuzz summary (KILN_SEED=$SEED; ${SECONDS_PER_TARGET}s per target, ${CONVERT_SECONDS}s per convert_* target)"
printf '%s\n' "${summary[@]}"
exit $status
