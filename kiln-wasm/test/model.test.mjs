// Model files (spec/model-file.md) through every reader of the package:
// parseModel, parseDirectory, DirectoryLoader / loadDirectory and openRemote
// open them and plain directories alike, by content, with the metadata's
// padding key hidden; every verdict is the core's (decodeFrame of the model
// record, which runs kiln_nostd's Frozen reader on the whole file, or the
// core's Parser for a plain directory), through every reader.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as kiln from '../pkg/index.js';
import { check_direct } from '../test-support/testing.mjs';
import { example } from '../test-support/goldens.mjs';
import { encodeKiln, le } from '../test-support/encode.mjs';
import { MODEL_TYPE, PAD_KEY, exampleModel, modelFile, modelHead } from '../test-support/model.mjs';
import { rangeServer } from '../test-support/range-server.mjs';

let srv;
before(async () => {
  srv = await rangeServer();
});
after(() => srv.close());

// The example model file's metadata (spec/examples/README.md); the padding key is between description and license.
const META = [
  ['description', '8x8 handwritten digits: a 64-32-10 MLP, an MXFP4 copy of fc1, 32 labelled samples'],
  ['license', 'MIT OR Apache-2.0'],
  ['source', 'spec/examples/make_digits_model.py'],
];

test('parseModel opens the example model file: its metadata without the padding key, the same tensors as the plain file', () => {
  const bytes = exampleModel();
  const m = kiln.parseModel(bytes);
  assert.equal(m.isModelFile, true);
  assert.ok(m.metadata instanceof Map);
  assert.deepEqual([...m.metadata], META);
  assert.equal(m.metadata.has(PAD_KEY), false);
  assert.ok(bytes.includes(0x20), 'the file has its padding spaces');
  const plain = kiln.parseDirectory(example());
  assert.deepEqual(m.tensors.names(), plain.names());
  for (const t of m.tensors) {
    const p = plain.get(t.name);
    assert.equal(t.dtype, p.dtype);
    assert.deepEqual(t.shape, p.shape);
    assert.deepEqual([...t.bytes()], [...p.bytes()]);
    assert.equal(t.byteOffset, m.tensors.byteOffset + (p.byteOffset - plain.byteOffset));
    assert.ok(t.isView, `${t.name}: the converter aligned the payload in the file`);
    assert.equal(t.view().buffer, bytes.buffer);
  }
  assert.equal(m.tensors.payloadOffset % 4096, 0, 'payloads start at a 4 KiB offset of the file');
  assert.equal(m.tensors.byteOffset + m.tensors.byteLength, bytes.length);
  assert.equal(m.tensors.metadata, m.metadata);
  // parseDirectory opens it too, by content; a plain directory has no metadata.
  const d = kiln.parseDirectory(bytes);
  assert.deepEqual([...d.metadata.keys()], ['description', 'license', 'source']);
  assert.equal(plain.metadata, null);
  assert.equal(plain.byteOffset, 0);
  const p = kiln.parseModel(example());
  assert.equal(p.isModelFile, false);
  assert.equal(p.metadata.size, 0);
  assert.equal(p.tensors.length, 8);
  assert.equal(kiln.isModelFile(bytes), true);
  assert.equal(kiln.isModelFile(example()), false);
  assert.equal(kiln.isModelFile(bytes.subarray(0, 15)), false);
  assert.throws(() => Object.assign(m, { metadata: null }), TypeError, 'the result is frozen');
  const viewed = kiln.parseModel(bytes).tensors.get('fc1.weight').viewAs('f32');
  assert.equal(viewed.constructor, Float32Array);
  assert.deepEqual(JSON.parse(JSON.stringify(d)).metadata.license, m.metadata.get('license'));
});

test('metadata: key order, non-ASCII text, empty metadata, the padding key anywhere in the order', () => {
  const block = encodeKiln([{ name: 'w', dtype: 'f32', shape: [2], data: le(Float32Array.of(1.5, -2)) }]);
  const entries = [['zeta', 'last'], ['', 'empty key'], ['ünï', 'cödé ✓'], ['a', ''], ['\ufeffbom', 'kept']];
  const payloadBase = kiln.parseDirectory(block).payloadOffset;
  for (const align of [0, 64, 4096]) {
    const f = modelFile(entries, block, { align, payloadBase });
    const m = kiln.parseModel(f);
    assert.deepEqual([...m.metadata], [['', 'empty key'], ['a', ''], ['zeta', 'last'], ['ünï', 'cödé ✓'], ['\ufeffbom', 'kept']]);
    if (align) assert.equal(m.tensors.payloadOffset % align, 0);
    assert.deepEqual([...m.tensors.get('w').viewAs('f32')], [1.5, -2]);
  }
  const none = kiln.parseModel(modelFile([], block));
  assert.equal(none.isModelFile, true);
  assert.equal(none.metadata.size, 0);
});

