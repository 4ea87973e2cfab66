// ONNX: a graph written by `kiln convert model.onnx -o model.kiln
// --onnx-graph model.kiln.onnx`, run with the caller's onnxruntime-web once
// the graph and its Kiln model have passed the hand-off rules of
// docs/onnx.md, the same rules (and the same verdicts) as Python's
// kiln.onnx.session, which checks through kiln-onnx's Rust:
//   R1 an initializer stays inline in the graph only when a node reads it as
//      data while the graph is resolved (a shape, axes, scales, ...: under
//      64 KiB; an input of another domain's operator: under 1,024 bytes) or
//      it is of a type Kiln cannot hold; external data only on the
//      initializers of the main graph and its subgraphs, each the Kiln
//      tensor of its name;
//   R2 the graph names its Kiln model (metadata_props kiln.model), whose
//      metadata records the graph's SHA-256 (kiln.convert.onnx_graph_sha256);
//   R3 the checked list: every initializer, main graph then subgraphs
//      pre-order, as [name, 'kiln' | 'inline'].
// The package never imports onnxruntime: the caller passes its module.

import { KilnError, MANIFEST, asBytes, checkWhole, inShard, limitsOf, readHeadWhole, sha256Of } from './validate.js';
import { Directory, INTERNAL } from './directory.js';
import { loadDirectory } from './loader.js';
import { openRemote, shardCheck } from './remote.js';
import { hex } from './cache.js';
import { is_plain_file_name } from './wasm/kiln_wasm.js';
import { assertReady } from './ready.js';

/**
 * ONNX TensorProto.DataType code -> [Kiln dtype with the same bytes, bits
 * per element] (docs/conversion.md). Any other code is a type Kiln cannot hold.
 */
const ONNX_TYPES = new Map([
  [1, ['f32', 32]], [2, ['u8', 8]], [3, ['i8', 8]], [4, ['u16', 16]], [5, ['i16', 16]], [6, ['i32', 32]],
  [7, ['i64', 64]], [9, ['bool', 8]], [10, ['f16', 16]], [11, ['f64', 64]], [12, ['u32', 32]], [13, ['u64', 64]],
  [16, ['bf16', 16]], [17, ['f8e4m3', 8]], [19, ['f8e5m2', 8]], [21, ['u4', 4]], [22, ['i4', 4]], [23, ['e2m1', 4]],
  [24, ['e8m0', 8]],
]);

/**
 * R1 (docs/onnx.md; kiln-onnx's rule.rs is the reference, and a test holds
 * this copy to it): a tensor of a Kiln dtype stays inline only when a node
 * reads it as data while the graph is resolved, under INLINE_LIMIT payload
 * bytes: an input at a position READS_DATA lists of a standard-domain node,
 * or an int32/int64 tensor of rank 0 or 1 a standard-domain node of
 * PROPAGATES takes (shape data propagates through it); or, under
 * OTHER_DOMAIN_LIMIT bytes, an input of a node of another domain.
 */
export const INLINE_LIMIT = 65536;
/** R1: an input of another domain's operator stays inline under this many bytes. */
export const OTHER_DOMAIN_LIMIT = 1024;
/** R1: the operators whose shape inference propagates shape data. */
export const PROPAGATES = new Set([
  'Add', 'Cast', 'Concat', 'Div', 'Gather', 'Identity', 'Max', 'Min', 'Mul', 'Neg', 'Shape', 'Size', 'Slice',
  'Squeeze', 'Sub', 'Unsqueeze',
]);
/** R1: operator -> the input positions whose values shape inference reads. */
export const READS_DATA = new Map([
  ['AffineGrid', [1]], ['BlackmanWindow', [0]], ['CenterCropPad', [1]], ['Col2Im', [1, 2]], ['ConstantOfShape', [0]],
  ['DFT', [1, 2]], ['Dropout', [1, 2]], ['Expand', [1]], ['HammingWindow', [0]], ['HannWindow', [0]],
  ['MelWeightMatrix', [0, 1, 2, 3, 4]], ['OneHot', [1]], ['Pad', [1, 2, 3]], ['Range', [0, 1, 2]], ['ReduceL1', [1]],
  ['ReduceL2', [1]], ['ReduceLogSum', [1]], ['ReduceLogSumExp', [1]], ['ReduceMax', [1]], ['ReduceMean', [1]],
  ['ReduceMin', [1]], ['ReduceProd', [1]], ['ReduceSum', [1]], ['ReduceSumSquare', [1]], ['Reshape', [1]],
  ['Resize', [1, 2, 3]], ['STFT', [1, 3]], ['Slice', [1, 2, 3, 4]], ['Split', [1]], ['SplitToSequence', [1]],
  ['Squeeze', [1]], ['Tile', [1]], ['TopK', [1]], ['Unsqueeze', [1]], ['Upsample', [1]],
]);
/** R2: the graph's metadata_props key naming its Kiln model. */
const MODEL_KEY = 'kiln.model';
/** R2: the Kiln model's metadata key recording the graph's SHA-256. */
const DIGEST_KEY = 'kiln.convert.onnx_graph_sha256';
// Subgraphs nested deeper are refused (kiln-onnx too): the recursion stays
// bounded, below protobuf parsers' 100 message levels (3 per subgraph, and a
// subgraph's own types take 5 or more).
const MAX_DEPTH = 30;
const SATURATED = 1n << 64n;

