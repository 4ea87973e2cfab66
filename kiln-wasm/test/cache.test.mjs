// openRemote's cache (an in-memory CacheStore here; OPFS and Cache Storage
// in browser-cache.test.mjs) over the range server: a sharded model loaded
// then reloaded with at most one request, a file changed on the server
// noticed, corrupted entries refused and fetched again, a failing put (full
// quota) that does not fail the load, a file without digests keyed by URL,
// length and ETag, weights shared across URLs by digest, a tampered tensor
// never stored, usage/delete, loadToGPU from the cache, and the progress
// reports (throttle, final call, sources).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { PROGRESS_BYTES, PROGRESS_MS } from '../pkg/progress.js';
import { rangeServer } from '../test-support/range-server.mjs';
import { writeSharded } from '../test-support/sharded.mjs';
import { encodeKiln } from '../test-support/encode.mjs';
import { exampleModel } from '../test-support/model.mjs';

let srv;
let big; // 3 shards, 30 tensors of 16 KiB: payloads past each shard's first request
let other; // the same names and layout, other values

before(async () => {
  srv = await rangeServer();
  big = writeSharded({ name: 'big', shards: 3, tensors: 30, bytes: 16384 });
  other = writeSharded({ name: 'big', shards: 3, tensors: 30, bytes: 16384, seed: 2 });
});

after(() => srv.close());

function serve(path, model) {
  for (const [n, b] of model.files) srv.files.set(`/${path}/${n}`, b.slice());
  return `${srv.base}/${path}/${model.manifest}`;
}

// Every tensor's bytes, loaded one by one.
async function loadAll(m, options = {}) {
  const out = new Map();
  for (const t of m) {
    await m.load(t.name, options);
    out.set(t.name, t.bytes().slice());
  }
  return out;
}

// What a model is, read with no cache.
async function reference(url) {
  return loadAll(await kiln.openRemote(url));
}

// A plain directory (no digests): 4 tensors of 96 KiB, payloads past the first request.
function plainFile(seed) {
  const specs = [0, 1, 2, 3].map((i) => ({
    name: `w${i}`,
    dtype: 'u8',
    shape: [96 * 1024],
    data: Uint8Array.from({ length: 96 * 1024 }, (_, k) => (k * 7 + i * 13 + seed) & 0xff),
  }));
  return encodeKiln(specs);
}

test('a sharded model reloaded from the cache: one request of one byte (the manifest unchanged), bytes identical', async (t) => {
  const url = serve('reload', big);
  const want = await reference(url);
  const store = kiln.cache.memory();
  const first = await kiln.openRemote(url, { cache: store });
  const got1 = await loadAll(first);
  t.diagnostic(`first run: ${first.requests} requests, ${first.bytesFetched} bytes`);
  assert.deepEqual(got1, want);

  srv.reset();
  const inits = [];
  const fetchLogged = (u, init) => {
    inits.push(init);
    return fetch(u, init);
  };
  const second = await kiln.openRemote(url, { cache: store, fetch: fetchLogged });
  const got2 = await loadAll(second);
  assert.equal(inits[0].cache, 'no-cache'); // a browser's HTTP cache must ask the server
  t.diagnostic(`reload: ${second.requests} requests, ${second.bytesFetched} bytes (server: ${srv.stats.requests} requests, ${srv.stats.bytes} bytes)`);
  assert.deepEqual(got2, want);
  assert.ok(second.requests <= 1, `${second.requests} requests`);
  assert.equal(srv.stats.requests, second.requests);
  assert.deepEqual(srv.stats.log, [[`/reload/${big.manifest}`, 206, 0, 1]]);
  assert.ok(first.requests > 10);
});

