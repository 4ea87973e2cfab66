// Big inputs, cheaply: sparse files of 100 MiB, 6 GiB and 20 GiB (a small
// valid block written at the start, the rest a hole) opened with Range
// requests from a local server, and multi-GiB buffers parsed in any order.
// wasm memory holds the directory, not the file.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as kiln from '../pkg/index.js';
import { wasm_memory } from '../pkg/wasm/kiln_wasm.js';
import { encodeKiln } from '../test-support/encode.mjs';
import { SMALL, rangeServer, sparseBlock } from '../test-support/range-server.mjs';
import { PAD_KEY, modelHead } from '../test-support/model.mjs';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
let srv;
let dir;
const wasmBytes = () => wasm_memory().buffer.byteLength;

before(async () => {
  srv = await rangeServer();
  dir = mkdtempSync(join(tmpdir(), 'kiln-sparse-'));
  for (const [name, size] of [['100m', 100 * MiB], ['6g', 6 * GiB], ['20g', 20 * GiB]]) {
    const f = sparseBlock(join(dir, `${name}.kiln`), size);
    srv.files.set(`/${name}.kiln`, f);
  }
});

after(async () => {
  await srv?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

for (const [name, size] of [['100m', 100 * MiB], ['6g', 6 * GiB], ['20g', 20 * GiB]]) {
  test(`a ${name} file: the directory and a small tensor in one request of 64 KiB; 3 requests, < 1 KiB beyond the tensor, from 64 bytes`, async () => {
    for (const first of [undefined, 64]) {
      srv.reset();
      const mem0 = wasmBytes();
      const remote = await kiln.openRemote(`${srv.base}/${name}.kiln`, { firstRequestBytes: first });
      const grew = wasmBytes() - mem0;
      assert.equal(remote.size, size);
      assert.equal(remote.byteLength, size);
      const huge = remote.get('huge');
      assert.equal(huge.byteOffset + huge.byteLength, size, 'offsets past 4 GiB are exact');
      const t = await remote.load('small');
      assert.deepEqual([...t.view()], [...SMALL]);
      assert.ok(t.isView);
      const want = first === undefined ? 1 : 3;
      assert.equal(srv.stats.requests, want, JSON.stringify(srv.stats.log));
      assert.equal(remote.requests, want);
      const beyond = srv.stats.bytes - t.byteLength;
      if (first === undefined) assert.equal(srv.stats.bytes, 65536);
      else assert.ok(beyond < 1024, `${beyond} bytes beyond the tensor's ${t.byteLength}`);
      assert.equal(remote.bytesFetched, srv.stats.bytes);
      assert.ok(grew < 16 * MiB, `wasm memory grew ${grew} bytes`);
      console.log(`# ${name}, first request ${first ?? 65536} bytes: ${srv.stats.requests} requests, ${srv.stats.bytes} bytes served (${beyond} beyond the tensor), wasm memory +${grew} bytes (now ${wasmBytes()})`);
    }
  });
}

test('6 GiB model files: metadata and directory in one request, a tensor past 6 GiB in one more; a 2 MiB padding key costs one request', async () => {
  const meta = [['description', 'a sparse model file'], ['license', 'MIT OR Apache-2.0']];
  for (const [label, padLength, opens] of [['short metadata', 40, 1], ['2 MiB padding key', 2 * MiB, 2]]) {
    const head = modelHead([...meta, [PAD_KEY, ' '.repeat(padLength)]]);
    const f = sparseBlock(join(dir, 'model.kiln'), 6 * GiB, { head, flags: Uint8Array.of(1, 0, 1) });
    srv.files.set('/model.kiln', f);
    srv.reset();
    const mem0 = wasmBytes();
    const remote = await kiln.openRemote(`${srv.base}/model.kiln`);
    assert.equal(remote.requests, opens, `${label}: ${JSON.stringify(srv.stats.log)}`);
    assert.deepEqual([...remote.metadata], meta, label);
    assert.equal(remote.byteOffset, head.length);
    assert.equal(remote.size, f.size);
    assert.deepEqual([...(await remote.load('small')).view()], [...SMALL]);
    const flags = await remote.load('flags');
    assert.equal(flags.byteOffset, f.flagsAt);
    assert.deepEqual([...flags.view()], [1, 0, 1]);
    assert.equal(remote.requests, opens + 1, label);
    const grew = wasmBytes() - mem0;
    assert.ok(grew < 16 * MiB, `wasm memory grew ${grew} bytes`);
    console.log(`# model file, ${label}: ${remote.requests} requests for the directory and a tensor past 6 GiB, ${srv.stats.bytes} bytes`);
    // The verdicts are the core's, with offsets in the file.
    srv.files.set('/cut.kiln', sparseBlock(join(dir, 'cut.kiln'), 6 * GiB, { head, extra: -1 }));
    await assert.rejects(kiln.openRemote(`${srv.base}/cut.kiln`), { code: 'EOF', rule: 'BlockTruncated', offset: head.length + 6 * GiB - 1 });
    rmSync(join(dir, 'model.kiln'));
    rmSync(join(dir, 'cut.kiln'));
  }
});

test('files past 4 GiB: EOF and TRAILING offsets are exact, faults past 4 GiB are found', async () => {
  const cut = sparseBlock(join(dir, 'cut.kiln'), 6 * GiB, { extra: -1 });
  srv.files.set('/cut.kiln', cut);
  await assert.rejects(kiln.openRemote(`${srv.base}/cut.kiln`), { code: 'EOF', rule: 'BlockTruncated', offset: 6 * GiB - 1 });
  const long = sparseBlock(join(dir, 'long.kiln'), 6 * GiB, { extra: 5 });
  srv.files.set('/long.kiln', long);
  await assert.rejects(kiln.openRemote(`${srv.base}/long.kiln`), { code: 'TRAILING', offset: 6 * GiB });
  // A bool tensor past 6 GiB: loaded and checked; a bad byte there is BoolByte,
  // at its exact offset (past 2^32: wasm32's core keeps offsets as u64).
  const good = sparseBlock(join(dir, 'flags.kiln'), 6 * GiB, { flags: Uint8Array.of(1, 0, 1) });
  srv.files.set('/flags.kiln', good);
  const r = await kiln.openRemote(`${srv.base}/flags.kiln`);
  const f = await r.load('flags');
  assert.equal(f.byteOffset, good.flagsAt);
  assert.deepEqual([...f.view()], [1, 0, 1]);
  const bad = sparseBlock(join(dir, 'badflags.kiln'), 6 * GiB, { flags: Uint8Array.of(1, 2, 1) });
  srv.files.set('/badflags.kiln', bad);
  const r2 = await kiln.openRemote(`${srv.base}/badflags.kiln`);
  await assert.rejects(r2.load('flags'), { code: 'TYPE', rule: 'BoolByte', offset: bad.flagsAt + 1 });
  for (const p of ['cut', 'long', 'flags', 'badflags']) rmSync(join(dir, `${p}.kiln`));
});

test('a nonzero gap byte past 4 GiB: NonzeroGap at its exact offset', async () => {
  // small f32[16] at payload offset 0, huge u8[5 GiB + 3] at 64, then a
  // 61-byte gap and tail f32[4] at the next multiple of 64; the block ends
  // there. Only the directory, the gap byte and tail are written.
  const hugeLen = 5 * GiB + 3;
  const specs = [
    { name: 'small', dtype: 'f32', shape: [16] },
    { name: 'huge', dtype: 'u8', shape: [hugeLen] },
    { name: 'tail', dtype: 'f32', shape: [4] },
  ];
  const base = Math.ceil((64 + 3 * 128 + 13) / 64) * 64;
  const tailAt = base + Math.ceil((64 + hugeLen) / 64) * 64;
  const gapByte = base + 64 + hugeLen + 10;
  const path = join(dir, 'gap.kiln');
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, encodeKiln(specs, base + 64), 0, base + 64, 0);
    writeSync(fd, Uint8Array.of(7), 0, 1, gapByte);
    writeSync(fd, new Uint8Array(16), 0, 16, tailAt);
  } finally {
    closeSync(fd);
  }
  srv.files.set('/gap.kiln', { path, size: tailAt + 16 });
  try {
    const r = await kiln.openRemote(`${srv.base}/gap.kiln`);
    assert.equal(r.get('tail').byteOffset, tailAt);
    assert.ok(gapByte > 2 ** 32);
    await assert.rejects(r.load('tail'), { code: 'TYPE', rule: 'NonzeroGap', offset: gapByte });
  } finally {
    rmSync(path);
  }
});

