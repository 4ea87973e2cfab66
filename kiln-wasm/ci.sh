#!/usr/bin/env bash
# CI for the browser side, idempotent: installs what is missing (the wasm32 target,
# wasm-bindgen-cli 0.2.130, npm packages pinned in the package-lock files: binaryen, esbuild,
# playwright-core, TypeScript and the bundlers of the toolchain tests; Debian's chromium), then runs
#   0. cargo clippy -p kiln-wasm --target wasm32-unknown-unknown -D warnings (the core's strict lint set),
#      with every feature and with the open module's alone (build.sh's two modules)
#   1. cargo test -p kiln-wasm        (in CI: the cargo-test suite; the incremental validator as JS drives it, the Frozen path and
#                                      model files: verdicts == the core's Parser/Reader/parse_any, on mutations)
#   2. kiln-wasm/build.sh             (pkg/, and the wasm size budget), cargo build -p kiln-cli (the
#                                      core's Frozen decoding, `kiln decode`, for the Frozen differential test)
#   3. node --test kiln-wasm/test/    (goldens, views, Frozen values (against `kiln decode` too), the
#                                      JS tables held to the core's, model files, loader, range requests on
#                                      sparse 100 MiB / 6 GiB / 20 GiB files, multi-GiB parses; WebGPU
#                                      upload in Chromium (gpu.test.mjs, about 3 s); openRemote caching (in memory, and
#                                      OPFS / Cache Storage across a Chromium restart, about 4 s); the packed
#                                      package in Node ESM and CommonJS, tsc --strict type tests, and every
#                                      toolchain of js/README.md's Bundlers section built and run in headless
#                                      Chromium: vite 5 and latest (build, dev server), esbuild ESM/IIFE,
#                                      webpack 5, rollup, module workers, kiln-wasm/slim; the converted digits
#                                      ONNX graph through createOnnxSession with the pinned onnxruntime-web, in
#                                      Node and Chromium (wasm, WebGPU), about 7 s)
#   3b. node kiln-wasm/bench/sharded.mjs --quick (openRemote of a 5,000-tensor sharded model: the smoke size),
#       node kiln-wasm/bench/gpu.mjs 16 (the WebGPU upload benchmark at 16 MiB, a few seconds; 256 locally)
#   4. web-demo/ci.sh                 (the demo in headless Chromium, screenshots, the 390 px layout)
#   5. with --bench: the Node and Chromium benchmarks (64 MiB quick mode with --quick-bench)
# Warm machine: 1.5 to 2 minutes (the toolchain matrix about 35 s of it). Usage: kiln-wasm/ci.sh [--bench | --quick-bench]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cd "$ROOT"

node -e 'const [a]=process.versions.node.split(".").map(Number); if (a < 20) { console.error("kiln-wasm: Node 20 or newer is required"); process.exit(1); }'

if [ ! -d "$HERE/node_modules/binaryen" ] || [ ! -d "$HERE/node_modules/vite5" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
  # `npm install --no-save` with the lock file, not `npm ci`: vite 8 names an
  # optional dependency the registry does not have, which `npm ci`'s lock
  # check refuses; the versions installed are the lock file's either way.
  (cd "$HERE" && npm install --no-save --prefer-offline --no-audit --no-fund --loglevel=error)
fi

echo "== cargo clippy -p kiln-wasm (wasm32)"
cargo clippy -p kiln-wasm --target wasm32-unknown-unknown --all-features --quiet -- -D warnings
cargo clippy -p kiln-wasm --target wasm32-unknown-unknown --no-default-features --features open --quiet -- -D warnings

# Under scripts/run-suites.py (KILN_WORKSPACE_FEATURES: the workspace test build's features) the
# cargo-test suite runs these tests in its one workspace build, and the kiln CLI below is that
# build's: neither is built again with another feature set.
if [ -z "${KILN_WORKSPACE_FEATURES:-}" ]; then
  echo "== cargo test -p kiln-wasm"
  cargo test -p kiln-wasm --quiet
fi

echo "== kiln-wasm/build.sh"
"$HERE/build.sh"

echo "== cargo build -p kiln-cli (test/frozen-differential.test.mjs runs its decode)"
if [ -n "${KILN_WORKSPACE_FEATURES:-}" ]; then
  cargo build --workspace --locked --features "$KILN_WORKSPACE_FEATURES" --bin kiln --quiet
else
  cargo build -p kiln-cli --quiet
fi

# test/browser.test.mjs needs Chromium (it skips without it): install it before step 3.
if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  echo "kiln-wasm: installing Debian's chromium (playwright downloads no browser here)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
export CHROMIUM="${CHROMIUM:-$(command -v chromium)}"

echo "== node --test kiln-wasm/test/"
node --test kiln-wasm/test/

echo "== node kiln-wasm/bench/sharded.mjs --quick"
node "$HERE/bench/sharded.mjs" --quick >/dev/null
echo "== node kiln-wasm/bench/gpu.mjs 16"
node "$HERE/bench/gpu.mjs" 16 >/dev/null

echo "== web-demo/ci.sh"
"$ROOT/web-demo/ci.sh"

case "${1:-}" in
  --bench) node "$HERE/bench/node.mjs" && node "$HERE/bench/chromium.mjs" ;;
  --quick-bench) node "$HERE/bench/node.mjs" --quick && node "$HERE/bench/chromium.mjs" --quick ;;
esac