test('a manifest changed on the server is noticed: the new model is fetched and checked, the old entries are not used', async () => {
  const url = serve('changed', big);
  const store = kiln.cache.memory();
  await loadAll(await kiln.openRemote(url, { cache: store }));
  // The same names, other values: every file replaced (new ETags).
  serve('changed', other);
  const want = await reference(url);
  srv.reset();
  const m = await kiln.openRemote(url, { cache: store });
  const got = await loadAll(m);
  assert.deepEqual(got, want);
  assert.ok(m.requests > 10, `${m.requests} requests: the new shards were fetched`);
  assert.equal(srv.stats.log[0][1], 206);
  assert.equal(srv.stats.log[0][3], 1); // the check
  // ...and the new version is what the cache holds now.
  srv.reset();
  assert.deepEqual(await loadAll(await kiln.openRemote(url, { cache: store })), want);
  assert.equal(srv.stats.requests, 1);
});

test('a file changed in place with the same length (a new ETag only) is fetched again, its old entries dropped', async () => {
  const path = '/inplace/plain.kiln';
  srv.files.set(path, plainFile(1));
  const url = srv.base + path;
  const store = kiln.cache.memory();
  await loadAll(await kiln.openRemote(url, { cache: store }));
  const file = srv.files.get(path);
  file.set(plainFile(2)); // same length, other payload bytes
  srv.touch(path);
  const m = await kiln.openRemote(url, { cache: store });
  const got = await loadAll(m);
  assert.deepEqual(got, await reference(url));
  assert.equal(m.requests, 1 + 1 + 4); // the check, the prefix, 4 tensors
  // Only this version's entries are left: a record, a prefix, 4 tensors.
  assert.equal((await store.keys()).length, 6);
});

test('a corrupted cache entry is refused, deleted and fetched again from the network, never served', async () => {
  const url = serve('corrupt', big);
  const want = await reference(url);
  const store = kiln.cache.memory();
  await loadAll(await kiln.openRemote(url, { cache: store }));
  const keys = (await store.keys()).sort();
  const tensor = keys.find((k) => k.startsWith('t-'));
  const shard = keys.find((k) => k.startsWith('s-'));
  for (const k of [tensor, shard]) {
    const b = await store.get(k);
    b[b.length >> 1] ^= 0x40;
    await store.put(k, b);
  }
  srv.reset();
  const m = await kiln.openRemote(url, { cache: store });
  assert.deepEqual(await loadAll(m), want);
  // The check, the shard's prefix and the one tensor (unless it is in that prefix).
  assert.ok(m.requests >= 2 && m.requests <= 3, `${m.requests} requests`);
  // Both entries are whole again: the next reload needs the check only.
  srv.reset();
  assert.deepEqual(await loadAll(await kiln.openRemote(url, { cache: store })), want);
  assert.equal(srv.stats.requests, 1);
});

test('a torn prefix entry is not read as whole: the file is opened from the network', async () => {
  const path = '/torn/plain.kiln';
  srv.files.set(path, plainFile(3));
  const url = srv.base + path;
  const store = kiln.cache.memory();
  await loadAll(await kiln.openRemote(url, { cache: store }));
  const prefix = (await store.keys()).find((k) => k.endsWith('-p'));
  const b = await store.get(prefix);
  await store.put(prefix, b.subarray(0, b.length - 100)); // half-written
  srv.reset();
  const m = await kiln.openRemote(url, { cache: store });
  assert.deepEqual(await loadAll(m), await reference(url));
  assert.equal(m.requests, 2); // the check, then the prefix; the tensors from the cache
});

test('a record is written only after its prefix entry: a failed prefix put leaves no record; a garbage record is ignored and dropped', async (t) => {
  const path = '/order/plain.kiln';
  srv.files.set(path, plainFile(6));
  const url = srv.base + path;
  const inner = kiln.cache.memory();
  const noPrefix = {
    ...inner,
    async put(key, bytes) {
      if (key.endsWith('-p')) throw new Error('disk full');
      return inner.put(key, bytes);
    },
  };
  t.mock.method(console, 'warn', () => {});
  await loadAll(await kiln.openRemote(url, { cache: noPrefix }));
  const keys = await inner.keys();
  assert.equal(keys.filter((k) => k.startsWith('r-')).length, 0);
  assert.equal(keys.length, 4); // the tensors, which check themselves
  // A record that is not one (torn JSON): ignored, deleted, the file opened from the network.
  const store = kiln.cache.memory();
  await loadAll(await kiln.openRemote(url, { cache: store }));
  const rk = (await store.keys()).find((k) => k.startsWith('r-'));
  await store.put(rk, new TextEncoder().encode('{"v":1,"url":'));
  srv.reset();
  const m = await kiln.openRemote(url, { cache: store });
  assert.deepEqual(await loadAll(m), await reference(url));
  assert.equal(m.requests, 1); // the prefix (no record: no check); the tensors from the cache
  assert.ok(JSON.parse(new TextDecoder().decode(await store.get(rk))).prefix.endsWith('-p')); // written again
});

