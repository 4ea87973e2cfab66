#!/usr/bin/env bash
# CI for the microcontroller side: prerequisites (idempotent), the QEMU demo
# (with step 9's signed and delta updates: each line checked below), the
# defmt-logged binary (decoded with defmt-print), and the no-panic link
# check (kiln-nostd's API and the C API's entry points). Fast on a warm
# machine (no apt, no network, nothing to rebuild: a few seconds; cold builds
# about 2 minutes, plus apt if needed).
#
#   firmware-demo/ci.sh            prerequisites + demo + no-panic check
#   SIZES=1 firmware-demo/ci.sh    also print the size table (kiln-nopanic/sizes.sh) and the
#                                  demo's flash with and without the boot digest check, the
#                                  signed updates and the delta
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
# defmt-print decodes the defmt binary's log (pinned; installed by scripts/setup.sh when missing).
"$root/scripts/setup.sh" defmt-print
installed=$(rustup target list --installed)
# riscv32imc: kiln-nopanic/ci.sh's fourth target (its QEMU run needs qemu-system-riscv32,
# qemu-system-misc, and is skipped without it).
for t in thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# Step 9's lines in the demo's output: each bad update refused by its rule
# ("as expected": at the packet and offset the firmware computed), the
# running model still 32/32 after each refusal, the good update and the
# delta accepted, the rebuilt slot equal to NEW.
signed_ok() {
    local f=$1 rule
    for rule in SignatureKey PayloadDigest SignatureInvalid ReleaseVersion ReleaseTarget BlockTruncated; do
        grep -Eq "^    rejected at packet [0-9]+ of [0-9]+: [A-Z]+ at byte [0-9]+ \($rule\), as expected$" "$f" ||
            { echo "missing: the signed update refused by $rule" >&2; return 1; }
    done
    for rule in DeltaBase PayloadDigest; do
        grep -Eq "^    rejected at packet [0-9]+ of [0-9]+: [A-Z]+ at byte [0-9]+ of the (delta|rebuilt model) \($rule\), as expected$" "$f" ||
            { echo "missing: the delta refused by $rule" >&2; return 1; }
    done
    # Every refusal of step 9 (6 updates, 2 deltas) is followed by the running model at 32/32.
    awk '/^signed updates:/ { on = 1 }
         on && /^    rejected at packet / { n++; want = 1 }
         on && want && /^    running model: / { want = 0; if ($0 ~ / 32\/32( |$)/) ok++ }
         END { exit !(n == 8 && ok == 8) }' "$f" ||
        { echo "missing: the running model at 32/32 after each refused update" >&2; return 1; }
    local line
    for line in '^    accepted after packet ([0-9]+) of \1: version 3, ' \
        '^    running model: slot B \(RAM\), version 3, .* 32/32 ' \
        '^    accepted after packet ([0-9]+) of \1: version 4; slot C rebuilt ' \
        '^    slot C: [0-9]+ bytes, SHA-256 [0-9a-f]+\.\.\.: byte for byte NEW' \
        '^    running model: slot C \(RAM\), version 4, .* 32/32 ' \
        '^  bytes sent: [0-9]+ for the delta against [0-9]+ for the full update'; do
        grep -Eq "$line" "$f" || { echo "missing: a line matching $line" >&2; return 1; }
    done
}

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
elif ! grep -q '^  ACCEPTED: 8 tensors, digests checked: yes' "$out" ||
    ! grep -q '^    corrupted model file refused at boot: DIGEST at ' "$out"; then
    echo "FAIL firmware-demo: the boot digest check lines are missing" >&2
    failed+=(firmware-demo)
elif ! signed_ok "$out"; then
    echo "FAIL firmware-demo: step 9's signed-update lines are missing" >&2
    failed+=(firmware-demo)
else
    echo "OK   firmware-demo exited 0 (boot digest check: accepted; a flipped payload byte: DIGEST;"
    echo "     signed updates: 6 refused by their rules, the good one and the delta accepted, 32/32 throughout)"
fi

