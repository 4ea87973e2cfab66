// Whether the wasm module has been instantiated: the default entry does it
// when it is imported (the module is embedded), kiln-wasm/slim on `await init()`.

let ready = false;
let hint = 'call `await init()` first';

/** Marks the module instantiated. */
export function setReady() {
  ready = true;
}

/** What to tell a caller who runs before init (set by the entry). */
export function setHint(text) {
  hint = text;
}

/** True once the wasm module is instantiated. */
export function isReady() {
  return ready;
}

/** Throws a clear Error when the wasm module is not instantiated yet. */
export function assertReady() {
  if (!ready) throw new Error(`kiln-wasm: the WebAssembly module is not initialised: ${hint}`);
}