test('errors carry the core\'s code, rule and offset in the file', () => {
  const block = encodeKiln([{ name: 'w', dtype: 'f32', shape: [2], data: le(Float32Array.of(1, 2)) }]);
  const good = modelFile([['a', 'x'], ['b', 'y']], block);
  const start = kiln.parseDirectory(good).byteOffset;
  const cases = [
    ['profile', (b) => { b[4] = 1; }, { code: 'FRAME', rule: 'FrameProfile', offset: 4 }],
    ['key order', (b) => { b[24] = 'c'.charCodeAt(0); }, { code: 'TYPE', rule: 'DictKeyOrder', offset: 30 }],
    ['UTF-8', (b) => { b[29] = 0xff; }, { code: 'UTF8', rule: 'StrUtf8', offset: 29 }],
    ['count', (b) => { b[16] = 200; }, { code: 'EOF', rule: 'CountPastEnd', offset: 16 }],
    ['string length', (b) => { b[21] = 0x10; }, { code: 'EOF', rule: 'ByteLengthPastEnd', offset: 20 }],
    ['block magic', (b) => { b[start] = 0; }, { code: 'FRAME', rule: 'DirectoryMagic', offset: start }],
    ['descriptor', (b) => { b[start + 64 + 48] = 3; }, { code: 'TYPE', rule: 'LengthMismatch', offset: start + 104 }],
  ];
  for (const [what, edit, want] of cases) {
    const b = good.slice();
    edit(b);
    assert.throws(() => kiln.parseModel(b), want, what);
    assert.throws(() => kiln.decodeFrame(b, MODEL_TYPE), want, `${what}: the core's Frozen reader agrees`);
  }
  const long = new Uint8Array(good.length + 3);
  long.set(good);
  assert.throws(() => kiln.parseModel(long), { code: 'TRAILING', rule: 'TrailingBytes', offset: good.length });
  assert.throws(() => kiln.parseModel(good.subarray(0, 25)), { code: 'EOF', rule: 'CountPastEnd', offset: 16 });
  assert.throws(() => kiln.parseModel(good.subarray(0, start + 10)), { code: 'EOF', rule: 'HeaderTruncated', offset: start + 10 });
  // Caps apply to the metadata as to the directory.
  assert.throws(() => kiln.parseModel(good, { countCap: 1 }), { code: 'LIMIT', rule: 'CountCap', offset: 16 });
  assert.throws(() => kiln.parseModel(good, { byteCap: 0 }), { code: 'LIMIT', rule: 'ByteLengthCap', offset: 20 });
});

// The verdict of every reader on `bytes`: parseDirectory, a DirectoryLoader in `chunk`-byte pushes, openRemote.
function verdictOf(f) {
  try {
    const d = f();
    return ['accept', d.length, d.byteOffset, d.metadata && [...d.metadata]];
  } catch (e) {
    if (!(e instanceof kiln.KilnError)) throw e;
    return [e.code, e.offset, e.rule];
  }
}

// The core's verdict: model files of every record kind (the example model
// carries digests) and plain directories, as kiln_nostd::model::parse_any opens them.
// `verified`: every digest compared too (the core's Model::parse_verified, through parseModel's
// `verify`), the verdict of a reader that hashes as bytes stream.
function core(bytes, verified = false) {
  if (verified && kiln.isModelFile(bytes)) {
    const v = verdictOf(() => kiln.parseModel(bytes, { verify: true }).tensors);
    return v[0] === 'accept' ? 'accept' : v;
  }
  const r = check_direct(bytes, kiln.DEFAULT_CAP, kiln.DEFAULT_CAP);
  if (r === undefined) return 'accept';
  const [code, offset, rule] = r;
  return [code, Number(offset), rule];
}

