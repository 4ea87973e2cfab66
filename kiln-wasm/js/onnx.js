// Running a converted model in onnxruntime-web: `kiln convert model.onnx -o
// model.kiln --onnx-graph model.kiln.onnx` writes a graph whose initializers
// are ONNX external data pointing into the Kiln file. This helper checks the
// Kiln file(s) with the package's own validator, every SHA-256 digest
// included, and only then hands the checked bytes to the runtime as its
// `externalData`, so the runtime never sees a byte that was not checked.
// onnxruntime-web is the caller's (an optional peer dependency): it is
// passed in, never imported here.

import { parseModel } from './kiln.js';

const baseName = (url) => {
  const path = new URL(String(url), 'http://x/').pathname;
  return decodeURIComponent(path.slice(path.lastIndexOf('/') + 1));
};

async function bytesOf(source, fetchFn, what) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  const r = await fetchFn(String(source));
  if (!r.ok) throw new Error(`kiln: ${what} ${source}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

/**
 * Creates an onnxruntime-web InferenceSession for a graph written by
 * `kiln convert --onnx-graph`, after checking the Kiln file(s) it reads.
 *
 * `options.model`: the Kiln model file (a URL, or its bytes with
 * `options.modelPath`, the name the graph gives it; default: the URL's file
 * name). For a sharded output, `options.files`: `[{ path, data }]`, one per
 * shard (`data` a URL or bytes). Each file is checked by `parseModel(bytes,
 * { verify: true })` and must carry digests (pass `requireDigests: false`
 * for a model file without them; its payloads are then checked by the byte
 * rules only). A file that fails rejects with the KilnError and the runtime
 * is never called. `options.sessionOptions` go to `InferenceSession.create`.
 *
 * @param {any} ort the onnxruntime-web module (`import * as ort from 'onnxruntime-web'`)
 * @param {string | URL | Uint8Array | ArrayBuffer} graph the graph (`model.kiln.onnx`)
 * @param {{model?: string | URL | Uint8Array | ArrayBuffer, modelPath?: string,
 *          files?: {path: string, data: string | URL | Uint8Array | ArrayBuffer}[],
 *          requireDigests?: boolean, sessionOptions?: object, fetch?: typeof fetch}} options
 */
export async function createOnnxSession(ort, graph, options = {}) {
  if (!ort || !ort.InferenceSession || typeof ort.InferenceSession.create !== 'function') {
    throw new TypeError('kiln: createOnnxSession needs the onnxruntime-web module as its first argument');
  }
  const fetchFn = options.fetch ?? globalThis.fetch;
  let files = options.files;
  if (files === undefined) {
    if (options.model === undefined) throw new TypeError('kiln: createOnnxSession needs options.model or options.files');
    const path = options.modelPath ?? (typeof options.model === 'string' || options.model instanceof URL ? baseName(options.model) : undefined);
    if (!path) throw new TypeError('kiln: options.modelPath must name the Kiln file as the graph does (e.g. "model.kiln")');
    files = [{ path, data: options.model }];
  }
  const externalData = [];
  for (const f of files) {
    const data = await bytesOf(f.data, fetchFn, 'Kiln file');
    const m = parseModel(data, { verify: true });
    if (options.requireDigests !== false && !m.hasDigests) {
      throw new Error(`kiln: ${f.path} has no digests, so its weights cannot be checked; convert it with kiln convert, or pass requireDigests: false`);
    }
    externalData.push({ path: f.path, data });
  }
  const graphBytes = await bytesOf(graph, fetchFn, 'ONNX graph');
  return ort.InferenceSession.create(graphBytes, { ...(options.sessionOptions ?? {}), externalData });
}
