#!/usr/bin/env bash
# Instructions per tensor (callgrind), the core's cost figures that do not
# vary run to run: the 10,000-tensor parse + iterate + look up, and the
# incremental validator over the same block in 64 KiB chunks
# (kiln-nostd/examples/instructions.rs). Each mode runs 1 and 11 rounds;
# the difference / (10 x 10,000) is the per-tensor count.
#   scripts/instructions.sh            # needs valgrind
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
(cd "$ROOT" && cargo build -q --release -p kiln-nostd --example instructions)
BIN="$TARGET/release/examples/instructions"
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" "$2" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for mode in parse incremental; do
  one=$(count "$mode" 1)
  eleven=$(count "$mode" 11)
  awk -v m="$mode" -v a="$one" -v b="$eleven" 'BEGIN { printf "%s: %.1f instructions per tensor (1 round: %d, 11 rounds: %d)\n", m, (b - a) / 100000, a, b }'
done