const decoder = new TextDecoder('utf-8', { fatal: true });

// An Error about the graph; `initializer` names the one at fault, where one is.
function graphError(message, initializer) {
  const e = new Error(`kiln: the ONNX graph: ${message}`);
  if (initializer !== undefined) e.initializer = initializer;
  return e;
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

// An int64 varint at `at`, exactly (two's complement: a negative dim is
// ten bytes on the wire).
function int64(bytes, at, to) {
  let v = 0n;
  for (let i = 0; i < 10; i++) {
    if (at >= to) throw graphError('a varint runs past its message');
    const b = bytes[at++];
    v |= BigInt(b & 0x7f) << BigInt(7 * i);
    if (b < 0x80) return [BigInt.asIntN(64, v), at];
  }
  throw graphError('a varint longer than 10 bytes');
}

// A protobuf message's fields, read with every length checked against the
// bytes left: {field, wire, value} for a varint (start and end its bytes),
// {field, wire, start, end} for a length-delimited or fixed-width field.
function* fields(bytes, from = 0, to = bytes.length) {
  let at = from;
  while (at < to) {
    let key;
    [key, at] = varint(bytes, at, to);
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) {
      const start = at;
      let value;
      [value, at] = varint(bytes, at, to);
      yield { field, wire, value, start, end: at };
    } else if (wire === 2) {
      let len;
      [len, at] = varint(bytes, at, to);
      if (len > to - at) throw graphError(`field ${field} claims ${len} bytes, ${to - at} are left`);
      yield { field, wire, start: at, end: at + len };
      at += len;
    } else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      if (n > to - at) throw graphError('a fixed-width field runs past its message');
      yield { field, wire, start: at, end: at + n };
      at += n;
    } else throw graphError(`wire type ${wire} (groups are not used by ONNX)`);
  }
}

const messages = (bytes, from, to, field) => [...fields(bytes, from, to)].filter((f) => f.field === field && f.wire === 2);

function text(bytes, f) {
  try {
    return decoder.decode(bytes.subarray(f.start, f.end));
  } catch {
    throw graphError('a string is not UTF-8');
  }
}

// A StringStringEntryProto: [key, value] (absent fields are '').
function entry(bytes, f) {
  let key = '';
  let value = '';
  for (const g of fields(bytes, f.start, f.end)) {
    if (g.field === 1 && g.wire === 2) key = text(bytes, g);
    if (g.field === 2 && g.wire === 2) value = text(bytes, g);
  }
  return [key, value];
}

// An int32 (an enum) read as protobuf's parsers read it: the varint's low 32 bits, signed.
const int32 = (bytes, f) => Number(BigInt.asIntN(32, int64(bytes, f.start, f.end)[0]));

// TensorProto's typed data fields: float_data 4, int32_data 5, string_data 6,
// int64_data 7, double_data 10, uint64_data 11 (raw_data 9 apart).
const TYPED_DATA = new Set([4, 5, 6, 7, 10, 11]);

/**
 * A TensorProto's name, type, dims (BigInt), whether it is external data
 * (its external_data entries) and whether it holds data in the graph.
 */
function tensorOf(bytes, from, to) {
  const t = { name: '', dataType: 0, dims: [], external: false, entries: [], raw: false, typed: false, start: from, end: to };
  for (const f of fields(bytes, from, to)) {
    if (f.field === 8 && f.wire === 2) t.name = text(bytes, f);
    else if (f.field === 2 && f.wire === 0) t.dataType = int32(bytes, f);
    else if (f.field === 1 && f.wire === 0) t.dims.push(int64(bytes, f.start, f.end)[0]);
    else if (f.field === 1 && f.wire === 2) {
      for (let at = f.start; at < f.end; ) {
        let v;
        [v, at] = int64(bytes, at, f.end);
        t.dims.push(v);
      }
    } else if (f.field === 14 && f.wire === 0) t.external = int32(bytes, f) === 1;
    else if (f.field === 13 && f.wire === 2) t.entries.push(entry(bytes, f));
    else if (f.field === 9 && f.wire === 2) t.raw = true; // present, even empty: protobuf's has_raw_data
    else if (TYPED_DATA.has(f.field) && (f.field === 6 || f.wire !== 2 || f.end > f.start)) t.typed = true;
  }
  return t;
}