test('the range server: ETag per version, touch() changes it, a matching If-None-Match is 304', async () => {
  srv.files.set('/etag/f', Uint8Array.of(1, 2, 3));
  const u = `${srv.base}/etag/f`;
  const a = (await fetch(u, { headers: { Range: 'bytes=0-0' } })).headers.get('etag');
  assert.match(a, /^"3-\d+"$/);
  assert.equal((await fetch(u, { headers: { 'If-None-Match': a } })).status, 304);
  srv.touch('/etag/f');
  const r = await fetch(u, { headers: { 'If-None-Match': a } });
  assert.equal(r.status, 200);
  assert.notEqual(r.headers.get('etag'), a);
  assert.equal((await fetch(`${u}?noetag`)).headers.get('etag'), null);
});

test('a full quota does not fail the load: it goes on from the network, cacheError in the progress info, one console.warn', async (t) => {
  const url = serve('quota', big);
  const want = await reference(url);
  const inner = kiln.cache.memory();
  const full = {
    ...inner,
    async put() {
      throw new DOMException('the quota is used up', 'QuotaExceededError');
    },
  };
  const warn = t.mock.method(console, 'warn', () => {});
  const infos = [];
  const m = await kiln.openRemote(url, { cache: full, onProgress: (r, total, info) => infos.push(info) });
  assert.deepEqual(await loadAll(m), want);
  assert.equal(warn.mock.callCount(), 1);
  assert.match(String(warn.mock.calls[0].arguments[0]), /QuotaExceededError/);
  const errs = infos.filter((i) => i.cacheError);
  assert.ok(errs.length > 0);
  assert.equal(errs[0].cacheError.name, 'QuotaExceededError');
  assert.equal((await inner.keys()).length, 0);
  // Another open on the same store: still reported to progress, not warned again.
  const again = [];
  const m2 = await kiln.openRemote(url, { cache: full, onProgress: (r, total, info) => again.push(info) });
  await m2.load('t.0');
  assert.ok(again.some((i) => i.cacheError?.name === 'QuotaExceededError'));
  assert.equal(warn.mock.callCount(), 1);
});

test('a file without digests is keyed by URL, length and ETag; without an ETag its payloads are not kept', async () => {
  srv.files.set('/plain/a.kiln', plainFile(4));
  srv.files.set('/plain/b.kiln', plainFile(4)); // the same bytes at another URL
  const store = kiln.cache.memory();
  const a = `${srv.base}/plain/a.kiln`;
  await loadAll(await kiln.openRemote(a, { cache: store }));
  const keys = await store.keys();
  assert.equal(keys.length, 6);
  assert.ok(keys.every((k) => /^(r|u)-[0-9a-f]{64}(-(p|\d+))?$/.test(k)), keys.join());
  srv.reset();
  const again = await kiln.openRemote(a, { cache: store });
  assert.deepEqual(await loadAll(again), await reference(a));
  assert.equal(again.requests, 1);
  // Another URL shares nothing (no digests to say the bytes are the same).
  const b = await kiln.openRemote(`${srv.base}/plain/b.kiln`, { cache: store });
  await loadAll(b);
  assert.equal(b.requests, 1 + 4);
  // No validator: nothing of the file is stored.
  const none = kiln.cache.memory();
  const n = await kiln.openRemote(`${srv.base}/plain/a.kiln?noetag`, { cache: none });
  await loadAll(n);
  assert.equal((await none.keys()).length, 0);
});