test('a server that ignores Range on a 6 GiB file: an error, and the body is cancelled', async () => {
  srv.reset();
  await assert.rejects(kiln.openRemote(`${srv.base}/6g.kiln?norange`), /ignored the Range request/);
  // The server streams the file until the client goes away: give it a moment to notice.
  await new Promise((r) => setTimeout(r, 200));
  const sent = srv.stats.bytes;
  assert.ok(sent < 64 * MiB, `the server sent ${sent} bytes of 6 GiB`);
  console.log(`# server ignoring Range: ${sent} bytes sent before the client cancelled`);
});

test('multi-GiB buffers and a 1,000-tensor directory parse in any order; wasm memory stays small', () => {
  const mem0 = wasmBytes();
  const blocks = {
    '1.5 GiB': () => encodeKiln([
      { name: 'a', dtype: 'f32', shape: [3] },
      { name: 'big', dtype: 'u8', shape: [1.5 * GiB] },
      { name: 'b', dtype: 'bool', shape: [5] },
    ]),
    '1,000 tensors': () => encodeKiln(Array.from({ length: 1000 }, (_, i) => ({
      name: `layer.${i}.w`,
      dtype: ['f32', 'bool', 'u4', 'f16', 'i8'][i % 5],
      shape: [1 + ((i * 37) % 501)],
    }))),
    '3 GiB': () => encodeKiln([{ name: 'big', dtype: 'u8', shape: [3 * GiB - 1024] }, { name: 'n', dtype: 'i4', shape: [3] }]),
  };
  const made = Object.fromEntries(Object.entries(blocks).map(([k, f]) => [k, f()]));
  const orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
  const keys = Object.keys(made);
  for (const order of orders) {
    for (const i of order) {
      const b = made[keys[i]];
      const d = kiln.parseDirectory(b);
      assert.equal(d.byteLength, b.length, keys[i]);
      const last = d.at(d.length - 1);
      assert.equal(last.bytes().buffer, b.buffer);
    }
  }
  const grew = wasmBytes() - mem0;
  assert.ok(grew < 16 * MiB, `wasm memory grew ${grew} bytes`);
  // A fault in the 3 GiB block's last tensor is still found.
  const big = made['3 GiB'];
  const n = kiln.parseDirectory(big).get('n');
  big[n.byteOffset + 1] = 0x10;
  assert.throws(() => kiln.parseDirectory(big), { code: 'TYPE', rule: 'PackedHighNibble', offset: n.byteOffset + 1 });
});
