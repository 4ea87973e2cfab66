// openRemote of a sharded model's manifest, then one load, over a local
// HTTP server with Range support: requests, bytes transferred, wasm memory
// and time. The model is written by the core's write_sharded
// (examples/write_sharded.rs): 100,000 f32 tensors of 64 bytes over 16
// shards (plus 6 small ones in shard 1).
//   node kiln-wasm/bench/sharded.mjs [--quick] [--tensors N] [--shards K] [--chromium]
// --quick (CI's smoke run): 5,000 tensors over 4 shards. --chromium: the
// manifest opened in headless Chromium too (the first open in a fresh page,
// then four more). Prints one JSON object and writes bench/results/sharded.json.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { wasm_memory } from '../pkg/wasm/kiln_wasm.js';
import { rangeServer } from '../test-support/range-server.mjs';
import { writeSharded } from '../test-support/sharded.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const quick = process.argv.includes('--quick');
const tensors = arg('--tensors', quick ? 5000 : 100000);
const shards = arg('--shards', quick ? 4 : 16);
const inChromium = process.argv.includes('--chromium');

let t0 = performance.now();
const model = writeSharded({ name: 'moe', shards, tensors, bytes: 64 });
const writeMs = performance.now() - t0;
// The package's files for the Chromium page (the model's files fall through to the range server).
const pkg = fileURLToPath(new URL('../pkg/', import.meta.url));
const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };
function pkgRoute(req, res) {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
  if (path === 'index.html') {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><link rel="icon" href="data:,"><title>kiln-wasm</title>');
    return true;
  }
  const file = join(pkg, path);
  if (path.startsWith('m/') || !file.startsWith(pkg) || !existsSync(file)) return false;
  res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  return true;
}

// Opens the manifest in a fresh page: the first open, then four more (ms each).
async function chromiumOpens(base, manifestUrl) {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    await page.goto(`${base}/index.html`);
    return await page.evaluate(async (url) => {
      const t0 = performance.now();
      const kiln = await import('/index.js');
      const importMs = performance.now() - t0;
      const ms = [];
      let tensors = 0;
      for (let i = 0; i < 5; i++) {
        const c0 = performance.now();
        const m = await kiln.openRemote(url);
        ms.push(+(performance.now() - c0).toFixed(1));
        tensors = m.length;
      }
      return { env: navigator.userAgent.match(/(HeadlessChrome|Chrome|Chromium)\/[\d.]+/)?.[0], importMs: +importMs.toFixed(1), tensors, firstOpenMs: ms[0], laterOpensMs: ms.slice(1) };
    }, manifestUrl);
  } finally {
    await ctx.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

const srv = await rangeServer({ routes: pkgRoute });
for (const [n, b] of model.files) srv.files.set(`/m/${n}`, b);
const url = `${srv.base}/m/${model.manifest}`;
const mem = () => wasm_memory().buffer.byteLength;
try {
  const memBefore = mem();
  t0 = performance.now();
  const m = await kiln.openRemote(url);
  const openMs = performance.now() - t0;
  const open = { requests: m.requests, bytes: m.bytesFetched, ms: +openMs.toFixed(1), wasmMemoryBytes: mem(), wasmMemoryGrowthBytes: mem() - memBefore };
  // One tensor in the middle of the last shard: its shard's prefix, then the tensor.
  const name = `t.${tensors - Math.floor(tensors / shards / 2)}`;
  t0 = performance.now();
  const t = await m.load(name);
  const loadMs = performance.now() - t0;
  const load = {
    tensor: name,
    shard: m.shardOf(name).name,
    requests: m.requests - open.requests,
    bytes: m.bytesFetched - open.bytes,
    ms: +loadMs.toFixed(1),
    wasmMemoryBytes: mem(),
  };
  t0 = performance.now();
  m.get(`t.${tensors - 1}`);
  const firstGetMs = performance.now() - t0;
  const out = {
    tensors: m.length,
    shards: m.shards.length,
    manifestBytes: model.files.get(model.manifest).length,
    modelBytes: [...model.files.values()].reduce((a, b) => a + b.length, 0),
    writeMs: +writeMs.toFixed(0),
    open,
    load,
    firstGetByNameMs: +firstGetMs.toFixed(1),
    loadedBytes: t.byteLength,
    node: process.version,
  };
  if (inChromium) out.chromium = await chromiumOpens(srv.base, `${srv.base}/m/${model.manifest}`);
  console.log(JSON.stringify(out, null, 2));
  if (!quick) {
    const dir = new URL('./results/', import.meta.url);
    mkdirSync(dir, { recursive: true });
    writeFileSync(new URL('sharded.json', dir), JSON.stringify(out, null, 2) + '\n');
  }
} finally {
  await srv.close();
  rmSync(model.dir, { recursive: true, force: true });
}