// Where a tensor is, for messages: '' in the main graph, else ' of subgraph "b" (node "n", attribute "body")'.
const placeOf = (where) => (where === null ? '' : ` of ${where}`);

// A plain file name in the graph's folder (what `location` and kiln.model
// must be): the core's rule for a shard name (kiln_nostd::model::ShardName).
function isPlainFileName(name) {
  assertReady();
  return is_plain_file_name(name);
}

// An external_data offset or length: 1 to 20 decimal digits, at most 2^64 - 1 (kiln-onnx's rule), as a BigInt.
function decimal(v, what, name) {
  const n = /^[0-9]{1,20}$/.test(v ?? '') ? BigInt(v) : null;
  if (n === null || n >= SATURATED) {
    throw graphError(`initializer ${JSON.stringify(name)}: external data ${what} ${JSON.stringify(v)} is not a decimal number`, name);
  }
  return n;
}

// R1's payload limit for tensor `t` (null: no node reads it as data).
function readLimit(t, reads) {
  if (reads.standard.has(t.name)) return INLINE_LIMIT;
  if ((t.dataType === 6 || t.dataType === 7) && t.dims.length <= 1 && reads.any.has(t.name)) return INLINE_LIMIT;
  if (reads.other.has(t.name)) return OTHER_DOMAIN_LIMIT;
  return null;
}

// R1 for an initializer held in the graph: a node reads it as data and its
// payload (product of dims x width, 4-bit types rounded up; a scalar is one
// element) is under that read's limit, or it is of a type Kiln cannot hold.
function checkInline(t, where, reads) {
  const type = ONNX_TYPES.get(t.dataType);
  if (type === undefined) return;
  // The element count, held at 2^64 once past it (a hostile list of dims
  // would otherwise grow one BigInt without bound); a zero dim makes it 0.
  let n = t.dims.includes(0n) ? 0n : 1n;
  for (let i = 0; i < t.dims.length && n > 0n && n < SATURATED; i++) n *= t.dims[i];
  const bytes = n >= SATURATED ? SATURATED : (n * BigInt(type[1]) + 7n) / 8n;
  const limit = readLimit(t, reads);
  if (limit === null || bytes >= BigInt(limit)) {
    const size = bytes >= SATURATED ? 'over 2^64 bytes' : `${bytes} bytes`;
    const why = limit === null ? 'no node reads it as data while the graph is resolved' : `a node reads it as data, but only under ${limit} bytes may stay`;
    throw graphError(
      `initializer ${JSON.stringify(t.name)}${placeOf(where)} is stored in the graph (${size}; ${why}): only what shape ` +
        'inference reads (a shape, axes, scales, ...) or a type Kiln cannot hold stays in the graph; the rest must be ' +
        'external data in the Kiln file',
      t.name,
    );
  }
}

// A main-graph initializer stored as external data: {name, location, offset, length, dataType, dims}.
function externalRef(t) {
  const name = t.name;
  const got = new Map();
  for (const [k, v] of t.entries) {
    if (got.has(k)) throw graphError(`initializer ${JSON.stringify(name)}: external_data key ${JSON.stringify(k)} given twice`, name);
    got.set(k, v);
  }
  const keys = [...got.keys()].sort();
  if (keys.join() !== 'length,location,offset') {
    throw graphError(`initializer ${JSON.stringify(name)}: external_data keys [${keys.map((k) => JSON.stringify(k))}]; exactly location, offset and length are expected`, name);
  }
  if (t.raw || t.typed) throw graphError(`initializer ${JSON.stringify(name)} is external data and also holds data in the graph`, name);
  const location = got.get('location');
  if (!isPlainFileName(location)) {
    throw graphError(`initializer ${JSON.stringify(name)}: external data location ${JSON.stringify(location)} is not a plain file name; it must be a file in the graph's own folder`, name);
  }
  const offset = decimal(got.get('offset'), 'offset', name);
  const length = decimal(got.get('length'), 'length', name);
  if (!ONNX_TYPES.has(t.dataType)) {
    throw graphError(`initializer ${JSON.stringify(name)} is external data of ONNX type ${t.dataType}, which no Kiln tensor holds`, name);
  }
  return { name, location, offset, length, dataType: t.dataType, dims: t.dims };
}

// A refusal of external data found while walking: the first in walk order
// is thrown once the walk has checked the nesting (kiln-onnx's order).
function note(ctx, e) {
  if (ctx.otherExternal === null) ctx.otherExternal = e;
}

