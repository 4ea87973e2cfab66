#!/usr/bin/env bash
# Installs everything the project's builds and tests need, and only what is
# missing, so a second run costs seconds. Used by scripts/test-all.sh (and so
# by CI) and safe to run by hand. Root is expected (CI runs as root); sudo is
# used otherwise.
set -euo pipefail

SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
log() { printf '== setup: %s\n' "$*"; }

# Debian packages: browser tests, QEMU (Cortex-M system + s390x user mode),
# the s390x cross linker, ARM binutils for sizes, GNU time for peak RSS, the
# 32-bit x86 C runtime for the i686 job (not gcc-multilib: it removes the s390x
# cross compiler).
apt_want=(chromium qemu-system-arm qemu-user gcc-s390x-linux-gnu libc6-dev-s390x-cross binutils-arm-none-eabi time
    lib32gcc-12-dev libc6-dev-i386)
apt_missing=()
for p in "${apt_want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || apt_missing+=("$p")
done
if [ "${#apt_missing[@]}" -gt 0 ]; then
    log "apt-get install ${apt_missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi

# Rust targets and components. The Windows and macOS targets are only
# checked (`cargo check`/`clippy` need their standard library, not a linker).
targets=(wasm32-unknown-unknown thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf s390x-unknown-linux-gnu
    i686-unknown-linux-gnu
    x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin)
installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
    grep -qx "$t" <<<"$installed" || { log "rustup target add $t"; rustup target add "$t"; }
done
rustup component list --installed | grep -q '^llvm-tools' || rustup component add llvm-tools
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
if ! rustup toolchain list | grep -q '^nightly'; then
    log "rustup toolchain install nightly"
    rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
for c in miri rust-src; do
    rustup +nightly component list --installed | grep -q "^$c" || rustup +nightly component add "$c"
done

# Cargo tools, pinned. wasm-bindgen's CLI must equal the crate version.
if ! command -v wasm-bindgen >/dev/null || [ "$(wasm-bindgen --version)" != "wasm-bindgen 0.2.130" ]; then
    log "cargo install wasm-bindgen-cli 0.2.130 (about 5 minutes)"
    cargo install -q wasm-bindgen-cli --version 0.2.130
fi
command -v cargo-fuzz >/dev/null || { log "cargo install cargo-fuzz"; cargo install -q cargo-fuzz --version 0.13.2; }

# Python packages for the conversion tests (writers nobody here wrote).
if ! python3 -c 'import numpy, safetensors, gguf' 2>/dev/null; then
    log "pip install numpy safetensors gguf"
    python3 -m pip install -q --disable-pip-version-check numpy safetensors gguf
fi
log "done"
