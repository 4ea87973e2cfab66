#!/usr/bin/env bash
# CI for the C firmware demo: CMake (through kiln-c/CMakeLists.txt) builds
# libkiln.a for thumbv7m-none-eabi and the demo with arm-none-eabi-gcc +
# newlib nano; QEMU lm3s6965evb runs it; the exit status is its verdict.
#   firmware-c/ci.sh             build + run
#   SIZES=1 firmware-c/ci.sh     also print the size table (sizes.sh)
# Prerequisites (scripts/setup.sh): gcc-arm-none-eabi, libnewlib-arm-none-eabi,
# cmake, qemu-system-arm, the thumbv7m-none-eabi Rust target.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
# The CMake tree stays in the clone (its cache names the source folder); cargo still
# builds libkiln.a in CARGO_TARGET_DIR (kiln-c/CMakeLists.txt).
build=$root/target/cmake/firmware-c
out=$(mktemp)
trap 'rm -f "$out" "$out.err"' EXIT

echo "== firmware-c: cmake build (toolchain cmake/arm-none-eabi.cmake, libkiln.a via kiln-c/CMakeLists.txt)"
cmake -S "$here" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$here/cmake/arm-none-eabi.cmake" >/dev/null
cmake --build "$build" --target firmware-c >"$out" 2>&1 || { cat "$out"; exit 1; }
arm-none-eabi-size "$build/firmware-c.elf"

echo "== firmware-c: QEMU lm3s6965evb"
set +e
timeout 60 qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic \
    -semihosting-config enable=on,target=native -kernel "$build/firmware-c.elf" 2>"$out.err" | tee "$out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
    grep -v '^Timer with period zero' "$out.err" >&2 || true
    echo "FAIL firmware-c exited with status $rc" >&2
    exit 1
elif ! grep -q '^result: PASS$' "$out"; then
    echo "FAIL firmware-c exited 0 but did not print 'result: PASS'" >&2
    exit 1
fi
echo "OK   firmware-c exited 0"

if [ "${SIZES:-0}" = 1 ]; then
    "$here/sizes.sh"
fi
