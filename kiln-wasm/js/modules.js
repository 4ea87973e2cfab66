// The three WebAssembly modules (README "Modules") and how an entry that has
// their bytes at hand instantiates them: `open` at once, `remote` and
// `frozen` on the first call that needs them (ready.js).
import { initSync as initOpen } from './wasm/kiln_wasm.js';
import { initSync as initRemote } from './wasm/kiln_remote.js';
import { initSync as initFrozen } from './wasm/kiln_frozen.js';
import { setLoader, setReady } from './ready.js';

/**
 * Instantiates `open` from `read('kiln_wasm')` and lets `remote` and
 * `frozen` be instantiated likewise when needed. `read(name)` returns the
 * module's bytes synchronously (`name` without `_bg.wasm`).
 */
export function startWith(read) {
  initOpen({ module: read('kiln_wasm') });
  setReady();
  setLoader('remote', { sync: () => initRemote({ module: read('kiln_remote') }) });
  setLoader('frozen', { sync: () => initFrozen({ module: read('kiln_frozen') }) });
}
