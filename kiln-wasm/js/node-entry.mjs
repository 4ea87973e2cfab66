// Source of index.cjs, the CommonJS entry (build.sh bundles it with esbuild;
// it is not shipped as is): the same API as index.js, the module read from the
// text of index.js's embedded copy with fs (require() is Node's, and cannot
// load an ES module before Node 20.19), so the tarball holds that copy once.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bytesOf, startWith, wasmFromText } from './modules.js';

export * from './kiln.js';

// `__dirname` is index.cjs's folder, the package's root.
startWith(bytesOf(wasmFromText(readFileSync(join(__dirname, 'wasm', 'kiln_full_inline.js'), 'utf8'))));

/**
 * Resolves at once: this entry instantiates its module itself (see index.js).
 * @param {{ wasm?: unknown, remote?: boolean, frozen?: boolean, values?: boolean }} [options]
 * @returns {Promise<void>}
 */
export function init(options) {
  void options;
  return Promise.resolve();
}
