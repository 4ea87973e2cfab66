#!/usr/bin/env bash
# What CI runs for robustness against hostile input (Kiln v2 core):
#   1. tools (idempotent): apt packages, the s390x target, nightly + miri +
#      rust-src, cargo-fuzz
#   2. generated files are current (fuzz seeds, regression cases, goldens)
#   3. differential test, 10,000 inputs against the Python reference, and
#      the regression cases replayed on both implementations
#   4. named GGUF-class regressions, allocation bounds, byte-order tests
#   5. fuzz smoke run: every target for FUZZ_SECONDS (default 60) seconds,
#      the converter targets (convert_*) half of it
#   6. Miri, reduced set, x86_64 and s390x
#   7. the full kiln-nostd suite big-endian under qemu-user (s390x)
#   8. peak RSS of `kiln validate` on hostile files (< 16 MiB) and of
#      `kiln convert` on the hostile inputs of issue 12 (< 64 MiB, release)
# Every step runs; the script prints each step's time and exits 1 if any failed.
#
#   scripts/robustness-ci.sh
#   FUZZ_SECONDS=10 SKIP="miri" scripts/robustness-ci.sh
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
SKIP=${SKIP:-}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

step_names=()
step_times=()
step_status=()
run() {
  local name=$1
  shift
  if [[ " $SKIP " == *" $name "* ]]; then
    step_names+=("$name"); step_times+=(0); step_status+=(skipped)
    return
  fi
  echo
  echo "################ $name: $*"
  local start=$(date +%s)
  "$@"
  local rc=$?
  step_names+=("$name"); step_times+=($(( $(date +%s) - start )))
  if [ $rc -eq 0 ]; then step_status+=(ok); else step_status+=("FAILED ($rc)"); fi
}

install_tools() {
  local need=()
  command -v qemu-s390x >/dev/null || need+=(qemu-user)
  command -v s390x-linux-gnu-gcc >/dev/null || need+=(gcc-s390x-linux-gnu)
  [ -d /usr/s390x-linux-gnu/lib ] || need+=(libc6-dev-s390x-cross)
  [ -x /usr/bin/time ] || need+=(time)
  command -v python3 >/dev/null || need+=(python3)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update && apt-get install -y "${need[@]}" || return 1
  fi
  rustup target list --installed | grep -q '^s390x-unknown-linux-gnu$' || rustup target add s390x-unknown-linux-gnu || return 1
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal || return 1
  rustup +nightly component list --installed | grep -q '^miri' || rustup +nightly component add miri || return 1
  rustup +nightly component list --installed | grep -q '^rust-src' || rustup +nightly component add rust-src || return 1
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz || return 1
}

generated_current() {
  python3 fuzz/make_seeds.py --check &&
    python3 spec/regressions/make_regressions.py --check &&
    python3 spec/reference/gen_v2_cases.py --check
}

differential() {
  cargo test -p kiln-nostd --test differential -- --nocapture
}

regressions() {
  cargo test -p kiln-nostd --all-features --test regressions --test alloc_bounds --test byte_order
}

run tools install_tools
run generated generated_current
run differential differential
run regressions regressions
run fuzz fuzz/ci.sh "$FUZZ_SECONDS"
run miri scripts/miri.sh
run big-endian scripts/big-endian.sh
run rss scripts/rss.sh

echo
echo "################ robustness summary"
fail=0
total=0
for i in "${!step_names[@]}"; do
  printf '%-14s %6ss  %s\n' "${step_names[$i]}" "${step_times[$i]}" "${step_status[$i]}"
  total=$(( total + step_times[$i] ))
  [[ "${step_status[$i]}" == FAILED* ]] && fail=1
done
printf '%-14s %6ss\n' total "$total"
exit $fail