test('without an ETag, Last-Modified is the validator: a reload in one request, a change noticed', async () => {
  const path = '/lm/plain.kiln';
  srv.files.set(path, plainFile(7));
  const url = `${srv.base}${path}?noetag&lastmodified`;
  const store = kiln.cache.memory();
  await loadAll(await kiln.openRemote(url, { cache: store }));
  assert.equal((await store.keys()).length, 6);
  const again = await kiln.openRemote(url, { cache: store });
  assert.deepEqual(await loadAll(again), await reference(url));
  assert.equal(again.requests, 1);
  srv.files.get(path).set(plainFile(8));
  srv.touch(path);
  const changed = await kiln.openRemote(url, { cache: store });
  assert.deepEqual(await loadAll(changed), await reference(url));
  assert.equal(changed.requests, 1 + 1 + 4);
});

test('bytes of two versions are never stored under one key: a file that changes during the open or before a load', async () => {
  const path = '/midway/plain.kiln';
  srv.files.set(path, plainFile(9));
  const url = srv.base + path;
  // The ETag changes after the first response of the open (the directory takes a second request).
  const store = kiln.cache.memory();
  let calls = 0;
  const touching = async (u, init) => {
    const r = await fetch(u, init);
    if (++calls === 1) srv.touch(path);
    return r;
  };
  const d = await kiln.openRemote(url, { cache: store, fetch: touching, firstRequestBytes: 64 });
  assert.ok(d.requests >= 2);
  assert.deepEqual(await store.keys(), []);
  // Opened at one version, loaded at the next: the tensor is not stored under the first one's key.
  const store2 = kiln.cache.memory();
  const e = await kiln.openRemote(url, { cache: store2 });
  srv.touch(path);
  await e.load('w0');
  assert.equal((await store2.keys()).filter((k) => /^u-[0-9a-f]{64}-\d+$/.test(k)).length, 0);
});

test('an empty tensor past the first request (a gap before it) is cached too: the reload makes no request for it', async () => {
  const specs = [
    { name: 'odd', dtype: 'u8', shape: [100001], data: Uint8Array.from({ length: 100001 }, (_, i) => i & 0xff) },
    { name: 'none', dtype: 'f32', shape: [0] },
  ];
  srv.files.set('/empty/e.kiln', encodeKiln(specs));
  const url = `${srv.base}/empty/e.kiln`;
  const store = kiln.cache.memory();
  const d = await kiln.openRemote(url, { cache: store });
  assert.ok(d.at(1).byteOffset > d.at(0).byteOffset + d.at(0).byteLength); // a gap before it
  await loadAll(d);
  const again = await kiln.openRemote(url, { cache: store });
  assert.deepEqual(await loadAll(again), await reference(url));
  assert.equal(again.requests, 1);
});

test('a model file with digests: its tensors are keyed by SHA-256 and shared by every URL that holds them', async () => {
  const bytes = exampleModel();
  srv.files.set('/digests/one.kiln', bytes);
  srv.files.set('/digests/two.kiln', bytes.slice());
  const store = kiln.cache.memory();
  const opts = { cache: store, firstRequestBytes: 4096 };
  const one = await kiln.openRemote(`${srv.base}/digests/one.kiln`, opts);
  const want = await loadAll(one);
  const tkeys = (await store.keys()).filter((k) => k.startsWith('t-'));
  assert.equal(tkeys.length, one.length);
  // The key is the file's digest of the tensor.
  const { createHash } = await import('node:crypto');
  const w = one.get('fc1.weight').bytes();
  assert.ok(tkeys.includes(`t-${createHash('sha256').update(w).digest('hex')}`));
  const two = await kiln.openRemote(`${srv.base}/digests/two.kiln`, opts);
  assert.deepEqual(await loadAll(two), want);
  assert.equal(two.requests, 1); // its prefix; every tensor from the cache
});

