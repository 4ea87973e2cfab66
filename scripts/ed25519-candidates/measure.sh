#!/usr/bin/env bash
# Ed25519 candidates for the signed update, side by side (see README.md):
#   scripts/ed25519-candidates/measure.sh
#   TARGETS="thumbv6m-none-eabi" CANDIDATES="baseline dalek" scripts/ed25519-candidates/measure.sh
#
# For each target and candidate: one release build of src/main.rs (opt-level "s",
# lto, codegen-units=1, panic=abort) with the panic handler that does not link.
#   flash    .text + .rodata over the baseline build (same inputs, no cryptography);
#            "verify" is over the sha256 build, i.e. the signature check alone
#   no-panic whether that build links; when it does not, the candidate is rebuilt with
#            feature locate-panics (a handler that links; same code otherwise), its
#            figures are taken from that build and the functions calling core's panic
#            machinery are listed
#   stack    bytes of stack the verify call used (painted before, read after, under QEMU;
#            the key checks included); key = the key checks alone (a trust made at start-up)
#   instr    instructions of the verify call (a 1,024-byte message in three pieces, key
#            checks included) under QEMU -icount shift=0, where each instruction takes one
#            virtual nanosecond: the machine's timer (SysTick; mtime on virt) over the call,
#            converted by a calibration loop of 200,000 instructions (resolution: about
#            100 instructions)
#   device   the binary's exit status: the message verified, a flipped signature byte
#            refused, RFC 8032's four short vectors verified
# QEMU machines: microbit (Cortex-M0) for thumbv6m, lm3s6965evb (M3) for thumbv7m,
# mps2-an386 (M4) for thumbv7em, virt for riscv32imc.
# Builds run with nice -n 15 and one job (the machine is shared).
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
base=${CARGO_TARGET_DIR:-$PWD/target}
TARGETS=${TARGETS:-"thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf"}
CANDIDATES=${CANDIDATES:-"baseline sha256 dalek dalek-csha2 dalek-fiat-csha2 small small-csha2 compact-os compact-os-csha2 salty salty-csha2"}

declare -A FEATS=(
    [baseline]=""
    [sha256]="sha256"
    [dalek]="dalek"
    [dalek-csha2]="dalek,compact-sha2"
    [dalek-fiat-csha2]="dalek,compact-sha2"
    [small]="dalek-small"
    [small-csha2]="dalek-small,compact-sha2"
    [compact]="compact"
    [compact-os]="compact-opt-size"
    [compact-os-csha2]="compact-opt-size,compact-sha2"
    [salty]="salty"
    [salty-csha2]="salty,compact-sha2"
)
# curve25519-dalek's backend is chosen by a cfg (its README), not a feature.
declare -A CFG=([dalek-fiat-csha2]='--cfg curve25519_dalek_backend="fiat"')

qemu() {
    case $1 in
        thumbv6m*) echo "qemu-system-arm -machine microbit -nographic -semihosting-config enable=on,target=native" ;;
        thumbv7m*) echo "qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic -semihosting-config enable=on,target=native" ;;
        thumbv7em*) echo "qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic -semihosting-config enable=on,target=native" ;;
        riscv32*) echo "qemu-system-riscv32 -machine virt -nographic -bios none" ;;
    esac
}
SIZE=$(command -v arm-none-eabi-size || ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-size | head -1)
OBJDUMP=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-objdump | head -1)
section() { "$SIZE" -A "$2" | awk -v s="$1" '$1 == s { print $2 }'; }
flash() { echo $(($(section .text "$1") + $(section .rodata "$1"))); }
MARK='a panic path survived optimisation'
log=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$log" "$work"' EXIT

