#!/usr/bin/env bash
# Builds the npm package kiln-wasm/pkg/ from a fresh clone:
#   1. the wasm32 target and the pinned wasm-bindgen CLI (installed only if missing),
#   2. cargo build of one module per feature set (profile wasm: release-size, LTO, one codegen
#      unit, panic=abort; the validator at opt-level 2, sha2 at 3): open, full, and the
#      test-only module into pkg-testing/ (never packed),
#   3. wasm-bindgen --target web (one glue, the full module's, for both; its default
#      `new URL(..., import.meta.url)` fetch taken out: the entries always pass the module),
#   4. wasm-opt -Oz from binaryen@132 (npm, NOT Debian's),
#   5. the full module embedded once (wasm/kiln_full_inline.js) for every entry, decoded at
#      import by a loop in a tiny module of its own (js/unpack.wat, assembled by wasm-as into
#      modules.js); the open module is the one .wasm file (kiln-wasm/slim's),
#   6. the hand-written JS API, types and README from js/, the licenses from the repository
#      root (the one copy; the crates link to it too); index.cjs (the CommonJS entry, reading
#      the embedded module's file) bundled from js/node-entry.mjs by esbuild (pinned in package-lock.json).
# Prints the sizes (each module, the pages, the tarball) and enforces issue 42's budgets for the
# open module and the slim page. Usage: kiln-wasm/build.sh [--quiet]
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
  # Not --locked: the registry lacks one dependency version its lock file names.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if [ ! -x "$HERE/node_modules/.bin/wasm-opt" ] || [ ! -x "$HERE/node_modules/.bin/esbuild" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
  say "installing binaryen, esbuild and the test tools from package-lock.json"
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
fi

# 2. Build: one module per feature set (src/lib.rs, Cargo.toml "features"):
#    open (directories, model files, digests: what a page needs to open and
#    validate a model), full (open + remote: a sharded model's manifest +
#    frozen: Frozen values), and the test-only module (full + check_direct,
#    table_layout, dtype_bits) into pkg-testing/, which is never packed. Each
#    is built as kiln_wasm.wasm into a folder of its own, so that all three
#    import from the same glue module name and one glue drives any of them.
PKG="$HERE/pkg"
TESTING="$HERE/pkg-testing"
rm -rf "$PKG" "$TESTING"
mkdir -p "$PKG/wasm" "$TESTING"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
MODULES="open:open full:open,remote,frozen,values testing:testing"
for m in $MODULES; do
  name="${m%%:*}"
  features="${m##*:}"
  say "cargo build --features $features (wasm32, profile wasm: release-size with the validator at opt-level 2, SHA-256 at 3)"
  (cd "$ROOT" && cargo build -p kiln-wasm --target wasm32-unknown-unknown --profile wasm \
    --no-default-features --features "$features" ${QUIET:+--quiet})
  mkdir -p "$WORK/$name" "$WORK/$name-out"
  cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm/kiln_wasm.wasm" "$WORK/$name/kiln_wasm.wasm"
  # 3. Bindings, 4. size.
  wasm-bindgen --target web --out-dir "$WORK/$name-out" --no-typescript \
    --remove-name-section --remove-producers-section "$WORK/$name/kiln_wasm.wasm"
  "$HERE/node_modules/.bin/wasm-opt" -Oz "$WORK/$name-out/kiln_wasm_bg.wasm" -o "$WORK/$name-out/kiln_wasm_bg.wasm"
done
# The glue is the full module's (the open module imports a subset of what it
# provides and exports a subset of what it calls: the calls of the other two
# parts' classes, never made on the open module). No fallback fetch of a file
# next to the glue: bundlers would try to emit it (webpack, vite) or leave a
# URL that 404s (esbuild). The entries always pass the module (slim.js its URL).
GLUE="$PKG/wasm/kiln_wasm.js"
cp "$WORK/full-out/kiln_wasm.js" "$GLUE"
DEFAULT_URL="module_or_path = new URL('kiln_wasm_bg.wasm', import.meta.url);"
if ! grep -qF "$DEFAULT_URL" "$GLUE"; then
  echo "kiln-wasm: wasm-bindgen's glue changed: no default module URL to take out of $GLUE" >&2
  exit 1
