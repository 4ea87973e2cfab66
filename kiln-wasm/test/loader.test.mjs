// DirectoryLoader: the table before the payload, checks as chunks arrive,
// and the same final verdict as parseDirectory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { example, golden, goldens } from '../test-support/goldens.mjs';
import { encodeKiln, le } from '../test-support/encode.mjs';

function verdictOf(fn) {
  try {
    fn();
    return 'accept';
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw e;
    return `${e.code} ${e.offset} ${e.rule}`;
  }
}

function feed(bytes, chunk, options = {}) {
  const loader = new kiln.DirectoryLoader(options);
  for (let at = 0; at < bytes.length; at += chunk) loader.push(bytes.subarray(at, at + chunk));
  return loader.end();
}

test('the tensor table and the total size arrive before the payload', () => {
  const bytes = example();
  const payloadStart = kiln.parseDirectory(bytes).payloadOffset;
  const seen = [];
  const loader = new kiln.DirectoryLoader({
    onDirectory: (d) => seen.push({ received: loader.receivedBytes, names: d.names(), total: loader.totalBytes }),
  });
  assert.equal(loader.totalBytes, null);
  assert.equal(loader.directory, null);
  let at = 0;
  for (; at < payloadStart; at += 100) loader.push(bytes.subarray(at, Math.min(at + 100, payloadStart)));
  assert.equal(seen.length, 1, 'onDirectory fires as soon as the directory region is in');
  assert.equal(seen[0].received, payloadStart);
  assert.equal(seen[0].total, bytes.length);
  assert.equal(loader.totalBytes, bytes.length);
  const pending = loader.directory;
  assert.deepEqual(pending.get('fc1.weight').shape, [32, 64]);
  assert.equal(pending.get('fc1.weight').byteLength, 8192);
  assert.throws(() => pending.get('fc1.weight').view(), /not arrived/);
  loader.push(bytes.subarray(payloadStart));
  const dir = loader.end();
  assert.equal(dir.length, 8);
  const v = dir.get('samples.x').view();
  assert.ok(v instanceof Float32Array);
  assert.equal(dir.get('fc1.weight').isView, true);
  assert.deepEqual([...v.subarray(0, 64)], [...kiln.parseDirectory(bytes).get('samples.x').view().subarray(0, 64)]);
  assert.equal(loader.end(), dir);
});

test('a plain directory has no digests: digestsVerified is false, as parseDirectory says', async () => {
  const bytes = example();
  assert.equal(kiln.parseDirectory(bytes).digestsVerified, false);
  assert.equal((await kiln.loadDirectory(new Blob([bytes]))).digestsVerified, false);
});

test('any chunking gives the same result, including 1-byte chunks', () => {
  const bytes = example();
  const want = kiln.parseDirectory(bytes).toJSON();
  for (const chunk of [1, 7, 64, 1000, 4096, bytes.length]) {
    assert.deepEqual(feed(bytes, chunk).toJSON(), want, `chunk ${chunk}`);
  }
});

test('final verdicts equal parseDirectory on goldens and mutations, for several chunk sizes', () => {
  let seed = 7;
  const rnd = (n) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % Math.max(1, n);
  const inputs = goldens().filter((g) => g.isDirectory).map((g) => g.bytes);
  const base = example();
  for (let i = 0; i < 300; i++) {
    const b = base.slice(0, rnd(4) === 0 ? rnd(base.length + 1) : base.length);
    if (b.length) b[rnd(b.length)] = rnd(256);
    inputs.push(b);
  }
  for (const b of inputs) {
    const want = verdictOf(() => kiln.parseDirectory(b));
    for (const chunk of [3, 61, 512]) {
      const got = verdictOf(() => feed(b, chunk, { totalLength: b.length }));
      assert.equal(got, want, `len ${b.length} chunk ${chunk}`);
      // Without the length hint a block that is cut short may fail early with its
      // in-block fault; a complete block gets the same verdict.
      const free = verdictOf(() => feed(b, chunk));
      if (!want.startsWith('EOF')) assert.equal(free, want, `no hint, len ${b.length} chunk ${chunk}`);
    }
  }
});

