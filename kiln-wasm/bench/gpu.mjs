// WebGPU upload in headless Chromium (--enable-unsafe-webgpu, SwiftShader,
// --enable-precise-memory-info), side by side in one run, for a sparse model
// of SIZE MiB (one u8 tensor, served by the range server):
//   loadToGPU            openRemote(url) + remote.loadToGPU (range requests)
//   loadDirectoryToGPU   the stream loader's GPU path over one fetch body
//   fetchWrite           fetch + arrayBuffer() + device.queue.writeBuffer
// and from a persistent cache (each path's cache filled once before the rounds):
//   loadToGPU+opfs       openRemote(url, { cache: 'opfs' }) + loadToGPU: the
//                        tensor streamed from OPFS (one bytes=0-0 request)
//   cacheApiWrite        caches.match(url) + arrayBuffer() + writeBuffer (the
//                        same baseline from Cache Storage)
// and the first, cold load with the cache (loadToGPU+opfs:cold: fetched and
// written to OPFS as it streams), once.
// For each: time, the peak growth of performance.memory.usedJSHeapSize
// (sampled every 5 ms in the page) and of the renderer processes' RSS
// (sampled every 10 ms from /proc). Usage:
//   node kiln-wasm/bench/gpu.mjs [MiB]     (default 256; CI runs 16 as a smoke test)
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FLAGS, WEBGPU, chromium, executablePath, pkgRoute } from '../test-support/chromium.mjs';
import { rangeServer, sparseBlock } from '../test-support/range-server.mjs';

const MiB = 2 ** 20;
const size = Number(process.argv[2] ?? 256) * MiB;
const dir = mkdtempSync(join(tmpdir(), 'kiln-gpu-bench-'));
const server = await rangeServer({ routes: pkgRoute('gpu') });
server.files.set('/big.kiln', sparseBlock(join(dir, 'big.kiln'), size));
const profile = mkdtempSync(join(tmpdir(), 'chromium-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  args: [...FLAGS, WEBGPU, '--enable-precise-memory-info', '--js-flags=--expose-gc'],
});

// The RSS of this profile's renderer processes, in bytes.
function rendererRss() {
  let sum = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer') || !cmd.includes(profile)) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) sum += Number(m[1]) * 1024;
    } catch {
      // the process ended
    }
  }
  return sum;
}

const page = ctx.pages()[0] ?? (await ctx.newPage());
await page.goto(`${server.base}/index.html`);
await page.evaluate(async () => {
  const kiln = await import('./index.js');
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
  const url = location.origin + '/big.kiln';
  const huge = (await kiln.openRemote(url)).get('huge');
  const paths = {
    loadToGPU: async () => [...(await (await kiln.openRemote(url)).loadToGPU(device, 'huge')).values()],
    loadDirectoryToGPU: async () => [...(await kiln.loadDirectoryToGPU(device, url, 'huge')).values()],
    fetchWrite: async () => write(await (await fetch(url)).arrayBuffer()),
    'loadToGPU+opfs:cold': async () => {
      await kiln.cache.delete(url, 'opfs');
      return [...(await (await kiln.openRemote(url, { cache: 'opfs' })).loadToGPU(device, 'huge')).values()];
    },
    'loadToGPU+opfs': async () => [...(await (await kiln.openRemote(url, { cache: 'opfs' })).loadToGPU(device, 'huge')).values()],
    cacheApiWrite: async () => write(await (await (await caches.open('bench')).match(url)).arrayBuffer()),
  };
  function write(ab) {
    const buf = device.createBuffer({ size: Math.ceil(huge.byteLength / 4) * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(buf, 0, ab, huge.byteOffset, Math.floor(huge.byteLength / 4) * 4);
    return [buf];
  }
  await (await caches.open('bench')).put(url, await fetch(url));
  window.__bench = async (name) => {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 100));
    const base = performance.memory.usedJSHeapSize;
    let peak = base;
    const timer = setInterval(() => (peak = Math.max(peak, performance.memory.usedJSHeapSize)), 5);
    const t0 = performance.now();
    const bufs = await paths[name]();
    await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0;
    peak = Math.max(peak, performance.memory.usedJSHeapSize);
    clearInterval(timer);
    for (const b of bufs) b.destroy();
    return { ms, heap: peak - base };
  };
});

// Two rounds: the first upload of a size makes the renderer map that much
// shared memory for the mapped range (the GPU buffer's own), which it keeps;
// the second round shows the steady state. Both are printed.
const rounds = [];
for (let round = 1; round <= 2; round++) {
  const rows = {};
  const names = ['loadToGPU', 'loadDirectoryToGPU', 'fetchWrite', 'loadToGPU+opfs', 'cacheApiWrite'];
  if (round === 1) names.splice(3, 0, 'loadToGPU+opfs:cold');
  for (const name of names) {
    await page.evaluate(() => new Promise((r) => setTimeout(r, 200)));
    const base = rendererRss();
    let peak = base;
    const timer = setInterval(() => (peak = Math.max(peak, rendererRss())), 10);
    const r = await page.evaluate((n) => window.__bench(n), name);
    clearInterval(timer);
    rows[name] = { ...r, rss: Math.max(peak, rendererRss()) - base };
  }
  rounds.push(rows);
}

const f = (b) => (b / MiB).toFixed(1);
console.log(`model: ${size / MiB} MiB (one u8 tensor), headless Chromium, SwiftShader WebGPU; served by a local range server`);
console.log('| round | path | time (ms) | peak JS heap growth (MiB) | peak renderer RSS growth (MiB) |\n|---|---|---|---|---|');
rounds.forEach((rows, i) => {
  for (const [k, v] of Object.entries(rows)) console.log(`| ${i + 1} | ${k} | ${v.ms.toFixed(0)} | ${f(v.heap)} | ${f(v.rss)} |`);
});
const rows = rounds.at(-1);
for (const [k, base] of [['loadToGPU', 'fetchWrite'], ['loadDirectoryToGPU', 'fetchWrite'], ['loadToGPU+opfs', 'cacheApiWrite']]) {
  const x = rows[base];
  const y = rows[k];
  console.log(
    `round 2, ratios (${base} / ${k}): time ${(x.ms / y.ms).toFixed(2)}x, peak heap ${(x.heap / Math.max(MiB, y.heap)).toFixed(0)}x, ` +
      `peak RSS ${(x.rss / Math.max(MiB, y.rss)).toFixed(1)}x (growth below 1 MiB counted as 1 MiB)`,
  );
}
await ctx.close();
await server.close();
rmSync(profile, { recursive: true, force: true });
rmSync(dir, { recursive: true, force: true });
