#!/usr/bin/env bash
# Builds the npm package kiln-wasm/pkg/ from a fresh clone:
#   1. the wasm32 target and the pinned wasm-bindgen CLI (installed only if missing),
#   2. cargo build (profile release-size: LTO, one codegen unit, panic=abort),
#   3. wasm-bindgen --target web, 4. wasm-opt -Oz from binaryen@132 (npm, NOT Debian's),
#   5. the hand-written JS API, types and README from js/.
# Prints the .wasm size raw and gzipped. Usage: kiln-wasm/build.sh [--quiet]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
WASM_BINDGEN_VERSION=0.2.130
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
QUIET="${1:-}"

say() { [ "$QUIET" = "--quiet" ] || echo "kiln-wasm: $*"; }

# 1. Toolchain pieces, idempotent.
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  say "installing the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 5 minutes, once)"
  # Not --locked: the registry lacks one locked dependency version (see shared/TOOLCHAIN.md).
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if [ ! -x "$HERE/node_modules/.bin/wasm-opt" ]; then
  say "installing binaryen and playwright-core from package-lock.json"
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
fi

# 2. Build.
say "cargo build (wasm32, release-size)"
(cd "$ROOT" && cargo build -p kiln-wasm --target wasm32-unknown-unknown --profile release-size ${QUIET:+--quiet})
WASM="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release-size/kiln_wasm.wasm"

# 3. Bindings.
PKG="$HERE/pkg"
rm -rf "$PKG"
mkdir -p "$PKG/wasm"
wasm-bindgen --target web --out-dir "$PKG/wasm" --no-typescript \
  --remove-name-section --remove-producers-section "$WASM"
rm -f "$PKG/wasm/.gitignore" "$PKG/wasm/package.json"

# 4. Size.
"$HERE/node_modules/.bin/wasm-opt" -Oz "$PKG/wasm/kiln_wasm_bg.wasm" -o "$PKG/wasm/kiln_wasm_bg.wasm"

# 5. The package around it.
cp "$HERE"/js/*.js "$HERE/js/kiln.d.ts" "$HERE/js/package.json" "$HERE/js/README.md" "$PKG/"
# The npm version is the crate's version.
VERSION="$(cd "$ROOT" && cargo pkgid -p kiln-wasm | sed 's/.*[#@]//')"
node -e 'const f=process.argv[1]; const p=JSON.parse(require("fs").readFileSync(f,"utf8")); p.version=process.argv[2]; require("fs").writeFileSync(f, JSON.stringify(p, null, 2) + "\n");' "$PKG/package.json" "$VERSION"

RAW=$(stat -c %s "$PKG/wasm/kiln_wasm_bg.wasm")
GZ=$(gzip -9 -c "$PKG/wasm/kiln_wasm_bg.wasm" | wc -c)
echo "$RAW $GZ" > "$PKG/wasm/SIZE"
say "pkg/wasm/kiln_wasm_bg.wasm: $RAW bytes, $GZ gzipped (budget 61440 gzipped)"
if [ "$GZ" -gt 61440 ]; then
  echo "kiln-wasm: the wasm module is over its 60 KB gzipped budget" >&2
  exit 1
fi
