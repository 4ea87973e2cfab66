// decodeValue / decodeFrame in headless Chromium: the same fixtures as frozen.test.mjs,
// through the browser entry (index.js, top-level await, streaming instantiate).
// Skipped when Chromium or playwright-core is missing (kiln-wasm/ci.sh installs both).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('../pkg/', import.meta.url));
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
let chromium = null;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  chromium = null;
}
const skip = (!existsSync(executablePath) && `no Chromium at ${executablePath}`) || (chromium === null && 'playwright-core not installed (npm ci in kiln-wasm/)');
const cases = JSON.parse(readFileSync(new URL('../test-support/frozen-fixtures.json', import.meta.url), 'utf8')).cases;

const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.json': 'application/json' };
let server;
let ctx;
let page;
let profile;
const problems = [];

before(async () => {
  if (skip) return;
  server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
    if (path === '' || path === 'index.html') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><link rel="icon" href="data:,"><title>kiln-wasm</title>');
      return;
    }
    const file = join(pkg, path);
    if (!file.startsWith(pkg) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  profile = mkdtempSync(join(tmpdir(), 'chromium-'));
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
  await page.goto(`http://127.0.0.1:${server.address().port}/index.html`);
});

after(async () => {
  await ctx?.close();
  server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test('Frozen fixtures decode in Chromium as in Node', { skip }, async () => {
  const out = await page.evaluate(async (cases) => {
    const kiln = await import('./index.js');
    const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
    const verdicts = {};
    for (const c of cases) {
      try {
        (c.framed ? kiln.decodeFrame : kiln.decodeValue)(hex(c.hex), c.type);
        verdicts[c.name] = 'accept';
      } catch (e) {
        verdicts[c.name] = `${e.code} ${e.offset}`;
      }
    }
    const get = (name) => {
      const c = cases.find((x) => x.name === name);
      const bytes = hex(c.hex);
      return { bytes, v: kiln.decodeValue(bytes, c.type) };
    };
    const s = get('scalars-max').v;
    const f = get('list-f32-aligned');
    const t = get('tensors-in-struct');
    const w = t.v.model.get('w');
    const d = get('dict-order').v;
    const strings = get('strings').v;
    return {
      verdicts,
      scalars: [String(s.i64), String(s.u64), s.s, s.f],
      f32: [f.v.constructor.name, f.v.buffer === f.bytes.buffer, Array.from(f.v)],
      tensor: [w.byteOffset, w.view().buffer === t.bytes.buffer, Array.from(w.view())],
      dict: [d instanceof Map, [...d.keys()]],
      strings,
    };
  }, cases);
  for (const c of cases) assert.equal(out.verdicts[c.name], c.expect === 'accept' ? 'accept' : `${c.expect} ${c.offset}`, c.name);
  assert.deepEqual(out.scalars, [String(2n ** 63n - 1n), String(2n ** 64n - 1n), 'héllo, wörld ✓ 🦀', 3.4028234663852886e38]);
  assert.deepEqual(out.f32, ['Float32Array', true, [1, -2, 0.5, 3]]);
  assert.deepEqual(out.tensor, [392, true, [1.5, -2, 0.25]]);
  assert.deepEqual(out.dict, [true, ['', '10', '2', '__proto__', 'a', 'constructor', 'é']]);
  assert.equal(out.strings[2], '\ufeffbom');
  assert.equal(out.strings[4], 'ünïcödé longer than thirty-two bytes, for TextDecoder');
});

test('no page errors', { skip }, () => {
  assert.deepEqual(problems, []);
});