const ONLY_INITIALIZERS = "only the initializers of the model's graphs may be (their Kiln files are checked; this would be read unchecked)";

// A tensor that is not an initializer of a graph must not be external data.
function notExternal(bytes, f, what, ctx, initializer) {
  if (tensorOf(bytes, f.start, f.end).external) note(ctx, graphError(`${what} is external data: ${ONLY_INITIALIZERS}`, initializer));
}

// A SparseTensorProto's values (1) and indices (2) must not be external data;
// a sparse initializer is named by its values' name.
function sparseNotExternal(bytes, f, what, ctx, named) {
  const parts = [...fields(bytes, f.start, f.end)].filter((g) => (g.field === 1 || g.field === 2) && g.wire === 2);
  const values = parts.filter((g) => g.field === 1).pop();
  const name = named ? (values === undefined ? '' : tensorOf(bytes, values.start, values.end).name) : undefined;
  for (const g of parts) notExternal(bytes, g, named ? `${what} ${JSON.stringify(name)}` : what, ctx, name);
}

/**
 * Walks a GraphProto (`where` null for the main graph, else a description
 * of the subgraph): external data on its sparse initializers (and, in a
 * function, on its initializers) noted in `ctx.otherExternal`; its
 * initializers (not a function's) into `ctx.inits` for R1 and R3; then each
 * node's attributes in order, each attribute's `g` then its `graphs`,
 * pre-order (R3's order).
 */
function walkGraph(bytes, from, to, where, depth, ctx) {
  const inits = [];
  const sparse = [];
  for (const f of fields(bytes, from, to)) {
    if (f.wire === 2 && f.field === 5) inits.push(tensorOf(bytes, f.start, f.end));
    else if (f.wire === 2 && f.field === 15) sparse.push(f);
  }
  if (ctx.inFunction) {
    // A function's subgraphs hold no weights of the conversion: nothing of theirs is external data.
    for (const t of inits) {
      if (t.external) note(ctx, graphError(`initializer ${JSON.stringify(t.name)}${placeOf(where)} of a function is external data: ${ONLY_INITIALIZERS}`, t.name));
    }
  }
  for (const f of sparse) sparseNotExternal(bytes, f, `sparse initializer${placeOf(where)}`, ctx, true);
  if (!ctx.inFunction) for (const t of inits) ctx.inits.push({ t, where });
  for (const f of messages(bytes, from, to, 1)) walkNode(bytes, f, depth, ctx);
}

// A NodeProto's attributes: tensors that must not be external, subgraphs walked in order.
function walkNode(bytes, nodeField, depth, ctx) {
  let name = '';
  let op = '';
  let domain = '';
  const inputs = [];
  const attributes = [];
  for (const f of fields(bytes, nodeField.start, nodeField.end)) {
    if (f.wire !== 2) continue;
    if (f.field === 1) inputs.push(text(bytes, f));
    else if (f.field === 3) name = text(bytes, f);
    else if (f.field === 4) op = text(bytes, f);
    else if (f.field === 7) domain = text(bytes, f);
    else if (f.field === 5) attributes.push(f);
  }
  // R1's reads: what this node takes as data while the graph is resolved.
  if (domain === '' || domain === 'ai.onnx') {
    if (PROPAGATES.has(op)) for (const i of inputs) if (i !== '') ctx.reads.any.add(i);
    for (const i of READS_DATA.get(op) ?? []) if (inputs[i]) ctx.reads.standard.add(inputs[i]);
  } else {
    for (const i of inputs) if (i !== '') ctx.reads.other.add(i);
  }
  for (const a of attributes) {
    let attr = '';
    const g = [];
    const graphs = [];
    const tensors = [];
    const sparse = [];
    for (const f of fields(bytes, a.start, a.end)) {
      if (f.wire !== 2) continue;
      if (f.field === 1) attr = text(bytes, f);
      else if (f.field === 6) g.push(f);
      else if (f.field === 11) graphs.push(f);
      else if (f.field === 5 || f.field === 10) tensors.push(f);
      else if (f.field === 22 || f.field === 23) sparse.push(f);
    }
    const what = `attribute ${JSON.stringify(attr)} of node ${JSON.stringify(name)} (${op})`;
    for (const t of tensors) notExternal(bytes, t, what, ctx);
    for (const s of sparse) sparseNotExternal(bytes, s, what, ctx, false);
    // A second `g` would be merged into the first by protobuf's parsers: refused rather than read another way.
    if (g.length > 1) throw graphError(`${what} gives its graph (g) ${g.length} times`);
    for (const s of [...g, ...graphs]) {
      if (depth >= MAX_DEPTH) throw graphError(`subgraphs nested more than ${MAX_DEPTH} deep (at ${what})`);
      let graphName = '';
      for (const f of fields(bytes, s.start, s.end)) if (f.field === 2 && f.wire === 2) graphName = text(bytes, f);
      walkGraph(bytes, s.start, s.end, `subgraph ${JSON.stringify(graphName)} (${what})`, depth + 1, ctx);
    }
  }
}

