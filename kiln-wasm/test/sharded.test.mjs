// Digests and sharded models (spec/model-file.md) in the npm package: a
// sharded model written by the core's write_sharded read back with
// openRemote + load over a local HTTP server (requests and bytes counted),
// tampering rejected with the shard named, parseModel's verify, and the
// stream loader's digest verdict in several chunkings.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as kiln from '../pkg/index.js';
import { rangeServer } from '../test-support/range-server.mjs';
import { writeSharded } from '../test-support/sharded.mjs';

let srv;
let small; // 3 shards of whole tensors fetched with their prefix
let big; // 3 shards whose payloads are past the first request
let other; // the same layout, other values (another model)

before(async () => {
  srv = await rangeServer();
  small = writeSharded({ name: 'small', shards: 3, tensors: 30, bytes: 64 });
  big = writeSharded({ name: 'big', shards: 3, tensors: 30, bytes: 16384 });
  other = writeSharded({ name: 'big', shards: 3, tensors: 30, bytes: 16384, seed: 2 });
});

after(() => srv.close());

// Serves `model` under /PATH/ (with `change(files)` applied to a copy first).
function serve(path, model, change = null) {
  const files = new Map([...model.files].map(([n, b]) => [n, b.slice()]));
  change?.(files);
  for (const [n, b] of files) srv.files.set(`/${path}/${n}`, b);
  return `${srv.base}/${path}/${model.manifest}`;
}

const shardsOf = (model) => [...model.files.keys()].filter((n) => n !== model.manifest).sort();

function verdict(fn) {
  try {
    fn();
    return 'accept';
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw e;
    return `${e.code} ${e.offset} ${e.rule}`;
  }
}

async function rejection(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof kiln.KilnError, String(e));
    return e;
  }
  assert.fail('accepted');
}

test('a sharded model opens from its manifest in one request and every tensor loads bit-exact', async () => {
  const url = serve('rt', big);
  srv.reset();
  const m = await kiln.openRemote(url);
  assert.equal(m.sharded, true);
  assert.equal(m.requests, 1, 'the manifest in one request');
  assert.equal(m.bytesFetched, big.files.get(big.manifest).length);
  assert.equal(m.length, 36);
  assert.deepEqual([...m.metadata], [['author', 'kiln'], ['seed', '1']]);
  assert.deepEqual(m.shards.map((s) => s.name), shardsOf(big));
  assert.equal(m.get('t.7').byteOffset, -1, 'offsets are known once the shard is opened');
  assert.deepEqual(m.get('scalar').shape, []);
  assert.deepEqual(m.get('empty').shape, [0]);
  assert.equal(m.shardOf('t.29').index, 3);
  // A tensor of shard 2 past its first 64 KiB: the prefix (one request), then the tensor (one request).
  await m.load('t.19');
  assert.equal(m.requests, 3);
  assert.equal(srv.stats.log[1][2], 0);
  assert.equal(srv.stats.log[1][3], 65536, 'the shard\'s first request: its prefix and the first tensors');
  await m.load('t.12');
  assert.equal(m.requests, 3, 'within the bytes already fetched');
  await m.load('t.18');
  assert.equal(m.requests, 4, 'the shard is opened once');
  const locals = new Map(shardsOf(big).map((n) => [n, kiln.parseModel(big.files.get(n), { verify: true })]));
  for (const t of m) {
    const got = await m.load(t.name);
    const local = locals.get(m.shardOf(t.name).name).tensors.get(t.name);
    assert.deepEqual([...got.bytes()], [...local.bytes()], t.name);
    assert.equal(got.byteOffset, local.byteOffset);
  }
  const q = m.get('q');
  assert.deepEqual([...kiln.dequantize(q)], [...kiln.dequantize(locals.get(shardsOf(big)[0]).tensors.get('q'))]);
  assert.deepEqual([...m.get('mask').view()], [1, 0, 1]);
  const total = [...big.files.values()].reduce((a, b) => a + b.length, 0);
  // Every byte once, but a tensor cut by the end of a shard's first request is fetched again whole.
  assert.ok(m.bytesFetched <= total + 3 * 16384, `${m.bytesFetched} of ${total}`);
  // One request per shard prefix and at most one per tensor.
  assert.ok(m.requests <= 1 + 3 + 36, `${m.requests}`);
  // loadTensor: manifest, shard prefix, tensor.
  srv.reset();
  const t = await kiln.loadTensor(url, 't.29');
  assert.deepEqual([...t.bytes()], [...locals.get(shardsOf(big)[2]).tensors.get('t.29').bytes()]);
  assert.equal(srv.stats.requests, 3);
});

