// openRemote's 'opfs' and 'cache-api' caches in headless Chromium with a
// persistent profile: a sharded model loaded, the browser closed and started
// again on the same profile, then the model loaded again with at most one
// request (the manifest's change check), bytes identical; cache.usage and
// cache.delete on the real backends; loadToGPU from the cache into real
// GPUBuffers (WebGPU on SwiftShader, skipped without an adapter). Skipped
// with the reason when Chromium or playwright-core is missing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FLAGS, WEBGPU, chromium, chromiumSkip, executablePath, pkgRoute } from '../test-support/chromium.mjs';
import { rangeServer } from '../test-support/range-server.mjs';
import { writeSharded } from '../test-support/sharded.mjs';

const skip = chromiumSkip;
let server;
let profile;
let model;

before(async () => {
  if (skip) return;
  server = await rangeServer({ routes: pkgRoute('kiln-wasm cache') });
  model = writeSharded({ name: 'bc', shards: 3, tensors: 12, bytes: 16384 });
  for (const [n, b] of model.files) server.files.set(`/m/${n}`, b);
  profile = mkdtempSync(join(tmpdir(), 'chromium-cache-'));
});

after(async () => {
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

// A browser on the persistent profile, one page: runs `body` there, then closes the browser.
async function inBrowser(body, arg) {
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [...FLAGS, WEBGPU],
  });
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    await page.goto(`${server.base}/index.html`);
    return await page.evaluate(new Function('arg', `return (async () => { const kiln = await import('./index.js'); ${body} })();`), arg);
  } finally {
    await ctx.close();
  }
}

// In the page: open the model with `arg.cache`, load every tensor, hash what was loaded.
const LOAD = `
  const m = await kiln.openRemote(location.origin + '/m/bc.kiln', { cache: arg.cache });
  const sources = new Set();
  const parts = [];
  for (const t of m) {
    await m.load(t.name, { onProgress: (r, total, info) => sources.add(info.source) });
    parts.push(t.name, Array.from(t.bytes()).join(','));
  }
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(parts.join(';'))));
  const out = { requests: m.requests, bytes: m.bytesFetched, hash: Array.from(digest).join(','), sources: [...sources].sort() };
`;

for (const cache of ['opfs', 'cache-api']) {
  test(`'${cache}': the cache persists across a browser restart; the reload makes at most one request; usage and delete`, { skip }, async (t) => {
    const first = await inBrowser(
      `${LOAD}
      out.usage = await kiln.cache.usage(arg.cache);
      if (arg.cache === 'opfs') {
        out.files = [];
        const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('kiln-wasm-cache');
        for await (const k of d.keys()) out.files.push(k);
      }
      return out;`,
      { cache },
    );
    if (cache === 'opfs') {
      // Entries only: no temporary file left behind by the write-then-rename.
      assert.equal(first.files.length, first.usage.entries);
      assert.ok(first.files.every((k) => /^[rust]-[0-9a-f]{64}(-(p|\d+))?$/.test(k)), first.files.join());
    }
    t.diagnostic(`first run: ${first.requests} requests, ${first.bytes} bytes; usage ${JSON.stringify(first.usage)}`);
    assert.ok(first.requests > 3);
    assert.deepEqual(first.sources, ['network']);
    assert.ok(first.usage.entries > 5 && first.usage.bytes > 12 * 16384, JSON.stringify(first.usage));
    server.reset();
    const second = await inBrowser(
      `${LOAD}
      out.usage = await kiln.cache.usage(arg.cache);
      out.removed = await kiln.cache.delete(location.origin + '/m/bc.kiln', arg.cache);
      out.after = await kiln.cache.usage(arg.cache);
      return out;`,
      { cache },
    );
    t.diagnostic(`reload: ${second.requests} requests, ${second.bytes} bytes (server: ${server.stats.requests} requests, ${server.stats.bytes} bytes)`);
    assert.equal(second.hash, first.hash);
    assert.ok(second.requests <= 1, `${second.requests} requests`);
    assert.ok(server.stats.requests <= 1, JSON.stringify(server.stats.log));
    assert.deepEqual(second.sources, ['cache']);
    assert.deepEqual(second.usage, first.usage);
    assert.equal(second.removed, first.usage.entries);
    assert.deepEqual(second.after, { bytes: 0, entries: 0 });
  });
}

// In the page: every tensor into GPUBuffers with `arg.cache`, read back and hashed.
const GPU = `
  if (!navigator.gpu) return { skip: 'navigator.gpu is missing' };
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return { skip: 'no WebGPU adapter' };
  const device = await adapter.requestDevice();
  if (arg.clear) await kiln.cache.delete(location.origin + '/m/bc.kiln', arg.cache);
  const m = await kiln.openRemote(location.origin + '/m/bc.kiln', { cache: arg.cache });
  const sources = new Set();
  const bufs = await m.loadToGPU(device, null, { onProgress: (r, total, info) => sources.add(info.source) });
  const parts = [];
  for (const [name, b] of bufs) {
    const r = device.createBuffer({ size: b.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(b, 0, r, 0, b.size);
    device.queue.submit([enc.finish()]);
    await r.mapAsync(GPUMapMode.READ);
    parts.push(name, Array.from(new Uint8Array(r.getMappedRange()).subarray(0, m.get(name).byteLength)).join(','));
    r.unmap();
  }
  // The same tensors through load(), without a cache: what the buffers must hold.
  const plain = await kiln.openRemote(location.origin + '/m/bc.kiln');
  const want = [];
  for (const name of bufs.keys()) {
    await plain.load(name);
    want.push(name, Array.from(plain.get(name).bytes()).join(','));
  }
  return { requests: m.requests, sources: [...sources].sort(), same: parts.join(';') === want.join(';'), n: bufs.size };
`;

test("'opfs': loadToGPU fills the cache, and after a browser restart streams the cached tensors into the mapped buffers", { skip }, async (t) => {
  const first = await inBrowser(GPU, { cache: 'opfs', clear: true });
  if (first.skip) {
    t.skip(first.skip);
    return;
  }
  assert.equal(first.same, true);
  assert.deepEqual(first.sources, ['network']);
  const second = await inBrowser(GPU, { cache: 'opfs' });
  t.diagnostic(`loadToGPU: first ${first.requests} requests, after the restart ${second.requests}`);
  assert.equal(second.same, true);
  assert.equal(second.n, first.n);
  assert.ok(second.requests <= 1, `${second.requests} requests`);
  assert.deepEqual(second.sources, ['cache']);
});