test('mutations of model files: every reader gives the core\'s verdict', async () => {
  let seed = 0x9e3779b9;
  const rnd = (n) => {
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed % Math.max(1, n);
  };
  const block = encodeKiln([
    { name: 'w', dtype: 'f32', shape: [3], data: le(Float32Array.of(1, -2, 3)) },
    { name: 'mask', dtype: 'bool', shape: [5], data: Uint8Array.of(1, 0, 1, 1, 0) },
    { name: 'nib', dtype: 'u4', shape: [3], data: Uint8Array.of(0x21, 0x03) },
  ]);
  const bases = [exampleModel(), modelFile([['a', 'x'], ['b', 'yy'], ['c', 'ü']], block), modelFile([['k', 'v']], block, { align: 256, payloadBase: 512 })];
  const seen = new Map();
  let n = 0;
  for (const base of bases) {
    const headEnd = kiln.parseDirectory(base).byteOffset;
    for (let round = 0; round < 250; round++) {
      let b = base.slice();
      for (let k = 1 + rnd(2); k > 0; k--) {
        const what = rnd(8);
        if (what < 3) b[rnd(Math.min(b.length, headEnd + 200))] = [0, 1, 0xff, 0x80, rnd(256)][rnd(5)];
        else if (what === 3 && b.length) b[rnd(b.length)] = rnd(256);
        else if (what === 4) b = b.slice(0, rnd(b.length + 1));
        else if (what === 5) b = b.slice(0, rnd(Math.min(b.length, headEnd + 100) + 1));
        else if (what === 6) { const e = new Uint8Array(b.length + 1 + rnd(5)); e.set(b); b = e; }
        else if (b.length > headEnd + 64) b[headEnd + [8, 12, 16, 24, 64, 104][rnd(6)] + rnd(4)] = rnd(256);
      }
      const want = core(b);
      const parsed = verdictOf(() => kiln.parseDirectory(b));
      const cmp = (v) => (v[0] === 'accept' ? 'accept' : v);
      assert.deepEqual(cmp(parsed), want, `parseDirectory, round ${round}`);
      // The loader hashes each payload as it streams (a digests record's), so its verdict is the verified one.
      const wantVerified = core(b, true);
      for (const chunk of [1, 7, 4096]) {
        // With the length known, early verdicts are exact; without it, a fault is the verdict for the
        // file as declared (a shorter stream would be EOF), so only acceptance is compared.
        for (const totalLength of [b.length, undefined]) {
          const loader = new kiln.DirectoryLoader({ totalLength });
          const got = verdictOf(() => {
            for (let at = 0; at < b.length; at += chunk) loader.push(b.subarray(at, at + chunk));
            return loader.end();
          });
          if (totalLength !== undefined) {
            assert.deepEqual(wantVerified === 'accept' ? got : cmp(got), wantVerified === 'accept' ? parsed : wantVerified,
              `DirectoryLoader, ${chunk}-byte chunks, round ${round}`);
          }
          else assert.equal(got[0] === 'accept', wantVerified === 'accept', `DirectoryLoader without totalLength, ${chunk}-byte chunks, round ${round}`);
        }
      }
      srv.files.set('/m.kiln', b);
      const remote = await kiln.openRemote(`${srv.base}/m.kiln`).then((d) => verdictOf(() => d), (e) => verdictOf(() => { throw e; }));
      assert.deepEqual(remote, parsed, `openRemote (the whole file in its first request), round ${round}`);
      const key = parsed[0] === 'accept' ? 'accept' : parsed[2];
      seen.set(key, (seen.get(key) ?? 0) + 1);
      if (wantVerified !== 'accept' && wantVerified[2] === 'PayloadDigest') seen.set('PayloadDigest', (seen.get('PayloadDigest') ?? 0) + 1);
      n++;
    }
  }
  console.log(`# ${n} mutated model files through 5 readers: ${JSON.stringify(Object.fromEntries(seen))}`);
  for (const rule of ['accept', 'DictKeyOrder', 'StrUtf8', 'ByteLengthPastEnd', 'CountPastEnd', 'TrailingBytes', 'DirectoryMagic', 'PayloadDigest']) {
    assert.ok(seen.has(rule), `${rule} reached`);
  }
});

test('DirectoryLoader: a model file\'s metadata comes with the tensor table, before the payload', () => {
  const bytes = exampleModel();
  const seen = [];
  const loader = new kiln.DirectoryLoader({
    onDirectory: (d) => seen.push([d.length, [...d.metadata], loader.totalBytes, loader.receivedBytes]),
  });
  const payload = kiln.parseDirectory(bytes).payloadOffset;
  for (let at = 0; at < bytes.length; at += 100) loader.push(bytes.subarray(at, at + 100));
  assert.equal(seen.length, 1);
  assert.deepEqual(seen[0].slice(0, 3), [8, META, bytes.length]);
  assert.ok(seen[0][3] < payload + 100, `the table came at ${seen[0][3]} bytes, the payload starts at ${payload}`);
  const d = loader.end();
  assert.equal(d.metadata.get('license'), 'MIT OR Apache-2.0');
  assert.ok(d.get('fc1.weight').isView);
  // A damaged metadata is rejected as soon as it is certain, before the block.
  const bad = bytes.slice();
  bad[4] = 9;
  const l2 = new kiln.DirectoryLoader();
  assert.throws(() => l2.push(bad.subarray(0, 16)), { code: 'FRAME', offset: 4 });
});

