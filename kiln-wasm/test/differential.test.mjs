// The package's verdict (the incremental validator, fed only the bytes it
// asks for) against the core's Parser run directly on a full copy of the
// bytes, over thousands of mutated inputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { check_direct } from '../test-support/testing.mjs';
import { example, goldens } from '../test-support/goldens.mjs';
import { encodeKiln, le } from '../test-support/encode.mjs';

export function richBlock() {
  return encodeKiln([
    { name: 'w', dtype: 'f32', shape: [3], data: le(Float32Array.of(1, -2, 3)) },
    { name: 'mask', dtype: 'bool', shape: [5], data: Uint8Array.of(1, 0, 1, 1, 0) },
    { name: 'nib', dtype: 'u4', shape: [3], data: Uint8Array.of(0x21, 0x03) },
    { name: 'q', dtype: 'e2m1', shape: [32], data: new Uint8Array(16).fill(0x72), quant: { scheme: 1, axis: 0, groupSize: 32, scale: 4 } },
    { name: 'q.scale', dtype: 'e8m0', shape: [1], data: Uint8Array.of(127) },
    { name: 'blöck', dtype: 4096, shape: [1], layout: 'Q4_K', blockSize: 18, data: new Uint8Array(18).fill(7) },
    { name: 'tail', dtype: 'i4', shape: [1], data: Uint8Array.of(0x07) },
  ]);
}

function verdict(bytes, caps) {
  try {
    kiln.parseDirectory(bytes, caps);
    return undefined;
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw e;
    return `${e.code} ${e.offset} ${e.rule}`;
  }
}

test('the rich block parses', () => {
  const d = kiln.parseDirectory(richBlock());
  assert.deepEqual(d.names(), ['w', 'mask', 'nib', 'q', 'q.scale', 'blöck', 'tail']);
  assert.equal(d.get('blöck').layout, 'Q4_K');
});

test('mutations: same verdict as the core on the real bytes', () => {
  let seed = 0x2545f491;
  const rnd = (n) => {
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed % Math.max(1, n);
  };
  const bases = [richBlock(), example(), ...goldens().filter((g) => g.isDirectory && g.expect === 'accept').map((g) => g.bytes)];
  const seen = new Map();
  let n = 0;
  for (const base of bases) {
    for (let round = 0; round < 400; round++) {
      let b = base.slice();
      for (let k = 1 + rnd(2); k > 0; k--) {
        const what = rnd(8);
        if (what < 4 && b.length) b[rnd(b.length)] = rnd(256);
        else if (what === 4 && b.length) b[b.length - 1 - rnd(Math.min(b.length, 80))] ^= 1 << rnd(8);
        else if (what === 5) b = b.slice(0, rnd(b.length + 1));
        else if (what === 6) { const e = new Uint8Array(b.length + 1 + rnd(5)); e.set(b); b = e; }
        else if (b.length >= 64) b[[8, 12, 16, 24][rnd(4)] + rnd(4)] = rnd(256);
      }
      const caps = round % 9 === 0 ? { countCap: 4, byteCap: 12 } : {};
      const want = check_direct(b, caps.countCap ?? kiln.DEFAULT_CAP, caps.byteCap ?? kiln.DEFAULT_CAP)?.join(' ');
      // At each 4-byte alignment in turn: the payload's runs are gathered as
      // 32-bit words where the input is 4-aligned, byte by byte elsewhere.
      const shift = round % 4;
      const host = new Uint8Array(b.length + shift);
      host.set(b, shift);
      const got = verdict(host.subarray(shift), caps);
      assert.equal(got, want, `base ${bases.indexOf(base)} round ${round}`);
      const rule = got === undefined ? 'accept' : got.split(' ')[2];
      seen.set(rule, (seen.get(rule) ?? 0) + 1);
      n++;
    }
  }
  assert.ok(n > 5000);
  for (const rule of ['accept', 'NonzeroGap', 'BoolByte', 'PackedHighNibble', 'TrailingBytes', 'BlockTruncated']) {
    assert.ok((seen.get(rule) ?? 0) >= 1, `${rule}: ${JSON.stringify([...seen])}`);
  }
});

test('payload faults: bool byte, high nibble, gap byte', () => {
  const base = richBlock();
  const d = kiln.parseDirectory(base);
  const at = (n) => d.get(n).byteOffset;
  for (const [pos, value, rule] of [
    [at('mask') + 3, 2, 'BoolByte'],
    [at('nib') + 1, 0x13, 'PackedHighNibble'],
    [at('mask') - 1, 9, 'NonzeroGap'],
    [at('tail'), 0x17, 'PackedHighNibble'],
  ]) {
    const b = base.slice();
    b[pos] = value;
    assert.equal(verdict(b), `TYPE ${pos} ${rule}`);
    assert.equal(check_direct(b, kiln.DEFAULT_CAP, kiln.DEFAULT_CAP)?.join(' '), `TYPE ${pos} ${rule}`);
  }
  // Two faults: the gap fault (step 10) wins over an earlier bool fault (step 11).
  const b = base.slice();
  b[at('mask') + 3] = 2;
  b[at('tail') - 1] = 1;
  assert.equal(verdict(b), `TYPE ${at('tail') - 1} NonzeroGap`);
});

test('gap bytes of many tensors: each nonzero byte is NonzeroGap at its offset, at every alignment of the input', () => {
  // f32 tensors of 1 to 40 elements: gaps of every length that is a multiple of 4, from 4 to
  // 60 bytes, gathered a window at a time (32-bit words on a 4-aligned input, bytes otherwise).
  const specs = Array.from({ length: 40 }, (_, i) => ({ name: `t${i}`, dtype: 'f32', shape: [i + 1], data: new Uint8Array(4 * (i + 1)).fill(0x3f) }));
  const base = encodeKiln(specs);
  const d = kiln.parseDirectory(base);
  const gaps = [];
  for (let i = 0; i + 1 < d.length; i++) {
    const end = d.at(i).byteOffset + d.at(i).byteLength;
    for (let at = end; at < d.at(i + 1).byteOffset; at++) gaps.push(at);
  }
  assert.ok(gaps.length > 500, `${gaps.length} gap bytes`);
  for (const shift of [0, 1, 2, 3]) {
    const host = new Uint8Array(base.length + shift);
    host.set(base, shift);
    const input = host.subarray(shift);
    assert.equal(kiln.parseDirectory(input).length, 40);
    for (const at of gaps) {
      input[at] = 1 + (at % 255);
      assert.equal(verdict(input), `TYPE ${at} NonzeroGap`, `shift ${shift}, byte ${at}`);
      input[at] = 0;
    }
  }
});

test('wasm memory is not handed out and stays consistent across many parses', () => {
  const bytes = example();
  const views = kiln.parseDirectory(bytes).tensors().map((t) => t.view());
  // A big block (64 MiB of payload), then check the old views are intact.
  const big = encodeKiln([{ name: 'big', dtype: 'u8', shape: [64 << 20] }]);
  assert.equal(kiln.parseDirectory(big).get('big').byteLength, 64 << 20);
  const again = kiln.parseDirectory(bytes).tensors().map((t) => t.view());
  views.forEach((v, i) => assert.deepEqual([...v], [...again[i]]));
  for (const v of views) assert.equal(v.buffer, bytes.buffer);
});
