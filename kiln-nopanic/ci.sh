#!/usr/bin/env bash
# No-panic link check for kiln-nostd (see src/main.rs).
#
#   ./ci.sh            check thumbv7m, thumbv6m, thumbv7em and riscv32imc, run the canary,
#                      run under QEMU (lm3s6965evb; virt for riscv32imc)
#   TARGETS="thumbv7m-none-eabi" ./ci.sh    only these targets
#
# The release build links only if no panic path survived optimisation in any
# kiln-nostd API (and kiln-c C entry point) the binary calls. The canary build adds one unchecked
# `input[i]` and must FAIL to link, proving the check bites. The signed-update check (features
# signed, delta, digests) is linked and run apart, on RFC 8032's vectors (see the end).
set -euo pipefail
cd "$(dirname "$0")"

TARGETS=${TARGETS:-"thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf"}
MARK='a panic path survived optimisation'
QEMU=(qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic -semihosting-config enable=on,target=native -kernel)
# The exit status comes from the machine's sifive_test device (see `rt` in src/main.rs).
QEMU_RISCV=(qemu-system-riscv32 -machine virt -nographic -bios none -kernel)
# Honour CARGO_TARGET_DIR (where cargo puts the default build). The other feature sets build in
# directories of their own under it (one binary name, several builds), so a later run on the
# machine, even from a fresh clone, rebuilds only the project's crates there too.
out=${CARGO_TARGET_DIR:-target}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

objdump_bin() {
    if [[ $1 != riscv* ]] && command -v arm-none-eabi-objdump >/dev/null; then echo arm-none-eabi-objdump; return; fi
    local t; t=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-objdump 2>/dev/null | head -1)
    echo "${t:-objdump}"
}

# After a failed link: rebuild with a panic handler that links and list who calls panic code.
locate_panics() {
    local target=$1 dir=$out/nopanic-locate
    cargo build -q --release --target "$target" --features locate-panics --target-dir "$dir" || return 0
    echo "  functions calling into core's panic machinery:"
    # Calls and jumps: bl/b.w/b on Arm; jal/jalr (after auipc), j, call, tail on RISC-V.
    "$(objdump_bin "$target")" -d --no-show-raw-insn -C "$dir/$target/release/kiln-nopanic" |
        awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 }
             /(bl|b\.w|b|jalr?|j|call|tail)[ \t]+[^<]*<(core::panicking|core::slice::.*fail|core::option::.*(unwrap|expect)|core::result::unwrap)/ { print "    " fn " -> " $NF }' |
        sort -u
}

status=0
for target in $TARGETS; do
    if cargo build --release --target "$target" >"$log" 2>&1; then
        echo "OK   $target: kiln-nopanic links: no panic path left in the kiln-nostd API, the update state (kiln-model slots) and the C API (kiln.h) it calls"
    elif grep -q "$MARK" "$log"; then
        echo "FAIL $target: a panic path survived optimisation (undefined symbol '$MARK')"
        locate_panics "$target"
        status=1
    else
        cat "$log"
        echo "FAIL $target: the build failed for another reason (see above)"
        status=1
    fi
done
[ "$status" = 0 ] || exit "$status"

# The check must be real: an unchecked index on a volatile input must not link
# (on thumbv7m, and on riscv32imc when it is checked: another runtime, another backend).
canaries=thumbv7m-none-eabi
[[ " $TARGETS " == *" riscv32imc-unknown-none-elf "* ]] && canaries+=" riscv32imc-unknown-none-elf"
for target in $canaries; do
    if cargo build --release --target "$target" --features canary-indexing --target-dir "$out/nopanic-canary" >"$log" 2>&1; then
        echo "FAIL canary $target: a build with an unchecked input[i] linked, so the check proves nothing"
        exit 1
    elif grep -q "$MARK" "$log"; then
        echo "OK   canary $target: the same binary plus one unchecked input[i] refuses to link, as it must"
    else
        cat "$log"
        echo "FAIL canary $target: the canary build failed for another reason (see above)"
        exit 1
    fi
