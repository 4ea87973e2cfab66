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

/**
 * The bytes of an embedded module (wasm/*_inline.js, written by build.sh):
 * character c below 0x7e is byte c, 0x7e then c is byte c + 0x80, 0x7f then c
 * is byte c (0x7e, 0x7f).
 */
export function bytesOf(text) {
  const out = new Uint8Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    out[n++] = c < 0x7e ? c : c === 0x7e ? text.charCodeAt(++i) + 0x80 : text.charCodeAt(++i);
  }
  return out.subarray(0, n);
}

/**
 * The string an inline file's source holds (for index.cjs, which reads the
 * file's text: Node's require cannot load an ES module before 20.19). The
 * file is `export const wasm =\n  "…";` with the escapes build.sh writes
 * (`\\`, `\"`, `\n`, `\r`, `\x00`).
 */
export function wasmFromText(source) {
  const body = source.slice(source.indexOf('"') + 1, source.lastIndexOf('"'));
  const plain = { n: '\n', r: '\r', '\\': '\\', '"': '"', x00: '\0' };
  return body.replace(/\\(x00|[\\"nr])/g, (_, c) => plain[c]);
}
