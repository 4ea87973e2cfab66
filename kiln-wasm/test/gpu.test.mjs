// WebGPU upload in headless Chromium (--enable-unsafe-webgpu, SwiftShader):
// toGPUBuffer and loadToGPU read back bit-exact for every dtype (odd sizes
// padded to 4), a corrupt payload byte (digest), a bad gap byte and a bad
// bool byte reject and destroy the buffer, and a tensor above maxBufferSize
// gives the documented error. Skipped with the reason when Chromium,
// playwright-core or WebGPU is missing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FLAGS, WEBGPU, chromium, chromiumSkip, executablePath, pkgRoute } from '../test-support/chromium.mjs';
import { rangeServer } from '../test-support/range-server.mjs';
import { CODES, byteLengthOf, encodeKiln } from '../test-support/encode.mjs';
import { exampleModel } from '../test-support/model.mjs';
import { writeSharded } from '../test-support/sharded.mjs';

let skip = chromiumSkip;
let server;
let ctx;
let page;
let profile;

// Every closed dtype, odd element counts (sizes not multiples of 4), deterministic bytes.
const SPECS = Object.keys(CODES).map((dtype, k) => {
  const shape = [3 + 2 * k];
  const len = byteLengthOf(CODES[dtype], shape);
  const data = Uint8Array.from({ length: len }, (_, i) => (i * 37 + k * 11 + 1) & 0xff);
  if (dtype === 'bool') data.forEach((_, i) => (data[i] = i & 1));
  if (dtype === 'i4' || dtype === 'u4' || dtype === 'e2m1') data[len - 1] &= 0x0f; // odd count: the pad nibble is 0
  return { name: `t_${dtype}`, dtype, shape, data };
});
const block = encodeKiln(SPECS);

before(async () => {
  if (skip) return;
  server = await rangeServer({ routes: pkgRoute('kiln-wasm gpu') });
  server.files.set('/all.kiln', block);
  server.files.set('/model.kiln', exampleModel());
  profile = mkdtempSync(join(tmpdir(), 'chromium-gpu-'));
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [...FLAGS, WEBGPU],
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  await page.goto(`${server.base}/index.html`);
  const why = await page.evaluate(async () => {
    if (!navigator.gpu) return 'navigator.gpu is missing';
    const a = await navigator.gpu.requestAdapter();
    return a ? '' : 'no WebGPU adapter';
  });
  if (why) {
    console.log(`# gpu.test.mjs skipped: ${why}`);
    skip = why;
  }
});