test('a damaged directory is rejected before any payload is pushed', () => {
  const bytes = example();
  const bad = bytes.slice();
  bad[64 + 3] = 1; // reserved descriptor byte
  const loader = new kiln.DirectoryLoader();
  const payloadStart = kiln.parseDirectory(bytes).payloadOffset;
  assert.throws(() => loader.push(bad.subarray(0, payloadStart)), { code: 'FRAME', rule: 'DescriptorReserved', offset: 67 });
  assert.throws(() => loader.push(bad.subarray(payloadStart)), { rule: 'DescriptorReserved' }, 'the error sticks');
  assert.throws(() => loader.end(), { rule: 'DescriptorReserved' });
  // A bad header is rejected at byte 64.
  const l2 = new kiln.DirectoryLoader();
  l2.push(golden('kiln-v2-bad-version').subarray(0, 10));
  assert.throws(() => l2.push(golden('kiln-v2-bad-version').subarray(10)), { code: 'FRAME', offset: 4 });
});

test('a nonzero gap byte is reported as soon as it arrives', () => {
  const bytes = encodeKiln([
    { name: 'a', dtype: 'f32', shape: [3], data: le(Float32Array.of(1, 2, 3)) },
    { name: 'b', dtype: 'f32', shape: [1000] },
  ]);
  const d = kiln.parseDirectory(bytes);
  const gap = d.get('a').byteOffset + 12 + 5;
  bytes[gap] = 1;
  const loader = new kiln.DirectoryLoader();
  loader.push(bytes.subarray(0, gap)); // up to the bad byte: fine so far
  assert.throws(() => loader.push(bytes.subarray(gap, gap + 100)), { code: 'TYPE', rule: 'NonzeroGap', offset: gap });
  assert.ok(loader.receivedBytes < bytes.length / 2, 'long before the end of the block');
});

test('with totalLength, a stream shorter than the block is EOF as soon as the header is in', () => {
  const bytes = example();
  const loader = new kiln.DirectoryLoader({ totalLength: 5000 });
  loader.push(bytes.subarray(0, 60));
  assert.throws(() => loader.push(bytes.subarray(60, 100)), { code: 'EOF', rule: 'BlockTruncated', offset: 5000 });
  const l2 = new kiln.DirectoryLoader({ totalLength: 300 });
  assert.throws(() => l2.push(bytes.subarray(0, 200)), { code: 'EOF', rule: 'DirectoryTruncated', offset: 300 });
  assert.throws(() => kiln.parseDirectory(bytes.subarray(0, 300)), { code: 'EOF', rule: 'DirectoryTruncated', offset: 300 });
});

test('cut-short and over-long streams', () => {
  const bytes = example();
  assert.throws(() => feed(bytes.subarray(0, bytes.length - 1), 999), { code: 'EOF', offset: bytes.length - 1 });
  const longer = new Uint8Array(bytes.length + 10);
  longer.set(bytes);
  assert.throws(() => feed(longer, 999), { code: 'TRAILING', offset: bytes.length });
  assert.throws(() => feed(bytes.subarray(0, 30), 7), { code: 'EOF', offset: 30 });
  assert.throws(() => new kiln.DirectoryLoader().end(), { code: 'EOF', offset: 0 });
});

test('consume() reads a ReadableStream; loadDirectory takes Blobs, Responses and streams', async () => {
  const bytes = example();
  const stream = () => new ReadableStream({
    start(c) {
      for (let at = 0; at < bytes.length; at += 1500) c.enqueue(bytes.slice(at, at + 1500));
      c.close();
    },
  });
  const progress = [];
  const dir = await new kiln.DirectoryLoader({ onProgress: (got, total) => progress.push([got, total]) }).consume(stream());
  assert.equal(dir.length, 8);
  assert.deepEqual(progress.at(-1), [bytes.length, bytes.length]);
  assert.equal((await kiln.loadDirectory(new Blob([bytes]))).length, 8);
  assert.equal((await kiln.loadDirectory(new Response(bytes))).length, 8);
  assert.equal((await kiln.loadDirectory(stream())).length, 8);
  // A fault cancels the stream.
  const bad = bytes.slice();
  bad[0] = 0;
  let cancelled = false;
  const s = new ReadableStream({
    pull(c) { c.enqueue(bad.slice(0, 100)); },
    cancel() { cancelled = true; },
  });
  await assert.rejects(kiln.loadDirectory(s), { code: 'FRAME', rule: 'DirectoryMagic' });
  assert.ok(cancelled);
});

