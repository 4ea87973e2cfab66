// The Kiln inspector in real headless Chromium (playwright-core + Debian's chromium).
// Screenshots and the axe-core report go to web-demo/test-artifacts/ (gitignored).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = fileURLToPath(new URL('..', import.meta.url));
const www = join(here, 'www');
const artifacts = fileURLToPath(new URL('../test-artifacts/', import.meta.url));
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
mkdirSync(artifacts, { recursive: true });

let python;
let slow;
let ctx;
let page;
let base;
let slowBase;
let profile;
const problems = [];
const warnings = [];

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitForHttp(url) {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not come up`);
}

// A synthetic 2.5 MB model served slowly, in 64 KiB chunks, to watch the progress bar.
function slowModel() {
  const enc = new TextEncoder();
  const count = 40;
  const each = 16384; // f32 elements
  const names = Array.from({ length: count }, (_, i) => enc.encode(`layer${i}.weight`));
  const heap = names.reduce((a, n) => a + n.length, 0);
  const base = Math.ceil((64 + count * 128 + heap) / 64) * 64;
  const out = new Uint8Array(base + count * each * 4);
  const dv = new DataView(out.buffer);
  out.set([0x4b, 0x4c, 0x4e, 0x54, 2, 3]);
  dv.setUint32(8, count, true);
  dv.setUint32(12, heap, true);
  dv.setBigUint64(16, BigInt(count * each * 4), true);
  dv.setBigUint64(24, BigInt(count * 128 + heap), true);
  let off = 0;
  for (let i = 0; i < count; i++) {
    const d = 64 + 128 * i;
    dv.setUint16(d, 2, true);
    out[d + 2] = 2;
    dv.setUint16(d + 4, off, true);
    dv.setUint16(d + 6, names[i].length, true);
    dv.setUint16(d + 8, 0xffff, true);
    dv.setUint16(d + 18, 0xffff, true);
    dv.setUint32(d + 24, 0xffffffff, true);
    dv.setUint32(d + 28, 0xffffffff, true);
    dv.setBigUint64(d + 32, BigInt(i * each * 4), true);
    dv.setBigUint64(d + 40, BigInt(each * 4), true);
    dv.setBigUint64(d + 48, 128n, true);
    dv.setBigUint64(d + 56, 128n, true);
    out.set(names[i], 64 + count * 128 + off);
    off += names[i].length;
    const f = new Float32Array(out.buffer, base + i * each * 4, each);
    for (let k = 0; k < each; k++) f[k] = Math.sin(k / (20 + i)) * Math.cos(k / 700) * (1 + i / 10);
  }
  return out;
}

before(async () => {
  const port = await freePort();
  python = spawn('python3', [join(here, 'serve.py'), String(port), www], { stdio: 'ignore' });
  base = `http://127.0.0.1:${port}`;
  const model = slowModel();
  slow = createServer(async (req, res) => {
    res.writeHead(200, { 'content-length': model.length, 'access-control-allow-origin': '*', 'content-type': 'application/octet-stream' });
    for (let at = 0; at < model.length; at += 65536) {
      res.write(model.subarray(at, at + 65536));
      await new Promise((r) => setTimeout(r, 40));
    }
    res.end();
  });
  await new Promise((r) => slow.listen(0, '127.0.0.1', r));
  slowBase = `http://127.0.0.1:${slow.address().port}`;
  await waitForHttp(`${base}/index.html`);
  profile = mkdtempSync(join(tmpdir(), 'chromium-'));
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    if (m.type() === 'warning') warnings.push(m.text());
  });
  await page.goto(`${base}/index.html`);
  await page.waitForSelector('body[data-state="ready"]');
});

