// ONNX: a graph whose initializers are external data in Kiln files (what
// `kiln convert model.onnx -o model.kiln --onnx-graph model.kiln.onnx`
// writes), run with the caller's onnxruntime-web once every Kiln file the
// graph reads has been checked by the core, digests included. The package
// never imports onnxruntime: the caller passes its module.

import { KilnError, MANIFEST, asBytes, checkWhole, inShard, limitsOf, readHeadWhole } from './validate.js';
import { Directory, INTERNAL } from './directory.js';
import { loadDirectory } from './loader.js';
import { openRemote, shardCheck } from './remote.js';

/** ONNX TensorProto.DataType codes of the Kiln dtypes with the same bytes (docs/conversion.md). */
const ONNX_DTYPES = {
  f32: 1, u8: 2, i8: 3, u16: 4, i16: 5, i32: 6, i64: 7, bool: 9, f16: 10, f64: 11, u32: 12, u64: 13, bf16: 16,
  f8e4m3: 17, f8e5m2: 19, u4: 21, i4: 22, e2m1: 23, e8m0: 24,
};

const decoder = new TextDecoder('utf-8', { fatal: true });

function graphError(message) {
  return new Error(`kiln: the ONNX graph: ${message}`);
}

// A varint at `at` (before `to`): [value, the next offset].
function varint(bytes, at, to) {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (at >= to) throw graphError('a varint runs past its message');
    const b = bytes[at++];
    v += (b & 0x7f) * mul;
    mul *= 128;
    if (b < 0x80) return [v, at];
  }
  throw graphError('a varint longer than 10 bytes');
}

// A protobuf message's fields, read with every length checked against the bytes left.
function* fields(bytes, from = 0, to = bytes.length) {
  let at = from;
  while (at < to) {
    let key;
    [key, at] = varint(bytes, at, to);
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) {
      let value;
      [value, at] = varint(bytes, at, to);
      yield { field, wire, value };
    } else if (wire === 2) {
      let len;
      [len, at] = varint(bytes, at, to);
      if (len > to - at) throw graphError(`field ${field} claims ${len} bytes, ${to - at} are left`);
      yield { field, wire, start: at, end: at + len };
      at += len;
    } else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      if (n > to - at) throw graphError('a fixed-width field runs past its message');
      at += n;
    } else throw graphError(`wire type ${wire} (groups are not used by ONNX)`);
  }
}

function text(bytes, f) {
  try {
    return decoder.decode(bytes.subarray(f.start, f.end));
  } catch {
    throw graphError('a string is not UTF-8');
  }
}

// Packed or unpacked repeated int64 (TensorProto.dims).
function pushInts(bytes, f, out) {
  if (f.wire === 0) out.push(f.value);
  else if (f.wire === 2) {
    for (let at = f.start; at < f.end; ) {
      let v;
      [v, at] = varint(bytes, at, f.end);
      out.push(v);
    }
  }
}

/** A TensorProto's name, type, dims and, for external data, its location, offset and length. */
function tensorRef(bytes, from, to) {
  const t = { name: null, dataType: 0, dims: [], external: false, entries: new Map() };
  for (const f of fields(bytes, from, to)) {
    if (f.field === 8 && f.wire === 2) t.name = text(bytes, f);
    else if (f.field === 2 && f.wire === 0) t.dataType = f.value;
    else if (f.field === 1) pushInts(bytes, f, t.dims);
    else if (f.field === 14 && f.wire === 0) t.external = f.value === 1;
    else if (f.field === 13 && f.wire === 2) {
      let key = null;
      let value = '';
      for (const g of fields(bytes, f.start, f.end)) {
        if (g.field === 1 && g.wire === 2) key = text(bytes, g);
        if (g.field === 2 && g.wire === 2) value = text(bytes, g);
      }
      if (t.entries.has(key)) throw graphError(`initializer ${JSON.stringify(t.name)} gives external_data "${key}" twice`);
      t.entries.set(key, value);
    }
  }
  return t;
}

function decimal(v, what, name) {
  if (v === undefined) return undefined;
  if (!/^(0|[1-9][0-9]*)$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw graphError(`initializer ${JSON.stringify(name)}: external_data ${what} "${v}" is not a decimal byte count`);
  }
  return Number(v);
}

/**
 * The main graph's initializers stored as external data:
 * [{name, location, offset, length, dataType, dims}] (offset and length
 * undefined where the graph leaves them out). Exported for tests.
 */