# --- the costs in instructions: the same ELF under -icount shift=0 (one virtual
# ns per instruction, so SysTick counts instructions; QEMU is not cycle-accurate)
echo "== firmware-demo under qemu -icount shift=0 (instruction counts: boot digest check, SHA-256, Ed25519, delta)"
demo_elf=${CARGO_TARGET_DIR:-$here/target}/thumbv7m-none-eabi/release/firmware-demo
set +e
timeout 300 qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic -icount shift=0 \
    -semihosting-config enable=on,target=native -kernel "$demo_elf" 2>"$out.err" >"$out"
rc=$?
set -e
if [ "$rc" != 0 ] || ! grep -q '^result: PASS$' "$out" || ! grep -q '^  instructions (valid under qemu -icount' "$out" ||
    ! grep -Eq '^    SHA-256: [1-9][0-9]* instructions for' "$out" ||
    ! grep -Eq '^    one Ed25519 signature check: [1-9][0-9]* instructions' "$out" ||
    ! grep -Eq '^  bytes sent: .*: [1-9][0-9]* instructions \(under QEMU -icount' "$out"; then
    echo "FAIL firmware-demo under -icount (status $rc)" >&2
    failed+=(firmware-icount)
else
    grep -A1 '^  cost: ' "$out"
    grep -A4 '^  cost (instructions under QEMU -icount' "$out"
    grep -E '^  stack used by (UpdateCheck|Trust)|^  bytes sent: ' "$out"
    echo "OK   boot digest check, signature check and delta measured under -icount"
fi

# --- the same model logged through defmt (kiln-nostd's `defmt` feature), decoded on the host
echo "== firmware-defmt: cargo build --release --features defmt --bin firmware-defmt | defmt-print"
elf=${CARGO_TARGET_DIR:-$here/target}/thumbv7m-none-eabi/release/firmware-defmt
set +e
(cd "$here" && cargo build -q --release --features defmt --bin firmware-defmt) &&
    timeout 60 qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic \
        -semihosting-config enable=on,target=native -kernel "$elf" 2>"$out.err" | defmt-print -e "$elf" | tee "$out"
rc=$((${PIPESTATUS[0]} + ${PIPESTATUS[1]} + ${PIPESTATUS[2]}))
set -e
if [ "$rc" != 0 ]; then
    echo "FAIL firmware-defmt: build, run or decode failed" >&2
    failed+=(firmware-defmt)
elif ! grep -q '^INFO  corrupted copy rejected: Error { rule: DirectoryVersion, offset: 4 }' "$out" ||
    ! grep -q '^INFO  result: PASS$' "$out"; then
    echo "FAIL firmware-defmt: the decoded log lacks the expected lines" >&2
    failed+=(firmware-defmt)
else
    echo "OK   firmware-defmt: defmt frames decoded by defmt-print, result: PASS"
fi

# --- no-panic link check (the three Cortex-M targets and riscv32imc + canaries + QEMU runs)
echo "== kiln-nopanic/ci.sh"
"$root/kiln-nopanic/ci.sh" || failed+=(kiln-nopanic)

if [ "${SIZES:-0}" = 1 ]; then
    flash() { (cd "$here" && cargo build -q --release "$@") && arm-none-eabi-size "$demo_elf" | awk 'NR == 2 { print $1 }'; }
    echo "== firmware-demo flash with and without the boot digest check (feature digests)"
    without=$(flash --no-default-features --features ota)
    with=$(flash --no-default-features --features ota,digests)
    echo "     text: $with bytes with, $without without: +$((with - without)) bytes"
    echo "== firmware-demo flash with and without step 9 (features signed, delta; the updates it sends included)"
    base=$(flash --no-default-features --features ota,digests)
    signed=$(flash --no-default-features --features ota,digests,signed)
    full=$(flash)
    compact=$(flash --features compact-sha2)
    echo "     text: $base without, $signed with the signed updates (+$((signed - base))), $full with the delta too (+$((full - signed)))"
    echo "     with sha2's compact implementation (feature compact-sha2): $compact ($((compact - full)))"
    flash >/dev/null
    echo "== kiln-nopanic/sizes.sh"
    "$root/kiln-nopanic/sizes.sh" || failed+=(sizes)
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "firmware CI FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "firmware CI passed"
