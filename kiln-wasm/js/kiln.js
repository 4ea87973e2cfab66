// The public API of the kiln-wasm package. The entry modules (index.js for
// browsers, node.js for Node) initialise the wasm module first, so nothing
// here runs before it is ready.

import { version as wasmVersion } from './wasm/kiln_wasm.js';
import { DEFAULT_CAP, KilnError, asBytes, checkWhole, limitsOf } from './validate.js';
import { Directory, Tensor, dequantize } from './directory.js';

export { DEFAULT_CAP, KilnError, Directory, Tensor, dequantize };
export { DirectoryLoader, loadDirectory } from './loader.js';
export { RemoteDirectory, openRemote, loadTensor } from './remote.js';
export * from './frozen.js';

/**
 * Checks a standalone Kiln v2 tensor directory and returns a Directory whose
 * tensors are views over `bytes`' own ArrayBuffer. Throws a KilnError.
 * wasm memory receives the directory prefix and the few payload bytes a
 * rule reads (gaps, bool tensors, odd packed tails), never the payload.
 * @param {Uint8Array} bytes
 * @param {{countCap?: number, byteCap?: number}} [options]
 */
export function parseDirectory(bytes, options = {}) {
  const input = asBytes(bytes, 'parseDirectory');
  return new Directory(checkWhole(input, limitsOf(options)), input);
}

/** The package version (the crate's). */
export function version() {
  return wasmVersion();
}
