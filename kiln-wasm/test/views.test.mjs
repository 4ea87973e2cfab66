// Views over the caller's ArrayBuffer, the copy paths, conversions, and the example MLP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { __setHostLittleEndian } from '../pkg/elements.js';
import { golden, example, predict } from '../test-support/goldens.mjs';
import { encodeKiln, le } from '../test-support/encode.mjs';

const f32bits = (x) => new Uint32Array(Float32Array.of(x).buffer)[0];
const only = (name) => kiln.parseDirectory(golden(name)).at(0);

test('golden values through view() and toFloat32()', () => {
  const f32 = only('kiln-v2-f32');
  assert.equal(f32.dtype, 'f32');
  assert.deepEqual([...f32.view()], [1, -2]);
  assert.ok(f32.view() instanceof Float32Array);
  assert.equal(f32.byteOffset, 192);
  assert.equal(f32.name, null);

  const scalar = only('kiln-v2-f32-scalar');
  assert.deepEqual([scalar.rank, scalar.shape, scalar.elementCount], [0, [], 1]);
  assert.deepEqual([...scalar.view()], [1]);

  assert.ok(Object.is(only('kiln-v2-f32-negzero').view()[0], -0));

  const nan = only('kiln-v2-f64-nan');
  assert.ok(nan.view() instanceof Float64Array);
  assert.equal(new BigUint64Array(nan.view().buffer, nan.view().byteOffset, 1)[0], 0x7ff8000000000001n);

  const half = only('kiln-v2-f16-named');
  assert.equal(half.name, 'half');
  assert.equal(half.dtype, 'f16');
  const hv = half.view();
  assert.ok(typeof Float16Array === 'function' ? hv instanceof Float16Array : hv instanceof Uint16Array);
  assert.deepEqual([...half.toFloat32()], [1]);

  const bf = only('kiln-v2-bf16');
  assert.deepEqual([...bf.view()], [0x3f80]);
  assert.deepEqual([...bf.toFloat32()], [1]);

  const i8 = only('kiln-v2-i8');
  assert.ok(i8.view() instanceof Int8Array);
  assert.deepEqual([...i8.view()], [-1, -128, 127]);
  assert.deepEqual([...i8.toFloat32()], [-1, -128, 127]);

  assert.deepEqual([...only('kiln-v2-bool').view()], [1, 0, 1]);
  const u4 = only('kiln-v2-u4');
  assert.deepEqual([...u4.view()], [0x21, 0x03]);
  assert.deepEqual([...u4.toFloat32()], [1, 2, 3]);

  const pair = kiln.parseDirectory(golden('kiln-v2-f8-pair'));
  assert.deepEqual(pair.tensors().map((t) => [t.dtype, t.byteOffset - pair.payloadOffset]), [['f8e4m3', 0], ['f8e5m2', 64]]);
  assert.deepEqual(pair.tensors().map((t) => t.toFloat32()[0]), [1, 1]);

  const opaque = only('kiln-v2-opaque');
  assert.deepEqual([opaque.dtype, opaque.dtypeCode, opaque.layout, opaque.blockSize, opaque.byteLength], ['opaque:4096', 4096, 'Q4_K', 18, 18]);
  assert.ok(opaque.view() instanceof Uint8Array);
  assert.throws(() => opaque.toFloat32(), TypeError);
});

test('quantization metadata resolves scale and outer tensors', () => {
  const d = kiln.parseDirectory(golden('kiln-v2-scales'));
  const q = d.at(0).quant;
  assert.deepEqual([q.scheme, q.axis, q.groupSize, q.scale.index, q.outer], [1, 0, 32, 1, null]);
  assert.equal(q.scale.dtype, 'e8m0');
  assert.deepEqual([...q.scale.toFloat32()], [1]);
  assert.equal(d.at(1).quant, null);
  const d2 = kiln.parseDirectory(golden('kiln-v2-scales-outer'));
  const q2 = d2.at(0).quant;
  assert.deepEqual([q2.scheme, q2.groupSize, q2.scale.dtype, q2.outer.dtype], [2, 16, 'f8e4m3', 'f32']);
  assert.deepEqual([...q2.outer.view()], [1]);
});

