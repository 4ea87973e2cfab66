// The npm session's verdict on a graph, for kiln-py/tests/test_onnx_agree.py
// (the same graphs through Python's kiln.onnx.check_graph must get the same):
//   node kiln-wasm/test-support/onnx-check.mjs GRAPH KILN_FILE...
// checks GRAPH with checkOnnxGraph against the Kiln files given (each under
// its file name; a sharded model's manifest and every shard) and prints one
// line of JSON: {"ok": true, "checked": [[name, "kiln" | "inline"], ...]} or
// {"ok": false, "kind": "graph" | "kiln", "initializer": name | null, "message"}.
//   node kiln-wasm/test-support/onnx-check.mjs --table
// prints rule R1's table as the package's onnx module holds it:
// {"reads_data": [[op, [position, ...]], ...], "propagates": [op, ...], "inline_limit", "other_domain_limit"}.
// The package is ../pkg (kiln-wasm/build.sh), or KILN_WASM_PKG.
import { readFileSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const pkg = process.env.KILN_WASM_PKG ?? new URL('../pkg/', import.meta.url).pathname;
const kiln = await import(pathToFileURL(resolve(pkg, 'index.js')).href);

if (process.argv[2] === '--table') {
  const { READS_DATA, PROPAGATES, INLINE_LIMIT, OTHER_DOMAIN_LIMIT } = await import(pathToFileURL(resolve(pkg, 'onnx.js')).href);
  console.log(
    JSON.stringify({
      reads_data: [...READS_DATA],
      propagates: [...PROPAGATES],
      inline_limit: INLINE_LIMIT,
      other_domain_limit: OTHER_DOMAIN_LIMIT,
    }),
  );
  process.exit(0);
}

const [graphPath, ...kilnPaths] = process.argv.slice(2);
if (graphPath === undefined || kilnPaths.length === 0) {
  console.error('usage: node onnx-check.mjs GRAPH KILN_FILE...');
  process.exit(2);
}
const files = kilnPaths.map((p) => ({ path: basename(p), data: new Uint8Array(readFileSync(p)) }));
let verdict;
try {
  const r = await kiln.checkOnnxGraph(new Uint8Array(readFileSync(graphPath)), { files });
  verdict = { ok: true, checked: r.checked };
} catch (e) {
  const isKiln = e instanceof kiln.KilnError;
  verdict = { ok: false, kind: isKiln ? 'kiln' : 'graph', initializer: isKiln ? null : (e.initializer ?? null), message: String(e.message) };
}
console.log(JSON.stringify(verdict));
