// Range-request loading against a small local HTTP server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { example } from '../test-support/goldens.mjs';
import { encodeKiln, le } from '../test-support/encode.mjs';
import { rangeServer } from '../test-support/range-server.mjs';

let srv;

before(async () => {
  srv = await rangeServer();
  srv.files.set('/digits.kiln', example());
});

after(() => srv.close());

const url = (p) => `${srv.base}${p}`;
const log = () => srv.stats.log.map(([p, status, start, n]) => [p, status, start, n]);

test('a small file opens in one request of 64 KiB, and its tensors need none', async () => {
  srv.reset();
  const local = kiln.parseDirectory(example());
  const remote = await kiln.openRemote(url('/digits.kiln'));
  assert.deepEqual(log(), [['/digits.kiln', 206, 0, example().length]]);
  assert.equal(remote.metadata, null);
  assert.equal(remote.byteOffset, 0);
  for (const t of remote) {
    const got = await remote.load(t.index);
    assert.deepEqual([...got.bytes()], [...local.at(t.index).bytes()]);
    assert.ok(got.isView);
  }
  assert.equal(remote.requests, 1);
  const t = await kiln.loadTensor(url('/digits.kiln'), 'fc1.weight');
  assert.equal(t.viewAs('f32')[5], local.get('fc1.weight').viewAs('f32')[5]);
});

test('with firstRequestBytes: 64, loadTensor fetches 64 bytes, the directory, then that payload with the gap before it', async () => {
  srv.reset();
  const bytes = example();
  const local = kiln.parseDirectory(bytes);
  const t = await kiln.loadTensor(url('/digits.kiln'), 'fc2.bias', { firstRequestBytes: 64 });
  assert.equal(t.name, 'fc2.bias');
  assert.deepEqual(t.shape, [10]);
  assert.equal(t.byteOffset, local.get('fc2.bias').byteOffset);
  assert.deepEqual([...t.view()], [...local.get('fc2.bias').view()]);
  assert.ok(t.isView, 'the payload lands 64-byte aligned in its buffer');
  const prev = local.get('fc2.weight');
  assert.deepEqual(log(), [
    ['/digits.kiln', 206, 0, 64],
    ['/digits.kiln', 206, 64, local.payloadOffset - 64],
    // fc2.bias (40 bytes) ends at 10,856; fc1.weight.mxfp4 starts at 10,880: the gap before
    // fc2.bias is empty (fc2.weight ends where it starts).
    ['/digits.kiln', 206, prev.byteOffset + prev.byteLength, 40],
  ]);
  // A tensor after a gap: the gap's bytes come with it, and are checked.
  srv.reset();
  const q = await (await kiln.openRemote(url('/digits.kiln'), { firstRequestBytes: 64 })).load('fc1.weight.mxfp4');
  const qGap = local.get('fc2.bias').byteOffset + 40;
  assert.ok(qGap < q.byteOffset);
  assert.deepEqual(log().find((e) => e[2] === qGap), ['/digits.kiln', 206, qGap, q.byteOffset + q.byteLength - qGap]);
});

test('a RemoteDirectory loads tensors one at a time, with their scales', async () => {
  const remote = await kiln.openRemote(url('/digits.kiln'), { firstRequestBytes: 64 });
  assert.equal(remote.size, example().length);
  assert.equal(remote.length, 8);
  assert.equal(remote.requests, 2);
  assert.equal(remote.isLoaded('fc1.weight.mxfp4'), false);
  assert.throws(() => remote.get('fc1.bias').view(), /not loaded/);
  const q = await remote.load('fc1.weight.mxfp4');
  assert.equal(remote.isLoaded('fc1.weight.mxfp4.scales'), true);
  const local = kiln.parseDirectory(example());
  assert.deepEqual([...kiln.dequantize(q)], [...kiln.dequantize(local.get('fc1.weight.mxfp4'))]);
  assert.equal(remote.requests, 4);
  assert.ok(remote.bytesFetched < remote.size / 2, `${remote.bytesFetched} of ${remote.size}`);
  await remote.load(0);
  assert.equal(remote.requests, 5);
  await remote.load(0);
  assert.equal(remote.requests, 5, 'a loaded tensor is not fetched again');
  for (const t of remote) if (remote.isLoaded(t.index)) assert.deepEqual([...t.bytes()], [...local.at(t.index).bytes()]);
  await assert.rejects(remote.load('missing'), RangeError);
});

test('loadDirectory(url) streams a whole file through a DirectoryLoader', async () => {
  const seen = [];
  const dir = await kiln.loadDirectory(url('/digits.kiln'), { onProgress: (got, total) => seen.push([got, total]) });
  assert.equal(dir.length, 8);
  assert.deepEqual(seen.at(-1), [example().length, example().length]);
  await assert.rejects(kiln.loadDirectory(url('/missing.kiln')), /HTTP 404/);
});