test('cache.usage and cache.delete: bytes and entries, and a model removed entry by entry', async () => {
  const store = kiln.cache.memory();
  assert.deepEqual(await kiln.cache.usage(store), { bytes: 0, entries: 0 });
  const url = serve('usage', big);
  await loadAll(await kiln.openRemote(url, { cache: store }));
  const keys = await store.keys();
  let bytes = 0;
  for (const k of keys) bytes += (await store.get(k)).length;
  assert.deepEqual(await kiln.cache.usage(store), { bytes, entries: keys.length });
  // 1 record + manifest + 3 shard prefixes + the tensors past those prefixes.
  assert.ok(keys.length > 5);
  // A plain file beside it stays.
  srv.files.set('/usage/plain.kiln', plainFile(5));
  await loadAll(await kiln.openRemote(`${srv.base}/usage/plain.kiln`, { cache: store }));
  const removed = await kiln.cache.delete(url, store);
  assert.equal(removed, keys.length);
  assert.equal((await kiln.cache.usage(store)).entries, 6);
  assert.equal(await kiln.cache.delete(`${srv.base}/usage/plain.kiln`, store), 6);
  assert.deepEqual(await kiln.cache.usage(store), { bytes: 0, entries: 0 });
  await assert.rejects(kiln.cache.usage({ get() {} }), /`cache` must be 'opfs', 'cache-api' or an object/);
});

// A GPU device for Node: buffers are ArrayBuffers, mapped at creation.
function fakeDevice() {
  return {
    limits: {},
    createBuffer({ size, label }) {
      const data = new Uint8Array(size);
      return { label, size, data, getMappedRange: () => data.buffer, unmap() {}, destroy() {} };
    },
  };
}

test('loadToGPU from the cache: cached payloads go into the mapped buffers, source "cache"', async () => {
  const url = serve('gpu', big);
  const want = await reference(url);
  const store = kiln.cache.memory();
  const m1 = await kiln.openRemote(url, { cache: store });
  const first = await m1.loadToGPU(fakeDevice());
  for (const [name, b] of first) assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name));
  srv.reset();
  const calls = [];
  const m2 = await kiln.openRemote(url, { cache: store });
  const got = await m2.loadToGPU(fakeDevice(), null, { onProgress: (r, total, info) => calls.push([r, total, info]) });
  assert.equal(m2.requests, 1);
  for (const [name, b] of got) assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name), name);
  assert.ok(calls.length > 0);
  assert.ok(calls.every(([, , info]) => info.source === 'cache'), JSON.stringify(calls.filter((c) => c[2].source !== 'cache')));
  const [r, total] = calls.at(-1);
  assert.equal(r, total);
  // A corrupted entry on this path too: refused, fetched, stored again. (Its
  // last byte: the entry is streamed from where the shard's first bytes end,
  // so a byte the prefix already holds is never read from it.)
  const k = (await store.keys()).find((x) => x.startsWith('t-'));
  const e = await store.get(k);
  e[e.length - 1] ^= 1;
  await store.put(k, e);
  const m3 = await kiln.openRemote(url, { cache: store });
  for (const [name, b] of await m3.loadToGPU(fakeDevice())) assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name), name);
  assert.equal(m3.requests, 2);
  assert.equal((await m3.loadToGPU(fakeDevice())).size, want.size);
  assert.equal(m3.requests, 2);
});

// No two calls closer than PROGRESS_BYTES and PROGRESS_MS; the last one final.
function assertThrottled(calls) {
  for (let i = 1; i < calls.length - 1; i++) {
    const [r, , , at] = calls[i];
    const [r0, , , at0] = calls[i - 1];
    assert.ok(r - r0 >= PROGRESS_BYTES || at - at0 >= PROGRESS_MS, `call ${i}: ${r - r0} bytes and ${at - at0} ms after the one before`);
  }
  const [r, total] = calls.at(-1);
  assert.equal(r, total);
  for (const c of calls) assert.ok(c[0] <= c[1] || c[1] === null);
}

