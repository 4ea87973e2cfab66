// The public API of the kiln-wasm package, without the wasm module's
// instantiation: index.js (the default entry) instantiates the embedded
// module when it is imported, slim.js on `await init()`.

import { version as wasmVersion, is_model_file } from './wasm/kiln_wasm.js';
import { DEFAULT_CAP, KilnError, asBytes, checkWhole, limitsOf } from './validate.js';
import { Directory, INTERNAL, Tensor, dequantize } from './directory.js';
import { assertReady } from './ready.js';

export { DEFAULT_CAP, KilnError, Directory, Tensor, dequantize };
export { DirectoryLoader, loadDirectory } from './loader.js';
export { RemoteDirectory, RemoteModel, openRemote, loadTensor } from './remote.js';
export * from './frozen.js';

function open(bytes, options, fn) {
  const input = asBytes(bytes, fn);
  const { table, head } = checkWhole(input, limitsOf(options));
  return new Directory(INTERNAL, table, input, { metadata: head.metadata });
}

/**
 * Checks a Kiln file and returns its Directory, whose tensors are views over
 * `bytes`' own ArrayBuffer. Opens a plain directory and a model file (what
 * `kiln convert` writes) alike, by content, as `kiln validate` does; a model
 * file's metadata is on `directory.metadata` (or use parseModel). Throws a
 * KilnError. wasm memory receives the directory prefix, a model file's
 * metadata and the few payload bytes a rule reads, never the payload.
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
 * @param {{countCap?: number, byteCap?: number}} [options]
 */
export function parseDirectory(bytes, options = {}) {
  return open(bytes, options, 'parseDirectory');
}

/**
 * Checks a model file (spec/model-file.md: the frame, string metadata, the
 * tensor directory) and returns {metadata, tensors, isModelFile}: the
 * metadata as a Map (the alignment padding key `kiln.convert.pad` is not
 * shown), the tensors as a Directory over `bytes`' own ArrayBuffer. A plain
 * directory opens too, with empty metadata and isModelFile false. The core
 * checks everything (kiln_nostd::model); throws a KilnError.
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
 * @param {{countCap?: number, byteCap?: number}} [options]
 */
export function parseModel(bytes, options = {}) {
  const tensors = open(bytes, options, 'parseModel');
  const isModelFile = tensors.metadata !== null;
  return Object.freeze({ metadata: tensors.metadata ?? new Map(), tensors, isModelFile });
}

/**
 * True when `bytes` starts like a model file (the KLN0 frame with the model
 * record's schema hash): how every reader tells one from a plain directory.
 * Nothing else is checked. Needs the first 16 bytes.
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
 */
export function isModelFile(bytes) {
  assertReady();
  const input = asBytes(bytes, 'isModelFile');
  return is_model_file(input.subarray(0, 16));
}

/** The package version (the crate's). */
export function version() {
  assertReady();
  return wasmVersion();
}