test('a manifest longer than the first request takes two; a small shard comes whole with its prefix', async () => {
  const url = serve('two', small);
  srv.reset();
  const m = await kiln.openRemote(url, { firstRequestBytes: 64 });
  assert.equal(m.requests, 2);
  assert.deepEqual(srv.stats.log.map((e) => e[2]), [0, 64]);
  await m.load('t.0');
  await m.load('q');
  assert.equal(m.requests, 3, 'shard 1 in one request: prefix and payloads');
});

test('tampering is rejected with the shard named', async () => {
  const names = shardsOf(big);
  // A flipped payload byte passes every structural rule: DIGEST on load, naming the file.
  const s2 = kiln.parseModel(big.files.get(names[1]));
  const t = s2.tensors.get('t.15');
  let url = serve('flip', big, (f) => {
    f.get(names[1])[t.byteOffset + 5] ^= 0x10;
  });
  const m = await kiln.openRemote(url);
  await m.load('t.14');
  let e = await rejection(m.load('t.15'));
  assert.deepEqual([e.code, e.rule, e.offset, e.file, e.shard], ['DIGEST', 'PayloadDigest', t.byteOffset, names[1], 2]);
  assert.match(e.message, new RegExp(`^${names[1]}: DIGEST`));
  assert.equal(m.isLoaded('t.15'), false);
  // A missing shard (404).
  url = serve('missing', big, (f) => f.delete(names[2]));
  e = await rejection(kiln.loadTensor(url, 't.25'));
  assert.deepEqual([e.code, e.rule, e.offset, e.file], ['SHARD', 'ShardMissing', 0, names[2]]);
  // A shard cut by one byte.
  const n = big.files.get(names[0]).length;
  url = serve('cut', big, (f) => f.set(names[0], f.get(names[0]).subarray(0, n - 1)));
  e = await rejection(kiln.loadTensor(url, 'q'));
  assert.deepEqual([e.code, e.rule, e.offset, e.file], ['SHARD', 'ShardLength', n - 1, names[0]]);
  // Two shards swapped (of one length): the position is wrong.
  assert.equal(big.files.get(names[1]).length, big.files.get(names[2]).length);
  url = serve('swap', big, (f) => {
    const a = f.get(names[1]);
    f.set(names[1], f.get(names[2]));
    f.set(names[2], a);
  });
  const s3 = kiln.parseModel(big.files.get(names[2]));
  e = await rejection(kiln.loadTensor(url, 't.12'));
  assert.deepEqual([e.code, e.rule, e.file], ['SHARD', 'ShardIndex', names[1]]);
  assert.equal(s3.shard.index, 3);
  // A shard of another model (same names and lengths, other values).
  url = serve('other', big, (f) => f.set(names[0], other.files.get(names[0]).slice()));
  const o = kiln.parseModel(other.files.get(names[0]));
  assert.notEqual(o.shard.model, kiln.parseModel(big.files.get(names[0])).shard.model);
  e = await rejection(kiln.loadTensor(url, 't.0'));
  assert.deepEqual([e.code, e.rule, e.file], ['SHARD', 'ShardModel', names[0]]);
  // The other shards still load.
  const ok = await kiln.openRemote(url);
  await ok.load('t.29');
  e = await rejection(ok.load('t.1'));
  assert.equal(e.rule, 'ShardModel');
  e = await rejection(ok.load('t.2'));
  assert.equal(e.file, names[0], 'a shard that failed keeps failing, named');
});

test('parseModel checks digests with { verify: true } only, as the core does', () => {
  const name = shardsOf(big)[1];
  const good = big.files.get(name);
  const plain = kiln.parseModel(good);
  assert.deepEqual([plain.kind, plain.hasDigests, plain.verified], ['shard', true, false]);
  assert.deepEqual([plain.shard.index, plain.shard.count], [2, 3]);
  assert.equal(kiln.parseModel(good, { verify: true }).verified, true);
  // The Directory's flag (docs/verification.md's cell for each call): hashed, or not.
  assert.deepEqual([plain.digestsVerified, plain.tensors.digestsVerified, kiln.parseDirectory(good).digestsVerified], [false, false, false]);
  const v = kiln.parseModel(good, { verify: true });
  assert.deepEqual([v.digestsVerified, v.tensors.digestsVerified], [true, true]);
  const t = plain.tensors.get('t.19');
  const bad = good.slice();
  bad[t.byteOffset + t.byteLength - 1] ^= 1;
  assert.equal(verdict(() => kiln.parseModel(bad)), 'accept', 'without verify no payload byte is read');
  assert.equal(verdict(() => kiln.parseModel(bad, { verify: true })), `DIGEST ${t.byteOffset} PayloadDigest`);
  // A manifest is not a model file.
  assert.equal(verdict(() => kiln.parseModel(big.files.get(big.manifest))), 'SCHEMA 8 SchemaHash');
  assert.equal(kiln.isModelFile(big.files.get(big.manifest)), false);
  assert.equal(kiln.isModelFile(good), true);
});