test('every view shares the input ArrayBuffer, for every dtype', () => {
  const specs = [
    ['f64', Float64Array.of(1.5, -2)], ['f32', Float32Array.of(3)], ['f16', Uint16Array.of(0x3c00)],
    ['bf16', Uint16Array.of(0x3f80)], ['i16', Int16Array.of(-5)], ['u16', Uint16Array.of(65535)],
    ['i32', Int32Array.of(-7)], ['u32', Uint32Array.of(4e9)], ['i64', BigInt64Array.of(-3n)], ['u64', BigUint64Array.of(2n ** 63n)],
    ['i8', Int8Array.of(-1)], ['u8', Uint8Array.of(255)], ['e8m0', Uint8Array.of(127)],
  ].map(([dtype, data], i) => ({ name: `t${i}.${dtype}`, dtype, shape: [data.length], data: le(data), typed: data }));
  const bytes = encodeKiln(specs);
  const dir = kiln.parseDirectory(bytes);
  for (const s of specs) {
    const t = dir.get(s.name);
    assert.equal(t.isView, true, s.name);
    const v = t.view();
    assert.equal(v.buffer, bytes.buffer, s.name);
    assert.equal(v.byteOffset, bytes.byteOffset + t.byteOffset, s.name);
    if (s.dtype !== 'f16') assert.equal(v.constructor, s.typed.constructor, s.name);
    if (s.dtype !== 'f16') assert.deepEqual([...v], [...s.typed], s.name);
  }
  assert.deepEqual([...dir.get('t8.i64').toFloat32()], [-3]);
  assert.deepEqual([...dir.get('t9.u64').toFloat32()], [2 ** 63]);
  // A view over the input sees later writes to it: it is not a copy.
  bytes[dir.get('t1.f32').byteOffset + 3] = 0xc0;
  assert.equal(dir.get('t1.f32').view()[0], -3);
});

test('a misaligned input gets correct copies (isView false); bytes() stays zero-copy', () => {
  const src = example();
  const big = new Uint8Array(src.length + 3);
  big.set(src, 1);
  const shifted = big.subarray(1, 1 + src.length);
  const a = kiln.parseDirectory(src);
  const b = kiln.parseDirectory(shifted);
  for (const name of a.names()) {
    const ta = a.get(name);
    const tb = b.get(name);
    assert.equal(tb.byteOffset, ta.byteOffset, 'byteOffset is relative to the input');
    assert.equal(tb.bytes().buffer, big.buffer);
    assert.equal(tb.bytes().byteOffset, 1 + tb.byteOffset);
    const width = ta.view().BYTES_PER_ELEMENT;
    assert.equal(tb.isView, width === 1, name);
    const vb = tb.view();
    if (width > 1) assert.notEqual(vb.buffer, big.buffer, `${name} is a copy`);
    assert.deepEqual([...vb], [...ta.view()], name);
    assert.deepEqual([...tb.toFloat32()], [...ta.toFloat32()], name);
  }
});

test('the big-endian path swaps into host order, bit-exactly', () => {
  const nan = golden('kiln-v2-f64-nan');
  const specs = [
    { name: 'a', dtype: 'f32', shape: [3], data: le(Float32Array.of(1, -2, NaN)) },
    { name: 'b', dtype: 'u16', shape: [2], data: le(Uint16Array.of(0x1234, 0xfedc)) },
    { name: 'c', dtype: 'i64', shape: [1], data: le(BigInt64Array.of(-0x123456789an)) },
    { name: 'd', dtype: 'bf16', shape: [1], data: le(Uint16Array.of(0x3f80)) },
  ];
  const bytes = encodeKiln(specs);
  const old = __setHostLittleEndian(false);
  try {
    const dir = kiln.parseDirectory(bytes);
    const a = dir.get('a');
    assert.equal(a.isView, false);
    assert.notEqual(a.view().buffer, bytes.buffer);
    assert.deepEqual([...a.view()].slice(0, 2), [1, -2]);
    assert.deepEqual([...dir.get('b').view()], [0x1234, 0xfedc]);
    assert.deepEqual([...dir.get('c').view()], [-0x123456789an]);
    assert.deepEqual([...dir.get('d').toFloat32()], [1]);
    const n = kiln.parseDirectory(nan).at(0).view();
    assert.equal(new BigUint64Array(n.buffer)[0], 0x7ff8000000000001n);
    assert.equal(dir.get('a').bytes().buffer, bytes.buffer, 'bytes() is wire order on any host');
  } finally {
    __setHostLittleEndian(old);
  }
});