/**
 * The graph read and held to R1 and R2's first half, in kiln-onnx's order
 * (one graph, nesting, external data elsewhere than on initializers, the
 * Kiln model named, then each initializer in R3's order): {refs (the
 * external initializers of every graph, in R3's order), checked (R3's
 * list), model (the kiln.model entry; null with `needModel` false)}.
 * Throws an Error naming what is refused.
 */
function readGraph(bytes, needModel = true) {
  const top = [...fields(bytes)];
  const graphs = top.filter((f) => f.field === 7 && f.wire === 2);
  if (graphs.length !== 1) throw graphError(`${graphs.length} graph fields (a model has one)`);
  const ctx = { inits: [], otherExternal: null, inFunction: false, reads: { standard: new Set(), any: new Set(), other: new Set() } };
  walkGraph(bytes, graphs[0].start, graphs[0].end, null, 0, ctx);
  // Functions (ModelProto.functions 25, their nodes 7): nesting and external data checked, nothing listed.
  ctx.inFunction = true;
  for (const fn of top.filter((f) => f.field === 25 && f.wire === 2)) {
    for (const node of messages(bytes, fn.start, fn.end, 7)) walkNode(bytes, node, 0, ctx);
  }
  if (ctx.otherExternal !== null) throw ctx.otherExternal;
  let model = null;
  if (needModel) {
    const models = top.filter((f) => f.field === 14 && f.wire === 2).map((f) => entry(bytes, f)).filter(([k]) => k === MODEL_KEY);
    if (models.length === 0) throw graphError('the graph names no Kiln model (metadata_props kiln.model): convert it again with kiln convert --onnx-graph');
    if (models.length > 1) throw graphError(`metadata_props ${MODEL_KEY} is given twice`);
    model = models[0][1];
    if (!isPlainFileName(model)) throw graphError(`metadata_props ${MODEL_KEY} ${JSON.stringify(model)} is not a plain file name in the graph's folder`);
  }
  const refs = [];
  const checked = [];
  for (const { t, where } of ctx.inits) {
    if (t.dims.some((d) => d < 0n)) throw graphError(`initializer ${JSON.stringify(t.name)}${placeOf(where)} has a negative dimension`, t.name);
    if (t.external) {
      refs.push({ ...externalRef(t), subgraph: where !== null, start: t.start, end: t.end });
      checked.push([t.name, 'kiln']);
    } else {
      checkInline(t, where, ctx.reads);
      checked.push([t.name, 'inline']);
    }
  }
  return { refs, checked, model };
}

/**
 * The external initializers of every graph (main and subgraphs, R3's
 * order): [{name, location, offset, length (BigInt), dataType, dims}],
 * after R1's checks of the whole graph (throws an Error for a graph it
 * refuses; kiln.model is not required). Exported for tests.
 */
export function externalInitializers(graph) {
  return readGraph(asBytes(graph, 'externalInitializers'), false).refs;
}

async function fetchBytes(url, options, what) {
  const fetchFn = options.fetch ?? ((...a) => globalThis.fetch(...a));
  const r = await fetchFn(url, { headers: options.headers, signal: options.signal });
  if (!r.ok) throw new Error(`kiln: ${what} ${url}: HTTP ${r.status} ${r.statusText}`);
  return new Uint8Array(await r.arrayBuffer());
}

const isUrl = (v) => typeof v === 'string' || v instanceof URL;

// One Kiln model file (a URL, fetched whole and checked as it streams in, or
// its bytes), checked whole with its digests: {bytes, directory, digests}
// (digests false for a record without them). A manifest throws
// manifestError's KilnError (marked MANIFEST).
async function checkedFile(data, options, limits) {
  if (isUrl(data)) {
    const d = await loadDirectory(String(data), { ...options, verifyDigests: true });
    return { bytes: d.source, directory: d, digests: readHeadWhole(d.source, limits).digests !== null };
  }
  const bytes = asBytes(data, 'createOnnxSession');
  const { table, head } = checkWhole(bytes, limits, true);
  return { bytes, directory: new Directory(INTERNAL, table, bytes, { metadata: head.metadata }), digests: head.digests !== null };
}

