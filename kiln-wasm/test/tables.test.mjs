// The tables the JavaScript states again, held to the core's through the
// module: the tensor table's slots (src/table.rs, js/directory.js), the dtype
// table (kiln_nostd::DType: js/elements.js's view types, index.d.ts's
// ViewTypes) and the block layout's sizes. A change on one side only fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import '../pkg/index.js';
import { dtype_bits, table_layout } from '../test-support/testing.mjs';
import { dtype_names } from '../pkg/wasm/kiln_wasm.js';
import { TABLE_LAYOUT } from '../pkg/directory.js';
import { VIEW_CODES, viewCtor, viewWidth } from '../pkg/elements.js';
import { descriptorOffset, layout, payloadBase } from '../pkg/validate.js';

const names = dtype_names();

test('js/directory.js reads the tensor table with the slots src/table.rs writes (META, SLOTS, every index)', () => {
  assert.deepEqual([...TABLE_LAYOUT], [...table_layout()]);
});

test("js/elements.js has a view type for each dtype of the core's closed set, no more", () => {
  assert.equal(VIEW_CODES, names.length);
  assert.equal(dtype_bits(0), 0);
  assert.equal(dtype_bits(names.length + 1), 0, 'the code after the closed set is reserved');
  assert.equal(dtype_bits(4096), 0, 'opaque');
  assert.equal(viewCtor(4096), Uint8Array, 'an opaque layout is viewed as its bytes');
});

// What a name says the view is: the number type for f32/f64 and the integer
// names, else the bits (packed dtypes: the bytes). f16 is a Float16Array
// where the runtime has one.
function expectedView(name, bits) {
  const width = Math.max(8, bits);
  if (name === 'f64') return [Float64Array];
  if (name === 'f32') return [Float32Array];
  if (name === 'f16' && typeof globalThis.Float16Array === 'function') return [globalThis.Float16Array];
  if (bits === 4) return [Uint8Array];
  if (/^i\d+$/.test(name)) return [{ 8: Int8Array, 16: Int16Array, 32: Int32Array, 64: BigInt64Array }[width]];
  return [{ 8: Uint8Array, 16: Uint16Array, 32: Uint32Array, 64: BigUint64Array }[width]];
}

for (let code = 1; code <= names.length; code++) {
  const name = names[code - 1];
  test(`dtype ${code} (${name}): js/elements.js's view type has the core's width`, () => {
    const bits = dtype_bits(code);
    assert.ok(bits > 0, 'a closed dtype has a width');
    assert.equal(viewWidth(code), Math.max(1, bits / 8), 'bytes per element of the view (1: packed bytes)');
    assert.deepEqual([viewCtor(code)], expectedView(name, bits));
  });
}

test("index.d.ts's ViewTypes names the core's dtypes in code order, each with the runtime's view type", () => {
  const dts = readFileSync(new URL('../pkg/index.d.ts', import.meta.url), 'utf8');
  const body = dts.slice(dts.indexOf('export interface ViewTypes {'), dts.indexOf('\n}', dts.indexOf('export interface ViewTypes {')));
  const entries = [...body.matchAll(/^ {2}(\w+): ([^;]+);$/gm)].map((m) => [m[1], m[2].split(' | ')]);
  assert.deepEqual(
    entries.map(([n]) => n),
    [...names],
  );
  for (const [i, [name, types]] of entries.entries()) {
    const ctor = viewCtor(i + 1).name;
    assert.ok(types.includes(ctor === 'Float16Array' ? 'Float16ArrayLike' : ctor), `${name}: ${types.join(' | ')} has ${ctor}`);
  }
});

test("the layout sizes the JavaScript uses are the core's", () => {
  const { HEADER_LEN, DESCRIPTOR_LEN, ALIGN } = layout();
  assert.deepEqual([HEADER_LEN, DESCRIPTOR_LEN, ALIGN], [64, 128, 64], 'spec/kiln-v2.md');
  assert.equal(descriptorOffset(0), HEADER_LEN);
  assert.equal(descriptorOffset(3), HEADER_LEN + 3 * DESCRIPTOR_LEN);
  assert.equal(payloadBase(2, 5), Math.ceil((HEADER_LEN + 2 * DESCRIPTOR_LEN + 5) / ALIGN) * ALIGN);
  assert.equal(payloadBase(0xffffffff, 0xffffffff), Math.ceil((HEADER_LEN + 0xffffffff * (DESCRIPTOR_LEN + 1)) / ALIGN) * ALIGN);
});
