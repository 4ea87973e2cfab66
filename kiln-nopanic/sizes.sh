#!/usr/bin/env bash
# Code size of kiln-nostd's validator, as differences between links of this
# crate (release: opt-level "s", lto, codegen-units=1, panic=abort):
#   baseline  --no-default-features          runtime + opaque inputs + sink, no decoder
#   parse     -F parse                       + Parser (caps, seed, scratch) parse/parse_indexed/parse_at, Directory::parse
#   views     -F views                       + tensor iteration, name, shape, bytes, as_slice, copy_to, quant, find, NameIndex
#   texts     -F views,error-text            + Rule::id/description, ErrorCode::as_str/from_name
#   full      -F views,error-text,writer     + Writer, sort_dict, encode_le/le_bytes (and a read-back)
# Separate links, each against the baseline alone:
#   typical   -F typical                     FixedIndex parse + lookups by name + f32 reads + table walk
#   frozen    -F frozen                      Schema::parse of a type text + frozen::Reader (frame, hash,
#                                            full value check) + field reads of one framed record
#   +typical  -F typical,frozen              frozen on top of typical: what a firmware that already
#                                            validates directories pays for the Frozen record
#   typed     -F frozen-typed                the same record through frozen::decode_framed with a
#                                            compile-time Ty (hand-written Decode, as derive(Kiln) makes)
#   incr      -F incremental                 Incremental: prefix_len, feed in chunks, next_needed/skip,
#                                            header, directory + one lookup, consumed, finish
#   incr+typ  -F typical,incremental         incr on top of typical: what an over-the-air update adds
#                                            to a firmware that already validates directories
#   +state   -F typical,digests,slots        the update state (kiln-model's slots) over typical+digests,
#                                            flash = .text + .rodata (third table)
# The validator figure is views - baseline (directory parse + views). Each
# delta includes the compiler-builtins it pulls in (memcpy, u64 division, ...)
# and the harness's own glue that consumes the results. Every build here uses
# the no-panic handler, so each one is also a no-panic link check.
set -euo pipefail
cd "$(dirname "$0")"
# riscv32imc last: RISC-V's runtime is riscv-rt (QEMU virt's memory map), so its
# baseline is not comparable with the Cortex-M rows; the deltas are.
TARGETS=${TARGETS:-"thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf"}

if command -v arm-none-eabi-size >/dev/null; then SIZE=arm-none-eabi-size
else SIZE=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-size | head -1); fi
section() { "$SIZE" -A "$2" | awk -v s="$1" '$1 == s { print $2 }'; }
if command -v arm-none-eabi-nm >/dev/null; then NM=arm-none-eabi-nm
else NM=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-nm | head -1); fi
# Both read RISC-V ELF files too (GNU binutils' generic ELF support, or llvm-size/llvm-nm).
# Bytes of compiler-builtins code (memcpy/memclr/memcmp, 64-bit division, ...) in an ELF.
builtins() {
    "$NM" -C -S -t d "$1" | awk '$3 ~ /^[tT]$/ && ($4 ~ /^(compiler_builtins::|__aeabi_|__udiv|__div|__mod|__umod|mem(cpy|set|move|cmp)$)/) { n += $2 } END { print n + 0 }'
}

declare -A FEATS=(
    [baseline]="--no-default-features"
    [parse]="--no-default-features --features parse"
    [views]="--no-default-features --features views"
    [texts]="--no-default-features --features views,error-text"
    [full]="--no-default-features --features views,error-text,writer"
    [typical]="--no-default-features --features typical"
    [typdig]="--no-default-features --features typical,digests"
    [typdelta]="--no-default-features --features typical,delta"
    [typsig]="--no-default-features --features typical,signed,locate-panics"
    [typslots]="--no-default-features --features typical,slots"
    [typdigslots]="--no-default-features --features typical,digests,slots"
    [frozen]="--no-default-features --features frozen"
    [typfroz]="--no-default-features --features typical,frozen"
    [typed]="--no-default-features --features frozen-typed"
    [incr]="--no-default-features --features incremental"
    [typincr]="--no-default-features --features typical,incremental"
)

