// Browser (and default) entry: fetches and instantiates the wasm module with
// top-level await, so `import * as kiln from 'kiln-wasm'` needs no init call.
import init from './wasm/kiln_wasm.js';

await init({ module_or_path: new URL('./wasm/kiln_wasm_bg.wasm', import.meta.url) });

export * from './kiln.js';