function feed(bytes, chunk, options = {}) {
  const loader = new kiln.DirectoryLoader(options);
  for (let at = 0; at < bytes.length; at += chunk) loader.push(bytes.subarray(at, at + chunk));
  return loader.end();
}

test('the DirectoryLoader hashes as bytes stream: its verdict equals parseModel({verify: true}) in every chunking', () => {
  const good = big.files.get(shardsOf(big)[0]);
  const m = kiln.parseModel(good);
  const cases = [['good', good]];
  for (const name of ['q', 'mask', 't.0', 't.5', 't.9']) {
    const t = m.tensors.get(name);
    for (const at of [t.byteOffset, t.byteOffset + t.byteLength - 1]) {
      const b = good.slice();
      b[at] ^= 0x02;
      cases.push([`${name}@${at}`, b]);
    }
  }
  // A payload fault of step 10 after a digest fault: DIGEST wins.
  const b = good.slice();
  b[m.tensors.get('t.0').byteOffset] ^= 1;
  b[good.length - 1] = 0;
  b[m.tensors.get('t.9').byteOffset - 1] = 7; // a gap byte, if there is a gap; else a payload byte
  cases.push(['digest then gap', b]);
  cases.push(['cut', good.subarray(0, good.length - 3)]);
  let digests = 0;
  for (const [what, bytes] of cases) {
    const want = verdict(() => kiln.parseModel(bytes, { verify: true }));
    const unverified = verdict(() => kiln.parseModel(bytes));
    if (want.startsWith('DIGEST')) digests += 1;
    for (const chunk of [1, 7, 64, 1000, 4096, 65536, bytes.length]) {
      assert.equal(verdict(() => feed(bytes, chunk)), want, `${what}, chunks of ${chunk}`);
      assert.equal(verdict(() => feed(bytes, chunk, { verifyDigests: false })), unverified, `${what}, unverified, chunks of ${chunk}`);
    }
  }
  assert.ok(digests >= 10, `${digests}`);
});

test('a DIGEST fault is thrown by the push that holds the tensor\'s last byte', () => {
  const good = big.files.get(shardsOf(big)[2]);
  const t = kiln.parseModel(good).tensors.get('t.22');
  const bad = good.slice();
  bad[t.byteOffset] ^= 1;
  const loader = new kiln.DirectoryLoader();
  const end = t.byteOffset + t.byteLength;
  loader.push(bad.subarray(0, end - 1));
  assert.throws(() => loader.push(bad.subarray(end - 1, end)), (e) => e.code === 'DIGEST' && e.offset === t.byteOffset);
});

test('loadDirectory of a shard says which model and position; of a manifest, SCHEMA', async () => {
  const url = serve('stream', big);
  const name = shardsOf(big)[1];
  const d = await kiln.loadDirectory(`${srv.base}/stream/${name}`);
  assert.equal(d.length, 10);
  await assert.rejects(kiln.loadDirectory(url), (e) => e instanceof kiln.KilnError && e.code === 'SCHEMA');
});

test('openRemote of one model file with digests checks a tensor\'s digest on load', async () => {
  const name = shardsOf(big)[2];
  const t = kiln.parseModel(big.files.get(name)).tensors.get('t.27');
  const url = serve('one', big, (f) => {
    f.get(name)[t.byteOffset + 1] ^= 4;
  });
  const r = await kiln.openRemote(`${url.slice(0, url.lastIndexOf('/'))}/${name}`);
  assert.equal(r.sharded, false);
  await r.load('t.26');
  const e = await rejection(r.load('t.27'));
  assert.deepEqual([e.code, e.offset, e.file], ['DIGEST', t.byteOffset, undefined]);
});

