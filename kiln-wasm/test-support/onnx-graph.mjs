// The digits MLP as an ONNX graph with inline weights, for the ONNX tests:
// input x f32 [N, 64], Gemm(transB=1) -> Relu -> Gemm(transB=1) -> logits
// f32 [N, 10], initializers fc1.weight, fc1.bias, fc2.weight, fc2.bias from
// spec/examples/digits-mlp.kiln (raw_data). spec/examples/digits-mlp.onnx is
// the same model; the tests use that file where it exists, else this one.
// Protobuf written by hand (onnx-ml.proto field numbers), fields in order.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ROOT } from './goldens.mjs';

export const BUNDLED_ONNX = fileURLToPath(new URL('spec/examples/digits-mlp.onnx', ROOT));

const enc = new TextEncoder();

function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}

const cat = (parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const int = (field, v) => Uint8Array.from([...varint(field * 8), ...varint(v)]);
const bytes = (field, b) => cat([Uint8Array.from([...varint(field * 8 + 2), ...varint(b.length)]), b]);
const str = (field, s) => bytes(field, enc.encode(s));
const msg = (field, parts) => bytes(field, cat(parts));

// TensorProto: dims 1, data_type 2, name 8, raw_data 9.
const tensor = (name, dims, raw) => msg(5, [...dims.map((d) => int(1, d)), int(2, 1), str(8, name), bytes(9, raw)]);
// NodeProto: input 1, output 2, op_type 4, attribute 5 (AttributeProto: name 1, i 3, type 20 = INT).
const node = (op, inputs, outputs, transB) =>
  msg(1, [...inputs.map((i) => str(1, i)), ...outputs.map((o) => str(2, o)), str(4, op), ...(transB ? [msg(5, [str(1, 'transB'), int(3, 1), int(20, 2)])] : [])]);
// ValueInfoProto: name 1, type 2 (TypeProto.tensor_type 1: elem_type 1, shape 2 (dim 1: dim_value 1, dim_param 2)).
const value = (field, name, dims) =>
  msg(field, [str(1, name), msg(2, [msg(1, [int(1, 1), msg(2, dims.map((d) => msg(1, [typeof d === 'string' ? str(2, d) : int(1, d)])))])])]);

/**
 * The graph's bytes from the four f32 tensors (Float32Arrays, little-endian
 * host): ModelProto ir_version 8 (1), producer_name (2), graph (7), opset
 * ai.onnx 17 (8).
 */
export function digitsOnnx({ w1, b1, w2, b2 }) {
  const raw = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const graph = [
    node('Gemm', ['x', 'fc1.weight', 'fc1.bias'], ['h'], true),
    node('Relu', ['h'], ['r'], false),
    node('Gemm', ['r', 'fc2.weight', 'fc2.bias'], ['logits'], true),
    str(2, 'digits-mlp'),
    tensor('fc1.weight', [32, 64], raw(w1)),
    tensor('fc1.bias', [32], raw(b1)),
    tensor('fc2.weight', [10, 32], raw(w2)),
    tensor('fc2.bias', [10], raw(b2)),
    value(11, 'x', ['N', 64]),
    value(12, 'logits', ['N', 10]),
  ];
  return cat([int(1, 8), str(2, 'kiln-wasm tests'), msg(7, graph), msg(8, [str(1, ''), int(2, 17)])]);
}

/** spec/examples/digits-mlp.onnx when it exists, else the graph built here from `tensors`. */
export function digitsOnnxBytes(tensors) {
  if (existsSync(BUNDLED_ONNX)) return { bytes: new Uint8Array(readFileSync(BUNDLED_ONNX)), from: 'spec/examples/digits-mlp.onnx' };
  return { bytes: digitsOnnx(tensors), from: 'test-support/onnx-graph.mjs' };
}