// A fetch that answers Range requests from `bytes`: openRemote then reads a
// manifest given as bytes exactly as it reads one over HTTP.
function memoryFetch(bytes) {
  return async (_url, init) => {
    const m = /^bytes=(\d+)-(\d+)$/.exec(new Headers(init?.headers).get('range') ?? '');
    if (m === null) return new Response(null, { status: 400 });
    const start = Number(m[1]);
    if (start >= bytes.length) return new Response(null, { status: 416, headers: { 'content-range': `bytes */${bytes.length}` } });
    const end = Math.min(Number(m[2]), bytes.length - 1);
    return new Response(bytes.slice(start, end + 1), { status: 206, headers: { 'content-range': `bytes ${start}-${end}/${bytes.length}` } });
  };
}

// R2: the Kiln model's metadata records the graph's SHA-256.
function checkRecorded(metadata, model, sha) {
  const recorded = metadata?.get(DIGEST_KEY);
  if (recorded === undefined) {
    throw new Error(
      `kiln: ${model} records no ${DIGEST_KEY} in its metadata, so nothing ties the graph to it: ` +
        'convert it again with kiln convert --onnx-graph',
    );
  }
  if (recorded !== sha) {
    throw new Error(`kiln: the graph's SHA-256 is ${sha}; ${model} records ${recorded}: the graph was changed or belongs to another conversion`);
  }
}

/**
 * The Kiln model the graph names (`model`, kiln.model), opened and checked
 * whole (digests compared; a manifest: every shard held against it) and
 * held to R2 (`sha`, the graph's SHA-256 in hex), then any other file of
 * `options.files`: Map path -> {bytes, directory}.
 *
 * The model: `options.model` (named `model`; `options.modelPath`, when
 * given, must be that name), or the entry of `options.files` of that name.
 * A model file is the one file; a manifest (a URL: read as openRemote does;
 * bytes: only with `options.files`) brings its shards, fetched from beside
 * it, or with `options.files` taken from there by name.
 */
async function openKiln(options, model, sha) {
  const limits = limitsOf(options);
  const files = new Map();
  const requireDigests = options.requireDigests !== false;
  const add = (path, f) => {
    if (requireDigests && !f.digests) {
      throw new Error(`kiln: ${path} has no digests, so its weights cannot be checked; convert it with kiln convert, or pass requireDigests: false`);
    }
    files.set(path, { bytes: f.bytes, directory: f.directory });
  };
  let source;
  const others = new Map();
  if (options.files !== undefined) {
    for (const f of options.files) {
      if (f.path === model) source = f.data;
      else others.set(f.path, f.data);
    }
    if (source === undefined) {
      const names = options.files.map((f) => f.path).join(', ');
      throw new Error(`kiln: the graph's Kiln model ${JSON.stringify(model)} (metadata_props ${MODEL_KEY}) is not among options.files (${names})`);
    }
  } else {
    if (options.modelPath !== undefined && options.modelPath !== model) {
      throw new Error(`kiln: options.modelPath is ${JSON.stringify(options.modelPath)}; the graph's Kiln model (metadata_props ${MODEL_KEY}) is ${JSON.stringify(model)}`);
    }
    source = options.model;
  }
  let single = null;
  try {
    single = await checkedFile(source, options, limits);
  } catch (e) {
    if (!(e instanceof KilnError && e[MANIFEST] === true)) throw e; // else a manifest
  }
  if (single !== null) {
    checkRecorded(single.directory.metadata, model, sha);
    add(model, single);
  } else {
    // A sharded model: the manifest checked by the core (openRemote), R2 on
    // its metadata, then every shard fetched (or taken from options.files)
    // whole, checked whole with its digests and held against the manifest.
    let m;
    if (isUrl(source)) {
      // A relative URL is resolved against the page: shard URLs are resolved against the manifest's.
      const base = globalThis.location?.href;
      m = await openRemote(base ? new URL(String(source), base).href : source, options);
    } else if (options.files !== undefined) {
      const { countCap, byteCap } = options;
      m = await openRemote(`https://kiln.invalid/${encodeURIComponent(model)}`, { countCap, byteCap, fetch: memoryFetch(asBytes(source, 'createOnnxSession')) });
    } else {
      throw new Error(`kiln: ${model} is a sharded model's manifest, given as bytes: pass its URL (the shards are fetched from beside it), or options.files with it and every shard`);
    }
    checkRecorded(m.metadata, model, sha);
    const shards = m.shards.map((s) => {
      if (options.files === undefined) return [s, s.url];
      if (!others.has(s.name)) throw new Error(`kiln: shard ${s.index} of ${model}, ${s.name}, is not among options.files`);
      const data = others.get(s.name);
      others.delete(s.name);
      return [s, data];
    });
    await Promise.all(
      shards.map(async ([s, data]) => {
        try {
          const f = await checkedFile(data, options, limits);
          shardCheck(m, s, f.bytes, f.directory.payloadOffset);
          files.set(s.name, { bytes: f.bytes, directory: f.directory });
        } catch (e) {
          throw inShard(e, s.name, s.index);
        }
      }),
    );
  }
  for (const [path, data] of others) add(path, await checkedFile(data, options, limits));
  return files;
}