after(async () => {
  await ctx?.close();
  python?.kill();
  slow?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

const shot = (name) => page.screenshot({ path: join(artifacts, name), fullPage: true });
const text = (sel) => page.locator(sel).innerText();

test('the page loads the package in the browser with no init call', async () => {
  assert.match(await text('#version'), /^\d+\.\d+\.\d+$/);
  // The same package API in the browser: f16 views are Float16Array here.
  const golden = JSON.parse(readFileSync(new URL('../../spec/kiln-v2-cases.json', import.meta.url), 'utf8')).cases.find((c) => c.name === 'kiln-v2-f16-named');
  const f16 = await page.evaluate(async (hex) => {
    const kiln = await import('./kiln-wasm/index.js');
    const bytes = Uint8Array.from(hex.match(/../g), (h) => parseInt(h, 16));
    const t = kiln.parseDirectory(bytes).get('half');
    const v = t.view();
    return [v.constructor.name, v[0], t.toFloat32()[0], v.buffer === bytes.buffer];
  }, golden.hex);
  assert.deepEqual(f16, ['Float16Array', 1, 1, true]);
  await shot('00-start.png');
});

const tableRows = () => page.locator('#tensors tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.innerText.trim())));

test('the example as a plain directory: no metadata', async () => {
  await page.click('#load-example-plain');
  await page.waitForSelector('body[data-state="loaded"]');
  await page.waitForFunction(() => document.getElementById('sum-file').textContent === 'digits-mlp.kiln');
  const rows = await tableRows();
  assert.equal(rows.length, 8);
  assert.deepEqual(rows[0].slice(3, 6), ['[32, 64]', '8,192', '1,216']);
  assert.equal(await text('#sum-kind'), 'tensor directory');
  assert.equal(await page.locator('#metadata-card').isVisible(), false);
  assert.equal(await text('#sum-views'), '8 of 8');
  await shot('01a-example-plain.png');
});

test('the bundled example model file: metadata, tensor table, summary, zero-copy views', async () => {
  await page.click('#load-example');
  await page.waitForSelector('body[data-state="loaded"]');
  await page.waitForFunction(() => document.getElementById('sum-file').textContent === 'digits-mlp.model.kiln');
  assert.equal(await text('#sum-kind'), 'model file');
  assert.equal(await text('#sum-size'), '22.5 KiB');
  // The metadata, in key order, without the converter's padding key.
  const meta = await page.locator('#metadata dt').allInnerTexts();
  assert.deepEqual(meta, ['description', 'license', 'source']);
  assert.equal(await page.locator('#metadata dd').nth(1).innerText(), 'MIT OR Apache-2.0');
  assert.doesNotMatch(await text('#metadata'), /kiln\.convert\.pad/);
  assert.match(await text('#metadata-note'), /starts at byte 2,880,.* payload at byte 4,096/);
  const rows = await tableRows();
  assert.equal(rows.length, 8);
  assert.deepEqual(rows.map((r) => r[1]), ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias', 'fc1.weight.mxfp4', 'fc1.weight.mxfp4.scales', 'samples.x', 'samples.y']);
  assert.deepEqual(rows.map((r) => r[2]), ['f32', 'f32', 'f32', 'f32', 'e2m1', 'e8m0', 'f32', 'u8']);
  // Offsets are in the file: the directory follows the metadata, the payload at a 4 KiB offset.
  assert.deepEqual(rows[0].slice(3, 6), ['[32, 64]', '8,192', '4,096']);
  assert.match(rows[4][6], /scheme 1 · e8m0 scales fc1\.weight\.mxfp4\.scales \[32, 2\] · axis 1 · group 32/);
  assert.ok(rows.every((r) => r[8].includes('in place')));
  assert.equal(await text('#sum-views'), '8 of 8');
  assert.equal(await text('#sum-count'), '8');
  // The views really are over the loaded bytes' ArrayBuffer.
  const shared = await page.evaluate(() => window.__kilnDemo.dir.tensors().every((t) => t.view().buffer === window.__kilnDemo.dir.source.buffer));
  assert.equal(shared, true);
  await shot('01-example-table.png');
});

test('a tensor shows its histogram and heatmap; MXFP4 can be dequantized', async () => {
  await page.click('#tensors tbody tr[data-i="4"]');
  assert.match(await text('#detail-title'), /fc1\.weight\.mxfp4 · e2m1 \[32, 64\]/);
  assert.equal(await page.locator('#heat-fig').isVisible(), true);
  assert.equal(await page.locator('#dequant-toggle').isVisible(), true);
  const before = await text('#detail-stats');
  await page.check('#dequant');
  const afterText = await text('#detail-stats');
  assert.notEqual(afterText, before);
  assert.match(afterText, /2,048 values/);
  await page.click('#tensors tbody tr[data-i="0"]');
  assert.match(await text('#detail-code'), /Float32Array\(2,048\) over your ArrayBuffer at byte 4,096/);
  const painted = await page.evaluate(() => {
    const c = document.getElementById('heat');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let colored = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] !== d[i + 2]) colored++;
    return colored;
  });
  assert.ok(painted > 1000, `heatmap painted (${painted} colored pixels)`);
  await page.click('#tensors tbody tr[data-i="4"]');
  await page.check('#dequant');
  await page.locator('#detail').scrollIntoViewIfNeeded();
  await shot('02-tensor-detail.png');
});

test('histogram count labels never repeat (a tallest bin of 1 is labelled 0 and 1)', async () => {
  for (let i = 0; i < 8; i++) {
    await page.click(`#tensors tbody tr[data-i="${i}"]`);
    const labels = (await page.locator('#hist').getAttribute('data-y-labels')).split(',').map(Number);
    assert.equal(new Set(labels).size, labels.length, `tensor ${i}: ${labels}`);
    assert.deepEqual(labels, [...labels].sort((a, b) => a - b), `tensor ${i}: ${labels}`);
  }
  const ticks = await page.evaluate(async () => {
    const { countTicks } = await import('./charts.js');
    return [1, 2, 3, 4, 5, 997].map(countTicks);
  });
  assert.deepEqual(ticks, [[0, 1], [0, 1, 2], [0, 2, 3], [0, 2, 4], [0, 3, 5], [0, 499, 997]]);
});

test('the MLP predicts the bundled samples, with f32 and with MXFP4', async () => {
  const labels = await page.locator('#samples .sample').allInnerTexts();
  assert.equal(labels.length, 32);
  await page.click('#samples .sample[data-sample="5"]');
  assert.equal(await text('#pred-f32'), labels[5].trim());
  const counts = await page.evaluate(() => {
    const m = window.__kilnDemo.mlp;
    let f32 = 0;
    let mx = 0;
    for (let s = 0; s < m.sampleCount; s++) {
      if (m.predict(m.sample(s), false).digit === m.label(s)) f32++;
      if (m.predict(m.sample(s), true).digit === m.label(s)) mx++;
    }
    return [f32, mx];
  });
  assert.deepEqual(counts, [32, 31], 'the README\'s figures: 32/32 f32, 31/32 MXFP4');
  await page.locator('#mlp').scrollIntoViewIfNeeded();
  await shot('03-prediction.png');
});

test('drawing a digit gives a prediction', async () => {
  await page.click('#clear');
  const box = await page.locator('#draw').boundingBox();
  // A "7": a bar across the top, then a diagonal down to the bottom left.
  const pts = [[0.25, 0.2], [0.78, 0.2], [0.62, 0.45], [0.45, 0.85]];
  await page.mouse.move(box.x + pts[0][0] * box.width, box.y + pts[0][1] * box.height);
  await page.mouse.down();
  for (const [a, b] of pts.slice(1)) await page.mouse.move(box.x + a * box.width, box.y + b * box.height, { steps: 12 });
  await page.mouse.up();
  await page.waitForFunction(() => document.getElementById('pred-f32').textContent !== '–');
  // Two more strokes, each read back for a prediction: the drawing canvas is read many times
  // (Chromium warns about willReadFrequently when such a canvas lacks it; the last test checks).
  for (const [a, b] of [[0.3, 0.5], [0.6, 0.5]]) {
    await page.mouse.move(box.x + a * box.width, box.y + b * box.height);
    await page.mouse.down();
    await page.mouse.move(box.x + (a + 0.05) * box.width, box.y + b * box.height, { steps: 3 });
    await page.mouse.up();
    await page.waitForTimeout(80);
  }
  await page.waitForTimeout(100);
  const seen = await page.evaluate(() => Array.from(document.getElementById('preview').getContext('2d').getImageData(0, 0, 8, 8).data).filter((v, i) => i % 4 === 0 && v < 250).length);
  assert.ok(seen >= 6, `the 8x8 preview has ink (${seen} pixels)`);
  const digit = await text('#pred-f32');
  assert.match(digit, /^\d$/);
  console.log(`drawn "7" predicted as ${digit} (f32), ${await text('#pred-mx')} (MXFP4)`);
  await page.locator('#mlp').scrollIntoViewIfNeeded();
  await shot('04-drawing.png');
});

test('a hostile file opened with the file picker: code, offset and rule in plain words', async () => {
  await page.setInputFiles('#file-input', join(www, 'examples', 'wrong-shape.kiln'));
  await page.waitForSelector('body[data-state="error"]');
  assert.equal(await text('#error-code'), 'TYPE');
  assert.match(await text('#error-title'), /wrong-shape\.kiln is not a valid Kiln file/);
  assert.match(await text('#error-where'), /at byte 104 \(0x68\) — in descriptor 0 \(of 8\), field byte_length/);
  assert.match(await text('#error-rule'), /byte_length is not the element count times the dtype width.*LengthMismatch/);
  assert.match(await text('#error-plain'), /tensor description is inconsistent/);
  assert.match(await text('#error-hex'), /00000060/);
  assert.match(await text('#error-desc'), /Descriptor 0 as the file states it: dtype f32, rank 2, shape \[32, 65\].*byte_length 8,192/);
  assert.equal(await page.locator('#table-card').isVisible(), false);
  await shot('05-error-wrong-shape.png');
});

test('damaged model files: the error located in the frame, the metadata or the directory after it', async () => {
  // The card's location line is written after the page has read the bytes around the offset.
  const located = (s) => page.waitForFunction((s) => document.getElementById('error-where').textContent.startsWith(s), s);
  await page.selectOption('#damaged', 'model-bad-utf8.kiln');
  await located('at byte 43 ');
  assert.equal(await text('#error-code'), 'UTF8');
  assert.match(await text('#error-where'), /at byte 43 \(0x2b\) — in metadata entry 0 \(description\), its value/);
  await page.selectOption('#damaged', 'model-cut-metadata.kiln');
  await located('at byte 35 ');
  assert.equal(await text('#error-code'), 'EOF');
  assert.match(await text('#error-rule'), /ByteLengthPastEnd/);
  assert.match(await text('#error-where'), /in metadata entry 0 \(description\), its value length/);
  await page.selectOption('#damaged', 'model-wrong-shape.kiln');
  await located('at byte 2,984 ');
  assert.equal(await text('#error-code'), 'TYPE');
  assert.match(await text('#error-where'), /at byte 2,984 \(0xba8\) — in descriptor 0 \(of 8\), field byte_length/);
  assert.match(await text('#error-desc'), /Descriptor 0 as the file states it: dtype f32, rank 2, shape \[32, 65\]/);
  await shot('05b-error-model-file.png');
});

test('a LIMIT error card shows its text, and no empty box', async () => {
  await page.selectOption('#damaged', 'count-cap.kiln');
  await page.waitForFunction(() => document.getElementById('error-title').textContent.includes('count-cap'));
  assert.equal(await text('#error-code'), 'LIMIT');
  assert.match(await text('#error-plain'), /above the reader.s limit/);
  assert.match(await text('#error-rule'), /TensorCountCap/);
  assert.match(await text('#error-where'), /field tensor_count/);
  const empty = await page.evaluate(() => [...document.querySelectorAll('#error-card *')]
    .filter((e) => e.offsetParent !== null && e.children.length === 0 && e.textContent.trim() === '')
    .map((e) => e.id || e.className || e.tagName));
  assert.deepEqual(empty, []);
  await shot('05c-error-limit.png');
});

test('damaged files from the menu and by drag-and-drop', async () => {
  await page.selectOption('#damaged', 'dirty-gap.kiln');
  await page.waitForSelector('body[data-state="error"]');
  await page.waitForFunction(() => document.getElementById('error-title').textContent.includes('dirty-gap'));
  assert.equal(await text('#error-code'), 'TYPE');
  assert.match(await text('#error-where'), /at byte 10,860 .* in the payload region/);
  assert.match(await text('#error-rule'), /payload gap byte is nonzero/);

  const bytes = [...readFileSync(join(www, 'examples', 'not-a-kiln-file.kiln'))];
  const dt = await page.evaluateHandle((b) => {
    const d = new DataTransfer();
    d.items.add(new File([new Uint8Array(b)], 'notes.json.kiln'));
    return d;
  }, bytes);
  await page.dispatchEvent('body', 'dragenter', { dataTransfer: dt });
  assert.equal(await page.locator('#drop-overlay').isVisible(), true);
  await page.dispatchEvent('body', 'drop', { dataTransfer: dt });
  await page.waitForFunction(() => document.getElementById('error-title').textContent.includes('notes.json.kiln'));
  assert.equal(await text('#error-code'), 'FRAME');
  assert.match(await text('#error-rule'), /the directory magic is not KLNT/);
  assert.match(await text('#error-where'), /field magic/);
  await shot('06-error-not-kiln.png');
});

test('a slow download shows the table first, then a progress bar, then the views', async () => {
  // The URL has a query string; the file name shown does not.
  await page.goto(`${base}/index.html?url=${encodeURIComponent(`${slowBase}/slow.kiln?token=abc#x`)}`);
  await page.waitForFunction(() => document.querySelectorAll('#tensors tbody tr').length === 40);
  assert.equal(await page.locator('body').getAttribute('data-state'), 'loading');
  assert.match(await text('#progress-label'), /Directory checked: 40 tensors/);
  assert.match(await text('#tensors tbody tr:last-child'), /arriving/);
  await page.waitForFunction(() => document.getElementById('progress-bar').value > 30);
  assert.match(await text('#tensors tbody tr:first-child'), /received/);
  await shot('07-progress.png');
  await page.waitForSelector('body[data-state="loaded"]', { timeout: 20000 });
  assert.equal(await text('#sum-file'), 'slow.kiln');
  assert.equal(await text('#sum-views'), '40 of 40');
  assert.equal(await page.locator('#mlp').isVisible(), false);
  await shot('08-slow-loaded.png');
});

test('at 390 px wide: no sideways scroll, header buttons whole, the example model file usable', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  const fits = () => page.evaluate(() => {
    const d = document.documentElement;
    const clipped = [...document.querySelectorAll('.actions > *')].filter((e) => {
      const r = e.getBoundingClientRect();
      return r.left < 0 || r.right > d.clientWidth || e.scrollWidth > e.clientWidth + 1;
    }).map((e) => e.id || e.className);
    return { scrollWidth: d.scrollWidth, clientWidth: d.clientWidth, clipped };
  });
  await page.goto(`${base}/index.html`);
  await page.waitForSelector('body[data-state="ready"]');
  let f = await fits();
  assert.ok(f.scrollWidth <= f.clientWidth, `start page: scrollWidth ${f.scrollWidth} > ${f.clientWidth}`);
  assert.deepEqual(f.clipped, []);
  await shot('09-390px-start.png');
  await page.click('#load-example');
  await page.waitForSelector('body[data-state="loaded"]');
  await page.click('#tensors tbody tr[data-i="0"]');
  f = await fits();
  assert.ok(f.scrollWidth <= f.clientWidth, `model file loaded: scrollWidth ${f.scrollWidth} > ${f.clientWidth}`);
  assert.deepEqual(f.clipped, []);
  assert.equal(await page.locator('#metadata-card').isVisible(), true);
  await page.screenshot({ path: join(artifacts, '10-390px-model.png'), fullPage: false });
  await shot('10-390px-model-full.png');
  await page.selectOption('#damaged', 'model-wrong-shape.kiln');
  await page.waitForSelector('body[data-state="error"]');
  await page.waitForFunction(() => document.getElementById('error-hex').textContent.length > 0);
  f = await fits();
  assert.ok(f.scrollWidth <= f.clientWidth, `error card: scrollWidth ${f.scrollWidth} > ${f.clientWidth}`);
  await shot('11-390px-error.png');
  await page.setViewportSize({ width: 1280, height: 900 });
});

// WebGPU (SwiftShader in headless Chromium) against the CPU, in a second browser.
const gpuFlags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--enable-unsafe-webgpu'];
async function withGpuPage(fn) {
  const dir = mkdtempSync(join(tmpdir(), 'chromium-gpu-'));
  const c = await chromium.launchPersistentContext(dir, { executablePath, headless: true, viewport: { width: 1280, height: 900 }, args: gpuFlags });
  const errors = [];
  try {
    const p = c.pages()[0] ?? (await c.newPage());
    p.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
    p.on('console', (m) => m.type() === 'error' && errors.push(`console: ${m.text()}`));
    await fn(p);
    assert.deepEqual(errors, []);
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
async function runExample(p, query) {
  await p.goto(`${base}/index.html${query}`);
  await p.waitForSelector('body[data-state="ready"]');
  await p.click('#load-example');
  await p.waitForSelector('body[data-state="loaded"]');
  await p.waitForFunction(() => document.body.dataset.backend, null, { timeout: 20000 });
  return p.evaluate(() => ({ ...window.__kilnDemo.batch, labels: Array.from(window.__kilnDemo.mlp.ys), text: document.getElementById('backend').innerText }));
}

test('WebGPU and CPU give the same 32 predictions; the page says which ran', async () => {
  await withGpuPage(async (p) => {
    const gpu = await runExample(p, '');
    await p.locator('#backend').scrollIntoViewIfNeeded();
    await p.screenshot({ path: join(artifacts, 'mlp-webgpu.png'), fullPage: true });
    const cpu = await runExample(p, '?cpu');
    await p.screenshot({ path: join(artifacts, 'mlp-cpu.png'), fullPage: true });
    assert.equal(gpu.backend, 'webgpu', `no WebGPU run: ${gpu.text}`);
    assert.match(gpu.text, /^Ran on WebGPU: 32\/32 test images right/);
    assert.equal(cpu.backend, 'cpu');
    assert.match(cpu.text, /^Ran on the CPU \(forced by \?cpu\): 32\/32 test images right/);
    assert.equal(gpu.digits.length, 32);
    assert.deepEqual(gpu.digits, cpu.digits);
    assert.deepEqual(cpu.digits, cpu.labels);
    console.log(`# WebGPU ${gpu.ms.toFixed(1)} ms (first run: adapter, pipeline, upload), CPU ${cpu.ms.toFixed(1)} ms for 32 samples`);
  });
});

test('without WebGPU (no --enable-unsafe-webgpu) the CPU runs, and says why', async () => {
  await page.goto(`${base}/index.html`);
  await page.waitForSelector('body[data-state="ready"]');
  await page.click('#load-example');
  await page.waitForFunction(() => document.body.dataset.backend);
  const t = await text('#backend');
  const backend = await page.locator('body').getAttribute('data-backend');
  if (backend === 'cpu') assert.match(t, /^Ran on the CPU \(no WebGPU adapter\): 32\/32/);
  else assert.match(t, /^Ran on WebGPU: 32\/32/);
});

test('the cache: a second visit reads the model from the cache (one small request) and says so', async () => {
  await withGpuPage(async (p) => {
    const model = [];
    p.on('request', (r) => r.url().endsWith('/examples/digits-mlp.model.kiln') && model.push(r.headers().range ?? 'whole'));
    const first = await runExample(p, '');
    assert.equal(first.backend, 'webgpu');
    assert.equal(await p.locator('body').getAttribute('data-cache'), 'miss');
    assert.equal(await p.locator('#cache-note').isVisible(), false, 'a first visit is no cache hit');
    assert.match(await p.evaluate(() => document.getElementById('progress-bytes').textContent), /from the network$/);
    const firstRequests = model.length;
    model.length = 0;
    const usage = await p.evaluate(async () => (await import('./kiln-wasm/index.js')).cache.usage('opfs'));
    assert.ok(usage.entries > 0 && usage.bytes > 0, JSON.stringify(usage));
    // A reload: the page opens the same model again.
    const second = await runExample(p, '');
    console.log(`# first visit: ${firstRequests} requests for the model; second visit: ${model.length} (${model.join(', ')}); cache ${usage.entries} entries, ${usage.bytes} bytes`);
    assert.ok(model.length <= 1, `second visit: ${model.join(', ')}`);
    assert.deepEqual(model, ['bytes=0-0'], 'only the change check');
    assert.equal(await p.locator('body').getAttribute('data-cache'), 'hit');
    assert.match(await p.locator('#cache-note').innerText(), /came from the cache/);
    assert.match(await p.evaluate(() => document.getElementById('progress-bytes').textContent), /from the cache$/);
    assert.deepEqual(second.digits, first.digits, 'the same predictions from the cached model');
    await p.locator('#cache-note').scrollIntoViewIfNeeded();
    await p.screenshot({ path: join(artifacts, 'second-visit.png'), fullPage: true });
  });
});

test('axe-core: no serious or critical accessibility violations (report in test-artifacts/axe.json)', async () => {
  await withGpuPage(async (p) => {
    await runExample(p, '');
    await p.addScriptTag({ path: fileURLToPath(new URL('../node_modules/axe-core/axe.min.js', import.meta.url)) });
    const result = await p.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    writeFileSync(join(artifacts, 'axe.json'), JSON.stringify(result, null, 2));
    const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(bad.map((v) => `${v.impact} ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), []);
  });
});

test('no page errors, no console warnings (willReadFrequently among them)', () => {
  assert.deepEqual(problems, []);
  assert.deepEqual(warnings.filter((w) => /willReadFrequently|getImageData/.test(w)), []);
  // Chromium's own warning when requestAdapter() finds none (this browser has no
  // --enable-unsafe-webgpu): the page's CPU path, tested above.
  assert.deepEqual(warnings.filter((w) => w !== 'No available adapters.'), []);
});
