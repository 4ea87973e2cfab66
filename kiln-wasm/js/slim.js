// kiln-wasm/slim: the same API as the default entry, without the embedded
// WebAssembly modules. Call `await init()` once before anything else; it
// fetches wasm/kiln_wasm_bg.wasm (the `open` module: directories, model
// files, digests) next to this file (bundlers that understand
// `new URL(..., import.meta.url)`, such as vite, webpack and rollup with an
// asset plugin, emit that file), or takes the module you give it:
//   await init({ wasm: '/static/kiln_wasm_bg.wasm' })        a URL (string, URL or Request)
//   await init({ wasm: fetch(url) })                          a Response or a promise of one
//   await init({ wasm: bytes })                               an ArrayBuffer or a view of one
//   await init({ wasm: module })                              a compiled WebAssembly.Module
// The remote part (a sharded model's manifest) and the Frozen part are in the
// full module (embedded: wasm/kiln_full_inline.js), instantiated beside
// `open` when openRemote, loadTensor or cache.delete first meets a manifest,
// or by `await init({ frozen: true })` (decodeValue and decodeFrame are
// synchronous); bundlers make it a chunk of its own, fetched only then.
import initOpen from './wasm/kiln_wasm.js';
import { bytesOf, useFull } from './modules.js';
import { isLoaded, isReady, setHint, setLoader, setReady } from './ready.js';

export * from './kiln.js';

setHint('kiln-wasm/slim needs `await init()` (or `await init({ wasm })`) before any other call');

let pending = null;
let loading = null;

/** Instantiates the full module once (concurrent callers share the one instantiation). */
function loadFull() {
  if (isLoaded('remote')) return Promise.resolve();
  loading ??= (async () => {
    const [glue, { wasm }] = await Promise.all([import('./wasm/kiln_full.js'), import('./wasm/kiln_full_inline.js')]);
    await glue.default({ module_or_path: bytesOf(wasm) });
    useFull(glue);
  })().catch((e) => {
    loading = null;
    throw e;
  });
  return loading;
}

setLoader('remote', { async: loadFull });
setLoader('frozen', { async: loadFull });
setLoader('values', { async: loadFull });

/**
 * Instantiates the `open` WebAssembly module, and the full one beside it
 * when `frozen`, `remote` or `values` is `true`; resolves once the API can be used. Later
 * calls resolve at once for what is loaded (the first module stays) and load
 * what they newly ask for.
 * @param {{ wasm?: string | URL | Request | Response | Promise<Response> | BufferSource | WebAssembly.Module, remote?: boolean, frozen?: boolean, values?: boolean }} [options]
 * @returns {Promise<void>}
 */
export function init(options = {}) {
  const wanted = ['remote', 'frozen', 'values'].filter((n) => options[n] === true);
  pending ??= (async () => {
    if (isReady()) return;
    const wasm = options.wasm ?? new URL('./wasm/kiln_wasm_bg.wasm', import.meta.url);
    await initOpen({ module_or_path: await wasm });
    setReady();
  })().catch((e) => {
    pending = null;
    throw e;
  });
  return pending.then(() => (wanted.length > 0 ? loadFull() : undefined));
}
