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
