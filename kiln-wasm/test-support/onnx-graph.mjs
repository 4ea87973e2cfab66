// ONNX graphs written by hand for the ONNX tests (protobuf, onnx-ml.proto
// field numbers, fields in field-number order as ONNX's own serializer
// writes them: a graph's nodes before its initializers). Building blocks
// (tensor, node, attribute, graph, model) and the digits MLP: input x f32
// [N, 64], Gemm(transB=1) -> Relu -> Gemm(transB=1) -> logits f32 [N, 10],
// initializers fc1.weight, fc1.bias, fc2.weight, fc2.bias.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ROOT } from './goldens.mjs';

export const BUNDLED_ONNX = fileURLToPath(new URL('spec/examples/digits-mlp.onnx', ROOT));

const enc = new TextEncoder();

function varint(n) {
  const out = [];
  let v = BigInt.asUintN(64, BigInt(n)); // int64: a negative value is its two's complement, ten bytes
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}

export const cat = (parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const int = (field, v) => Uint8Array.from([...varint(field * 8), ...varint(v)]);
/** A length-delimited field. */
export const bytes = (field, b) => cat([Uint8Array.from([...varint(field * 8 + 2), ...varint(b.length)]), b]);
const str = (field, s) => bytes(field, enc.encode(s));
const entry = (field, k, v) => bytes(field, cat([str(1, k), str(2, v)]));

/** ONNX TensorProto.DataType codes used by the tests. */
export const ONNX = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, STRING: 8, DOUBLE: 11, COMPLEX64: 14, FLOAT8E4M3FNUZ: 18, UINT4: 21 };

/**
 * A TensorProto (its bytes, without a field key): dims 1, data_type 2,
 * string_data 6, name 8, raw_data 9, external_data 13 (the [key, value]
 * pairs of `external`, an object or an array of pairs), data_location 14
 * (EXTERNAL when `external` is given). `raw` defaults to zeros of
 * `rawLength` bytes when that is given.
 */
export function tensor({ name, dataType = ONNX.FLOAT, dims = [], raw = null, rawLength = null, strings = null, external = null }) {
  const data = raw ?? (rawLength !== null ? new Uint8Array(rawLength) : null);
  const ext = external === null ? [] : Array.isArray(external) ? external : Object.entries(external);
  return cat([
    ...dims.map((d) => int(1, d)),
    int(2, dataType),
    ...(strings ?? []).map((s) => str(6, s)),
    str(8, name),
    ...(data !== null ? [bytes(9, data)] : []),
    ...ext.map(([k, v]) => entry(13, k, String(v))),
    ...(external !== null ? [int(14, 1)] : []),
  ]);
}

/**
 * An AttributeProto: name 1, i 3, t 5 (a tensor's bytes), g 6 (a graph's
 * bytes), graphs 11, type 20 (INT 2, TENSOR 4, GRAPH 5, GRAPHS 10).
 */
export function attribute({ name, i = null, t = null, g = null, graphs = null }) {
  const type = i !== null ? 2 : t !== null ? 4 : g !== null ? 5 : 10;
  return cat([
    str(1, name),
    ...(i !== null ? [int(3, i)] : []),
    ...(t !== null ? [bytes(5, t)] : []),
    ...(g !== null ? [bytes(6, g)] : []),
    ...(graphs ?? []).map((s) => bytes(11, s)),
    int(20, type),
  ]);
}

/** A NodeProto: input 1, output 2, name 3, op_type 4, attribute 5 (attributes' bytes), domain 7 (when given). */
export function node({ op, name = '', inputs = [], outputs = [], attributes = [], domain = null }) {
  return cat([
    ...inputs.map((s) => str(1, s)),
    ...outputs.map((s) => str(2, s)),
    str(3, name),
    str(4, op),
    ...attributes.map((a) => bytes(5, a)),
    ...(domain !== null ? [str(7, domain)] : []),
  ]);
}

// ValueInfoProto: name 1, type 2 (TypeProto.tensor_type 1: elem_type 1, shape 2 (dim 1: dim_value 1, dim_param 2)).
const value = (field, name, dims, elemType = 1) =>
  bytes(field, cat([str(1, name), bytes(2, bytes(1, cat([int(1, elemType), bytes(2, cat(dims.map((d) => bytes(1, typeof d === 'string' ? str(2, d) : int(1, d)))))])))]));

/**
 * A GraphProto: node 1, name 2, initializer 5, input 11, output 12
 * (`inputs`/`outputs`: [name, dims, elemType (default 1, FLOAT)], a dim a
 * number or a symbolic name).
 */
export function graph({ name = '', nodes = [], initializers = [], inputs = [], outputs = [] }) {
  return cat([
    ...nodes.map((n) => bytes(1, n)),
    str(2, name),
    ...initializers.map((t) => bytes(5, t)),
    ...inputs.map(([n, d, e]) => value(11, n, d, e)),
    ...outputs.map(([n, d, e]) => value(12, n, d, e)),
  ]);
}

/**
 * A ModelProto: ir_version 1 (8), producer_name 2, graph 7, opset_import 8
 * (ai.onnx 17), metadata_props 14 (the [key, value] pairs of `metadata`).
 */
export function model({ graph: g, metadata = [] }) {
  return cat([int(1, 8), str(2, 'kiln-wasm tests'), bytes(7, g), bytes(8, cat([str(1, ''), int(2, 17)])), ...metadata.map(([k, v]) => entry(14, k, v))]);
}

/**
 * The digits MLP from its four f32 tensors (Float32Arrays, little-endian
 * host), each inline (raw_data), or external data where `external` has its
 * name ({location, offset, length}); `metadata`: the model's metadata_props.
 */
export function digitsOnnx({ w1, b1, w2, b2 }, { external = {}, metadata = [] } = {}) {
  const raw = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const init = (name, dims, a) => tensor(external[name] ? { name, dims, external: external[name] } : { name, dims, raw: raw(a) });
  const transB = [attribute({ name: 'transB', i: 1 })];
  const g = graph({
    name: 'digits-mlp',
    nodes: [
      node({ op: 'Gemm', inputs: ['x', 'fc1.weight', 'fc1.bias'], outputs: ['h'], attributes: transB }),
      node({ op: 'Relu', inputs: ['h'], outputs: ['r'] }),
      node({ op: 'Gemm', inputs: ['r', 'fc2.weight', 'fc2.bias'], outputs: ['logits'], attributes: transB }),
    ],
    initializers: [init('fc1.weight', [32, 64], w1), init('fc1.bias', [32], b1), init('fc2.weight', [10, 32], w2), init('fc2.bias', [10], b2)],
    inputs: [['x', ['N', 64]]],
    outputs: [['logits', ['N', 10]]],
  });
  return model({ graph: g, metadata });
}

/** spec/examples/digits-mlp.onnx when it exists, else the graph built here from `tensors`. */
export function digitsOnnxBytes(tensors) {
  if (existsSync(BUNDLED_ONNX)) return { bytes: new Uint8Array(readFileSync(BUNDLED_ONNX)), from: 'spec/examples/digits-mlp.onnx' };
  return { bytes: digitsOnnx(tensors), from: 'test-support/onnx-graph.mjs' };
}
