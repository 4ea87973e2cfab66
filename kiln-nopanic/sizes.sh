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
# Flash columns (the second table): .text + .rodata of each link, over typical.
#   +digests  -F typical,digests             Model::parse_verified, every digest compared
#   +signed   -F typical,signed,compact-sha2 a signed update streamed (Trust, UpdateCheck) with
#                                            sha2's compact SHA-512/256, as a device ships it
#   unrolled  -F typical,signed              the same with sha2's unrolled rounds (its default)
#   +delta    -F typical,delta               a delta's head, base id and plan
#   +state    -F typical,digests,slots       the update state (kiln-model's slots: A/B slots, trial boot,
#                                            confirm, the release counter's journal, trusted keys), over
#                                            typical + digests (SHA-256 is linked already)
#
#   TABLES=trust ./sizes.sh                  only the second table
#   BEFORE=/path/to/other/checkout ./sizes.sh
#                                            the second table for this checkout and, side by
#                                            side, baseline/typical/+signed of the other one
#                                            (its own kiln-nopanic, its own feature names; a
#                                            signed build that cannot link with the no-panic
#                                            handler is measured with locate-panics and marked *)
#   SIZE_DIR=/path                           where the builds go (default target/), one
#                                            directory per checkout and target
# The validator figure is views - baseline (directory parse + views). Each
# delta includes the compiler-builtins it pulls in (memcpy, u64 division, ...)
# and the harness's own glue that consumes the results. Every build here uses
# the no-panic handler, so each one is also a no-panic link check.
set -euo pipefail
cd "$(dirname "$0")"
# riscv32imc last: RISC-V's runtime is riscv-rt (QEMU virt's memory map), so its
# baseline is not comparable with the Cortex-M rows; the deltas are.
TARGETS=${TARGETS:-"thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf"}
TABLES=${TABLES:-all}
[ -n "${BEFORE:-}" ] && TABLES=trust
SIZE_DIR=${SIZE_DIR:-target}

if command -v arm-none-eabi-size >/dev/null; then SIZE=arm-none-eabi-size
else SIZE=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-size | head -1); fi
section() { "$SIZE" -A "$2" | awk -v s="$1" '$1 == s { print $2 }'; }
# Flash: .text + .rodata (riscv-rt also puts small constants in .srodata).
flash() { "$SIZE" -A "$1" | awk '$1 == ".text" || $1 == ".rodata" || $1 == ".srodata" { n += $2 } END { print n + 0 }'; }
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
    [typsig]="--no-default-features --features typical,signed,compact-sha2"
    [typsigu]="--no-default-features --features typical,signed"
    [typdigslots]="--no-default-features --features typical,digests,slots"
    [frozen]="--no-default-features --features frozen"
    [typfroz]="--no-default-features --features typical,frozen"
    [typed]="--no-default-features --features frozen-typed"
    [incr]="--no-default-features --features incremental"
    [typincr]="--no-default-features --features typical,incremental"
)

# One build of this crate in `dir` (a kiln-nopanic folder) with `feats` for `target`,
# in a target directory per checkout and target; prints the ELF's path.
build() {
    local dir=$1 target=$2 feats=$3 out
    out=$(realpath -m "$SIZE_DIR")/$(basename "$(realpath "$dir/..")")-$target
    # shellcheck disable=SC2086
    # A failed build must not leave the previous build's ELF to be measured.
    (cd "$dir" && nice -n 15 cargo build -q --release --target "$target" $feats --target-dir "$out") >&2 || return 1
    echo "$out/$target/release/kiln-nopanic"
}

# The other checkout's baseline, typical and +signed (flash), one line per target.
before() {
    local dir=$BEFORE/kiln-nopanic target elf mark base typ sig
    for target in $TARGETS; do
        elf=$(build "$dir" "$target" "--no-default-features") || return 1
        base=$(flash "$elf")
        elf=$(build "$dir" "$target" "--no-default-features --features typical") || return 1
        typ=$(flash "$elf")
        mark=" "
        if ! elf=$(build "$dir" "$target" "--no-default-features --features typical,signed" 2>/dev/null); then
            elf=$(build "$dir" "$target" "--no-default-features --features typical,signed,locate-panics") || return 1
            mark="*"
        fi
        sig=$(flash "$elf")
        printf '%-22s %8d %8d %8d%s\n' "$target" "$base" $((typ - base)) $((sig - typ)) "$mark"
    done
}
if [ -n "${BEFORE:-}" ]; then
    before_out=$(mktemp)
    trap 'rm -f "$before_out"' EXIT
    before >"$before_out" &
    before_pid=$!
fi