test('progress: openRemote reports the prefix, load the tensor; throttled, a final call, the sources right on a reload', async () => {
  const specs = [{ name: 'big', dtype: 'u8', shape: [4 << 20], data: Uint8Array.from({ length: 4 << 20 }, (_, i) => (i * 31) & 0xff) }];
  srv.files.set('/progress/one.kiln', encodeKiln(specs));
  const url = `${srv.base}/progress/one.kiln`;
  const store = kiln.cache.memory();
  const log = [];
  const onProgress = (r, total, info) => log.push([r, total, info, performance.now()]);
  const d = await kiln.openRemote(url, { cache: store, onProgress });
  assertThrottled(log);
  assert.ok(log.every((c) => c[2].tensor === null && c[2].source === 'network'));
  assert.equal(log.at(-1)[0], d.bytesFetched);
  log.length = 0;
  await d.load('big'); // openRemote's onProgress is the default
  assertThrottled(log);
  assert.equal(log.at(-1)[1], (4 << 20) + d.at(0).byteOffset - d.payloadOffset);
  assert.ok(log.length >= 2, `${log.length} calls`);
  assert.ok(log.every((c) => c[2].tensor === 'big' && c[2].source === 'network'));
  // Reload: every report says 'cache'.
  const again = [];
  const d2 = await kiln.openRemote(url, { cache: store, onProgress: (r, total, info) => again.push([r, total, info, performance.now()]) });
  const own = [];
  await d2.load('big', { onProgress: (r, total, info) => own.push([r, total, info, performance.now()]) });
  assertThrottled(again);
  assertThrottled(own);
  assert.ok(again.every((c) => c[2].source === 'cache'));
  assert.ok(own.every((c) => c[2].source === 'cache' && c[2].tensor === 'big'));
  assert.equal(own.at(-1)[0], 4 << 20);
  assert.equal(d2.requests, 1);
});

test("a cache the runtime lacks ('opfs' in Node) warns once and loads from the network; a wrong option is a TypeError", async (t) => {
  await assert.rejects(kiln.openRemote(`${srv.base}/x.kiln`, { cache: 'disk' }), /`cache` must be 'opfs', 'cache-api' or an object/);
  const url = serve('nocache', big);
  const warn = t.mock.method(console, 'warn', () => {});
  const m = await kiln.openRemote(url, { cache: 'opfs' });
  assert.deepEqual(await loadAll(m), await reference(url));
  assert.equal(warn.mock.callCount(), 1);
  assert.match(String(warn.mock.calls[0].arguments[0]), /Origin Private File System/);
});

test('without crypto.subtle (an insecure context) the cache is off: one warning, the network, nothing stored', async (t) => {
  const url = serve('nosubtle', big);
  const want = await reference(url);
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'crypto');
  const warn = t.mock.method(console, 'warn', () => {});
  const store = kiln.cache.memory();
  Object.defineProperty(globalThis, 'crypto', { value: {}, configurable: true, writable: true });
  let m;
  try {
    m = await kiln.openRemote(url, { cache: store });
  } finally {
    Object.defineProperty(globalThis, 'crypto', saved);
  }
  assert.deepEqual(await loadAll(m), want);
  assert.equal(warn.mock.callCount(), 1);
  assert.match(String(warn.mock.calls[0].arguments[0]), /crypto\.subtle/);
  assert.equal((await store.keys()).length, 0);
});

test('a tensor whose digest does not match is refused and not stored (load and loadToGPU)', async () => {
  const path = 'tampered';
  const url = serve(path, big);
  const last = [...big.files.keys()].filter((n) => n !== big.manifest).sort().at(-1);
  const bytes = srv.files.get(`/${path}/${last}`);
  bytes[bytes.length - 1] ^= 0x01; // the last tensor's last payload byte
  const store = kiln.cache.memory();
  const d = await kiln.openRemote(url, { cache: store });
  // Payloads are in descriptor order: the shard's last tensor holds its last byte.
  const victim = [...d.names()].filter((n) => d.shardOf(n).name === last).at(-1);
  await assert.rejects(d.load(victim), (e) => e instanceof kiln.KilnError && e.code === 'DIGEST');
  const g = await kiln.openRemote(url, { cache: store });
  await assert.rejects(g.loadToGPU(fakeDevice(), [victim]), (e) => e instanceof kiln.KilnError && e.code === 'DIGEST');
  // Only the prefixes were stored, no tensor.
  assert.deepEqual((await store.keys()).filter((k) => k.startsWith('t-')), []);
});

