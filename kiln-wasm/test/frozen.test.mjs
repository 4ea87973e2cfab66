// Frozen values: decodeValue / decodeFrame against values encoded by the Python
// reference (test-support/frozen-fixtures.json, made by make-frozen-fixtures.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { check_direct } from '../test-support/testing.mjs';
import { __setHostLittleEndian } from '../pkg/elements.js';
import { goldens, hex } from '../test-support/goldens.mjs';
import { encodeKiln } from '../test-support/encode.mjs';

const FIXTURES = new URL('../test-support/frozen-fixtures.json', import.meta.url);
const cases = JSON.parse(readFileSync(FIXTURES, 'utf8')).cases;

/** A fixture's bytes at the start of a fresh ArrayBuffer (or at `at` inside a bigger one). */
function fx(name, at = 0) {
  const c = cases.find((x) => x.name === name);
  if (!c) throw new Error(`no fixture ${name}`);
  const b = hex(c.hex);
  if (at === 0) return b;
  const big = new Uint8Array(b.length + at + 8);
  big.set(b, at);
  return big.subarray(at, at + b.length);
}
const typeOf = (name) => cases.find((x) => x.name === name).type;
const dec = (name, at = 0) => {
  const bytes = fx(name, at);
  return { bytes, v: kiln.decodeValue(bytes, typeOf(name)) };
};
const f32bits = (x) => {
  const dv = new DataView(new ArrayBuffer(4));
  dv.setFloat32(0, x, true);
  return dv.getUint32(0, true);
};
const f64bits = (x) => {
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, x, true);
  return dv.getBigUint64(0, true);
};
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U64_MAX = 2n ** 64n - 1n;

