#!/usr/bin/env bash
# CI for the C API (kiln.h, libkiln.a) on the host:
#   1. kiln.h is what cbindgen 0.29.4 generates now (regenerated to a temp file and diffed;
#      cbindgen expands the crate's macros, see kiln-c/cbindgen.toml)
#   2. libkiln.a builds for the host, for thumbv6m, thumbv7m and thumbv7em, and for riscv32imc
#   3. the C test program (C99, -Wall -Wextra -pedantic -Werror, ASan + UBSan) gives the
#      Rust verdict on every vector (kiln-c/api/tests/api.rs writes them) and runs the
#      example model end to end; a C++ file includes kiln.h, compiles and runs
#   3b. the slots' C test (kiln-c/tests/c/test_slots.c): provisioning, trial boot, confirm, the
#      release counter, and a power cut in every flash operation of an update
#   4. the README's C example is kiln-c/examples/readme.c verbatim, and builds and runs
#      through CMake (add_subdirectory + kiln::kiln) when cmake is installed
# Prerequisites (scripts/setup.sh): cbindgen 0.29.4, a C/C++ compiler, cmake.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()
step() { echo "== kiln-c: $*"; }

step "kiln.h is up to date (cbindgen $(cbindgen --version 2>/dev/null | awk '{print $2}'))"
if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen 0.29.4" ]; then
    echo "FAIL cbindgen 0.29.4 is required (scripts/setup.sh installs it)" >&2
    failed+=(header)
# Macro expansion (cbindgen.toml's parse.expand) needs RUSTC_BOOTSTRAP=1 on a stable rustc; its
# check build goes to a directory of its own, so the flag leaves the shared target's builds alone.
elif ! RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target_dir/cbindgen-expand" \
    cbindgen -q --config kiln-c/cbindgen.toml --crate kiln-c-api --output "$tmp/kiln.h" kiln-c/api; then
    failed+=(header)
elif ! diff -u kiln-c/include/kiln.h "$tmp/kiln.h"; then
    echo "FAIL kiln-c/include/kiln.h is stale: regenerate it with" >&2
    echo "  RUSTC_BOOTSTRAP=1 cbindgen --config kiln-c/cbindgen.toml --crate kiln-c-api --output kiln-c/include/kiln.h kiln-c/api" >&2
    failed+=(header)
else
    echo "OK   kiln-c/include/kiln.h"
fi

step "libkiln.a for the host, the Cortex-M targets and RISC-V (riscv32imc)"
cargo build -q --release --locked -p kiln-c
for t in thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf riscv32imc-unknown-none-elf; do
    cargo build -q --release --locked -p kiln-c --target "$t"
    ls -l "$target_dir/$t/release/libkiln.a" | awk -v t="$t" '{print "OK   " t ": libkiln.a, " $5 " bytes"}'
done
lib=$target_dir/release/libkiln.a
libs=(-lpthread -ldl -lm)

step "vectors: every input with the Rust verdict (kiln-c/api/tests/api.rs)"
KILN_C_VECTORS=$tmp/vectors.tsv cargo test -q --locked -p kiln-c-api --test api write_vectors_for_the_c_test >/dev/null
echo "OK   $(wc -l <"$tmp/vectors.tsv") inputs"

step "C test program (C99, ASan + UBSan)"
cc -std=c99 -Wall -Wextra -pedantic -Werror -g -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Ikiln-c/include kiln-c/tests/c/test_kiln.c "$lib" "${libs[@]}" -o "$tmp/test_kiln"
if "$tmp/test_kiln" "$tmp/vectors.tsv"; then echo "OK   test_kiln"; else failed+=(c-test); fi

step "the slots' C API (C99, ASan + UBSan): trial boot, confirm, release counter, a power cut in every flash operation"
cc -std=c99 -Wall -Wextra -pedantic -Werror -g -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Ikiln-c/include kiln-c/tests/c/test_slots.c "$lib" "${libs[@]}" -o "$tmp/test_slots"
if "$tmp/test_slots"; then echo "OK   test_slots"; else failed+=(c-slots); fi

step "C++ (kiln.h under -std=c++11 -pedantic)"
c++ -std=c++11 -Wall -Wextra -pedantic -Werror -Ikiln-c/include kiln-c/tests/c/test_cpp.cpp "$lib" "${libs[@]}" \
    -o "$tmp/test_cpp"
if "$tmp/test_cpp"; then echo "OK   test_cpp"; else failed+=(cpp); fi

step "the README's C example"
awk '/<!-- kiln-c\/examples\/readme.c -->/ { on = 1; next } on && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit } inside { print }' README.md >"$tmp/readme.c"
if ! diff -u kiln-c/examples/readme.c "$tmp/readme.c"; then
    echo "FAIL the README's C example differs from kiln-c/examples/readme.c" >&2
    failed+=(readme)
elif command -v cmake >/dev/null; then
    # The CMake tree stays in the clone (a cache in the shared target dir would name another clone).
    build=$root/target/cmake/kiln-c-examples
    cmake -S kiln-c/examples -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; failed+=(readme); }
    if [ -x "$build/readme-example" ] && "$build/readme-example" spec/examples/digits-mlp.kiln; then
        echo "OK   README example, built with CMake (add_subdirectory(kiln-c), kiln::kiln), accepts the example"
    else
        failed+=(readme)
    fi
    set +e
    head -c 100 spec/examples/digits-mlp.kiln >"$tmp/cut.kiln"
    "$build/readme-example" "$tmp/cut.kiln"
    rc=$?
    set -e
    [ "$rc" = 3 ] && echo "OK   README example rejects a truncated copy with EOF (exit 3)" || failed+=(readme-eof)
else
    cc -std=c99 -Wall -Wextra -pedantic -Werror -c -Ikiln-c/include "$tmp/readme.c" -o "$tmp/readme.o"
    echo "OK   README example compiles (cmake not installed: CMake build skipped)"
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "kiln-c CI FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "kiln-c CI passed"