// A store with only the four required methods: entries go through get/put whole.
function plainStore() {
  const inner = kiln.cache.memory();
  return { get: (k) => inner.get(k), put: (k, b) => inner.put(k, b), delete: (k) => inner.delete(k), keys: () => inner.keys() };
}

test('loadToGPU of a file without digests: entries written as the bytes stream (trailer included), read back by load() and loadToGPU alike; a bad trailer is refetched', async () => {
  const path = '/gpu-plain/plain.kiln';
  srv.files.set(path, plainFile(21));
  const url = srv.base + path;
  const want = await reference(url);
  for (const [label, store] of [['streaming store', kiln.cache.memory()], ['get/put store', plainStore()]]) {
    const first = await kiln.openRemote(url, { cache: store });
    for (const [name, b] of await first.loadToGPU(fakeDevice())) assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name), `${label}: ${name}`);
    const keys = (await store.keys()).filter((k) => /^u-[0-9a-f]{64}-\d+$/.test(k));
    assert.ok(keys.length >= 3, `${label}: ${keys.length} tensor entries`);
    // load() reads what loadToGPU stored: one request (the change check) for every tensor.
    const cpu = await kiln.openRemote(url, { cache: store });
    assert.deepEqual(await loadAll(cpu), want, label);
    assert.equal(cpu.requests, 1, label);
    // loadToGPU reads what load() stored (a fresh store filled by load).
    const store2 = kiln.cache.memory();
    await loadAll(await kiln.openRemote(url, { cache: store2 }));
    const gpu2 = await kiln.openRemote(url, { cache: store2 });
    for (const [name, b] of await gpu2.loadToGPU(fakeDevice())) assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name), `${label}: ${name} from load()'s entry`);
    assert.equal(gpu2.requests, 1, label);
    // A body byte of the last tensor's entry flipped: the trailer refuses it, the tensor is fetched again and stored again.
    const k = keys.sort().at(-1);
    const bad = await store.get(k);
    bad[bad.length - 40] ^= 1;
    await store.put(k, bad);
    const third = await kiln.openRemote(url, { cache: store });
    const calls = [];
    for (const [name, b] of await third.loadToGPU(fakeDevice(), null, { onProgress: (r, total, info) => calls.push([r, total, info.source]) })) {
      assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name), `${label}: ${name} after the bad entry`);
    }
    assert.equal(third.requests, 2, `${label}: the change check and one refetch`);
    assert.deepEqual((await store.get(k)).subarray(0, 8), (await store2.get(k)).subarray(0, 8));
    assert.equal(calls.at(-1)[0], calls.at(-1)[1], 'a final call with received === total, the retry not counted twice');
    assert.ok(calls.every(([r, total]) => r <= total));
    const fourth = await kiln.openRemote(url, { cache: store });
    await fourth.loadToGPU(fakeDevice());
    assert.equal(fourth.requests, 1, `${label}: stored again`);
  }
});

test('loadToGPU: a tensor that fails its digest over the network leaves no entry; a store that fails mid-write loses nothing but the entry', async (t) => {
  const url = serve('gpu-fail', big);
  const want = await reference(url);
  // A store whose streamed writes fail after the first chunk: the upload goes on, the entry is dropped.
  const inner = kiln.cache.memory();
  let writes = 0;
  const failing = {
    ...inner,
    get: inner.get, put: inner.put, delete: inner.delete, keys: inner.keys,
    async openWrite(key, size) {
      const w = await inner.openWrite(key, size);
      return { ...w, async write(c) { if (++writes > 1 && key.startsWith('t-')) throw new DOMException('full', 'QuotaExceededError'); return w.write(c); } };
    },
  };
  const warn = t.mock.method(console, 'warn', () => {});
  const m = await kiln.openRemote(url, { cache: failing });
  const errors = [];
  for (const [name, b] of await m.loadToGPU(fakeDevice(), null, { onProgress: (r, total, info) => info.cacheError && errors.push(info.cacheError.name) })) {
    assert.deepEqual(b.data.subarray(0, want.get(name).length), want.get(name), name);
  }
  assert.ok(errors.includes('QuotaExceededError'));
  assert.ok(warn.mock.callCount() >= 1);
  warn.mock.restore();
});
