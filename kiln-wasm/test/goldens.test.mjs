// The 46 goldens of spec/kiln-v2-cases.json through the package (39 directories
// through parseDirectory, 7 Frozen values through decodeValue/decodeFrame).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { check_direct } from '../test-support/testing.mjs';
import { goldens } from '../test-support/goldens.mjs';

const cases = goldens();

test('the golden file holds 46 cases', () => {
  assert.equal(cases.length, 46);
  assert.equal(cases.filter((c) => c.isDirectory).length, 39);
});

for (const c of cases) {
  if (!c.isDirectory) {
    // Frozen values (a struct holding a directory, a framed value, lists).
    test(`${c.name} (${c.type}${c.framed ? ', framed' : ''}) -> ${c.expect}`, () => {
      const decode = c.framed ? kiln.decodeFrame : kiln.decodeValue;
      if (c.expect === 'accept') {
        const v = decode(c.bytes, c.type);
        assert.notEqual(v, undefined);
      } else {
        assert.throws(() => decode(c.bytes, c.type), (e) => {
          assert.ok(e instanceof kiln.KilnError);
          assert.equal(e.code, c.expect);
          assert.equal(e.inTypeText, false);
          return true;
        });
      }
    });
    continue;
  }
  test(`${c.name} -> ${c.expect}`, () => {
    const direct = check_direct(c.bytes, kiln.DEFAULT_CAP, kiln.DEFAULT_CAP)?.join(' ');
    if (c.expect === 'accept') {
      const dir = kiln.parseDirectory(c.bytes);
      assert.equal(direct, undefined);
      assert.equal(dir.byteLength, c.bytes.length);
      for (const t of dir) {
        assert.equal(t.bytes().buffer, c.bytes.buffer, 'bytes() borrows the input');
        if (t.isView) assert.equal(t.view().buffer, c.bytes.buffer, 'view() borrows the input');
      }
    } else {
      assert.throws(
        () => kiln.parseDirectory(c.bytes),
        (e) => {
          assert.ok(e instanceof kiln.KilnError && e instanceof Error);
          assert.equal(e.code, c.expect);
          // The incremental verdict is Parser's on the same bytes: code, offset, rule.
          assert.equal(`${e.code} ${e.offset} ${e.rule}`, direct);
          assert.equal(e.message, `${e.code} at byte ${e.offset}: ${e.description}`);
          // The module keeps the id and text of every rule it can report (src/texts.rs).
          assert.ok(e.rule !== '' && e.description !== '', `${e.code} ${e.offset}: the rule's id and text`);
          return true;
        },
      );
    }
  });
}

test('error offsets and rules of hand-checked goldens', () => {
  const want = {
    'kiln-v2-bad-magic': [0, 'DirectoryMagic'],
    'kiln-v2-bad-version': [4, 'DirectoryVersion'],
    'kiln-v2-le-clear': [5, 'LittleEndianFlagClear'],
    'kiln-v2-unknown-flag': [5, 'UnknownFlag'],
    'kiln-v2-reserved': [32, 'HeaderReserved'],
    'kiln-v2-directory-eof': [64, 'DirectoryTruncated'],
    'kiln-v2-count-cap': [8, 'TensorCountCap'],
    'kiln-v2-directory-mismatch': [24, 'DirectoryBytesMismatch'],
    'kiln-v2-trailing': [64, 'TrailingBytes'],
    'kiln-v2-bool-byte': [193, 'BoolByte'],
    'kiln-v2-high-nibble': [193, 'PackedHighNibble'],
    'kiln-v2-payload-overflow': [16, 'PayloadSizeOverflow'],
    'kiln-v2-dtype-zero': [64, 'UnknownDtype'],
    'kiln-v2-length-mismatch': [104, 'LengthMismatch'],
  };
  for (const [name, [offset, rule]] of Object.entries(want)) {
    const c = cases.find((g) => g.name === name);
    assert.throws(() => kiln.parseDirectory(c.bytes), (e) => {
      assert.deepEqual([e.offset, e.rule], [offset, rule], name);
      return true;
    });
  }
});

test('caps are options: countCap and byteCap give LIMIT', () => {
  const f16 = cases.find((g) => g.name === 'kiln-v2-f16-named').bytes;
  assert.equal(kiln.parseDirectory(f16, { countCap: 1, byteCap: 4 }).length, 1);
  assert.throws(() => kiln.parseDirectory(f16, { countCap: 0 }), { code: 'LIMIT', rule: 'TensorCountCap', offset: 8 });
  assert.throws(() => kiln.parseDirectory(f16, { byteCap: 3 }), { code: 'LIMIT', rule: 'NameBytesCap', offset: 12 });
  assert.throws(() => kiln.parseDirectory(f16, { countCap: -1 }), RangeError);
  // The 16,777,217-count golden passes the cap check when the cap is raised, then fails to fit.
  const capCase = cases.find((g) => g.name === 'kiln-v2-count-cap').bytes;
  assert.throws(() => kiln.parseDirectory(capCase, { countCap: 0xffffffff }), { code: 'EOF', rule: 'DirectoryTruncated' });
});

test('inputs other than Uint8Array', () => {
  const f32 = cases.find((g) => g.name === 'kiln-v2-f32').bytes;
  assert.equal(kiln.parseDirectory(f32.buffer).length, 1);
  assert.equal(kiln.parseDirectory(new DataView(f32.buffer)).length, 1);
  assert.throws(() => kiln.parseDirectory('KLNT'), TypeError);
  assert.throws(() => kiln.parseDirectory(new Uint8Array(0)), { code: 'EOF', offset: 0 });
});

test('the accepted Frozen goldens decode to their values', () => {
  const get = (name) => cases.find((g) => g.name === name);
  const inStruct = get('kiln-v2-in-struct');
  const v = kiln.decodeValue(inStruct.bytes, inStruct.type);
  assert.equal(v.id, 7n);
  assert.ok(v.batch instanceof kiln.Directory);
  const t = v.batch.at(0);
  assert.deepEqual([t.dtype, t.byteOffset, [...t.view()]], ['f32', 8 + 192, [1, -2]]);
  assert.equal(t.view().buffer, inStruct.bytes.buffer);
  const pod = get('kiln-pod-list-f32');
  const list = kiln.decodeValue(pod.bytes, pod.type);
  assert.ok(list instanceof Float32Array);
  assert.deepEqual([...list], [1, -2]);
  assert.equal(list.buffer, pod.bytes.buffer);
});
