// The default entry for ES modules, every runtime and bundler: the WebAssembly
// module is embedded (wasm/kiln_full_inline.js) and instantiated synchronously
// when this module is imported. No top-level await, no URL to resolve, no file
// to serve: `import * as kiln from 'kiln-wasm'` and call. index.cjs (require)
// is the same API reading the same file with fs; kiln-wasm/slim the same API
// with the module served separately.
import { wasm } from './wasm/kiln_full_inline.js';
import { bytesOf, startWith } from './modules.js';

export * from './kiln.js';

startWith(bytesOf(wasm));

/**
 * Resolves at once: this entry instantiates its embedded module on import.
 * Present so that code written for kiln-wasm/slim (`await init({ wasm })`)
 * runs unchanged; the argument is ignored here.
 * @param {{ wasm?: unknown, remote?: boolean, frozen?: boolean, values?: boolean }} [options]
 * @returns {Promise<void>}
 */
export function init(options) {
  void options;
  return Promise.resolve();
}
