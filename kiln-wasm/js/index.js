// The default entry for ES modules, every runtime and bundler: the WebAssembly
// modules are embedded (wasm/*_inline.js); `open` is instantiated
// synchronously when this module is imported, `remote` and `frozen` when a
// call first needs them. No top-level await, no URL to resolve, no file to
// serve: `import * as kiln from 'kiln-wasm'` and call. index.cjs (require) is
// the same API reading the same files with fs; kiln-wasm/slim the same API
// with the `open` module served separately.
import { wasm as open } from './wasm/kiln_wasm_inline.js';
import { wasm as remote } from './wasm/kiln_remote_inline.js';
import { wasm as frozen } from './wasm/kiln_frozen_inline.js';
import { bytesOf, startWith } from './modules.js';

export * from './kiln.js';

const embedded = { kiln_wasm: open, kiln_remote: remote, kiln_frozen: frozen };

startWith((name) => bytesOf(embedded[name]));

/**
 * Resolves at once: this entry instantiates its embedded modules itself.
 * Present so that code written for kiln-wasm/slim (`await init({ wasm })`)
 * runs unchanged; the argument is ignored here.
 * @param {{ wasm?: unknown, remote?: unknown, frozen?: unknown }} [options]
 * @returns {Promise<void>}
 */
export function init(options) {
  void options;
  return Promise.resolve();
}