test('progress: (received, total, {tensor, source}), at most one call per 64 KiB or 50 ms, a final call with received === total', async () => {
  // 24 tensors of 40,000 bytes, pushed 1,500 bytes at a time (about 640 chunks).
  const bytes = encodeKiln(Array.from({ length: 24 }, (_, i) => ({ name: `w.${i}`, dtype: 'u8', shape: [40000], data: new Uint8Array(40000).fill(i) })));
  const calls = [];
  const loader = new kiln.DirectoryLoader({ onProgress: (got, total, info) => calls.push({ got, total, info, t: performance.now() }) });
  for (let at = 0; at < bytes.length; at += 1500) loader.push(bytes.subarray(at, at + 1500));
  const dir = loader.end();
  const last = calls.at(-1);
  assert.equal(last.got, bytes.length);
  assert.equal(last.total, bytes.length);
  assert.equal(calls.filter((c) => c.got === c.total).length, 1, 'one final call');
  for (let k = 1; k < calls.length; k++) {
    const a = calls[k - 1];
    const b = calls[k];
    assert.ok(b.got - a.got >= 65536 || b.t - a.t >= 50 || b === last, `call ${k}: ${b.got - a.got} bytes and ${b.t - a.t} ms after the last`);
  }
  assert.ok(calls.length >= 10 && calls.length <= Math.ceil(bytes.length / 65536) + 2, `${calls.length} calls`);
  for (const c of calls) {
    assert.equal(c.info.source, 'network');
    if (c.got <= dir.payloadOffset) assert.equal(c.info.tensor, null, 'header and directory bytes belong to no tensor');
    else {
      // The tensor holding the last byte received (a gap counts as the tensor after it).
      const t = dir.tensors().find((x) => x.byteOffset + x.byteLength >= c.got);
      assert.equal(c.info.tensor, t.name, `at ${c.got}`);
    }
  }
  // The two-argument form still works.
  const two = [];
  await new kiln.DirectoryLoader({ onProgress: (got, total) => two.push([got, total]) }).consume(new Blob([bytes]).stream());
  assert.deepEqual(two.at(-1), [bytes.length, bytes.length]);
});

test('random chunks of a 1,000-tensor block: the same table; a bad bool byte deep inside is found; wasm memory stays flat', async () => {
  const { wasm_memory } = await import('../pkg/wasm/kiln_wasm.js');
  const bytes = encodeKiln(Array.from({ length: 1000 }, (_, i) => ({
    name: `layer.${i}`,
    dtype: ['f32', 'bool', 'u4', 'f16', 'e2m1'][i % 5],
    shape: [1 + ((i * 37) % 301)],
  })));
  const want = kiln.parseDirectory(bytes).toJSON();
  let seed = 99;
  const rnd = (n) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
  const chunked = (b) => {
    const loader = new kiln.DirectoryLoader();
    for (let at = 0; at < b.length;) {
      const n = 1 + rnd(9000);
      loader.push(b.subarray(at, at + n));
      at += n;
    }
    return loader.end();
  };
  assert.deepEqual(chunked(bytes).toJSON(), want);
  const flag = kiln.parseDirectory(bytes).at(901);
  assert.equal(flag.dtype, 'bool');
  const bad = bytes.slice();
  bad[flag.byteOffset + 3] = 5;
  assert.throws(() => chunked(bad), { code: 'TYPE', rule: 'BoolByte', offset: flag.byteOffset + 3 });
  // 256 MiB through a loader: wasm memory holds the directory, not the block.
  const big = encodeKiln([{ name: 'w', dtype: 'f32', shape: [64 << 20] }, { name: 'b', dtype: 'bool', shape: [7] }]);
  const mem0 = wasm_memory().buffer.byteLength;
  const loader = new kiln.DirectoryLoader();
  for (let at = 0; at < big.length; at += 1 << 20) loader.push(big.subarray(at, at + (1 << 20)));
  assert.equal(loader.end().get('w').byteLength, 256 << 20);
  assert.ok(wasm_memory().buffer.byteLength - mem0 < 16 << 20);
});

// A byte stream (as fetch bodies are) whose source writes into the view a BYOB
// read hands it, in pieces of at most `piece` bytes; records the length of the
// buffer behind each view it filled.
function byteStream(bytes, piece, log = { buffers: [], cancelled: false }) {
  let at = 0;
  return new ReadableStream({
    type: 'bytes',
    autoAllocateChunkSize: piece,
    pull(c) {
      const view = c.byobRequest.view;
      const n = Math.min(view.byteLength, piece, bytes.length - at);
      if (n === 0) {
        c.close();
        c.byobRequest.respond(0);
        return;
      }
      view.set(bytes.subarray(at, at + n));
      log.buffers.push([view.buffer.byteLength, n]);
      at += n;
      c.byobRequest.respond(n);
    },
    cancel() {
      log.cancelled = true;
    },
  });
}