fi
sed -i "s|$DEFAULT_URL|throw new Error('kiln-wasm: no WebAssembly module given');|" "$GLUE"
if grep -q "import\.meta" "$GLUE"; then
  echo "kiln-wasm: $GLUE still refers to import.meta" >&2
  exit 1
fi
# A second copy of the glue, for kiln-wasm/slim's second instance (the full
# module, loaded when the remote or Frozen parts are first needed): a glue
# module holds one instance.
cp "$GLUE" "$PKG/wasm/kiln_full.js"
cp "$WORK/open-out/kiln_wasm_bg.wasm" "$PKG/wasm/kiln_wasm_bg.wasm"
cp "$WORK/full-out/kiln_wasm_bg.wasm" "$WORK/kiln_full_bg.wasm"
cp "$WORK/testing-out/kiln_wasm.js" "$TESTING/kiln_testing.js"
cp "$WORK/testing-out/kiln_wasm_bg.wasm" "$TESTING/kiln_testing_bg.wasm"

# 5. The full module, embedded once (wasm/kiln_full_inline.js) for the
# default ES module entry and read by the others: index.cjs reads the file's
# text (wasmFromText in js/modules.js), slim.js imports it when the remote or
# Frozen part is first needed. The open module is the one .wasm file (what
# kiln-wasm/slim fetches). The string is ASCII that gzip packs within 7% of
# the .wasm (base64 costs 30%: it splits bytes across characters): byte b is
# the character b below 0x7e, 0x7e then b - 0x80 from 0x80, 0x7f then b for
# 0x7e and 0x7f (bytesOf), with backslash, quote, CR, LF and NUL escaped in the
# source. ASCII because minifiers write what an escape stands for as it is:
# above 0x7f that is UTF-8, which a classic script served without a charset misreads.
node -e '
  const fs = require("fs");
  const esc = { 0x5c: "\\\\", 0x22: "\\\"", 0x0a: "\\n", 0x0d: "\\r", 0: "\\x00" };
  const ch = (c) => esc[c] ?? String.fromCharCode(c);
  let s = "";
  for (const b of fs.readFileSync(process.argv[1])) s += b >= 0x80 ? "\x7e" + ch(b - 0x80) : b >= 0x7e ? "\x7f" + ch(b) : ch(b);
  fs.writeFileSync(process.argv[2], "// The full kiln-wasm module, one or two ASCII characters a byte (generated by build.sh; bytesOf in modules.js reads it).\nexport const wasm =\n  \"" + s + "\";\n");
' "$WORK/kiln_full_bg.wasm" "$PKG/wasm/kiln_full_inline.js"

# 6. The package around it.
cp "$HERE"/js/*.js "$HERE/js/index.d.ts" "$HERE/js/package.json" "$HERE/js/README.md" "$ROOT/LICENSE-MIT" "$ROOT/LICENSE-APACHE" "$PKG/"
# modules.js's decoder of the embedded module (js/unpack.wat), assembled by
# binaryen's wasm-as (the pinned one) into its byte array.
"$HERE/node_modules/.bin/wasm-as" "$HERE/js/unpack.wat" -o "$WORK/unpack.wasm"
node -e '
  const fs = require("fs");
  const [wasm, file] = process.argv.slice(1);
  const empty = "[/* unpack.wat */]";
  const src = fs.readFileSync(file, "utf8");
  if (src.split(empty).length !== 2) { console.error("kiln-wasm: " + file + " has no one " + empty + " to fill"); process.exit(1); }
  fs.writeFileSync(file, src.replace(empty, JSON.stringify([...fs.readFileSync(wasm)])));
' "$WORK/unpack.wasm" "$PKG/modules.js"
# The ES modules ship minified (no --keep-names: its calls would keep bundlers from
# dropping unused code); the readable sources are js/ in the repository.
# esbuild's output is ASCII (its default charset), and each file stays a module
# of its own with its imports, so bundlers split and tree-shake as before.
# wasm/kiln_full_inline.js is left as written: it is one string.
MIN="$WORK/min"
mkdir -p "$MIN/wasm"
(cd "$PKG" && "$HERE/node_modules/.bin/esbuild" *.js wasm/kiln_wasm.js wasm/kiln_full.js --minify \
  --format=esm --log-level=warning --outbase=. --outdir="$MIN")
