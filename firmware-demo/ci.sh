#!/usr/bin/env bash
# CI for the microcontroller side: prerequisites (idempotent), the QEMU demo,
# and the no-panic link check. Fast on a warm machine (no apt, no network,
# nothing to rebuild: ~3 s; cold builds ~40 s, plus apt if needed).
#
#   firmware-demo/ci.sh            prerequisites + demo + no-panic check
#   SIZES=1 firmware-demo/ci.sh    also print the size table (kiln-nopanic/sizes.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

# --- prerequisites (only what is missing)
need_apt=()
command -v qemu-system-arm >/dev/null || need_apt+=(qemu-system-arm)
command -v arm-none-eabi-size >/dev/null || need_apt+=(binutils-arm-none-eabi)
if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "== apt-get install ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
installed=$(rustup target list --installed)
for t in thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# --- the demo under QEMU (exit status is the firmware's verdict)
failed=()
echo "== firmware-demo: cargo run --release (QEMU lm3s6965evb)"
out=$(mktemp)
trap 'rm -f "$out" "$out.err"' EXIT
set +e
(cd "$here" && timeout 120 cargo run --release 2>"$out.err") | tee "$out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
    grep -v '^Timer with period zero' "$out.err" >&2 || true
    echo "FAIL firmware-demo exited with status $rc" >&2
    failed+=(firmware-demo)
elif ! grep -q '^result: PASS$' "$out"; then
    echo "FAIL firmware-demo exited 0 but did not print 'result: PASS'" >&2
    failed+=(firmware-demo)
else
    echo "OK   firmware-demo exited 0"
fi

# --- no-panic link check (all three Cortex-M targets + canary + QEMU run)
echo "== kiln-nopanic/check.sh"
"$root/kiln-nopanic/check.sh" || failed+=(kiln-nopanic)

if [ "${SIZES:-0}" = 1 ]; then
    echo "== kiln-nopanic/sizes.sh"
    "$root/kiln-nopanic/sizes.sh" || failed+=(sizes)
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "firmware CI FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "firmware CI passed"