test('consume() reads a byte stream straight into the final buffer (BYOB), or copies where BYOB is slow', async () => {
  const { streamReading } = await import('../pkg/loader.js');
  const saved = streamReading.byob;
  const bytes = encodeKiln(Array.from({ length: 40 }, (_, i) => ({ name: `t${i}`, dtype: ['f32', 'bool', 'u4'][i % 3], shape: [1000 + i * 77] })));
  const want = kiln.parseDirectory(bytes).toJSON();
  try {
    for (const byob of [true, false]) {
      streamReading.byob = byob;
      const log = { buffers: [], cancelled: false };
      const dir = await new kiln.DirectoryLoader().consume(byteStream(bytes, 3000, log));
      assert.deepEqual(dir.toJSON(), want, `byob ${byob}`);
      const t = dir.get('t39');
      assert.deepEqual([...t.bytes()], [...bytes.subarray(t.byteOffset, t.byteOffset + t.byteLength)]);
      // With BYOB the source wrote every byte after the read that completed
      // the directory into the buffer the views are over (the file's length);
      // without it, into chunks.
      const inFinal = log.buffers.filter(([len]) => len === bytes.length).reduce((a, [, n]) => a + n, 0);
      if (byob) assert.ok(inFinal >= bytes.length - dir.payloadOffset - 3000, `${inFinal} bytes written in place`);
      else assert.equal(inFinal, 0);
      assert.equal(dir.get('t0').view().buffer.byteLength, bytes.length);
      // A nonzero gap byte deep in the payload: the exact verdict, the stream cancelled.
      const gapAt = dir.get('t30').byteOffset - 1;
      assert.equal(bytes[gapAt], 0);
      const bad = bytes.slice();
      bad[gapAt] = 9;
      const badLog = { buffers: [], cancelled: false };
      await assert.rejects(new kiln.DirectoryLoader().consume(byteStream(bad, 3000, badLog)), { code: 'TYPE', rule: 'NonzeroGap', offset: gapAt });
      assert.ok(badLog.cancelled, `byob ${byob}: cancelled`);
      // Longer than declared: TRAILING at the block's end, as parseDirectory says.
      const long = new Uint8Array(bytes.length + 100);
      long.set(bytes);
      await assert.rejects(new kiln.DirectoryLoader().consume(byteStream(long, 3000)), { code: 'TRAILING', offset: bytes.length });
      // A stream that fails after the directory: its error, then and from end().
      let sent = 0;
      const failing = new ReadableStream({
        type: 'bytes',
        pull(c) {
          if (sent >= 20000) throw new Error('network down');
          const view = c.byobRequest?.view;
          const chunk = bytes.subarray(sent, sent + 3000);
          if (view) {
            view.set(chunk.subarray(0, view.byteLength));
            const n = Math.min(view.byteLength, chunk.length);
            sent += n;
            c.byobRequest.respond(n);
          } else {
            c.enqueue(chunk.slice());
            sent += chunk.length;
          }
        },
      });
      const broken = new kiln.DirectoryLoader();
      await assert.rejects(broken.consume(failing), /network down/);
      assert.throws(() => broken.end(), byob ? /network down/ : { code: 'EOF' });
    }
  } finally {
    streamReading.byob = saved;
  }
});

test('payload no rule reads costs no wasm call per chunk', async () => {
  const { Validator } = await import('../pkg/wasm/kiln_wasm.js');
  const big = encodeKiln([{ name: 'w', dtype: 'f32', shape: [16 << 20] }, { name: 'b', dtype: 'bool', shape: [7] }]);
  let calls = 0;
  const saved = {};
  for (const m of ['skip', 'feed', 'next_needed']) {
    saved[m] = Validator.prototype[m];
    Validator.prototype[m] = function (...args) {
      calls++;
      return saved[m].apply(this, args);
    };
  }
  try {
    const loader = new kiln.DirectoryLoader();
    for (let at = 0; at < big.length; at += 65536) loader.push(big.subarray(at, at + 65536));
    const dir = loader.end();
    assert.equal(dir.get('w').byteLength, 64 << 20);
    // 1,025 chunks; before this they cost a skip call each.
    assert.ok(calls < 20, `${calls} wasm calls`);
    // The bool byte after the big tensor is still checked.
    const bad = big.slice();
    bad[dir.get('b').byteOffset + 6] = 2;
    const l2 = new kiln.DirectoryLoader();
    assert.throws(() => {
      for (let at = 0; at < bad.length; at += 65536) l2.push(bad.subarray(at, at + 65536));
    }, { code: 'TYPE', rule: 'BoolByte', offset: dir.get('b').byteOffset + 6 });
  } finally {
    Object.assign(Validator.prototype, saved);
  }
});
