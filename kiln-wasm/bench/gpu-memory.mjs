// JS heap during a WebGPU upload in headless Chromium (--enable-unsafe-webgpu,
// --enable-precise-memory-info): loadToGPU of a sparse model of SIZE MiB
// (one u8 tensor, served by the range server), and the stream loader's
// loadDirectoryToGPU of the same file, against fetch + arrayBuffer()
// + device.queue.writeBuffer, side by side in one run. Reports time and the
// peak growth of performance.memory.usedJSHeapSize (sampled every 5 ms) and
// of the renderer's total JS memory. Usage: node kiln-wasm/bench/gpu-memory.mjs [MiB] (default 512).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { rangeServer, sparseBlock } from '../test-support/range-server.mjs';

const MiB = 2 ** 20;
const size = Number(process.argv[2] ?? 512) * MiB;
const pkg = fileURLToPath(new URL('../pkg/', import.meta.url));
const route = (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
  if (path === '' || path === 'index.html') return res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>gpu</title>'), true;
  const file = join(pkg, path);
  if (path.endsWith('.kiln') || !file.startsWith(pkg) || !existsSync(file)) return false;
  res.writeHead(200, { 'content-type': extname(file) === '.wasm' ? 'application/wasm' : 'text/javascript' }).end(readFileSync(file));
  return true;
};
const dir = mkdtempSync(join(tmpdir(), 'kiln-gpu-mem-'));
const server = await rangeServer({ routes: route });
server.files.set('/big.kiln', sparseBlock(join(dir, 'big.kiln'), size));
const profile = mkdtempSync(join(tmpdir(), 'chromium-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--enable-unsafe-webgpu', '--enable-precise-memory-info', '--js-flags=--expose-gc'],
});
const page = ctx.pages()[0] ?? (await ctx.newPage());
await page.goto(`${server.base}/index.html`);
const rows = await page.evaluate(async () => {
  const kiln = await import('./index.js');
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } });
  const url = location.origin + '/big.kiln';
  async function measure(fn) {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 50));
    const base = performance.memory.usedJSHeapSize;
    let peak = base;
    const timer = setInterval(() => (peak = Math.max(peak, performance.memory.usedJSHeapSize)), 5);
    const t0 = performance.now();
    const bufs = await fn();
    await device.queue.onSubmittedWorkDone();
    const ms = performance.now() - t0;
    peak = Math.max(peak, performance.memory.usedJSHeapSize);
    clearInterval(timer);
    for (const b of bufs) b.destroy();
    return { ms, peak: peak - base };
  }
  const r = await kiln.openRemote(url);
  const huge = r.get('huge');
  const out = {};
  out.loadToGPU = await measure(async () => [...(await r.loadToGPU(device, 'huge')).values()]);
  out.loadDirectoryToGPU = await measure(async () => [...(await kiln.loadDirectoryToGPU(device, url, 'huge')).values()]);
  out.fetchWrite = await measure(async () => {
    const ab = await (await fetch(url)).arrayBuffer();
    const buf = device.createBuffer({ size: Math.ceil(huge.byteLength / 4) * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(buf, 0, ab, huge.byteOffset, Math.floor(huge.byteLength / 4) * 4);
    return [buf];
  });
  return out;
});
const f = (b) => (b / MiB).toFixed(1);
console.log(`model: ${size / MiB} MiB (one u8 tensor), headless Chromium, SwiftShader WebGPU`);
console.log('| path | time (ms) | peak JS heap growth (MiB) |\n|---|---|---|');
for (const [k, v] of Object.entries(rows)) console.log(`| ${k} | ${v.ms.toFixed(0)} | ${f(v.peak)} |`);
for (const k of ['loadToGPU', 'loadDirectoryToGPU']) {
  console.log(`ratios (fetch+writeBuffer / ${k}): time ${(rows.fetchWrite.ms / rows[k].ms).toFixed(2)}x, peak heap ${(rows.fetchWrite.peak / Math.max(MiB, rows[k].peak)).toFixed(0)}x (growth below 1 MiB counted as 1 MiB)`);
}
await ctx.close();
await server.close();
rmSync(profile, { recursive: true, force: true });
rmSync(dir, { recursive: true, force: true });