test('toFloat32 of the narrow floats matches kiln_nostd::dequant::mx', () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  const dir = kiln.parseDirectory(encodeKiln([
    { name: 'e4', dtype: 'f8e4m3', shape: [256], data: all },
    { name: 'e5', dtype: 'f8e5m2', shape: [256], data: all },
    { name: 'e8', dtype: 'e8m0', shape: [256], data: all },
    { name: 'fp4', dtype: 'e2m1', shape: [16], data: Uint8Array.from({ length: 8 }, (_, i) => (2 * i) | ((2 * i + 1) << 4)) },
    { name: 'i4', dtype: 'i4', shape: [3], data: Uint8Array.of(0x8f, 0x07) },
    { name: 'h', dtype: 'f16', shape: [4], data: le(Uint16Array.of(0x3c00, 0xc000, 0x7bff, 0x0001)) },
  ]));
  const e4 = dir.get('e4').toFloat32();
  assert.deepEqual([e4[0x38], e4[0x3c], e4[0x7e], e4[0xfe], e4[0x01]], [1, 1.5, 448, -448, 2 ** -9]);
  assert.ok(Number.isNaN(e4[0x7f]) && Number.isNaN(e4[0xff]));
  const e5 = dir.get('e5').toFloat32();
  assert.deepEqual([e5[0x3c], e5[0x7b], e5[0x7c], e5[0xfc]], [1, 57344, Infinity, -Infinity]);
  const e8 = dir.get('e8').toFloat32();
  assert.deepEqual([e8[127], e8[128], e8[0], e8[254]], [1, 2, 2 ** -127, 2 ** 127]);
  assert.ok(Number.isNaN(e8[255]));
  assert.deepEqual([...dir.get('fp4').toFloat32()], [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6]);
  assert.ok(Object.is(dir.get('fp4').toFloat32()[8], -0));
  assert.deepEqual([...dir.get('i4').toFloat32()], [-1, -8, 7]);
  assert.deepEqual([...dir.get('h').toFloat32()], [1, -2, 65504, 2 ** -24]);
  assert.equal(f32bits(dir.get('h').toFloat32()[0]), 0x3f800000);
});

test('non-ASCII names and lookups', () => {
  const dir = kiln.parseDirectory(encodeKiln([
    { name: 'größe', dtype: 'u8', shape: [1], data: Uint8Array.of(1) },
    { name: '重み😀', dtype: 'u8', shape: [1], data: Uint8Array.of(2) },
    { name: 'z', dtype: 'u8', shape: [1], data: Uint8Array.of(3) },
  ]));
  assert.deepEqual(dir.names(), ['größe', '重み😀', 'z']);
  assert.equal(dir.get('重み😀').view()[0], 2);
  assert.equal(dir.get('z').view()[0], 3);
  assert.equal(dir.get('nope'), undefined);
  assert.equal(dir.has('größe'), true);
  assert.equal(dir.tensors(), dir.tensors());
  assert.equal(dir.at(5), undefined);
});

test('the example MLP: 32/32 with f32 weights, 31/32 with the MXFP4 fc1, zero-copy', () => {
  const bytes = example();
  const dir = kiln.parseDirectory(bytes);
  assert.deepEqual(dir.names(), ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias', 'fc1.weight.mxfp4', 'fc1.weight.mxfp4.scales', 'samples.x', 'samples.y']);
  const v = (n) => dir.get(n).view();
  for (const n of dir.names()) assert.equal(dir.get(n).view().buffer, bytes.buffer, n);
  const q = dir.get('fc1.weight.mxfp4');
  assert.deepEqual([q.dtype, q.quant.scheme, q.quant.axis, q.quant.groupSize, q.quant.scale.name], ['e2m1', 1, 1, 32, 'fc1.weight.mxfp4.scales']);
  const w1q = kiln.dequantize(q);
  const w1 = v('fc1.weight');
  let maxErr = 0;
  for (let i = 0; i < w1.length; i++) maxErr = Math.max(maxErr, Math.abs(w1[i] - w1q[i]));
  assert.ok(Math.abs(maxErr - 0.24784) < 1e-4, `max |w - dequant(w)| = ${maxErr}`);
  const xs = v('samples.x');
  const ys = v('samples.y');
  let f32 = 0;
  let mx = 0;
  for (let s = 0; s < ys.length; s++) {
    const x = xs.subarray(s * 64, s * 64 + 64);
    if (predict(w1, v('fc1.bias'), v('fc2.weight'), v('fc2.bias'), x) === ys[s]) f32++;
    if (predict(w1q, v('fc1.bias'), v('fc2.weight'), v('fc2.bias'), x) === ys[s]) mx++;
  }
  assert.deepEqual([f32, mx], [32, 31]);
});
