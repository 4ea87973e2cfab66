#!/usr/bin/env bash
# Flash used by libkiln.a in a C firmware (arm-none-eabi-gcc -Os -ffunction-sections
# -fdata-sections -Wl,--gc-sections, newlib nano; libkiln.a from cargo profile
# release-size: opt-level "s", LTO), as differences of whole links (text + rodata,
# `arm-none-eabi-size`'s "text" column) against sizes/baseline.c:
#   validate   kiln_validate (the rule texts come with kiln_error)
#   typical    kiln_parse + kiln_find + kiln_tensor_view_f32/kiln_tensor_copy_f32
# for Cortex-M0 (thumbv6m), M3 (thumbv7m) and M4F (thumbv7em-none-eabihf), with and
# without the rule descriptions (-DKILN_RULE_DESCRIPTIONS=OFF).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=$(dirname "$here")/target/cmake   # in the clone: a CMake cache names its source folder
printf '%-12s %-13s %9s %9s %9s\n' core descriptions baseline validate typical
for cpu in cortex-m0 cortex-m3 cortex-m4f; do
    for desc in ON OFF; do
        b=$base/firmware-c-size-$cpu-$desc
        cmake -S "$here" -B "$b" -DCMAKE_TOOLCHAIN_FILE="$here/cmake/arm-none-eabi.cmake" -DFIRMWARE_CPU=$cpu \
            -DKILN_RULE_DESCRIPTIONS=$desc >/dev/null
        cmake --build "$b" --target size-baseline size-validate size-typical >/dev/null 2>&1 ||
            cmake --build "$b" --target size-baseline size-validate size-typical
        text() { arm-none-eabi-size "$b/$1.elf" | awk 'NR == 2 { print $1 }'; }
        t0=$(text size-baseline)
        printf '%-12s %-13s %9d %9d %9d\n' $cpu $desc "$t0" $(($(text size-validate) - t0)) $(($(text size-typical) - t0))
    done
done
echo "(bytes of flash; baseline is absolute and holds the 20,192-byte example model; the rest are"
echo " deltas over it, compiler builtins and libgcc/newlib routines they pull in included)"
