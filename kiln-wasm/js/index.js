// The default entry, for every runtime and bundler: the WebAssembly module is
// embedded (wasm/kiln_wasm_inline.js, base64) and instantiated synchronously
// when this module is imported. No top-level await, no URL to resolve, no
// file to serve: `import * as kiln from 'kiln-wasm'` (or require) and call.
// kiln-wasm/slim is the same API with the module served separately.
import { initSync } from './wasm/kiln_wasm.js';
import { wasmBase64 } from './wasm/kiln_wasm_inline.js';
import { setReady } from './ready.js';

export * from './kiln.js';

function decodeBase64(text) {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

initSync({ module: decodeBase64(wasmBase64) });
setReady();

/**
 * Resolves at once: this entry instantiates its embedded module on import.
 * Present so that code written for kiln-wasm/slim (`await init({ wasm })`)
 * runs unchanged; the argument is ignored here.
 * @param {{ wasm?: unknown }} [options]
 * @returns {Promise<void>}
 */
export function init(options) {
  void options;
  return Promise.resolve();
}
