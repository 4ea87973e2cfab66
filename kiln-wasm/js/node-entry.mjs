// Source of index.cjs, the CommonJS entry (build.sh bundles it with esbuild;
// it is not shipped as is): the same API as index.js, the modules read from
// the package's own files with fs (require() is Node's): kiln_wasm_bg.wasm,
// and the text of the other two modules' inline files, so the tarball holds
// one embedded copy of each module, shared with index.js.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bytesOf, startWith, wasmFromText } from './modules.js';

export * from './kiln.js';

// `__dirname` is index.cjs's folder, the package's root.
const file = (name) => join(__dirname, 'wasm', name);
startWith((name) =>
  name === 'kiln_wasm' ? readFileSync(file('kiln_wasm_bg.wasm')) : bytesOf(wasmFromText(readFileSync(file(`${name}_inline.js`), 'utf8'))),
);

/**
 * Resolves at once: this entry instantiates its modules itself (see index.js).
 * @param {{ wasm?: unknown, remote?: unknown, frozen?: unknown }} [options]
 * @returns {Promise<void>}
 */
export function init(options) {
  void options;
  return Promise.resolve();
}