test('the fixtures are what make-frozen-fixtures.py writes today', { skip: spawnSync('python3', ['--version']).status !== 0 && 'python3 missing' }, () => {
  const script = fileURLToPath(new URL('../test-support/make-frozen-fixtures.py', import.meta.url));
  const r = spawnSync('python3', [script, '--check'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

for (const c of cases) {
  test(`reference fixture ${c.name} (${c.type}${c.framed ? ', framed' : ''}) -> ${c.expect}`, () => {
    const decode = c.framed ? kiln.decodeFrame : kiln.decodeValue;
    const bytes = hex(c.hex);
    if (c.expect === 'accept') {
      decode(bytes, c.type);
    } else {
      assert.throws(() => decode(bytes, c.type), (e) => {
        assert.ok(e instanceof kiln.KilnError);
        assert.deepEqual([e.code, e.offset], [c.expect, c.offset], 'code and offset as the reference reports them');
        assert.equal(e.inTypeText, false);
        assert.equal(e.message, `${e.code} at byte ${e.offset}: ${e.description}`);
        return true;
      });
    }
  });
}

test('scalars: every kind, extremes, BigInt for 64-bit kinds, -0 kept, field order kept', () => {
  const { v: min } = dec('scalars-min');
  assert.deepEqual(Object.keys(min), ['b', 'c', 'i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64', 'n', 'un', 'f', 'd', 's']);
  assert.deepEqual(min, {
    b: true, c: false, i8: -128, i16: -32768, i32: -2147483648, i64: I64_MIN, u8: 0, u16: 0, u32: 0, u64: 0n,
    n: I64_MIN, un: 0n, f: -0, d: -0, s: '',
  });
  assert.ok(Object.is(min.f, -0) && Object.is(min.d, -0));
  const { v: max } = dec('scalars-max');
  assert.deepEqual(max, {
    b: true, c: true, i8: 127, i16: 32767, i32: 2147483647, i64: I64_MAX, u8: 255, u16: 65535, u32: 4294967295,
    u64: U64_MAX, n: I64_MAX, un: U64_MAX, f: 3.4028234663852886e38, d: 1.7976931348623157e308,
    s: 'héllo, wörld ✓ 🦀',
  });
  assert.equal(Object.getPrototypeOf(max), Object.prototype, 'structs are plain objects');
});

test('floats: NaN payloads, infinities, subnormals', () => {
  const { v } = dec('floats-special');
  assert.ok(Number.isNaN(v.qnan32) && Number.isNaN(v.qnan64));
  // A JS number is an f64: the NaN's payload survives the trip back to its width.
  assert.equal(f32bits(v.qnan32), 0x7fc00001);
  assert.equal(f64bits(v.qnan64), 0x7ff8000000000001n);
  assert.equal(v.inf, Infinity);
  assert.equal(v.ninf, -Infinity);
  assert.equal(v.tiny, 5e-324);
  assert.equal(v.third, Math.fround(1 / 3));
});

test('nested structs and struct{}', () => {
  assert.deepEqual(dec('nested-structs').v, { a: { b: { c: 9 }, d: 'deep' }, e: -2, empty: {} });
  assert.deepEqual(kiln.decodeValue(new Uint8Array(0), 'struct{}'), {});
  assert.deepEqual(dec('list-empty-structs').v, [{}, {}, {}]);
});

test('opt: null or the value; opt<opt<T>> wraps a present value as {value}', () => {
  const { v } = dec('opts');
  assert.deepEqual({ ...v, ol: [...v.ol] }, {
    none: null, some: -5, s: 'x', oo_none: null, oo_inner_none: { value: null }, oo_some: { value: 3 }, ol: [1, 2],
  });
  assert.ok(v.ol instanceof Uint16Array);
});

test('dict<str,V>: a Map, keys in wire (byte) order, prototype names are ordinary keys', () => {
  const { v } = dec('dict-order');
  assert.ok(v instanceof Map);
  assert.deepEqual([...v], [['', 6], ['10', 3], ['2', 2], ['__proto__', 4], ['a', 1], ['constructor', 7], ['é', 5]]);
  const { v: n } = dec('dict-nested');
  assert.deepEqual(n, { tags: new Map([['a', []], ['b', ['1', '2']]]), m: new Map([['k', { x: 0.5 }]]) });
});

test('a struct field named __proto__ is an own property, not the prototype', () => {
  const bytes = Uint8Array.of(5, 6);
  const v = kiln.decodeValue(bytes, 'struct{__proto__:u8,constructor:u8,}');
  assert.deepEqual(Object.keys(v), ['__proto__', 'constructor']);
  assert.equal(Object.getPrototypeOf(v), Object.prototype);
  assert.equal(Object.getOwnPropertyDescriptor(v, '__proto__').value, 5);
  assert.equal(v.constructor, 6);
});

test('a list of structs', () => {
  assert.deepEqual(dec('list-structs').v, [
    { id: 1, name: 'one', score: 0.5 },
    { id: 2, name: 'two', score: null },
    { id: 3, name: '', score: -1 },
  ]);
});

test('list<f32> at an aligned address is a view sharing the caller\'s ArrayBuffer', () => {
  const { bytes, v } = dec('list-f32-aligned');
  assert.ok(v instanceof Float32Array);
  assert.equal(v.buffer, bytes.buffer);
  assert.equal(v.byteOffset, 4);
  assert.deepEqual([...v], [1, -2, 0.5, 3]);
  v[0] = 8; // it is the caller's memory
  assert.equal(new DataView(bytes.buffer).getFloat32(4, true), 8);
});

test('list<f32> at a misaligned address is a copy with the same values', () => {
  const { bytes, v } = dec('list-f32-misaligned');
  assert.equal(v.pad, 7);
  assert.ok(v.xs instanceof Float32Array);
  assert.notEqual(v.xs.buffer, bytes.buffer);
  assert.deepEqual([...v.xs], [1, -2, 0.5]);
  // The same bytes at another offset of a bigger buffer: the f32s now sit at 3 + 5 = 8, a view.
  const { bytes: moved, v: w } = dec('list-f32-misaligned', 3);
  assert.equal(w.xs.buffer, moved.buffer);
  assert.equal(w.xs.byteOffset, 8);
  // And an aligned list moved by one byte becomes a copy.
  const { bytes: off, v: x } = dec('list-f32-aligned', 1);
  assert.notEqual(x.buffer, off.buffer);
  assert.deepEqual([...x], [1, -2, 0.5, 3]);
});

test('list<f64>: a view when 8-aligned (NaN bits and -0 kept), else a copy', () => {
  const { bytes, v } = dec('list-f64-aligned');
  assert.ok(v.xs instanceof Float64Array);
  assert.equal(v.xs.buffer, bytes.buffer);
  assert.equal(v.xs.byteOffset, 8);
  assert.equal(v.xs[0], 1.25);
  assert.ok(Object.is(v.xs[1], -0));
  assert.equal(new BigUint64Array(v.xs.buffer, v.xs.byteOffset, 3)[2], 0x7ff8000000000001n);
  const { bytes: b2, v: m } = dec('list-f64-misaligned');
  assert.ok(m instanceof Float64Array);
  assert.notEqual(m.buffer, b2.buffer);
  assert.equal(m[0], 1.25);
  assert.ok(Object.is(m[1], -0));
});

test('lists of every fixed-width kind: typed arrays, BigInt arrays for 64-bit, booleans for bool', () => {
  const { bytes, v } = dec('list-ints');
  const want = {
    i8: [Int8Array, [-1, 127]], u8: [Uint8Array, [0, 255, 16]], i16: [Int16Array, [-300]], u16: [Uint16Array, [65535, 1]],
    i32: [Int32Array, [-2147483648]], u32: [Uint32Array, [4294967295]], i64: [BigInt64Array, [I64_MIN, I64_MAX]],
    u64: [BigUint64Array, [U64_MAX, 0n]], n: [BigInt64Array, [-1n]], un: [BigUint64Array, [2n ** 63n]], e: [Uint32Array, []],
  };
  for (const [k, [C, values]] of Object.entries(want)) {
    assert.equal(v[k].constructor, C, k);
    assert.deepEqual([...v[k]], values, k);
    const w = C.BYTES_PER_ELEMENT;
    if (w === 1) assert.equal(v[k].buffer, bytes.buffer, `${k}: one-byte lists are always views`);
    else if (v[k].buffer === bytes.buffer) assert.equal(v[k].byteOffset % w, 0, k);
  }
  assert.deepEqual(v.b, [true, false, true]);
  assert.deepEqual(dec('lists-nested').v, [[Uint8Array.of(1, 2), new Uint8Array(0)], [], [Uint8Array.of(255)]]);
});

test('strings: short and long, ASCII and not, a leading BOM kept, NUL', () => {
  assert.deepEqual(dec('strings').v, [
    '', 'a', '\ufeffbom', 'ASCII text longer than thirty-two characters...',
    'ünïcödé longer than thirty-two bytes, for TextDecoder', '\u0000nul',
  ]);
});

test('a tensors field inside a struct is a Directory with views at absolute offsets of the caller\'s buffer', () => {
  for (const at of [0, 8, 3]) {
    const { bytes, v } = dec('tensors-in-struct', at);
    assert.equal(v.id, -7n);
    assert.equal(v.tag, 'after');
    const d = v.model;
    assert.ok(d instanceof kiln.Directory);
    assert.deepEqual(d.names(), ['w', 'mask']);
    assert.equal(d.source, bytes);
    assert.equal(d.payloadOffset, 8 + 384, 'block at 8, payload after header, 2 descriptors and the names');
    const w = d.get('w');
    assert.deepEqual([w.dtype, w.shape, w.byteOffset, w.byteLength], ['f32', [3], 392, 12]);
    assert.deepEqual([...w.view()], [1.5, -2, 0.25]);
    assert.equal(w.bytes().buffer, bytes.buffer);
    assert.equal(w.bytes().byteOffset, bytes.byteOffset + 392);
    assert.equal(w.isView, at % 4 === 0);
    if (w.isView) assert.equal(w.view().buffer, bytes.buffer);
    const mask = d.get('mask');
    assert.deepEqual([mask.dtype, mask.shape, [...mask.view()]], ['bool', [2, 2], [1, 0, 0, 1]]);
    assert.equal(mask.view().buffer, bytes.buffer);
    assert.equal(d.byteLength, bytes.length - 8 - 9, 'the directory ends where tag starts');
  }
});

test('directories in lists, opts and dicts come back in place', () => {
  const { bytes, v } = dec('tensors-many');
  assert.deepEqual(v.layers.map((d) => d.length), [1, 0, 1]);
  assert.deepEqual([...v.layers[0].get('w').view()], [1.5, -2, 0.25]);
  assert.deepEqual([...v.layers[2].at(0).view()], [-1, -128]);
  assert.equal(v.layers[2].at(0).name, null);
  assert.deepEqual(v.extra.names(), ['mask']);
  assert.equal(v.none, null);
  assert.deepEqual([...v.byname.keys()], ['a', 'z']);
  assert.equal(v.byname.get('a').length, 0);
  assert.deepEqual([...v.byname.get('z').at(0).view()], [-1, -128]);
  for (const d of [...v.layers, v.extra, ...v.byname.values()]) {
    for (const t of d) assert.equal(t.bytes().buffer, bytes.buffer);
  }
  const root = kiln.decodeValue(fx('tensors-root'), 'tensors');
  assert.ok(root instanceof kiln.Directory);
  assert.deepEqual([...root.get('w').view()], [1.5, -2, 0.25]);
});

test('decodeFrame: the frame, then the value; its hash must be the type\'s (SCHEMA)', () => {
  const bytes = fx('framed-struct');
  assert.deepEqual(kiln.decodeFrame(bytes, 'struct{id:i64,name:str,}'), { id: 42n, name: 'framed' });
  assert.throws(() => kiln.decodeFrame(bytes, 'struct{id:i64,name:str,extra:struct{},}'), (e) => {
    assert.deepEqual([e.code, e.offset, e.rule], ['SCHEMA', 8, 'SchemaHash']);
    return true;
  });
  assert.throws(() => kiln.decodeFrame(bytes, 'struct{id:u64,name:str,}'), { code: 'SCHEMA' });
  // The goldens' framed value.
  const golden = goldens().find((g) => g.name === 'kiln-v2-framed');
  const v = kiln.decodeFrame(golden.bytes, golden.type);
  assert.equal(v.id, 7n);
  assert.equal(v.batch.length, 0);
});

test('errors carry the core\'s rule and the absolute offset', () => {
  const rule = (name) => {
    const c = cases.find((x) => x.name === name);
    try {
      (c.framed ? kiln.decodeFrame : kiln.decodeValue)(hex(c.hex), c.type);
    } catch (e) {
      return [e.code, e.offset, e.rule];
    }
    return 'accepted';
  };
  assert.deepEqual(rule('bool-byte'), ['TYPE', 1, 'BoolValue']);
  assert.deepEqual(rule('opt-tag'), ['TYPE', 1, 'OptTag']);
  assert.deepEqual(rule('utf8'), ['UTF8', 6, 'StrUtf8']);
  assert.deepEqual(rule('dict-key-order'), ['TYPE', 10, 'DictKeyOrder']);
  assert.deepEqual(rule('dict-dup'), ['TYPE', 10, 'DictKeyOrder']);
  assert.deepEqual(rule('trailing'), ['TRAILING', 2, 'TrailingBytes']);
  assert.deepEqual(rule('tensor-bool-in-struct'), ['TYPE', 457, 'BoolByte']);
  assert.deepEqual(rule('frame-magic'), ['FRAME', 0, 'FrameMagic']);
  assert.deepEqual(rule('frame-short'), ['EOF', 0, 'FrameTruncated']);
});

test('a bad type text is a KilnError about the text (inTypeText), before the input is looked at', () => {
  assert.throws(() => kiln.decodeValue(new Uint8Array(4), 'struct{a:i8}'), (e) => {
    assert.ok(e instanceof kiln.KilnError);
    assert.deepEqual([e.code, e.offset, e.rule, e.inTypeText], ['TYPE', 11, 'TypeTextSyntax', true]);
    assert.equal(e.message, `TYPE at byte 11 of the type text: ${e.description}`);
    return true;
  });
  assert.throws(() => kiln.decodeValue(new Uint8Array(0), 'struct{ a:i8,}'), { code: 'TYPE', offset: 7, inTypeText: true });
  assert.throws(() => kiln.decodeValue(new Uint8Array(0), 'struct{a:i8,a:u8,}'), { code: 'TYPE', rule: 'DuplicateField', inTypeText: true });
  const deep = 'list<'.repeat(65) + 'u8' + '>'.repeat(65);
  assert.throws(() => kiln.decodeValue(new Uint8Array(4), deep), { code: 'LIMIT', rule: 'TypeDepth', inTypeText: true });
  assert.throws(() => kiln.decodeValue(new Uint8Array(4)), TypeError);
  assert.throws(() => kiln.decodeValue('bytes', 'u8'), TypeError);
});

test('the deepest legal type, and types of up to 2,048 nodes', () => {
  const deep = 'list<'.repeat(63) + 'opt<u8>' + '>'.repeat(63);
  // 63 nested lists of one element each, then opt present 5.
  const bytes = new Uint8Array(63 * 4 + 2);
  for (let i = 0; i < 63; i++) bytes[4 * i] = 1;
  bytes.set([1, 5], 63 * 4);
  let v = kiln.decodeValue(bytes, deep);
  for (let i = 0; i < 63; i++) v = v[0];
  assert.equal(v, 5);
  const wide = (n) => `struct{${Array.from({ length: n }, (_, i) => `f${i}:u8,`).join('')}}`;
  const r = kiln.decodeValue(new Uint8Array(2047).fill(1), wide(2047));
  assert.equal(Object.keys(r).length, 2047);
  assert.equal(r.f2046, 1);
  assert.throws(() => kiln.decodeValue(new Uint8Array(2048), wide(2048)), { code: 'LIMIT', rule: 'SchemaCapacity', inTypeText: true });
});

test('countCap and byteCap are options: LIMIT', () => {
  const bytes = fx('list-structs');
  assert.equal(kiln.decodeValue(bytes, typeOf('list-structs'), { countCap: 3 }).length, 3);
  assert.throws(() => kiln.decodeValue(bytes, typeOf('list-structs'), { countCap: 2 }), { code: 'LIMIT', offset: 0, rule: 'CountCap' });
  assert.throws(() => kiln.decodeValue(bytes, typeOf('list-structs'), { byteCap: 2 }), { code: 'LIMIT', rule: 'ByteLengthCap' });
  assert.throws(() => kiln.decodeValue(bytes, typeOf('list-structs'), { countCap: 1.5 }), RangeError);
  // The tensor directory inside obeys the count cap too.
  assert.throws(() => kiln.decodeValue(fx('tensors-in-struct'), typeOf('tensors-in-struct'), { countCap: 1 }), { code: 'LIMIT', rule: 'TensorCountCap', offset: 16 });
});

test('inputs: ArrayBuffer, DataView, SharedArrayBuffer; a second decode of a cached type', () => {
  const bytes = fx('strings');
  const want = kiln.decodeValue(bytes, typeOf('strings'));
  assert.deepEqual(kiln.decodeValue(bytes.buffer, typeOf('strings')), want);
  assert.deepEqual(kiln.decodeValue(new DataView(bytes.buffer), typeOf('strings')), want);
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  assert.deepEqual(kiln.decodeValue(shared, typeOf('strings')), want);
  const again = kiln.decodeValue(fx('list-structs'), typeOf('list-structs'));
  assert.deepEqual(again, kiln.decodeValue(fx('list-structs'), typeOf('list-structs')));
});

test('big-endian hosts get host-order copies with every bit kept', () => {
  const old = __setHostLittleEndian(false);
  try {
    const { bytes, v } = dec('list-f64-aligned');
    assert.notEqual(v.xs.buffer, bytes.buffer);
    assert.equal(v.xs[0], 1.25);
    assert.ok(Object.is(v.xs[1], -0));
    assert.equal(f64bits(v.xs[2]), 0x7ff8000000000001n);
    const { bytes: ib, v: ints } = dec('list-ints');
    assert.deepEqual([...ints.i64], [I64_MIN, I64_MAX]);
    assert.notEqual(ints.i64.buffer, ib.buffer);
    assert.equal(ints.u8.buffer, ib.buffer, 'one-byte lists stay views');
  } finally {
    __setHostLittleEndian(old);
  }
});

test('the value\'s copy in wasm memory is cleared: directory checks after Frozen decodes are unchanged', () => {
  // Nonzero bytes where the directory checker's zero pages are (an accepted and a rejected value).
  const n = 299_000;
  const big = new Uint8Array(300_000).fill(0xff);
  new DataView(big.buffer).setUint32(0, n, true); // list<u8> of n bytes, then 996 trailing bytes
  assert.throws(() => kiln.decodeValue(big, 'list<u8>'), { code: 'TRAILING', offset: 4 + n });
  assert.equal(kiln.decodeValue(big.subarray(0, 4 + n), 'list<u8>').length, n);
  for (const c of goldens().filter((g) => g.isDirectory)) {
    const direct = check_direct(c.bytes, kiln.DEFAULT_CAP, kiln.DEFAULT_CAP)?.join(' ');
    if (c.expect === 'accept') {
      assert.equal(kiln.parseDirectory(c.bytes).byteLength, c.bytes.length, c.name);
    } else {
      assert.throws(() => kiln.parseDirectory(c.bytes), (e) => `${e.code} ${e.offset} ${e.rule}` === direct, c.name);
    }
  }
  // A block with payload gaps, larger than the garbage was.
  const block = encodeKiln([{ name: 'a', dtype: 'u8', shape: [3] }, { name: 'b', dtype: 'f32', shape: [70_000] }]);
  assert.equal(kiln.parseDirectory(block).length, 2);
});

test('tensor names that start with a BOM keep it (parseDirectory and Frozen)', () => {
  const block = encodeKiln([{ name: '\ufeffa', dtype: 'u8', shape: [1] }, { name: 'bc', dtype: 'u8', shape: [1] }]);
  assert.deepEqual(kiln.parseDirectory(block).names(), ['\ufeffa', 'bc']);
  assert.deepEqual(kiln.decodeValue(block, 'tensors').names(), ['\ufeffa', 'bc']);
});
