// kiln-wasm/slim: the same API as the default entry, without the embedded
// WebAssembly module. Call `await init()` once before anything else; it
// fetches wasm/kiln_wasm_bg.wasm next to this file (bundlers that understand
// `new URL(..., import.meta.url)`, such as vite, webpack and rollup with an
// asset plugin, emit that file), or takes the module you give it:
//   await init({ wasm: '/static/kiln_wasm_bg.wasm' })        a URL (string, URL or Request)
//   await init({ wasm: fetch(url) })                          a Response or a promise of one
//   await init({ wasm: bytes })                               an ArrayBuffer or a view of one
//   await init({ wasm: module })                              a compiled WebAssembly.Module
import initWasm from './wasm/kiln_wasm.js';
import { isReady, setHint, setReady } from './ready.js';

export * from './kiln.js';

setHint('kiln-wasm/slim needs `await init()` (or `await init({ wasm })`) before any other call');

let pending = null;

/**
 * Instantiates the WebAssembly module; resolves once the API can be used.
 * Later calls resolve at once (the first module stays).
 * @param {{ wasm?: string | URL | Request | Response | Promise<Response> | BufferSource | WebAssembly.Module }} [options]
 * @returns {Promise<void>}
 */
export function init(options = {}) {
  if (isReady()) return Promise.resolve();
  pending ??= (async () => {
    const wasm = options.wasm ?? new URL('./wasm/kiln_wasm_bg.wasm', import.meta.url);
    await initWasm({ module_or_path: await wasm });
    setReady();
  })().catch((e) => {
    pending = null;
    throw e;
  });
  return pending;
}