test('kiln-wasm/slim: openRemote of a sharded model instantiates the full module beside open when it meets the manifest', async () => {
  const url = serve('slim', small);
  const want = await kiln.openRemote(url);
  const wantBias = [...(await want.load('t.1')).viewAs('f32')];
  const program = `
    import * as kiln from ${JSON.stringify(new URL('../pkg/slim.js', import.meta.url).href)};
    import { readFileSync } from 'node:fs';
    await kiln.init({ wasm: readFileSync(new URL(${JSON.stringify(new URL('../pkg/wasm/kiln_wasm_bg.wasm', import.meta.url).href)})) });
    let frozen;
    try { kiln.decodeValue(Uint8Array.of(7, 0, 0, 0), 'u32'); } catch (e) { frozen = e.message; }
    const m = await kiln.openRemote(process.argv[1]);
    const t = await m.load('t.1');
    // The Frozen part came with it (the same module instance).
    console.log(JSON.stringify([m.length, [...t.viewAs('f32')], /frozen/.test(frozen), kiln.decodeValue(Uint8Array.of(7, 0, 0, 0), 'u32')]));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', program, url], { encoding: 'utf8' });
  const [n, bias, refused, v] = JSON.parse(stdout);
  assert.deepEqual([n, bias, refused, v], [want.length, wantBias, true, 7]);
});

test('open(source): the call made for each kind of source, and its digest policy', async () => {
  const name = shardsOf(big)[1];
  const good = big.files.get(name);
  const t = kiln.parseModel(good).tensors.get('t.19');
  const bad = good.slice();
  bad[t.byteOffset + t.byteLength - 1] ^= 1;
  const digestFault = `DIGEST ${t.byteOffset} PayloadDigest`;
  const names = (dir) => [...dir].map((x) => x.name);
  const fails = async (p) => {
    try {
      await p;
      return 'accept';
    } catch (e) {
      if (!(e instanceof kiln.KilnError)) throw e;
      return `${e.code} ${e.offset} ${e.rule}`;
    }
  };
  // Bytes: parseModel, a view over them; digests with { verify: true } only.
  const m = await kiln.open(good);
  const want = kiln.parseModel(good);
  assert.deepEqual([m.kind, m.hasDigests, m.verified, names(m.tensors)], [want.kind, want.hasDigests, want.verified, names(want.tensors)]);
  assert.equal(m.tensors.get('t.19').bytes().buffer, good.buffer, 'a view over the caller\'s buffer');
  assert.equal(await fails(kiln.open(bad)), 'accept');
  assert.equal(await fails(kiln.open(bad, { verify: true })), digestFault);
  assert.equal(await fails(kiln.open(bad.buffer, { verify: true })), digestFault, 'an ArrayBuffer too');
  // A Blob, a Response, a stream: loadDirectory, every byte read, so digests by default.
  const loaded = await kiln.open(new Blob([good]));
  assert.deepEqual(names(loaded), names(await kiln.loadDirectory(new Blob([good]))));
  assert.deepEqual(names(await kiln.open(new Response(good))), names(loaded));
  assert.deepEqual(names(await kiln.open(new Blob([good]).stream())), names(loaded));
  assert.equal(await fails(kiln.open(new Blob([bad]))), digestFault);
  assert.equal(await fails(kiln.open(new Response(bad))), digestFault);
  assert.equal(await fails(kiln.open(new Blob([bad]), { verifyDigests: false })), 'accept');
  assert.equal(loaded.digestsVerified, true, 'loadDirectory hashed every payload');
  assert.equal((await kiln.open(new Blob([good]), { verifyDigests: false })).digestsVerified, false);
  const loader = new kiln.DirectoryLoader();
  loader.push(good);
  assert.equal(loader.end().digestsVerified, true);
  // A URL: openRemote (a manifest opens the sharded model; each load checks its digest).
  const url = serve('open', big);
  const remote = await kiln.open(url);
  const direct = await kiln.openRemote(url);
  assert.deepEqual([remote.constructor.name, remote.length], [direct.constructor.name, direct.length]);
  assert.deepEqual([...(await remote.load('t.19')).viewAs('f32')], [...(await direct.load('t.19')).viewAs('f32')]);
  const flipped = serve('open-flip', big, (f) => f.set(name, bad));
  assert.match(await fails((await kiln.open(new URL(flipped))).load('t.19')), /^DIGEST \d+ PayloadDigest$/);
  await assert.rejects(kiln.open(42), /TypeError: kiln-wasm: open expects a URL, an ArrayBuffer/);
});