export function externalInitializers(graph) {
  const bytes = asBytes(graph, 'externalInitializers');
  const graphs = [...fields(bytes)].filter((f) => f.field === 7 && f.wire === 2);
  if (graphs.length !== 1) throw graphError(`${graphs.length} graph fields (a model has one)`);
  const refs = [];
  for (const f of fields(bytes, graphs[0].start, graphs[0].end)) {
    if (f.field === 15) throw graphError('sparse initializers are not supported');
    if (f.field !== 5 || f.wire !== 2) continue;
    const t = tensorRef(bytes, f.start, f.end);
    if (!t.external) continue;
    const name = t.name ?? '';
    const location = t.entries.get('location');
    if (location === undefined) throw graphError(`initializer ${JSON.stringify(name)} has external data without a location`);
    for (const k of t.entries.keys()) {
      if (!['location', 'offset', 'length', 'checksum'].includes(k)) {
        throw graphError(`initializer ${JSON.stringify(name)}: external_data key "${k}" is not supported`);
      }
    }
    const offset = decimal(t.entries.get('offset'), 'offset', name);
    const length = decimal(t.entries.get('length'), 'length', name);
    refs.push({ name, location, offset, length, dataType: t.dataType, dims: t.dims });
  }
  return refs;
}

async function fetchBytes(url, options, what) {
  const fetchFn = options.fetch ?? ((...a) => globalThis.fetch(...a));
  const r = await fetchFn(url, { headers: options.headers, signal: options.signal });
  if (!r.ok) throw new Error(`kiln: ${what} ${url}: HTTP ${r.status} ${r.statusText}`);
  return new Uint8Array(await r.arrayBuffer());
}

const isUrl = (v) => typeof v === 'string' || v instanceof URL;

// One Kiln file fetched whole and checked as it streams in, digests compared.
function loadFile(url, options) {
  return loadDirectory(url, { ...options, verifyDigests: true });
}

// One Kiln model file (a URL or its bytes), checked whole with its digests:
// {bytes, directory, digests} (digests false for a record without them).
// A manifest throws manifestError's KilnError (marked MANIFEST).
async function checkedFile(data, options, limits) {
  if (isUrl(data)) {
    const d = await loadFile(String(data), options);
    return { bytes: d.source, directory: d, digests: readHeadWhole(d.source, limits).digests !== null };
  }
  const bytes = asBytes(data, 'createOnnxSession');
  const { table, head } = checkWhole(bytes, limits, true);
  return { bytes, directory: new Directory(INTERNAL, table, bytes, { metadata: head.metadata }), digests: head.digests !== null };
}

/**
 * The Kiln files given, each checked whole (digests compared): Map path ->
 * {bytes, directory}, `path` the name the graph gives the file. From
 * `options.files`, or `options.model`: one model file (its URL or bytes,
 * named `modelPath` or as the graph names its one file) or a sharded model's
 * manifest (its URL; the shards the graph reads, from beside it).
 */
async function openKiln(options, locations) {
  const limits = limitsOf(options);
  const files = new Map();
  const requireDigests = options.requireDigests !== false;
  const add = (path, f) => {
    if (requireDigests && !f.digests) {
      throw new Error(`kiln: ${path} has no digests, so its weights cannot be checked; convert it with kiln convert, or pass requireDigests: false`);
    }
    files.set(path, f);
  };
  if (options.files !== undefined) {
    for (const f of options.files) add(f.path, await checkedFile(f.data, options, limits));
    return files;
  }
  const { model } = options;
  let single = null;
  try {
    single = await checkedFile(model, options, limits);
  } catch (e) {
    if (!(isUrl(model) && e instanceof KilnError && e[MANIFEST] === true)) throw e; // else a manifest
  }
  if (single !== null) {
    if (options.modelPath === undefined && locations.length !== 1) {
      throw new Error(
        `kiln: the graph reads ${locations.length} files (${locations.join(', ')}) and the model given is one Kiln file: ` +
          "for a sharded model pass its manifest's URL, or options.files",
      );
    }
    add(options.modelPath ?? locations[0], single);
    return files;
  }
  // A sharded model: the manifest checked by the core (openRemote), then
  // every shard the graph reads, fetched whole, checked whole with its
  // digests and held against the manifest.
  // (A relative URL is resolved against the page: shard URLs are resolved against the manifest's.)
  const base = globalThis.location?.href;
  const m = await openRemote(base ? new URL(String(model), base).href : model, options);
  const byName = new Map(m.shards.map((s) => [s.name, s]));
  await Promise.all(
    locations.map(async (loc) => {
      const s = byName.get(loc);
      if (s === undefined) throw new Error(`kiln: the graph reads ${JSON.stringify(loc)}, which is not a shard of the manifest ${m.url}`);
      try {
        const d = await loadFile(s.url, options);
        shardCheck(m, s, d.source, d.payloadOffset);
        files.set(loc, { bytes: d.source, directory: d });
      } catch (e) {
        throw inShard(e, s.name, s.index);
      }
    }),
  );
  return files;
}