TRUST=()
STATE=()
# Flash of a link: .text + .rodata.
flash() { echo $(( $(section .text "$1") + $(section .rodata "$1") )); }
printf '%-22s %8s | %7s %7s %10s %9s | %7s %7s | %8s %7s %8s %6s | %6s %8s\n' target baseline parse views "validator" builtins texts writer typical frozen "+typical" typed incr "incr+typ"
for target in $TARGETS; do
    declare -A TEXT=() BUILTINS=()
    declare -A FLASH=()
    for v in baseline parse views texts full typical frozen typfroz typed incr typincr typdig typdelta typsig typslots typdigslots; do
        # shellcheck disable=SC2086
        cargo build -q --release --target "$target" ${FEATS[$v]} --target-dir "target/size-$v"
        TEXT[$v]=$(section .text "target/size-$v/$target/release/kiln-nopanic")
        BUILTINS[$v]=$(builtins "target/size-$v/$target/release/kiln-nopanic")
        FLASH[$v]=$(flash "target/size-$v/$target/release/kiln-nopanic")
    done
    printf '%-22s %8d | %7d %7d %10d %9d | %7d %7d | %8d %7d %8d %6d | %6d %8d\n' "$target" "${TEXT[baseline]}" \
        $((TEXT[parse] - TEXT[baseline])) $((TEXT[views] - TEXT[parse])) $((TEXT[views] - TEXT[baseline])) \
        $((BUILTINS[views] - BUILTINS[baseline])) \
        $((TEXT[texts] - TEXT[views])) $((TEXT[full] - TEXT[texts])) \
        $((TEXT[typical] - TEXT[baseline])) $((TEXT[frozen] - TEXT[baseline])) $((TEXT[typfroz] - TEXT[typical])) \
        $((TEXT[typed] - TEXT[baseline])) \
        $((TEXT[incr] - TEXT[baseline])) $((TEXT[typincr] - TEXT[typical]))
    TRUST+=("$(printf '%-22s %8d | %8d %8d %8d' "$target" $((TEXT[typical] - TEXT[baseline])) \
        $((TEXT[typdig] - TEXT[typical])) $((TEXT[typsig] - TEXT[typical])) $((TEXT[typdelta] - TEXT[typical])))")
    STATE+=("$(printf '%-22s %8d | %8d %8d' "$target" $((FLASH[typical] - FLASH[baseline])) \
        $((FLASH[typdigslots] - FLASH[typdig])) $((FLASH[typslots] - FLASH[typical])))")
done
echo
printf '%-22s %8s | %8s %8s %8s\n' target typical +digests +signed +delta
printf '%s\n' "${TRUST[@]}"
echo "(.text bytes; baseline is absolute, the rest are deltas incl. the builtins they pull in;"
echo " validator = parse + views, every directory API (budget 8192);"
echo " builtins = the part of validator that is compiler-builtins code: memcpy/memclr/memcmp, 64-bit division;"
echo " typical = FixedIndex parse + lookups by name + f32 reads + table walk, over the baseline;"
echo " frozen = Schema::parse + frozen::Reader validate/read of one framed record + field reads, over the baseline;"
echo " +typical = the same frozen code linked beside typical, over typical (shared directory validator/builtins);"
echo " typed = the same record through decode_framed with a compile-time Ty, over the baseline;"
echo " incr = Incremental fed in chunks (prefix_len, feed, next_needed/skip, directory, finish), over the baseline;"
echo " incr+typ = the same linked beside typical, over typical)"
echo "(second table: typical as above; each column what a firmware that already validates adds, over typical:"
echo " +digests = Model::parse_verified of a model file, every SHA-256 digest compared (sha2);"
echo " +signed = a signed update checked as it streams: Trust, UpdateCheck feed/finish (sha2, ed25519-dalek;"
echo "   built with the linking panic handler: curve25519-dalek keeps one bounds check, see ci.sh);"
echo " +delta = a delta's head, base id (SHA-256) and the plan of pieces that rebuild the new model)"
echo
printf '%-22s %8s | %8s %8s\n' target typical "+state" "+st+sha"
printf '%s\n' "${STATE[@]}"
echo "(third table, flash = .text + .rodata bytes: the update state, kiln-model's slots: A/B slots, trial boot,"
echo " confirm, the release counter's journal and the trusted keys over a NOR flash (the harness's RAM flash"
echo " driver included); +state = over typical + digests (SHA-256 already linked, as any update check links it);"
echo " +st+sha = over typical alone, SHA-256 for the records' digests included)"
