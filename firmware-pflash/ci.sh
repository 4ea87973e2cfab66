#!/usr/bin/env bash
# The update killed mid-way on QEMU virt (riscv32imc) with a file-backed flash
# (pflash1: -drive if=pflash,unit=1,format=raw,file=FILE), then started again
# on the same file: it must recover.
#
# For each kill point (a packet in the middle of the download; after the
# update was recorded as pending, before the reboot; during the trial,
# before the confirm) on a fresh flash file:
#   1. run until the firmware prints the point's line, then kill -9 QEMU (a power cut);
#   2. run again on the same file: it boots a model whose signature and digests
#      verify, the confirmed release or the new one, never below the counter,
#      finishes (or retries) the update and ends on release 2 confirmed;
#   3. run a third time: release 2 boots confirmed and the same release is
#      refused by the persisted counter.
# Plus a run with no kill, and four kills at seeded random moments of the update (KILN_PFLASH_SEED).
# About 40 s warm (cold: a few minutes of build).
#
#   firmware-pflash/ci.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=riscv32imc-unknown-none-elf

if ! command -v qemu-system-riscv32 >/dev/null; then
    echo "== apt-get install qemu-system-misc (qemu-system-riscv32)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-system-misc >/dev/null
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

echo "== firmware-pflash: cargo build --release ($target)"
(cd "$here" && cargo build -q --release --locked --target "$target")
elf=${CARGO_TARGET_DIR:-$here/target}/$target/release/firmware-pflash

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flash=$tmp/flash.img
failed=()

# pflash1 is 32 MiB; an erased flash reads 0xFF.
fresh() { python3 -c "import sys; open(sys.argv[1], 'wb').write(b'\xff' * (32 << 20))" "$flash"; }
# `-device loader` (not -kernel): QEMU 7.2's virt does not load -kernel's ELF when a pflash drive is given.
QEMU=(qemu-system-riscv32 -machine virt -nographic -bios none
    -drive "if=pflash,unit=1,format=raw,file=$flash" -device "loader,file=$elf")

# Runs until a line matches $1, waits $2 ms (default 0), then kills QEMU (SIGKILL: no chance
# to flush anything more).
run_until() {
    local log=$tmp/cut.log
    : >"$log" # emptied before QEMU starts: the last run's lines must not match
    "${QEMU[@]}" </dev/null >>"$log" 2>&1 &
    local pid=$! n=0
    until grep -Eq "$1" "$log"; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$n" -ge 600 ]; then
            cat "$log"
            echo "FAIL firmware-pflash: no line matching '$1' before QEMU ended" >&2
            return 1
        fi
        sleep 0.05
        n=$((n + 1))
    done
    local ms=${2:-0}
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "     killed after: $(grep -v '^ *$' "$log" | tail -n 1)"
}

# Runs to the end; the output must pass and hold every pattern given.
run_check() {
    local name=$1 log=$tmp/run.log
    shift
    set +e
    timeout 60 "${QEMU[@]}" </dev/null >"$log" 2>&1
    local rc=$?
    set -e
    grep -v 'packet [0-9]*/' "$log" | sed 's/^/     | /'
    local ok=1
    [ "$rc" = 0 ] || { echo "FAIL $name: QEMU exited with status $rc" >&2; ok=0; }
    for p in "$@" '^result: PASS$'; do
        grep -Eq "$p" "$log" || { echo "FAIL $name: no line matching '$p'" >&2; ok=0; }
    done
    [ "$ok" = 1 ] || failed+=("$name")
}

verified='signature and digests verified in place'
after='^boot: slot B, release 2 \(confirmed\), .*counter 2$'
refused='^update to release 2 again: refused \(ReleaseVersion\), the counter is 2$'

echo "== no cut"
fresh
run_check "no cut" '^provisioned: ' "^boot: slot A, release 1 \(confirmed\), .*$verified" \
    "^boot: slot B, release 2 \(trial\), .*$verified" '^confirmed: release 2, counter 2$' "$after" "$refused"

cases=(
    "mid-download|^  packet 37/[0-9]+ programmed$|^boot: slot A, release 1 \(confirmed\), .*$verified; counter 1$|^update: release 2"
    "pending|^pending: release 2 in slot B|^boot: slot B, release 2 \(trial\), .*$verified; counter 1$|^confirmed: release 2, counter 2$"
    "trial|^trial: running release 2|^boot: slot A, release 1 \(confirmed\), .*$verified; counter 1$|^confirmed: release 2, counter 2$"
)
for c in "${cases[@]}"; do
    IFS='|' read -r name at first then <<<"$c"
    echo "== killed at: $name"
    fresh
    run_until "$at" || { failed+=("$name"); continue; }
    echo "     restarted on the same flash file:"
    run_check "$name: recovery" "$first" "$then" "$after" "$refused"
    echo "     and once more:"
    run_check "$name: after recovery" "^state: .*counter 2, slot B confirmed, trial Idle$" "$after" "$refused"
done

# And at seeded random moments after the update starts (in the download, the pending record,
# the reboot, the trial or the confirm): the restart must end the same way.
RANDOM=${KILN_PFLASH_SEED:-44}
for k in 1 2 3 4; do
    ms=$((RANDOM % 2000))
    echo "== killed $ms ms (seeded) after the update started"
    fresh
    run_until '^update: release 2' "$ms" || { failed+=("random kill $k"); continue; }
    run_check "random kill $k: recovery" "$after" "$refused"
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "FAIL firmware-pflash: ${failed[*]}" >&2
    exit 1
fi
echo "OK   firmware-pflash: killed mid-download, after activation, during the trial and at 4 random moments of the update, each run again on the same pflash file recovered (a verified model booted, never below the counter) and ended on release 2 confirmed; the same release was refused after every restart"