function sameDims(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// Every external initializer is the Kiln tensor of its name in the file it
// names: the same bytes (offset, length), dtype and shape.
function match(refs, files) {
  for (const r of refs) {
    const f = files.get(r.location);
    if (f === undefined) {
      throw new Error(`kiln: the graph reads ${JSON.stringify(r.location)}, which is not among the Kiln files given (${[...files.keys()].join(', ')})`);
    }
    const t = f.directory.get(r.name);
    const where = `initializer ${JSON.stringify(r.name)} (${r.location}, offset ${r.offset ?? 0}, length ${r.length ?? 'to the end'})`;
    if (t === undefined) throw new Error(`kiln: the graph's ${where}: ${r.location} has no tensor of that name`);
    const length = r.length ?? f.bytes.length - (r.offset ?? 0);
    if ((r.offset ?? 0) !== t.byteOffset || length !== t.byteLength) {
      throw new Error(`kiln: the graph's ${where} is not that tensor's payload (offset ${t.byteOffset}, length ${t.byteLength})`);
    }
    if (ONNX_DTYPES[t.dtype] !== r.dataType || !sameDims(r.dims, t.shape)) {
      throw new Error(`kiln: the graph's ${where} is ONNX type ${r.dataType} [${r.dims}], the tensor ${t.dtype} [${t.shape}]`);
    }
  }
}

/**
 * Creates an onnxruntime-web InferenceSession for an ONNX graph whose
 * initializers are external data in a Kiln model (`kiln convert model.onnx
 * -o model.kiln --onnx-graph model.kiln.onnx`), once every Kiln file the
 * graph reads has been checked whole by the core, digests included, and
 * every external initializer of the graph has been found to be the Kiln
 * tensor of its name (same offset, length, ONNX type and shape). Only then is
 * `ort.InferenceSession.create` called, with the graph's bytes and one
 * `externalData` entry per Kiln file, named as the graph names it, its data
 * the checked bytes.
 *
 * `options.model`: the Kiln model file (a URL, fetched and checked as it
 * streams in, or its bytes; `options.modelPath` names it as the graph does,
 * by default the one file the graph names) or a sharded model's manifest (a
 * URL: the manifest is read with Range requests and checked as openRemote
 * does; each shard the graph reads is fetched whole from beside it, checked
 * whole and held against the manifest). Or `options.files`: `[{ path, data
 * }]`, one per Kiln file (`data` a URL or bytes). Files must carry digests
 * (`requireDigests: false` accepts a model file without them; its payloads
 * are then checked by the byte rules only). `options.sessionOptions` go to
 * `InferenceSession.create`; `fetch`, `headers`, `signal`, `countCap`,
 * `byteCap` as for loadDirectory and openRemote.
 *
 * A Kiln file that fails its check rejects with its KilnError (a shard's
 * with `file` and `shard`); a graph that does not match the files rejects
 * with an Error; the runtime is then never called.
 *
 * @param {any} ort the onnxruntime-web module (`import * as ort from 'onnxruntime-web'`)
 * @param {string | URL | Uint8Array | ArrayBuffer | ArrayBufferView} graph the graph (`model.kiln.onnx`): a URL or its bytes
 * @param {{model?: string | URL | Uint8Array | ArrayBuffer | ArrayBufferView, modelPath?: string,
 *          files?: {path: string, data: string | URL | Uint8Array | ArrayBuffer}[], requireDigests?: boolean,
 *          sessionOptions?: object, fetch?: typeof fetch, headers?: Record<string, string>, signal?: AbortSignal,
 *          countCap?: number, byteCap?: number}} options
 */
export async function createOnnxSession(ort, graph, options = {}) {
  const create = ort?.InferenceSession?.create;
  if (typeof create !== 'function') {
    throw new TypeError('kiln: createOnnxSession needs the onnxruntime-web module as its first argument');
  }
  const { sessionOptions = {} } = options;
  if (options.files === undefined && (options.model === undefined || options.model === null)) {
    throw new TypeError('kiln: createOnnxSession needs options.model or options.files');
  }
  const graphBytes = isUrl(graph) ? await fetchBytes(String(graph), options, 'ONNX graph') : asBytes(graph, 'createOnnxSession: graph');
  const refs = externalInitializers(graphBytes);
  const locations = [...new Set(refs.map((r) => r.location))];
  if (locations.length === 0) throw graphError('no initializer is external data: there is no Kiln file to check');
  const given = sessionOptions.externalData ?? [];
  for (const e of given) {
    const path = typeof e === 'string' ? e : e?.path;
    if (locations.includes(path)) throw new TypeError(`kiln: sessionOptions.externalData names ${path}, a Kiln file of the graph`);
  }
  const files = await openKiln(options, locations);
  match(refs, files);
  const externalData = [...given, ...locations.map((path) => ({ path, data: files.get(path).bytes }))];
  return ort.InferenceSession.create(graphBytes, { ...sessionOptions, externalData });
}
