// Whether the wasm module is instantiated, and which parts it has. The
// default entries instantiate the full module on import (every part);
// kiln-wasm/slim instantiates `open` on `await init()` and the full module
// beside it when the `remote` part (a sharded model's manifest, on first use
// by an async call) or the `frozen` part (`await init({ frozen: true })`) is
// needed (modules.js).

let ready = false;
let hint = 'call `await init()` first';

/** How each optional module is had: `{ sync?: () => void, async?: () => Promise<void> }`, set by the entry. */
const loaders = { remote: null, frozen: null, values: null };
const loaded = { remote: false, frozen: false, values: false };
const pending = { remote: null, frozen: null, values: null };

/** Marks the `open` module instantiated. */
export function setReady() {
  ready = true;
}

/** What to tell a caller who runs before init (set by the entry). */
export function setHint(text) {
  hint = text;
}

/** True once the `open` module is instantiated. */
export function isReady() {
  return ready;
}

/** Throws a clear Error when the `open` module is not instantiated yet. */
export function assertReady() {
  if (!ready) throw new Error(`kiln-wasm: the WebAssembly module is not initialised: ${hint}`);
}

/** Sets how the entry instantiates module `name` ('remote', 'frozen' or 'values'). */
export function setLoader(name, loader) {
  loaders[name] = loader;
}

/** Marks module `name` instantiated. */
export function setLoaded(name) {
  loaded[name] = true;
}

/** True once module `name` is instantiated. */
export function isLoaded(name) {
  return loaded[name];
}

/**
 * Module `name` for a synchronous call: instantiated now from its embedded
 * copy (the default entry), or a clear Error saying how to load it first.
 */
export function need(name) {
  assertReady();
  if (loaded[name]) return;
  const l = loaders[name];
  if (l?.sync) {
    l.sync();
    loaded[name] = true;
    return;
  }
  throw new Error(`kiln-wasm: the ${name} module is not loaded: with kiln-wasm/slim, call \`await init({ ${name}: true })\` first`);
}

/** Module `name` for an async call: instantiated from its embedded copy, or fetched (slim). */
export async function needAsync(name) {
  assertReady();
  if (loaded[name]) return;
  const l = loaders[name];
  if (l?.async) {
    pending[name] ??= l.async().then(
      () => {
        loaded[name] = true;
      },
      (e) => {
        pending[name] = null;
        throw e;
      },
    );
    return pending[name];
  }
  need(name);
}