after(async () => {
  await ctx?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

// In the page: a device whose createBuffer records destroy calls, and a read-back helper.
const SETUP = `
  const kiln = await import('./index.js');
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const destroyed = new Set();
  const made = [];
  const create = device.createBuffer.bind(device);
  device.createBuffer = (d) => { const b = create(d); made.push(b); const x = b.destroy.bind(b); b.destroy = () => { destroyed.add(b.label); x(); }; return b; };
  async function readBack(buf) {
    const r = create({ size: buf.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(buf, 0, r, 0, buf.size);
    device.queue.submit([enc.finish()]);
    await r.mapAsync(GPUMapMode.READ);
    const out = Array.from(new Uint8Array(r.getMappedRange()));
    r.unmap(); r.destroy();
    return out;
  }
  const hex = (a) => a.map((x) => x.toString(16).padStart(2, '0')).join('');
  const verdict = async (f) => { try { await f(); return 'accept'; } catch (e) { return e instanceof kiln.KilnError ? e.code + ' ' + e.offset + ' ' + e.rule : 'other ' + e.message; } };
`;
const run = (body, arg = {}) => page.evaluate(new Function('arg', `return (async () => { const limit = arg.limit; ${SETUP} ${body} })();`), arg);

const padded = (d) => {
  const n = Math.max(4, Math.ceil(d.length / 4) * 4);
  const out = new Uint8Array(n);
  out.set(d);
  return Array.from(out, (x) => x.toString(16).padStart(2, '0')).join('');
};

test('every dtype: toGPUBuffer and loadToGPU read back bit-exact, padded to 4 with zeros', { skip }, async () => {
  const out = await run(`
    const r = await kiln.openRemote(location.origin + '/all.kiln');
    const calls = [];
    const bufs = await r.loadToGPU(device, null, { onProgress: (a, b, i) => calls.push([a, b, i.tensor, i.source]) });
    const res = {};
    for (const [name, b] of bufs) res[name] = { size: b.size, label: b.label, usage: b.usage, stream: hex(await readBack(b)) };
    // Payloads over the network, chunk by chunk (a first request of 64 bytes holds none of them).
    const r64 = await kiln.openRemote(location.origin + '/all.kiln', { firstRequestBytes: 64 });
    for (const [name, b] of await r64.loadToGPU(device, [...r64.names()])) res[name].net = hex(await readBack(b));
    for (const name of bufs.keys()) {
      await r.load(name);
      const b = kiln.toGPUBuffer(device, r.get(name));
      res[name].direct = hex(await readBack(b));
      res[name].directSize = b.size;
    }
    return { res, last: calls.at(-1), n: calls.length, destroyed: destroyed.size };
  `);
  for (const s of SPECS) {
    const r = out.res[s.name];
    assert.ok(r, s.name);
    assert.equal(r.stream, padded(s.data), `${s.name} via loadToGPU`);
    assert.equal(r.net, padded(s.data), `${s.name} via loadToGPU, over the network`);
    assert.equal(r.direct, padded(s.data), `${s.name} via toGPUBuffer`);
    assert.equal(r.size, Math.max(4, Math.ceil(s.data.length / 4) * 4));
    assert.equal(r.label, s.name);
    assert.equal(r.usage, 0x80 | 0x04 | 0x08);
  }
  assert.equal(out.last[0], out.last[1], 'a final progress call with received === total');
  assert.equal(out.last[3], 'network');
  assert.equal(out.destroyed, 0);
});

test('a model file with digests: loadToGPU matches load(); a corrupt payload byte is DIGEST and the buffer is destroyed', { skip }, async () => {
  const model = exampleModel();
  const good = await run(`
    const r = await kiln.openRemote(location.origin + '/model.kiln', { firstRequestBytes: 64 });
    const bufs = await r.loadToGPU(device);
    const same = [];
    for (const [name, b] of bufs) { await r.load(name); same.push(hex(await readBack(b)).startsWith(hex(Array.from(r.get(name).bytes())))); }
    const last = r.at(r.length - 1);
    return { same, n: r.length, offset: last.byteOffset, name: last.name };
  `);
  assert.equal(good.same.length, good.n);
  assert.ok(good.same.every(Boolean));
  const bad = model.slice();
  bad[good.offset + 1] ^= 0x40;
  server.files.set('/bad-digest.kiln', bad);
  const out = await run(`
    const r = await kiln.openRemote(location.origin + '/bad-digest.kiln', { firstRequestBytes: 64 });
    const v = await verdict(() => r.loadToGPU(device, arg.name));
    const l = await verdict(() => r.load(arg.name));
    return { v, l, destroyed: [...destroyed] };
  `, { name: good.name });
  assert.match(out.v, /^DIGEST \d+ PayloadDigest$/);
  assert.equal(out.v, out.l, 'the verdict load() gives');
  assert.deepEqual(out.destroyed, [good.name]);
});

test('a bad gap byte and a bad bool byte reject with load()\'s verdict, the buffer destroyed', { skip }, async () => {
  const info = await run(`
    const r = await kiln.openRemote(location.origin + '/all.kiln');
    const b = r.get('t_bool'); const n = r.get('t_i8');
    return { bool: b.byteOffset, gap: b.byteOffset + b.byteLength };
  `);
  const badBool = block.slice();
  badBool[info.bool + 2] = 2;
  const badGap = block.slice();
  badGap[info.gap] = 7; // the gap after t_bool, before t_i8
  server.files.set('/bad-bool.kiln', badBool);
  server.files.set('/bad-gap.kiln', badGap);
  const out = await run(`
    const res = {};
    for (const [f, name] of [['bad-bool', 't_bool'], ['bad-gap', 't_i8']]) {
      // A first request of 64 bytes: the payloads are not fetched at open.
      const r = await kiln.openRemote(location.origin + '/' + f + '.kiln', { firstRequestBytes: 64 });
      const r2 = await kiln.openRemote(location.origin + '/' + f + '.kiln', { firstRequestBytes: 64 });
      res[f] = { gpu: await verdict(() => r.loadToGPU(device, [name])), load: await verdict(() => r2.load(name)) };
    }
    return { res, destroyed: [...destroyed].sort() };
  `);
  assert.match(out.res['bad-bool'].gpu, /^TYPE \d+ BoolByte$|BoolByte/);
  assert.equal(out.res['bad-bool'].gpu, out.res['bad-bool'].load);
  assert.match(out.res['bad-gap'].gpu, /NonzeroGap/);
  assert.equal(out.res['bad-gap'].gpu, out.res['bad-gap'].load);
  assert.deepEqual(out.destroyed, ['t_bool', 't_i8']);
});

test('a tensor above maxBufferSize: a KilnError with the size, the limit and how to ask for more', { skip }, async () => {
  const huge = encodeKiln([{ name: 'big', dtype: 'u8', shape: [300000] }]);
  server.files.set('/big.kiln', huge);
  const out = await run(`
    const r = await kiln.openRemote(location.origin + '/big.kiln');
    // A device limit below WebGPU's default (requiredLimits cannot lower it): the same device, smaller limits.
    const small = { limits: { maxBufferSize: arg.limit }, createBuffer: (d) => device.createBuffer(d) };
    let m1 = '', m2 = '';
    try { await r.loadToGPU(small, 'big'); } catch (e) { m1 = (e instanceof kiln.KilnError) + ' ' + e.message; }
    await r.load('big');
    try { kiln.toGPUBuffer(small, r.get('big')); } catch (e) { m2 = (e instanceof kiln.KilnError) + ' ' + e.message; }
    return { m1, m2, limit: small.limits.maxBufferSize, made: made.length };
  `, { limit: 262144 });
  assert.equal(out.limit, 262144);
  for (const m of [out.m1, out.m2]) {
    assert.match(m, /^true LIMIT/);
    assert.match(m, /300000 bytes/);
    assert.match(m, /maxBufferSize of 262144 bytes/);
    assert.match(m, /requiredLimits: \{ maxBufferSize: adapter\.limits\.maxBufferSize \}/);
  }
  assert.equal(out.made, 0, 'no buffer created');
});

test('the stream loader: loadDirectoryToGPU reads back bit-exact (fetch body, Blob stream, pushed chunks), names select', { skip }, async () => {
  const out = await run(`
    const url = location.origin + '/all.kiln';
    const res = {};
    const calls = [];
    let table = null;
    const a = await kiln.loadDirectoryToGPU(device, url, null, { onDirectory: (d) => (table = d.names()), onProgress: (g, t, i) => calls.push([g, t, i.tensor, i.source]) });
    for (const [name, b] of a) res[name] = { size: b.size, label: b.label, fetch: hex(await readBack(b)) };
    const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
    for (const [name, b] of await kiln.loadDirectoryToGPU(device, new Blob([bytes]))) res[name].blob = hex(await readBack(b));
    const loader = new kiln.DirectoryLoader({ gpu: { device } });
    for (let at = 0; at < bytes.length; at += 7) loader.push(bytes.subarray(at, at + 7));
    const dir = loader.end();
    for (const [name, b] of loader.gpuBuffers) res[name].push = hex(await readBack(b));
    let pending = '';
    try { dir.get('t_u8').bytes(); } catch (e) { pending = e.message; }
    const before = made.length;
    const some = await kiln.loadDirectoryToGPU(device, url, ['t_f32', 't_bool']);
    return { res, keys: [...a.keys()], table, some: [...some.keys()], madeSome: made.length - before, pending, last: calls.at(-1), destroyed: destroyed.size };
  `);
  assert.deepEqual(out.keys, out.table);
  for (const s of SPECS) {
    const r = out.res[s.name];
    assert.ok(r, s.name);
    assert.equal(r.fetch, padded(s.data), `${s.name} from a fetch body`);
    assert.equal(r.blob, padded(s.data), `${s.name} from a Blob stream`);
    assert.equal(r.push, padded(s.data), `${s.name} pushed in 7-byte chunks`);
    assert.equal(r.size, Math.max(4, Math.ceil(s.data.length / 4) * 4));
    assert.equal(r.label, s.name);
  }
  assert.deepEqual(out.some.sort(), ['t_bool', 't_f32']);
  assert.equal(out.madeSome, 2, 'a buffer only for the tensors asked for');
  assert.match(out.pending, /GPU/);
  assert.equal(out.last[0], out.last[1], 'a final progress call with received === total');
  assert.equal(out.last[3], 'network');
  assert.equal(out.destroyed, 0);
});

test('the stream loader: a corrupt payload byte (digest), a bad gap byte, a bad bool byte reject with loadDirectory\'s verdict; every buffer destroyed', { skip }, async () => {
  const model = exampleModel();
  const info = await run(`
    const m = await kiln.loadDirectory(location.origin + '/model.kiln');
    const r = await kiln.openRemote(location.origin + '/all.kiln');
    const b = r.get('t_bool');
    return { offset: m.at(m.length - 1).byteOffset, n: m.length, names: m.names(), bool: b.byteOffset, gap: b.byteOffset + b.byteLength, all: r.length };
  `);
  const bad = model.slice();
  bad[info.offset + 1] ^= 0x40;
  server.files.set('/bad-digest.kiln', bad);
  const badBool = block.slice();
  badBool[info.bool + 2] = 2;
  const badGap = block.slice();
  badGap[info.gap] = 7;
  server.files.set('/bad-bool.kiln', badBool);
  server.files.set('/bad-gap.kiln', badGap);
  const out = await run(`
    const res = {};
    for (const f of ['bad-digest', 'bad-bool', 'bad-gap']) {
      const url = location.origin + '/' + f + '.kiln';
      const before = made.length;
      destroyed.clear();
      const gpu = await verdict(() => kiln.loadDirectoryToGPU(device, url));
      res[f] = { gpu, cpu: await verdict(() => kiln.loadDirectory(url)), made: made.length - before, destroyed: destroyed.size };
    }
    // The model file without its digests checked: the byte rules only, so it passes.
    res.noVerify = await verdict(() => kiln.loadDirectoryToGPU(device, location.origin + '/bad-digest.kiln', null, { verifyDigests: false }));
    return res;
  `);
  assert.match(out['bad-digest'].gpu, /^DIGEST \d+ PayloadDigest$/);
  assert.match(out['bad-bool'].gpu, /BoolByte/);
  assert.match(out['bad-gap'].gpu, /NonzeroGap/);
  for (const f of ['bad-digest', 'bad-bool', 'bad-gap']) {
    assert.equal(out[f].gpu, out[f].cpu, `${f}: the verdict loadDirectory gives`);
    assert.equal(out[f].made, f === 'bad-digest' ? info.n : info.all);
    assert.equal(out[f].destroyed, out[f].made, `${f}: every buffer destroyed`);
  }
  assert.equal(out.noVerify, 'accept');
});

test('the stream loader: a tensor above maxBufferSize is LIMIT before any payload, the buffers made so far destroyed', { skip }, async () => {
  server.files.set('/two.kiln', encodeKiln([{ name: 'small', dtype: 'u8', shape: [1000] }, { name: 'big', dtype: 'u8', shape: [300000] }]));
  const out = await run(`
    const small = { limits: { maxBufferSize: arg.limit }, createBuffer: (d) => device.createBuffer(d) };
    let m = '', received = -1;
    const loader = new kiln.DirectoryLoader({ gpu: { device: small } });
    try { await loader.consume((await fetch(location.origin + '/two.kiln')).body); } catch (e) { m = (e instanceof kiln.KilnError) + ' ' + e.message; }
    return { m, made: made.map((b) => b.label), destroyed: [...destroyed], buffers: loader.gpuBuffers };
  `, { limit: 262144 });
  assert.match(out.m, /^true LIMIT/);
  assert.match(out.m, /300000 bytes/);
  assert.match(out.m, /maxBufferSize of 262144 bytes/);
  assert.deepEqual(out.made, ['small']);
  assert.deepEqual(out.destroyed, ['small']);
  assert.equal(out.buffers, null);
});

test('a sharded model: loadToGPU of every tensor matches load(); a corrupt byte in a shard is DIGEST naming the shard', { skip }, async () => {
  const m = writeSharded({ name: 'g', shards: 3, tensors: 12, bytes: 68 });
  try {
    for (const [name, b] of m.files) server.files.set(`/s/${name}`, b);
    const out = await run(`
      const r = await kiln.openRemote(location.origin + '/s/g.kiln');
      const bufs = await r.loadToGPU(device);
      let same = 0;
      for (const [name, b] of bufs) { await r.load(name); if (hex(await readBack(b)).startsWith(hex(Array.from(r.get(name).bytes())))) same++; }
      const t = r.get('t.11');
      return { same, n: r.length, keys: bufs.size, shard: r.shardOf('t.11').name, offset: t.byteOffset };
    `);
    assert.equal(out.same, out.n);
    assert.equal(out.keys, out.n);
    const bad = m.files.get(out.shard).slice();
    bad[out.offset + 3] ^= 1;
    server.files.set(`/s/${out.shard}`, bad);
    const v = await run(`
      const r = await kiln.openRemote(location.origin + '/s/g.kiln');
      let got = '';
      try { await r.loadToGPU(device, ['t.0', 't.11']); } catch (e) { got = e.code + ' ' + e.rule + ' ' + e.file; }
      return { got, destroyed: [...destroyed].sort() };
    `);
    assert.equal(v.got, `DIGEST PayloadDigest ${out.shard}`);
    assert.deepEqual(v.destroyed, ['t.0', 't.11']);
  } finally {
    rmSync(m.dir, { recursive: true, force: true });
  }
});
