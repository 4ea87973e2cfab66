#!/usr/bin/env bash
# Everything the demo's browser tests need, then the tests:
# builds the site (and kiln-wasm/pkg when stale), installs playwright-core (pinned in
# package-lock.json) and Debian's chromium when missing, runs node --test web-demo/test/.
# Screenshots and axe.json land in web-demo/test-artifacts/ (gitignored). Usage: web-demo/ci.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

if [ ! -d "$HERE/node_modules/playwright-core" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
  (cd "$HERE" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
fi
if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  echo "web-demo: installing Debian's chromium (playwright downloads no browser here)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
export CHROMIUM="${CHROMIUM:-$(command -v chromium)}"
"$HERE/build.sh"
cd "$ROOT"
node --test web-demo/test/
