// The npm package's dequantize (and toFloat32 under it) held to
// spec/kiln-v2.md section 11.1 through spec/dequant-cases.json: the
// directories and the f32 bits the Python reference computes, which the
// core's kiln_nostd::dequant is held to as well (tests/tests/dequant_cases.rs).
// Both are the core's code (js/directory.js copies the payload through the
// full module's Values window, src/values.rs); this file checks the window
// and the hand-over.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as kiln from '../pkg/index.js';
import { __setHostLittleEndian } from '../pkg/elements.js';
import { ROOT, hex } from '../test-support/goldens.mjs';

const file = JSON.parse(readFileSync(new URL('spec/dequant-cases.json', ROOT), 'utf8'));
const bitsOf = (values) => [...new Uint32Array(values.buffer, values.byteOffset, values.length)];
const isNaNBits = (b) => (b & 0x7f800000) === 0x7f800000 && (b & 0x007fffff) !== 0;

function check(c) {
  const dir = kiln.parseDirectory(hex(c.hex));
  const t = dir.at(c.tensor);
  if (c.refused !== undefined) {
    assert.throws(() => kiln.dequantize(t), TypeError, `${c.name}: refused (${c.refused})`);
    return;
  }
  const got = bitsOf(kiln.dequantize(t));
  const want = c.expect.map((h) => parseInt(h, 16));
  assert.equal(got.length, want.length, `${c.name}: element count`);
  for (let i = 0; i < want.length; i++) {
    if (isNaNBits(want[i])) {
      assert.ok(isNaNBits(got[i]), `${c.name}[${i}]: NaN expected, got ${got[i].toString(16)}`);
    } else {
      assert.equal(got[i].toString(16).padStart(8, '0'), c.expect[i], `${c.name}[${i}]`);
    }
  }
}

test('spec/dequant-cases.json has cases of every kind the spec section names', () => {
  const names = file.cases.map((c) => c.name);
  assert.ok(file.cases.length >= 50, `${file.cases.length} cases`);
  for (const n of ['element-i64', 'element-u64', 'element-f64', 'scheme2-two-roundings', 'opaque-data', 'opaque-scale']) {
    assert.ok(names.includes(n), n);
  }
});

for (const c of file.cases) {
  test(`dequantize: ${c.name} (${c.note})`, () => check(c));
}

test('every case again on a pretended big-endian host (the copy paths)', () => {
  const old = __setHostLittleEndian(false);
  try {
    for (const c of file.cases) check(c);
  } finally {
    __setHostLittleEndian(old);
  }
});

test('tensors of several 64 KiB windows: every element at its place (i8 x e8m0 groups, u4, e2m1 with an odd count)', async () => {
  const { encodeKiln } = await import('../test-support/encode.mjs');
  const n = 200001; // 3+ windows of i8, 2 of nibbles, and an odd nibble count
  const i8 = Uint8Array.from({ length: n }, (_, i) => (i * 7) & 0xff);
  const groups = Math.ceil(n / 32);
  const e8 = Uint8Array.from({ length: groups }, (_, g) => 120 + (g % 15));
  const nib = Uint8Array.from({ length: Math.ceil(n / 2) }, (_, i) => (i * 13) & 0xff);
  nib[nib.length - 1] &= 15; // the unused high nibble of the odd count is zero (a rule)
  const dir = kiln.parseDirectory(encodeKiln([
    { name: 'q', dtype: 'i8', shape: [n], data: i8, quant: { scheme: 1, axis: 0, groupSize: 32, scale: 1 } },
    { name: 's', dtype: 'e8m0', shape: [groups], data: e8 },
    { name: 'u4', dtype: 'u4', shape: [n], data: nib },
    { name: 'fp4', dtype: 'e2m1', shape: [n], data: nib },
  ]));
  const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
  const nibble = (i) => (i & 1 ? nib[i >> 1] >> 4 : nib[i >> 1] & 15);
  const q = kiln.dequantize(dir.get('q'));
  const u4 = dir.get('u4').toFloat32();
  const fp4 = dir.get('fp4').toFloat32();
  assert.deepEqual([q.length, u4.length, fp4.length], [n, n, n]);
  for (let i = 0; i < n; i++) {
    const x = (i8[i] << 24) >> 24;
    // An i8 times a power of two: exact in f32.
    assert.equal(q[i], x * 2 ** (e8[i >> 5] - 127), `q[${i}]`);
    assert.equal(u4[i], nibble(i), `u4[${i}]`);
    const v = nibble(i);
    assert.ok(Object.is(fp4[i], (v & 8 ? -1 : 1) * E2M1[v & 7]), `fp4[${i}]`);
  }
});
