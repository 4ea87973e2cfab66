// Node entry: reads the wasm module from disk (fetch has no file: URLs in
// Node), then exposes the same API as the browser entry.
import { readFile } from 'node:fs/promises';
import init from './wasm/kiln_wasm.js';

await init({ module_or_path: await readFile(new URL('./wasm/kiln_wasm_bg.wasm', import.meta.url)) });

export * from './kiln.js';
