// Opening a whole file in memory: the payload gaps go to the core many per
// call (Validator.feed_runs, planned from the tensor table), with the same
// verdicts as the core on the real bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { Validator, check_direct } from '../pkg/wasm/kiln_wasm.js';
import { encodeKiln } from '../test-support/encode.mjs';

// 3,000 f32 tensors of 52 elements (a 48-byte gap after each), a bool tensor in the middle.
const COUNT = 3000;
const specs = Array.from({ length: COUNT }, (_, i) =>
  i === 1500 ? { name: `t.${i}`, dtype: 'bool', shape: [5], data: Uint8Array.of(1, 0, 1, 1, 0) } : { name: `t.${i}`, dtype: 'f32', shape: [52] },
);
const bytes = encodeKiln(specs);

function counting(fn) {
  const calls = { feed: 0, skip: 0, feed_runs: 0 };
  const saved = {};
  for (const m of Object.keys(calls)) {
    saved[m] = Validator.prototype[m];
    Validator.prototype[m] = function (...args) {
      calls[m]++;
      return saved[m].apply(this, args);
    };
  }
  try {
    return { result: fn(), calls };
  } finally {
    Object.assign(Validator.prototype, saved);
  }
}

function verdict(b) {
  try {
    kiln.parseDirectory(b);
    return undefined;
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw e;
    return `${e.code} ${e.offset} ${e.rule}`;
  }
}

test('the gaps after 3,000 payloads take a few calls, not one per tensor', () => {
  const { result: dir, calls } = counting(() => kiln.parseDirectory(bytes));
  assert.equal(dir.length, COUNT);
  assert.deepEqual([...dir.at(1500).view()], [1, 0, 1, 1, 0]);
  assert.ok(calls.feed_runs >= 1, 'feed_runs used');
  assert.ok(calls.feed + calls.skip + calls.feed_runs < 60, `calls: ${JSON.stringify(calls)}`);
});

test('a nonzero gap byte, a bad bool, a short file: the core\'s verdicts', () => {
  const dir = kiln.parseDirectory(bytes);
  const cases = [];
  for (const i of [0, 1, 1499, 1500, 1501, 2222, COUNT - 2]) {
    const t = dir.at(i);
    const end = t.byteOffset + t.byteLength;
    const gap = bytes.slice();
    gap[end + 7] = 1;
    cases.push(gap);
    const first = bytes.slice();
    first[end] = 0x80;
    cases.push(first);
  }
  const bool = bytes.slice();
  bool[dir.at(1500).byteOffset + 2] = 2;
  cases.push(bool, bytes.slice(0, dir.at(2000).byteOffset + 3), bytes.slice(0, dir.at(2000).byteOffset - 5));
  for (const b of cases) {
    const direct = check_direct(b, kiln.DEFAULT_CAP, kiln.DEFAULT_CAP);
    assert.notEqual(direct, undefined);
    assert.equal(verdict(b), direct);
  }
});