cp "$MIN"/*.js "$PKG/"
cp "$MIN"/wasm/*.js "$PKG/wasm/"
# The declarations for `require` (TypeScript reads .d.cts as a CommonJS
# module's): index.d.ts's, re-exported (test/types.test.mjs compiles a
# CommonJS project against it), not a second copy.
printf '%s\n' "// The declarations of the CommonJS entry (index.cjs): the ES module entry's." "export * from './index.js';" > "$PKG/index.d.cts"
# The CommonJS entry: js/node-entry.mjs and everything it imports in one
# minified file, the modules read from wasm/*.wasm (no embedded copy).
cp "$HERE/js/node-entry.mjs" "$PKG/node-entry.mjs"
"$HERE/node_modules/.bin/esbuild" "$PKG/node-entry.mjs" --bundle --format=cjs --platform=node --target=es2020 \
  --minify --log-level=warning --outfile="$PKG/index.cjs"
rm "$PKG/node-entry.mjs"
# The npm version is the crate's version.
VERSION="$(cd "$ROOT" && cargo pkgid -p kiln-wasm | sed 's/.*[#@]//')"
node -e 'const f=process.argv[1]; const p=JSON.parse(require("fs").readFileSync(f,"utf8")); p.version=process.argv[2]; require("fs").writeFileSync(f, JSON.stringify(p, null, 2) + "\n");' "$PKG/package.json" "$VERSION"

# Sizes, and the budgets of issue 42 (bytes; KB = 1000 bytes).
gz() { gzip -9 -c "$1" | wc -c; }
OVER=0
: > "$PKG/wasm/SIZE"
for m in "open $PKG/wasm/kiln_wasm_bg.wasm" "full $WORK/kiln_full_bg.wasm"; do
  set -- $m
  RAW=$(stat -c %s "$2")
  GZ=$(gz "$2")
  echo "$1 $RAW $GZ" >> "$PKG/wasm/SIZE"
  say "the $1 module: $RAW bytes, $GZ gzipped"
done
OPEN_GZ=$(awk '$1 == "open" { print $3 }' "$PKG/wasm/SIZE")
# What a page downloads to open and validate a model file before its first
# call (test-support/page-size.mjs: the JS it imports, bundled, minified and
# split as a bundler does, lazily loaded chunks not counted, and the .wasm).
page() { node "$HERE/test-support/page-size.mjs" "$PKG" "$@"; }
SLIM_PAGE=$(page "import { init, parseModel } from './slim.js'; await init(); globalThis.k = parseModel;" wasm/kiln_wasm_bg.wasm)
SLIM_ALL=$(page "import * as kiln from './slim.js'; await kiln.init(); globalThis.k = kiln;" wasm/kiln_wasm_bg.wasm)
DEFAULT_PAGE=$(page "import { parseModel } from './index.js'; globalThis.k = parseModel;")
DEFAULT_ALL=$(page "import * as kiln from './index.js'; globalThis.k = kiln;")
say "a page that opens and validates a model (parseModel): with kiln-wasm/slim $SLIM_PAGE bytes gzipped, the .wasm included (every export: $SLIM_ALL); with the default entry $DEFAULT_PAGE (every export: $DEFAULT_ALL; the full module embedded)"
echo "slim-page $SLIM_PAGE" >> "$PKG/wasm/SIZE"
echo "slim-page-all $SLIM_ALL" >> "$PKG/wasm/SIZE"
echo "default-page $DEFAULT_PAGE" >> "$PKG/wasm/SIZE"
echo "default-page-all $DEFAULT_ALL" >> "$PKG/wasm/SIZE"
if [ "$OPEN_GZ" -gt 48000 ]; then
  echo "kiln-wasm: the open-and-validate module (kiln_wasm_bg.wasm) is over its 48 KB gzipped budget: $OPEN_GZ" >&2
  OVER=1
fi
if [ "$SLIM_PAGE" -gt 64000 ]; then
  echo "kiln-wasm: the slim page's download is over its 64 KB gzipped budget: $SLIM_PAGE" >&2
  OVER=1
fi
TARBALL=$(cd "$PKG" && npm pack --dry-run --json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s)[0].size))')
echo "tarball $TARBALL" >> "$PKG/wasm/SIZE"
say "npm pack: $TARBALL bytes"
if [ "$TARBALL" -gt 224000 ]; then
  echo "kiln-wasm: the tarball is over its 224 kB budget: $TARBALL" >&2
  OVER=1
fi
[ "$OVER" = 0 ] || exit 1