test('loadDirectory and openRemote open the example model file (one request for the directory, none more for its tensors)', async () => {
  srv.files.set('/model.kiln', exampleModel());
  const d = await kiln.loadDirectory(`${srv.base}/model.kiln`);
  assert.deepEqual([...d.metadata], META);
  srv.reset();
  const remote = await kiln.openRemote(`${srv.base}/model.kiln`);
  assert.equal(remote.requests, 1);
  assert.deepEqual([...remote.metadata.keys()], ['description', 'license', 'source']);
  const w = await remote.load('fc1.weight');
  assert.equal(remote.requests, 1);
  assert.ok(w.isView);
  const local = kiln.parseModel(exampleModel()).tensors;
  assert.deepEqual([...w.viewAs('f32')], [...local.get('fc1.weight').viewAs('f32')]);
  // A first request that holds the metadata and the block's header but not the whole directory:
  // the rest of the directory, then each tensor with its gap (offsets shifted by the metadata).
  srv.reset();
  const small = await kiln.openRemote(`${srv.base}/model.kiln`, { firstRequestBytes: 3000 });
  assert.equal(small.requests, 2);
  const t = await small.load('fc2.bias');
  assert.equal(small.requests, 3, JSON.stringify(srv.stats.log));
  assert.deepEqual([...t.viewAs('f32')], [...local.get('fc2.bias').viewAs('f32')]);
  assert.ok(t.isView, 'fetched into a buffer where the payload is aligned');
  const q = await small.load('fc1.weight.mxfp4');
  assert.deepEqual([...kiln.dequantize(q)], [...kiln.dequantize(local.get('fc1.weight.mxfp4'))]);
  const t2 = await kiln.loadTensor(`${srv.base}/model.kiln`, 'samples.y', { firstRequestBytes: 64 });
  assert.deepEqual([...t2.viewAs('u8')], [...local.get('samples.y').viewAs('u8')]);
  // From 64 bytes each step of the metadata is a request (the option trades requests for bytes).
  srv.reset();
  await kiln.openRemote(`${srv.base}/model.kiln`, { firstRequestBytes: 64 });
  console.log(`# the example model file from a first request of 64 bytes: ${srv.stats.requests} requests, ${srv.stats.bytes} bytes`);
});

test('a server that answers with less than the range asked for (at most 1,000 bytes a response)', async () => {
  srv.files.set('/model.kiln', exampleModel());
  const capped = (url, init) => {
    const [, a, b] = /bytes=(\d+)-(\d+)/.exec(init.headers.Range);
    const end = Math.min(Number(b), Number(a) + 999);
    return fetch(url, { ...init, headers: { ...init.headers, Range: `bytes=${a}-${end}` } });
  };
  const remote = await kiln.openRemote(`${srv.base}/model.kiln`, { fetch: capped });
  assert.deepEqual([...remote.metadata], META);
  const local = kiln.parseModel(exampleModel()).tensors;
  assert.deepEqual([...(await remote.load('fc2.bias')).viewAs('f32')], [...local.get('fc2.bias').viewAs('f32')]);
  assert.ok(remote.requests > 3);
});

test('a model file whose metadata is longer than the first request', async () => {
  const block = encodeKiln([{ name: 'w', dtype: 'f32', shape: [4], data: le(Float32Array.of(1, 2, 3, 4)) }]);
  const f = modelFile([['a', 'b'], ['note', 'n'.repeat(200_000)]], block, { align: 4096, payloadBase: 192 });
  srv.files.set('/long.kiln', f);
  srv.reset();
  const remote = await kiln.openRemote(`${srv.base}/long.kiln`);
  assert.equal(remote.requests, 2, 'the first request shows how long the metadata is');
  assert.equal(remote.metadata.get('note').length, 200_000);
  assert.deepEqual([...(await remote.load('w')).viewAs('f32')], [1, 2, 3, 4]);
  assert.equal(remote.requests, 2);
  const loaded = await kiln.loadDirectory(new Blob([f]));
  assert.equal(loaded.metadata.get('a'), 'b');
  assert.equal(kiln.parseModel(f).metadata.get('note').length, 200_000);
  // A head that says more than the file holds: EOF at the file's end, from every reader.
  const cut = f.subarray(0, 100_000);
  srv.files.set('/cut.kiln', cut);
  await assert.rejects(kiln.openRemote(`${srv.base}/cut.kiln`), { code: 'EOF', rule: 'ByteLengthPastEnd' });
  assert.throws(() => kiln.parseModel(cut), { code: 'EOF', rule: 'ByteLengthPastEnd' });
  void modelHead;
});
