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
// The `remote` module (a sharded model's manifest) is fetched from
// wasm/kiln_remote_bg.wasm when openRemote or loadTensor first meets a
// manifest; the `frozen` module (decodeValue, decodeFrame, synchronous) is
// loaded by `await init({ frozen: true })`. Either takes the same forms as
// `wasm` instead of `true`: `init({ remote: url, frozen: bytes })`.
import initOpen from './wasm/kiln_wasm.js';
import initRemote from './wasm/kiln_remote.js';
import initFrozen from './wasm/kiln_frozen.js';
import { isLoaded, isReady, setHint, setLoaded, setLoader, setReady } from './ready.js';

export * from './kiln.js';

setHint('kiln-wasm/slim needs `await init()` (or `await init({ wasm })`) before any other call');

let pending = null;
const sources = { remote: undefined, frozen: undefined };
const url = {
  remote: () => new URL('./wasm/kiln_remote_bg.wasm', import.meta.url),
  frozen: () => new URL('./wasm/kiln_frozen_bg.wasm', import.meta.url),
};
const instantiate = { remote: initRemote, frozen: initFrozen };

for (const name of ['remote', 'frozen']) {
  setLoader(name, {
    async: async () => {
      const given = sources[name];
      await instantiate[name]({ module_or_path: await (given === undefined || given === true ? url[name]() : given) });
    },
  });
}

async function load(name) {
  if (isLoaded(name)) return;
  const given = sources[name];
  await instantiate[name]({ module_or_path: await (given === true ? url[name]() : given) });
  setLoaded(name);
}

/**
 * Instantiates the `open` WebAssembly module (and `frozen`, `remote` when
 * asked); resolves once the API can be used. Later calls resolve at once for
 * what is loaded (the first module stays) and load what they newly ask for.
 * @param {{ wasm?: WasmSource, remote?: true | WasmSource, frozen?: true | WasmSource }} [options]
 * where WasmSource = string | URL | Request | Response | Promise<Response> | BufferSource | WebAssembly.Module
 * @returns {Promise<void>}
 */
export function init(options = {}) {
  for (const name of ['remote', 'frozen']) if (options[name] !== undefined && options[name] !== false) sources[name] ??= options[name];
  const wanted = ['remote', 'frozen'].filter((n) => options[n] !== undefined && options[n] !== false);
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
