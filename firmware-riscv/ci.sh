#!/usr/bin/env bash
# CI for the RISC-V demo: prerequisites (only what is missing), the build, a run
# under QEMU's virt machine with a timeout, and the lines the run must print.
# A few seconds on a warm machine (cold: about 30 s of build, plus apt if needed).
#
#   firmware-riscv/ci.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=riscv32imc-unknown-none-elf

# --- prerequisites (only what is missing)
if ! command -v qemu-system-riscv32 >/dev/null; then
    echo "== apt-get install qemu-system-misc (qemu-system-riscv32)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-system-misc >/dev/null
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

# --- build
echo "== firmware-riscv: cargo build --release ($target)"
(cd "$here" && cargo build -q --release --locked)
elf=${CARGO_TARGET_DIR:-$here/target}/$target/release/firmware-riscv

# --- run under QEMU (the sifive_test device's status is the firmware's verdict)
echo "== firmware-riscv under qemu-system-riscv32 -machine virt -bios none"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
timeout 60 qemu-system-riscv32 -machine virt -nographic -bios none -kernel "$elf" </dev/null | tee "$out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 124 ]; then
    echo "FAIL firmware-riscv: no exit within 60 s" >&2
    exit 1
elif [ "$rc" != 0 ]; then
    echo "FAIL firmware-riscv exited with status $rc (the number of failed checks)" >&2
    exit 1
fi
missing=0
for line in \
    '^valid: 8 tensors, block 20192 bytes' \
    '^  f32 accuracy: 32/32 ' \
    '^  MXFP4 accuracy: 31/32 ' \
    '^  rejected: code TYPE \(4\), rule NonzeroGap, offset [0-9]+, as expected$' \
    '^  rejected: code FRAME \(1\), rule DirectoryVersion, offset 4, as expected$' \
    '^  model: valid, block 20192 bytes \([0-9]+ flash reads\); blocking verify: valid, block 20192 bytes; async verdict equals the blocking one: yes$' \
    '^  hostile copy \(byte [0-9]+ -> 0x5a\): rejected: code TYPE \(4\), rule NonzeroGap, offset [0-9]+ \([0-9]+ flash reads\); async verdict equals the blocking one: yes$' \
    '^result: PASS$'; do
    grep -Eq "$line" "$out" || { echo "FAIL firmware-riscv: no line matching '$line'" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1

size=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-size 2>/dev/null | head -1)
if [ -n "$size" ]; then
    "$size" -A "$elf" | awk '$1 ~ /^\.(text|rodata|eh_frame|bss)$/ { printf "%s%s %d", sep, $1, $2; sep = ", " } END { print "" }' |
        sed 's/^/     bytes: /'
fi
echo "OK   firmware-riscv exited 0: 32/32 in f32, 31/32 with MXFP4, hostile copies rejected (TYPE NonzeroGap, FRAME DirectoryVersion), verify_async through AsyncFlash gives the blocking verdicts"
