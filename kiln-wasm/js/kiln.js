// The public API of the kiln-wasm package, without the wasm module's
// instantiation: index.js (the default entry) instantiates the embedded
// module when it is imported, slim.js on `await init()`.

import { version as wasmVersion, is_model_file } from './wasm/kiln_wasm.js';
import { DEFAULT_CAP, KilnError, asBytes, checkWhole, limitsOf } from './validate.js';
import { Directory, INTERNAL, Tensor, dequantize } from './directory.js';
import { assertReady } from './ready.js';
import { memory, usage } from './cache.js';
import { deleteCached, openRemote } from './remote.js';
import { loadDirectory } from './loader.js';

export { DEFAULT_CAP, KilnError, Directory, Tensor, dequantize };
export { DirectoryLoader, loadDirectory, loadDirectoryToGPU } from './loader.js';
export { RemoteDirectory, RemoteModel, openRemote, loadTensor } from './remote.js';

/** Persistent caches for openRemote (see README "Caching"): usage(cache?), delete(url, cache?), memory(). */
export const cache = Object.freeze({ usage, delete: deleteCached, memory });
export * from './frozen.js';
// WebGPU upload
export { toGPUBuffer } from './gpu.js';
export { checkOnnxGraph, createOnnxSession } from './onnx.js';

function openBytes(bytes, options, fn) {
  const input = asBytes(bytes, fn);
  const verify = options.verify === true;
  const { table, head } = checkWhole(input, limitsOf(options), verify);
  const digestsVerified = verify && head.digests !== null;
  const dir = new Directory(INTERNAL, table, input, { metadata: head.metadata, digestsVerified });
  return { dir, head, input };
}

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

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
  return openBytes(bytes, options, 'parseDirectory').dir;
}

/**
 * Checks a model file (spec/model-file.md: the frame, string metadata, for
 * a digests record a SHA-256 per tensor, for a shard record its model and
 * position, then the tensor directory) and returns {metadata, tensors,
 * isModelFile, kind, hasDigests, verified, digestsVerified, shard}: the metadata as a Map (the
 * alignment padding key `kiln.convert.pad` is not shown), the tensors as a
 * Directory over `bytes`' own ArrayBuffer, kind 'plain' | 'digests' |
 * 'shard' (null for a plain directory), shard {model (hex model id), index,
 * count} for a shard record (a shard given alone says which model and
 * position it is), else null. A plain directory opens too, with empty
 * metadata and isModelFile false. The core checks everything
 * (kiln_nostd::model); throws a KilnError.
 *
 * Digests (step 9d) are compared only with `{ verify: true }`: this is a
 * view over your buffer, and without it no payload byte is read (the other
 * rules read a few). With it, every payload byte goes through wasm memory
 * (64 KiB at a time) and a mismatch is DIGEST at the tensor's first byte;
 * `verified` (and `digestsVerified`, the Directory's name for it) says
 * whether digests were compared (false for a plain record).
 * @param {Uint8Array | ArrayBuffer | ArrayBufferView} bytes
 * @param {{countCap?: number, byteCap?: number, verify?: boolean}} [options]
 */
export function parseModel(bytes, options = {}) {
  const { dir: tensors, head, input } = openBytes(bytes, options, 'parseModel');
  const isModelFile = tensors.metadata !== null;
  const s = head.shard;
  const shard = s ? Object.freeze({ model: hex(input.subarray(s.modelAt, s.modelAt + 32)), index: s.index, count: s.count }) : null;
  const hasDigests = head.digests !== null;
  const verified = tensors.digestsVerified;
  return Object.freeze({
    metadata: tensors.metadata ?? new Map(),
    tensors,
    isModelFile,
    kind: head.record,
    hasDigests,
    verified,
    digestsVerified: verified,
    shard,
  });
}

/**
 * True when `bytes` starts like a model file (the KLN0 frame with the schema
 * hash of the plain, digests or shard record; a manifest is not one): how every reader tells one from a plain directory.
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

/**
 * One front door: opens `source` with the call made for it and resolves to
 * what that call returns. A URL (string or URL): `openRemote(url, options)`,
 * Range requests, no payload fetched (each `load(name)` checks its tensor's
 * digest). Bytes (an ArrayBuffer or a view): `parseModel(bytes, options)`,
 * a view over them (digests compared with `{ verify: true }`: without it no
 * payload byte is read). A Response, Blob/File or ReadableStream:
 * `loadDirectory(source, options)`, which reads every byte and so compares
 * the digests (`verifyDigests: false` to skip). Rejects with a KilnError
 * (or a TypeError for another kind of source).
 * @param {string | URL | ArrayBuffer | ArrayBufferView | Response | Blob | ReadableStream<Uint8Array>} source
 * @param {object} [options] the options of the call it makes
 */
export async function open(source, options = {}) {
  assertReady();
  if (typeof source === 'string' || source instanceof URL) return openRemote(source, options);
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source) || (typeof SharedArrayBuffer === 'function' && source instanceof SharedArrayBuffer)) {
    return parseModel(source, options);
  }
  const streamed = (typeof Response === 'function' && source instanceof Response) || (typeof Blob === 'function' && source instanceof Blob) || typeof source?.getReader === 'function';
  if (streamed) return loadDirectory(source, options);
  throw new TypeError('kiln-wasm: open expects a URL, an ArrayBuffer or a view of one, a Response, a Blob or File, or a ReadableStream');
}
