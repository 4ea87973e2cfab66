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
// The `remote` module (a sharded model's manifest) is instantiated when
// openRemote, loadTensor or cache.delete first meets a manifest, the `frozen`
// module (decodeValue, decodeFrame: synchronous) by `await init({ frozen:
// true })`; both from their embedded copies (wasm/*_inline.js, imported
// then: bundlers make them chunks of their own, fetched only then).
import initOpen from './wasm/kiln_wasm.js';
import initRemote from './wasm/kiln_remote.js';
import initFrozen from './wasm/kiln_frozen.js';
import { bytesOf } from './modules.js';
import { isLoaded, isReady, setHint, setLoaded, setLoader, setReady } from './ready.js';

export * from './kiln.js';

setHint('kiln-wasm/slim needs `await init()` (or `await init({ wasm })`) before any other call');

let pending = null;
const embedded = {
  remote: () => import('./wasm/kiln_remote_inline.js'),
  frozen: () => import('./wasm/kiln_frozen_inline.js'),
};
const instantiate = { remote: initRemote, frozen: initFrozen };

const loading = { remote: null, frozen: null };

/** Instantiates module `name` once (concurrent callers share the one instantiation). */
function load(name) {
  if (isLoaded(name)) return Promise.resolve();
  loading[name] ??= (async () => {
    await instantiate[name]({ module_or_path: bytesOf((await embedded[name]()).wasm) });
    setLoaded(name);
  })().catch((e) => {
    loading[name] = null;
    throw e;
  });
  return loading[name];
}

setLoader('remote', { async: () => load('remote') });
setLoader('frozen', { async: () => load('frozen') });

/**
 * Instantiates the `open` WebAssembly module, and the `frozen` and `remote`
 * modules when asked (`true`); resolves once the API can be used. Later
 * calls resolve at once for what is loaded (the first module stays) and load
 * what they newly ask for.
 * @param {{ wasm?: string | URL | Request | Response | Promise<Response> | BufferSource | WebAssembly.Module, remote?: boolean, frozen?: boolean }} [options]
 * @returns {Promise<void>}
 */
export function init(options = {}) {
  const wanted = ['remote', 'frozen'].filter((n) => options[n] === true);
  pending ??= (async () => {
    if (isReady()) return;
    const wasm = options.wasm ?? new URL('./wasm/kiln_wasm_bg.wasm', import.meta.url);
    await initOpen({ module_or_path: await wasm });
    setReady();
  })().catch((e) => {
    pending = null;
    throw e;
  });
  return pending.then(() => Promise.all(wanted.map(load))).then(() => undefined);
}