TRUST=()
if [ "$TABLES" = all ]; then
    printf '%-22s %8s | %7s %7s %10s %9s | %7s %7s | %8s %7s %8s %6s | %6s %8s\n' target baseline parse views "validator" builtins texts writer typical frozen "+typical" typed incr "incr+typ"
fi
for target in $TARGETS; do
    declare -A TEXT=() BUILTINS=() FLASH=()
    if [ "$TABLES" = all ]; then
        variants="baseline parse views texts full typical frozen typfroz typed incr typincr typdig typdelta typsig typsigu typdigslots"
    else
        variants="baseline typical typdig typdelta typsig typsigu typdigslots"
    fi
    for v in $variants; do
        elf=$(build . "$target" "${FEATS[$v]}") || exit 1
        TEXT[$v]=$(section .text "$elf")
        FLASH[$v]=$(flash "$elf")
        BUILTINS[$v]=$(builtins "$elf")
    done
    if [ "$TABLES" = all ]; then
        printf '%-22s %8d | %7d %7d %10d %9d | %7d %7d | %8d %7d %8d %6d | %6d %8d\n' "$target" "${TEXT[baseline]}" \
            $((TEXT[parse] - TEXT[baseline])) $((TEXT[views] - TEXT[parse])) $((TEXT[views] - TEXT[baseline])) \
            $((BUILTINS[views] - BUILTINS[baseline])) \
            $((TEXT[texts] - TEXT[views])) $((TEXT[full] - TEXT[texts])) \
            $((TEXT[typical] - TEXT[baseline])) $((TEXT[frozen] - TEXT[baseline])) $((TEXT[typfroz] - TEXT[typical])) \
            $((TEXT[typed] - TEXT[baseline])) \
            $((TEXT[incr] - TEXT[baseline])) $((TEXT[typincr] - TEXT[typical]))
    fi
    TRUST+=("$(printf '%-22s %8d %8d | %8d %8d %8d %8d %8d' "$target" "${FLASH[baseline]}" $((FLASH[typical] - FLASH[baseline])) \
        $((FLASH[typdig] - FLASH[typical])) $((FLASH[typsig] - FLASH[typical])) $((FLASH[typsigu] - FLASH[typical])) \
        $((FLASH[typdelta] - FLASH[typical])) $((FLASH[typdigslots] - FLASH[typdig])))")
done
if [ "$TABLES" = all ]; then
echo "(.text bytes; baseline is absolute, the rest are deltas incl. the builtins they pull in;"
echo " validator = parse + views, every directory API (budget 8192);"
echo " builtins = the part of validator that is compiler-builtins code: memcpy/memclr/memcmp, 64-bit division;"
echo " typical = FixedIndex parse + lookups by name + f32 reads + table walk, over the baseline;"
echo " frozen = Schema::parse + frozen::Reader validate/read of one framed record + field reads, over the baseline;"
echo " +typical = the same frozen code linked beside typical, over typical (shared directory validator/builtins);"
echo " typed = the same record through decode_framed with a compile-time Ty, over the baseline;"
echo " incr = Incremental fed in chunks (prefix_len, feed, next_needed/skip, directory, finish), over the baseline;"
echo " incr+typ = the same linked beside typical, over typical)"
fi
echo
echo "flash (.text + .rodata), this checkout:"
printf '%-22s %8s %8s | %8s %8s %8s %8s %8s\n' target baseline typical +digests +signed unrolled +delta +state
printf '%s\n' "${TRUST[@]}"
echo "(baseline absolute, typical over it (with the 20,192-byte example model in .rodata: every build but"
echo " the baseline embeds it); each later column what a firmware that already validates adds, over typical:"
echo " +digests = Model::parse_verified of a model file, every SHA-256 digest compared (sha2);"
echo " +signed = a signed update checked as it streams: Trust, UpdateCheck feed/finish (SHA-256, SHA-512"
echo "   in sha2's compact form, Ed25519 on curve25519-dalek's arithmetic; links with the no-panic handler);"
echo " unrolled = +signed with sha2's default unrolled rounds;"
echo " +delta = a delta's head, base id (SHA-256) and the plan of pieces that rebuild the new model;"
echo " +state = the update state, kiln-model's slots (A/B slots, trial boot, confirm, the release counter's"
echo "   journal, the trusted keys) over a NOR flash (the harness's RAM flash driver included), over"
echo "   typical + digests, whose SHA-256 the records' digests share)"
if [ -n "${BEFORE:-}" ]; then
    wait "$before_pid" || { echo "the builds of $BEFORE failed" >&2; exit 1; }
    echo
    echo "flash (.text + .rodata), $BEFORE:"
    printf '%-22s %8s %8s %8s\n' target baseline typical +signed
    cat "$before_out"
    echo "(* = links only with the locate-panics handler: a panic path is left in the signed check)"
fi
