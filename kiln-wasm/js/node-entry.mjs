// Source of index.cjs, the CommonJS entry (build.sh bundles it with esbuild;
// it is not shipped as is): the same API as index.js, the modules read from
// the package's own .wasm files (require() is Node's), so the tarball holds
// one embedded copy of each module, index.js's.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startWith } from './modules.js';

export * from './kiln.js';

// `__dirname` is index.cjs's folder, the package's root.
startWith((name) => readFileSync(join(__dirname, 'wasm', `${name}_bg.wasm`)));

/**
 * Resolves at once: this entry instantiates its modules itself (see index.js).
 * @param {{ wasm?: unknown, remote?: unknown, frozen?: unknown }} [options]
 * @returns {Promise<void>}
 */
export function init(options) {
  void options;
  return Promise.resolve();
}
