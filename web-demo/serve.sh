#!/usr/bin/env bash
# Builds what the page needs and serves it on http://127.0.0.1:PORT/ (default 8080).
# Usage: web-demo/serve.sh [PORT]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${1:-8080}"
"$HERE/build.sh"
echo "web-demo: open http://127.0.0.1:$PORT/  (Ctrl-C to stop)"
exec python3 "$HERE/serve.py" "$PORT" "$HERE/www"