// The graph's dims (BigInt) and a Kiln tensor's shape are equal.
function sameDims(dims, shape) {
  return dims.length === shape.length && dims.every((d, i) => d === BigInt(shape[i]));
}

// Every external initializer is the Kiln tensor of its name in the file it
// names: the same bytes (offset, length), dtype and shape. A mismatch is an
// Error naming the initializer (`initializer`) and the file (`file`).
function match(refs, files) {
  for (const r of refs) {
    const fail = (message) => Object.assign(new Error(`kiln: the graph's ${message}`), { initializer: r.name, file: r.location });
    const f = files.get(r.location);
    if (f === undefined) throw fail(`initializer ${JSON.stringify(r.name)} reads ${JSON.stringify(r.location)}, which is not among the Kiln files given (${[...files.keys()].join(', ')})`);
    const t = f.directory.get(r.name);
    const where = `initializer ${JSON.stringify(r.name)} (${r.location}, offset ${r.offset}, length ${r.length})`;
    if (t === undefined) throw fail(`${where}: ${r.location} has no tensor of that name`);
    if (r.offset !== BigInt(t.byteOffset) || r.length !== BigInt(t.byteLength)) {
      throw fail(`${where} is not that tensor's payload (offset ${t.byteOffset}, length ${t.byteLength})`);
    }
    if (ONNX_TYPES.get(r.dataType)[0] !== t.dtype || !sameDims(r.dims, t.shape)) {
      throw fail(`${where} is ONNX type ${r.dataType} [${r.dims}], the tensor ${t.dtype} [${t.shape}]`);
    }
  }
}

