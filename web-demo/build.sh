#!/usr/bin/env bash
# Assembles the static site in web-demo/www/: the page, the kiln-wasm package
# (built by kiln-wasm/build.sh when missing or older than its sources) and the
# example files. Usage: web-demo/build.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PKG="$ROOT/kiln-wasm/pkg"

stale=0
if [ ! -f "$PKG/wasm/kiln_wasm_bg.wasm" ]; then
  stale=1
elif [ -n "$(find "$ROOT/kiln-wasm/src" "$ROOT/kiln-wasm/js" "$ROOT/kiln-nostd/src" "$ROOT/kiln-wasm/Cargo.toml" -newer "$PKG/wasm/kiln_wasm_bg.wasm" -type f 2>/dev/null | head -1)" ]; then
  stale=1
fi
if [ "$stale" = 1 ]; then
  "$ROOT/kiln-wasm/build.sh" --quiet
fi

WWW="$HERE/www"
rm -rf "$WWW"
mkdir -p "$WWW/kiln-wasm"
cp "$HERE"/src/* "$WWW/"
cp -r "$PKG"/*.js "$PKG/wasm" "$WWW/kiln-wasm/"
node "$HERE/make-samples.mjs"
echo "web-demo: site assembled in $WWW"
