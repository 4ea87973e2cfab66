// The package in headless Chromium, through the default entry (index.js, the
// embedded module instantiated on import): the Frozen fixtures of
// frozen.test.mjs, and openRemote on sparse 100 MiB / 6 GiB / 20 GiB files
// (same origin and cross-origin, with and without the exposed Content-Range,
// a server that ignores Range), counting requests, bytes and wasm memory.
// Skipped when Chromium or playwright-core is missing (kiln-wasm/ci.sh installs both).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SMALL, rangeServer, sparseBlock } from '../test-support/range-server.mjs';
import { encodeKiln } from '../test-support/encode.mjs';

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
const GiB = 2 ** 30;
const MiB = 2 ** 20;
const SPARSE = [['100m', 100 * MiB], ['6g', 6 * GiB], ['20g', 20 * GiB]];
let server; // the page's origin: the package and the sparse files
let other; // another origin (CORS), the same files
let sparseDir;
let ctx;
let page;
let profile;
const problems = [];

// The package files; everything else falls through to the range server's files.
function pkgRoute(req, res) {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
  if (path === '' || path === 'index.html') {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><link rel="icon" href="data:,"><title>kiln-wasm</title>');
    return true;
  }
  const file = join(pkg, path);
  if (path.endsWith('.kiln') || !file.startsWith(pkg) || !existsSync(file)) return false;
  res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  return true;
}

before(async () => {
  if (skip) return;
  server = await rangeServer({ routes: pkgRoute });
  other = await rangeServer({ cors: true });
  sparseDir = mkdtempSync(join(tmpdir(), 'kiln-sparse-'));
  for (const [name, size] of SPARSE) {
    const f = sparseBlock(join(sparseDir, `${name}.kiln`), size);
    server.files.set(`/${name}.kiln`, f);
    other.files.set(`/${name}.kiln`, f);
  }
  profile = mkdtempSync(join(tmpdir(), 'chromium-'));
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
  await page.goto(`${server.base}/index.html`);
});