// A length-delimited field's key and length, then `payload`.
function lengthDelimited(field, payload) {
  const head = [];
  for (let v = field * 8 + 2, first = true; first || v > 0; first = false) {
    head.push((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    v = Math.floor(v / 128);
  }
  for (let v = payload.length, first = true; first || v > 0; first = false) {
    head.push((v % 128) | (v >= 0x80 ? 0x80 : 0));
    v = Math.floor(v / 128);
  }
  const out = new Uint8Array(head.length + payload.length);
  out.set(head);
  out.set(payload, head.length);
  return out;
}

const concat = (parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

// The message bytes[from, to) with each length-delimited field whose range is
// a key of `replaced` (start -> [end, bytes]) replaced by those bytes, and the
// fields holding one re-encoded around it; every other byte is copied as it is.
function splice(bytes, from, to, replaced) {
  const parts = [];
  let copied = from;
  let key = from; // fields are contiguous: each one's key starts where the one before ended
  for (const f of fields(bytes, from, to)) {
    const start = key;
    key = f.end;
    if (f.wire !== 2 || ![...replaced.keys()].some((s) => s >= f.start && s < f.end)) continue;
    const [end, payload] = replaced.get(f.start) ?? [];
    const body = end === f.end ? payload : splice(bytes, f.start, f.end, replaced);
    parts.push(bytes.subarray(copied, start), lengthDelimited(f.field, body));
    copied = f.end;
  }
  parts.push(bytes.subarray(copied, to));
  return concat(parts);
}

// The graph for the runtime: the checked bytes, or, when subgraphs hold
// external initializers (which ONNX Runtime reads only from files, never from
// externalData), the same graph with those inline in their subgraph, their
// raw_data the checked Kiln payload (what the original model held there).
function forRuntime(checked) {
  const sub = checked.refs.filter((r) => r.subgraph);
  if (sub.length === 0) return checked.graph;
  const bytes = checked.graph;
  const replaced = new Map();
  for (const r of sub) {
    // The tensor's own fields but external_data (13) and data_location (14), then raw_data (9).
    const kept = [];
    let key = r.start;
    for (const f of fields(bytes, r.start, r.end)) {
      if (f.field !== 13 && f.field !== 14) kept.push(bytes.subarray(key, f.end));
      key = f.end;
    }
    const data = checked.opened.get(r.location).bytes.subarray(Number(r.offset), Number(r.offset + r.length));
    replaced.set(r.start, [r.end, concat([...kept, lengthDelimited(9, data)])]);
  }
  return splice(bytes, 0, bytes.length, replaced);
}

// checkOnnxGraph's work; `beforeOpen(locations)` runs once the graph has
// passed R1, before any Kiln file is fetched or checked.
async function check(graph, options, beforeOpen = null) {
  const graphBytes = isUrl(graph) ? await fetchBytes(String(graph), options, 'ONNX graph') : asBytes(graph, 'checkOnnxGraph: graph');
  const { refs, checked, model } = readGraph(graphBytes);
  const locations = [...new Set(refs.map((r) => r.location))];
  beforeOpen?.(locations);
  const sha256 = hex(sha256Of(graphBytes));
  const files = await openKiln(options, model, sha256);
  match(refs, files);
  return { graph: graphBytes, model, sha256, checked, files: locations.map((path) => ({ path, data: files.get(path).bytes })), refs, opened: files };
}

/**
 * Checks an ONNX graph written by `kiln convert model.onnx -o model.kiln
 * --onnx-graph model.kiln.onnx` against its Kiln model, as createOnnxSession
 * does, without creating a session:
 *
 * - R1: each initializer held in the graph (main graph or subgraph) is one a
 *   node reads as data while the graph is resolved, under that read's limit
 *   (READS_DATA, INLINE_LIMIT, OTHER_DOMAIN_LIMIT), or of a type Kiln cannot
 *   hold, else it is refused by name; external data only on the
 *   initializers of the main graph and its subgraphs (`location`, `offset`,
 *   `length`, nothing else; a plain file name), nowhere else (a Constant's
 *   or any attribute's tensor, a sparse tensor, a function's subgraph). A negative dimension, a second `g` in
 *   one attribute and subgraphs nested more than 30 deep are refused.
 * - R2: the graph's metadata_props name its Kiln model (`kiln.model`); that
 *   file (`options.model`, or the entry of `options.files` of that name) is
 *   checked whole, digests included (a manifest: with every shard held
 *   against it), and its metadata's `kiln.convert.onnx_graph_sha256` must be
 *   the SHA-256 of the graph's bytes.
 * - Every external initializer is the Kiln tensor of its name in the file it
 *   names: offset, length, ONNX type and shape.
 *
 * Resolves to `{ graph, model, sha256, checked, files }`: the graph's
 * bytes, the Kiln model's name, the graph's SHA-256 (hex), R3's list
 * (`[name, 'kiln' | 'inline']` for every initializer: the main graph's in
 * order, then each node's subgraphs, pre-order) and `[{ path, data }]`, the
 * checked bytes of each Kiln file the graph reads. Rejects as
 * createOnnxSession does. Options as for createOnnxSession (no
 * `sessionOptions`).
 */
export async function checkOnnxGraph(graph, options = {}) {
  if (options.files === undefined && (options.model === undefined || options.model === null)) {
    throw new TypeError('kiln: checkOnnxGraph needs options.model or options.files');
  }
  const { refs, opened, ...result } = await check(graph, options);
  return result;
}

/**
 * Creates an onnxruntime-web InferenceSession for an ONNX graph written by
 * `kiln convert model.onnx -o model.kiln --onnx-graph model.kiln.onnx`,
 * once the graph and its Kiln model have passed every check of
 * checkOnnxGraph: initializers inline only as the conversion leaves them
 * (what a node reads as data, or of a type Kiln cannot hold), the Kiln model the
 * graph names checked whole, digests included, and recording the graph's
 * SHA-256, and every external initializer the Kiln tensor of its name (same
 * offset, length, ONNX type and shape). Only then is
 * `ort.InferenceSession.create` called, with the graph's bytes and one
 * `externalData` entry per Kiln file the graph reads, named as the graph
 * names it, its data the checked bytes.
 *
 * `options.model`: the Kiln model file (a URL, fetched and checked as it
 * streams in, or its bytes; `options.modelPath`, if given, must be the name
 * the graph gives it) or a sharded model's manifest (a URL: the manifest is
 * read with Range requests and checked as openRemote does; each shard is
 * fetched whole from beside it, checked whole and held against the
 * manifest). Or `options.files`: `[{ path, data }]`, the Kiln model under
 * the name the graph gives it and, for a manifest, every shard (`data` a
 * URL or bytes). Files must carry digests (`requireDigests: false` accepts a
 * model file without them; its payloads are then checked by the byte rules
 * only). `options.sessionOptions` go to `InferenceSession.create`; `fetch`,
 * `headers`, `signal`, `countCap`, `byteCap` as for loadDirectory and
 * openRemote.
 *
 * A Kiln file that fails its check rejects with its KilnError (a shard's
 * with `file` and `shard`); a graph refused, or one that does not match the
 * files, rejects with an Error (`initializer` naming the one at fault, where
 * one is); the runtime is then never called.
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
  const given = sessionOptions.externalData ?? [];
  const checked = await check(graph, options, (locations) => {
    for (const e of given) {
      const path = typeof e === 'string' ? e : e?.path;
      if (locations.includes(path)) throw new TypeError(`kiln: sessionOptions.externalData names ${path}, a Kiln file of the graph`);
    }
  });
  return ort.InferenceSession.create(forRuntime(checked), { ...sessionOptions, externalData: [...given, ...checked.files] });
}