done

# It also runs: exit 0 when the example model parsed, the writer round trip matched,
# the Frozen record read back (both ways) and every C API call on the model succeeded.
if [[ " $TARGETS " == *" thumbv7m-none-eabi "* ]] && command -v qemu-system-arm >/dev/null; then
    if timeout 30 "${QEMU[@]}" "$out/thumbv7m-none-eabi/release/kiln-nopanic" 2>/dev/null; then
        echo "OK   run: kiln-nopanic exits 0 under QEMU (lm3s6965evb)"
    else
        echo "FAIL run: kiln-nopanic did not exit 0 under QEMU"
        exit 1
    fi
fi
if [[ " $TARGETS " == *" riscv32imc-unknown-none-elf "* ]] && command -v qemu-system-riscv32 >/dev/null; then
    if timeout 30 "${QEMU_RISCV[@]}" "$out/riscv32imc-unknown-none-elf/release/kiln-nopanic" 2>/dev/null; then
        echo "OK   run: kiln-nopanic exits 0 under QEMU (virt, riscv32imc)"
    else
        echo "FAIL run: kiln-nopanic did not exit 0 under QEMU (virt, riscv32imc)"
        exit 1
    fi
fi
# The signed update (Trust, UpdateCheck), the delta's head and plan and the digests check are
# in the proof too, as a device ships them (sha2's compact rounds), on every target, and the
# same build runs the signature check on RFC 8032's vectors under QEMU (Cortex-M0 `microbit`,
# M3 `lm3s6965evb`, M4F `mps2-an386`, riscv32imc `virt`): exit 0 only when every verdict is
# right and Trust::check_pieces stayed within 2 KiB of stack on Arm (2,560 bytes on riscv32imc,
# which misses the 2 KiB target; src/main.rs STACK_MAX) (it prints its figures). With
# sha2's unrolled rounds (its default) the signed path is checked on thumbv7m.
machine() {
    case $1 in
        thumbv6m*) echo "qemu-system-arm -machine microbit -nographic -semihosting-config enable=on,target=native -kernel" ;;
        thumbv7m*) echo "${QEMU[*]}" ;;
        thumbv7em*) echo "qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic -semihosting-config enable=on,target=native -kernel" ;;
        riscv32*) echo "${QEMU_RISCV[*]}" ;;
    esac
}
signed_builds=()
for target in $TARGETS; do
    signed_builds+=("$target signed-vectors,delta,digests,compact-sha2")
done
[[ " $TARGETS " == *" thumbv7m-none-eabi "* ]] && signed_builds+=("thumbv7m-none-eabi signed,delta,digests")
for b in "${signed_builds[@]}"; do
    read -r target feats <<<"$b"
    dir=$out/nopanic-signed-${feats//,/-}
    if cargo build --release --target "$target" --no-default-features --features "$feats" --target-dir "$dir" >"$log" 2>&1; then
        echo "OK   signed $target ($feats): links: no panic path left in the signed update, delta and digests checks"
    elif grep -q "$MARK" "$log"; then
        echo "FAIL signed $target ($feats): a panic path survived optimisation"
        exit 1
    else
        cat "$log"
        echo "FAIL signed $target ($feats): the build failed for another reason (see above)"
        exit 1
    fi
    [[ $feats == signed-vectors* ]] || continue
    read -r -a qemu <<<"$(machine "$target")"
    if command -v "${qemu[0]}" >/dev/null; then
        if timeout 120 "${qemu[@]}" "$dir/$target/release/kiln-nopanic" 2>/dev/null | sed "s/^/     $target: /"; then
            echo "OK   run: RFC 8032 vectors through Trust::check_pieces under QEMU ($target), stack within its ceiling"
        else
            echo "FAIL run: the signature check's vectors or stack under QEMU ($target)"
            exit 1
        fi
    fi
done
echo "no-panic check passed"