test('a server that ignores Range is an error, and its body is cancelled', async () => {
  // 64 MiB, served whole on ?norange: the client must not download it.
  const big = encodeKiln([{ name: 'w', dtype: 'u8', shape: [64 << 20] }]);
  srv.files.set('/big.kiln', big);
  await assert.rejects(kiln.openRemote(url('/big.kiln?norange')), (e) => {
    assert.ok(!(e instanceof kiln.KilnError));
    assert.match(e.message, /ignored the Range request \(HTTP 200/);
    return true;
  });
  await assert.rejects(kiln.loadTensor(url('/digits.kiln?norange'), 'fc1.bias'), /ignored the Range request/);
  srv.files.delete('/big.kiln');
});

test('a 206 whose Content-Range cannot be read names Access-Control-Expose-Headers', async () => {
  // What a page sees from another origin that does not expose the header.
  const hide = async (u, init) => {
    const r = await fetch(u, init);
    const h = new Headers(r.headers);
    h.delete('content-range');
    return new Response(r.body, { status: r.status, headers: h });
  };
  await assert.rejects(kiln.openRemote(url('/digits.kiln'), { fetch: hide }), /Access-Control-Expose-Headers: Content-Range/);
  // A total of "*" is not enough either.
  const star = async (u, init) => {
    const r = await fetch(u, init);
    const h = new Headers(r.headers);
    h.set('content-range', h.get('content-range').replace(/\/\d+$/, '/*'));
    return new Response(r.body, { status: r.status, headers: h });
  };
  await assert.rejects(kiln.openRemote(url('/digits.kiln'), { fetch: star }), /did not say how long the file is/);
});

test('a damaged remote directory and damaged remote payloads are reported as parseDirectory would', async () => {
  const bad = example();
  bad[100] = 0xff;
  srv.files.set('/bad.kiln', bad);
  let want;
  try {
    kiln.parseDirectory(bad);
  } catch (e) {
    want = e;
  }
  await assert.rejects(kiln.openRemote(url('/bad.kiln')), { code: want.code, offset: want.offset, rule: want.rule });

  const withBool = encodeKiln([
    { name: 'x', dtype: 'f32', shape: [3] },
    { name: 'flags', dtype: 'bool', shape: [4], data: Uint8Array.of(0, 1, 7, 1) },
    { name: 'nib', dtype: 'u4', shape: [3], data: Uint8Array.of(0x21, 0x13) },
  ]);
  srv.files.set('/bool.kiln', withBool);
  // Fetched whole by the first request, the file is rejected at once, as parseDirectory would.
  await assert.rejects(kiln.openRemote(url('/bool.kiln')), { code: 'TYPE', rule: 'BoolByte' });
  const remote = await kiln.openRemote(url('/bool.kiln'), { firstRequestBytes: 64 });
  await remote.load('x');
  const flags = remote.get('flags');
  await assert.rejects(remote.load('flags'), { code: 'TYPE', rule: 'BoolByte', offset: flags.byteOffset + 2 });
  assert.equal(remote.isLoaded('flags'), false);
  await assert.rejects(remote.load('nib'), { code: 'TYPE', rule: 'PackedHighNibble', offset: remote.get('nib').byteOffset + 1 });

  // A nonzero gap byte before a tensor comes with it.
  const gap = encodeKiln([
    { name: 'a', dtype: 'f32', shape: [3], data: le(Float32Array.of(1, 2, 3)) },
    { name: 'b', dtype: 'f32', shape: [2], data: le(Float32Array.of(4, 5)) },
  ]);
  const local = kiln.parseDirectory(gap);
  const at = local.get('a').byteOffset + 12 + 7;
  gap[at] = 1;
  srv.files.set('/gap.kiln', gap);
  const r2 = await kiln.openRemote(url('/gap.kiln'), { firstRequestBytes: 64 });
  await r2.load('a');
  await assert.rejects(r2.load('b'), { code: 'TYPE', rule: 'NonzeroGap', offset: at });

  // Descriptor-level faults that a full parse finds only at the end of the payload.
  const trailing = new Uint8Array(example().length + 3);
  trailing.set(example());
  srv.files.set('/trailing.kiln', trailing);
  await assert.rejects(kiln.openRemote(url('/trailing.kiln')), { code: 'TRAILING', offset: example().length });

  // A file shorter than its header says.
  srv.files.set('/short.kiln', example().subarray(0, 5000));
  await assert.rejects(kiln.openRemote(url('/short.kiln')), { code: 'EOF', offset: 5000 });
  srv.files.set('/tiny.kiln', Uint8Array.of(0x4b, 0x4c));
  await assert.rejects(kiln.openRemote(url('/tiny.kiln')), { code: 'EOF', offset: 2 });
  srv.files.set('/empty.kiln', new Uint8Array(0));
  await assert.rejects(kiln.openRemote(url('/empty.kiln')), { code: 'EOF', offset: 0 });
  await assert.rejects(kiln.openRemote(url('/missing.kiln')), /HTTP 404/);
});

test('an abort signal stops openRemote', async () => {
  const ac = new AbortController();
  ac.abort(new Error('stop'));
  await assert.rejects(kiln.openRemote(url('/digits.kiln'), { signal: ac.signal }), /stop/);
});