after(async () => {
  await ctx?.close();
  await server?.close();
  await other?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (sparseDir) rmSync(sparseDir, { recursive: true, force: true });
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

test('openRemote in Chromium: sparse 100 MiB, 6 GiB, 20 GiB files in 3 requests from 64 bytes, wasm memory flat', { skip }, async () => {
  server.reset();
  const out = await page.evaluate(async ({ base, names }) => {
    const kiln = await import('./index.js');
    const { wasm_memory } = await import('./wasm/kiln_wasm.js');
    const mem = () => wasm_memory().buffer.byteLength;
    const res = {};
    for (const name of names) {
      const before = mem();
      // 64 bytes first (the default is 64 KiB, which holds this small tensor: one request).
      const r = await kiln.openRemote(`${base}/${name}.kiln`, { firstRequestBytes: 64 });
      const grew = mem() - before;
      const t = await r.load('small');
      const huge = r.get('huge');
      res[name] = {
        size: r.size,
        requests: r.requests,
        fetched: r.bytesFetched,
        tensorBytes: t.byteLength,
        values: Array.from(t.view()),
        isView: t.isView,
        hugeEnd: huge.byteOffset + huge.byteLength,
        grew,
        memory: mem(),
      };
    }
    return res;
  }, { base: server.base, names: SPARSE.map(([n]) => n) });
  for (const [name, size] of SPARSE) {
    const r = out[name];
    const served = server.stats.log.filter((e) => e[0] === `/${name}.kiln`);
    const bytes = served.reduce((a, e) => a + e[3], 0);
    assert.equal(r.size, size, name);
    assert.equal(r.hugeEnd, size, name);
    assert.deepEqual(r.values, [...SMALL], name);
    assert.ok(r.isView, name);
    assert.equal(served.length, 3, `${name}: ${JSON.stringify(served)}`);
    assert.equal(r.requests, 3, name);
    assert.equal(bytes, r.fetched, name);
    assert.ok(bytes - r.tensorBytes < 1024, `${name}: ${bytes - r.tensorBytes} bytes beyond the tensor`);
    assert.ok(r.grew < 16 * MiB, `${name}: wasm memory grew ${r.grew}`);
    console.log(`# Chromium ${name}: ${served.length} requests, ${bytes} bytes served (${bytes - r.tensorBytes} beyond the tensor), wasm memory +${r.grew} bytes (now ${r.memory})`);
  }
});

test('openRemote in Chromium: cross-origin needs Access-Control-Expose-Headers; a server ignoring Range is cancelled', { skip }, async () => {
  server.reset();
  const out = await page.evaluate(async ({ same, cross }) => {
    const kiln = await import('./index.js');
    const attempt = async (url) => {
      try {
        const r = await kiln.openRemote(url);
        return `opened ${r.size}`;
      } catch (e) {
        return `${e.name}: ${e.message}`;
      }
    };
    return {
      exposed: await attempt(`${cross}/6g.kiln`),
      hidden: await attempt(`${cross}/6g.kiln?noexpose`),
      norange: await attempt(`${same}/6g.kiln?norange`),
    };
  }, { same: server.base, cross: other.base });
  assert.equal(out.exposed, `opened ${6 * GiB}`);
  assert.match(out.hidden, /no readable Content-Range header.*Access-Control-Expose-Headers: Content-Range/);
  assert.match(out.norange, /ignored the Range request \(HTTP 200/);
  await new Promise((r) => setTimeout(r, 300));
  const sent = server.stats.log.filter((e) => e[1] === 200).reduce((a, e) => a + e[3], 0);
  assert.ok(sent < 64 * MiB, `the server sent ${sent} bytes of 6 GiB before the page cancelled`);
  console.log(`# Chromium, server ignoring Range: ${sent} bytes sent before the page cancelled`);
});

test('loadDirectory(url) in Chromium reads the fetch body straight into the final buffer (BYOB); a bad bool byte past 100 MiB is found', { skip }, async () => {
  const size = 100 * MiB;
  const good = sparseBlock(join(sparseDir, 'flags-good.kiln'), size, { flags: Uint8Array.of(1, 0, 1) });
  const bad = sparseBlock(join(sparseDir, 'flags-bad.kiln'), size, { flags: Uint8Array.of(1, 2, 0) });
  server.files.set('/flags-good.kiln', good);
  server.files.set('/flags-bad.kiln', bad);
  const out = await page.evaluate(async ({ base }) => {
    const kiln = await import('./index.js');
    const { streamReading } = await import('./loader.js');
    const drain = async () => {
      const t0 = performance.now();
      const r = (await fetch(`${base}/flags-good.kiln`)).body.getReader();
      for (;;) if ((await r.read()).done) break;
      return performance.now() - t0;
    };
    const drainMs = await drain();
    const t0 = performance.now();
    const d = await kiln.loadDirectory(`${base}/flags-good.kiln`);
    const loadMs = performance.now() - t0;
    let error = null;
    try {
      await kiln.loadDirectory(`${base}/flags-bad.kiln`);
    } catch (e) {
      error = { code: e.code, offset: e.offset, rule: e.rule };
    }
    return {
      byob: streamReading.byob,
      flags: Array.from(d.get('flags').view()),
      small: Array.from(d.get('small').view()),
      buffer: d.get('small').view().buffer.byteLength,
      error,
      drainMs,
      loadMs,
    };
  }, { base: server.base });
  assert.equal(out.byob, true, 'Chromium transfers natively: the BYOB path is taken');
  assert.deepEqual(out.flags, [1, 0, 1]);
  assert.deepEqual(out.small, [...SMALL]);
  assert.equal(out.buffer, good.size, 'the views are over one buffer of the file\'s length');
  assert.deepEqual(out.error, { code: 'TYPE', offset: bad.flagsAt + 1, rule: 'BoolByte' });
  console.log(`# Chromium, loadDirectory of ${size / MiB} MiB over fetch (BYOB): ${out.loadMs.toFixed(0)} ms; draining the body ${out.drainMs.toFixed(0)} ms`);
});

test('DirectoryLoader in Chromium over a 5 GiB byte stream: a nonzero gap byte past 4 GiB at its exact offset', { skip }, async () => {
  // small f32[16], huge u8[5 GiB + 3], a 61-byte gap, tail f32[4]. The source
  // writes only the directory and the planted byte: the views it is handed are
  // fresh (zero) memory, the loader's own buffer among them, so 5 GiB stay untouched.
  const hugeLen = 5 * GiB + 3;
  const specs = [
    { name: 'small', dtype: 'f32', shape: [16] },
    { name: 'huge', dtype: 'u8', shape: [hugeLen] },
    { name: 'tail', dtype: 'f32', shape: [4] },
  ];
  const base = Math.ceil((64 + 3 * 128 + 13) / 64) * 64;
  const head = encodeKiln(specs, base + 64);
  const total = base + Math.ceil((64 + hugeLen) / 64) * 64 + 16;
  const gapByte = base + 64 + hugeLen + 10;
  const out = await page.evaluate(async ({ head, total, gapByte }) => {
    const kiln = await import('./index.js');
    const { streamReading } = await import('./loader.js');
    const stream = (planted) => {
      let pos = 0;
      return new ReadableStream({
        type: 'bytes',
        pull(c) {
          const view = c.byobRequest.view;
          const n = Math.min(view.byteLength, 4 << 20, total - pos);
          if (n === 0) {
            c.close();
            c.byobRequest.respond(0);
            return;
          }
          for (let i = pos; i < Math.min(pos + n, head.length); i++) view[i - pos] = head[i];
          if (planted && gapByte >= pos && gapByte < pos + n) view[gapByte - pos] = 7;
          pos += n;
          c.byobRequest.respond(n);
        },
      });
    };
    const result = async (planted) => {
      try {
        const d = await new kiln.DirectoryLoader({ totalLength: total }).consume(stream(planted));
        return { accepted: d.length, tailAt: d.get('tail').byteOffset };
      } catch (e) {
        return { code: e.code, offset: e.offset, rule: e.rule, message: String(e.message) };
      }
    };
    return { byob: streamReading.byob, good: await result(false), bad: await result(true) };
  }, { head: Array.from(head), total, gapByte });
  assert.equal(out.byob, true);
  if (out.good.rule === 'ArrayBufferLimit') {
    // This Chromium build will not allocate one 5 GiB ArrayBuffer: the loader
    // must then say so, at the header's length field, for both streams.
    assert.deepEqual(out.good, { code: 'LIMIT', offset: 16, rule: 'ArrayBufferLimit', message: out.good.message });
    assert.equal(out.bad.rule, 'ArrayBufferLimit', out.bad.message);
    console.log(`# Chromium refuses a 5 GiB ArrayBuffer here (${out.good.message}); the past-4-GiB offset is checked in Node (large.test.mjs)`);
    assert.deepEqual(problems, []);
    return;
  }
  assert.deepEqual(out.good, { accepted: 3, tailAt: total - 16 });
  assert.ok(gapByte > 2 ** 32);
  assert.deepEqual({ code: out.bad.code, offset: out.bad.offset, rule: out.bad.rule }, { code: 'TYPE', offset: gapByte, rule: 'NonzeroGap' }, out.bad.message);
});

test('no page errors', { skip }, () => {
  assert.deepEqual(problems, []);
});