# build NAME TARGET FEATURES: the ELF's path on stdout; "no" in $work/panics if it needed locate-panics.
build() {
    local name=$1 target=$2 feats=$3 dir=$base/cand
    local args=(build -q --release --target "$target" --no-default-features)
    [ -n "${CFG[$name]:-}" ] && dir=$base/cand-$name
    args+=(--target-dir "$dir")
    run_cargo() {
        if [ -n "${CFG[$name]:-}" ]; then
            # RUSTFLAGS replaces the config's target rustflags: name link.x again on Arm.
            local rf=${CFG[$name]}
            [[ $target == thumb* ]] && rf+=" -C link-arg=-Tlink.x"
            RUSTFLAGS="$rf" nice -n 15 cargo "${args[@]}" "$@"
        else
            nice -n 15 cargo "${args[@]}" "$@"
        fi
    }
    local elf=$dir/$target/release/candidate out=$work/$name-$target.elf
    rm -f "$work/panics"
    if run_cargo ${feats:+--features "$feats"} >"$log" 2>&1; then
        echo yes >"$work/panics"
    elif grep -q "$MARK" "$log"; then
        echo no >"$work/panics"
        run_cargo --features "${feats:+$feats,}locate-panics" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
        # Functions (after inlining) that call into core's panic machinery.
        "$OBJDUMP" -d --no-show-raw-insn -C "$elf" |
            awk '/^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<")) }
                 fn !~ /^<core::/ && /(bl|b\.w|b|jal|jalr|j|call|tail)[ \t]+[^<]*<(core::panicking|core::slice::.*fail|core::option::.*(unwrap|expect)|core::result::unwrap)/ { print fn }' |
            sed -E 's/\$LT\$/</g; s/\$GT\$/>/g; s/\$RF\$/\&/g; s/\$u20\$/ /g; s/\$C\$/,/g; s/\.\./::/g; s/::h[0-9a-f]{16}>/>/; s/^<_</<</' |
            sort | uniq -c | sed 's/^/      /' >"$work/sites-$name-$target"
    else
        cat "$log" >&2
        return 1
    fi
    cp "$elf" "$out"
    echo "$out"
}

# run TARGET ELF: "stack key-stack instr status" (status 0 = every verdict right).
run() {
    local status=0
    # shellcheck disable=SC2046
    timeout 600 nice -n 15 $(qemu "$1") -icount shift=0 -kernel "$2" >"$work/out" 2>/dev/null || status=$?
    local stack key instr
    stack=$(awk '$1 == "stack" { print $2 }' "$work/out")
    key=$(awk '$1 == "key" && $2 == "stack" { print $3 }' "$work/out")
    instr=$(awk '$1 == "instructions" { print $2 }' "$work/out")
    echo "${stack:-?} ${key:-?} ${instr:-?} $status"
}

printf '%-27s %-17s %7s %7s %7s %6s %6s %10s %-6s %-8s\n' target candidate flash "+base" verify stack key instr device no-panic
for target in $TARGETS; do
    base_flash=0 sha_flash=0
    for name in $CANDIDATES; do
        elf=$(build "$name" "$target" "${FEATS[$name]}") || { printf '%-27s %-17s build failed (see above)\n' "$target" "$name"; continue; }
        nopanic=$(cat "$work/panics")
        f=$(flash "$elf")
        [ "$name" = baseline ] && base_flash=$f
        [ "$name" = sha256 ] && sha_flash=$f
        read -r stack key instr status < <(run "$target" "$elf")
        device=$([ "$status" = 0 ] && echo ok || echo "FAIL($status)")
        verify=$([ "$sha_flash" -gt 0 ] && [ "$name" != baseline ] && [ "$name" != sha256 ] && echo $((f - sha_flash)) || echo -)
        printf '%-27s %-17s %7d %7d %7s %6s %6s %10s %-6s %-8s\n' "$target" "$name" "$f" $((f - base_flash)) "$verify" "$stack" "$key" "$instr" "$device" "$nopanic"
        [ -s "$work/sites-$name-$target" ] && cat "$work/sites-$name-$target"
    done
done
echo "(flash = .text + .rodata of the whole binary, bytes; +base = over the baseline (same inputs, no"
echo " cryptography), i.e. the signature check and SHA-256; verify = over the sha256 build, the signature"
echo " check alone; stack = bytes used by the verify call, key checks included (painting; the baseline's"
echo " is the harness's own frames); key = the key checks alone; instr = the verify call's instructions"
echo " under QEMU -icount shift=0; device = exit status under QEMU;"
echo " no-panic = whether the build links with the undefined panic handler (no: the functions calling"
echo " panic code are listed, the figures are those of the locate-panics build))"
