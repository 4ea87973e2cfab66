// A converted ONNX graph run by onnxruntime-web through createOnnxSession:
// spec/examples/digits-mlp.onnx converted by the `kiln` CLI (`--onnx-graph`),
// its weights read from the Kiln file as ONNX external data. In Node (the
// wasm execution provider) and in headless Chromium (wasm; WebGPU where the
// adapter lets onnxruntime start it): the same logits, bit for bit, as the
// original inline-weights graph in the same runtime, and the same 32
// predictions as our own f64 forward pass. A Kiln file with one flipped
// weight byte is refused before InferenceSession.create is called. The
// runtime's files are served locally: nothing is fetched from the network.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { rangeServer } from '../test-support/range-server.mjs';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = fileURLToPath(new URL('../pkg/', import.meta.url));
const bin = process.env.KILN_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(root, 'target'), 'debug', 'kiln');
let ort = null;
let ortDist = null;
try {
  ort = await import('onnxruntime-web');
  // The Node entry is dist/ort.node.min.mjs: its folder holds the browser bundles and .wasm files too.
  ortDist = dirname(fileURLToPath(import.meta.resolve('onnxruntime-web'))) + '/';
} catch {
  ort = null;
}
const skip = (ort === null && 'onnxruntime-web not installed (npm install in kiln-wasm/)') || (!existsSync(bin) && `no kiln binary at ${bin}`);

let dir;
let graph; // model.kiln.onnx
let model; // model.kiln
let original; // digits-mlp.onnx, inline weights
let x; // samples.x, f32 [32, 64]
let ours; // our f64 forward pass's predictions
let labels;

function forward(dirOf) {
  const w1 = dirOf.get('fc1.weight').view();
  const b1 = dirOf.get('fc1.bias').view();
  const w2 = dirOf.get('fc2.weight').view();
  const b2 = dirOf.get('fc2.bias').view();
  const preds = [];
  for (let n = 0; n < 32; n++) {
    const h = new Float64Array(32);
    for (let j = 0; j < 32; j++) {
      let s = b1[j];
      for (let i = 0; i < 64; i++) s += w1[j * 64 + i] * x[n * 64 + i];
      h[j] = Math.max(0, s);
    }
    let best = 0;
    let bestV = -Infinity;
    for (let k = 0; k < 10; k++) {
      let s = b2[k];
      for (let j = 0; j < 32; j++) s += w2[k * 32 + j] * h[j];
      if (s > bestV) [best, bestV] = [k, s];
    }
    preds.push(best);
  }
  return preds;
}

const argmax = (logits) => Array.from({ length: logits.length / 10 }, (_, n) => {
  const row = logits.subarray(n * 10, n * 10 + 10);
  return row.indexOf(Math.max(...row));
});

before(() => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'kiln-onnx-'));
  original = readFileSync(join(root, 'spec/examples/digits-mlp.onnx'));
  execFileSync(bin, ['convert', '-q', join(root, 'spec/examples/digits-mlp.onnx'), '-o', join(dir, 'model.kiln'), '--onnx-graph', join(dir, 'model.kiln.onnx')]);
  graph = new Uint8Array(readFileSync(join(dir, 'model.kiln.onnx')));
  model = new Uint8Array(readFileSync(join(dir, 'model.kiln')));
  const ex = kiln.parseDirectory(new Uint8Array(readFileSync(join(root, 'spec/examples/digits-mlp.kiln'))));
  x = ex.get('samples.x').view();
  labels = Array.from(ex.get('samples.y').view());
  ours = forward(kiln.parseModel(model).tensors);
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.wasmPaths = ortDist;
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('Node: the converted graph runs on the Kiln file, bit-identical to the original', { skip }, async () => {
  const session = await kiln.createOnnxSession(ort, graph, { model, modelPath: 'model.kiln', sessionOptions: { executionProviders: ['wasm'] } });
  const input = new ort.Tensor('float32', Float32Array.from(x), [32, 64]);
  const got = (await session.run({ x: input })).logits.data;
  const inline = await ort.InferenceSession.create(new Uint8Array(original), { executionProviders: ['wasm'] });
  const want = (await inline.run({ x: input })).logits.data;
  assert.deepEqual(new Uint32Array(got.buffer, got.byteOffset, got.length), new Uint32Array(want.buffer, want.byteOffset, want.length));
  assert.deepEqual(argmax(got), ours);
  const right = ours.filter((p, i) => p === labels[i]).length;
  console.log(`onnxruntime-web (Node, wasm): ${right}/32 correct, predictions equal our f64 forward pass`);
  assert.equal(right, 32);
});

test('Node: a flipped weight byte is refused before the runtime is called', { skip }, async () => {
  const bad = model.slice();
  const at = kiln.parseModel(bad).tensors.get('fc1.weight').byteOffset + 100;
  bad[at] ^= 0x01;
  let calls = 0;
  const spy = { InferenceSession: { create: async () => { calls += 1; } } };
  await assert.rejects(kiln.createOnnxSession(spy, graph, { model: bad, modelPath: 'model.kiln' }), (e) => {
    assert.ok(e instanceof kiln.KilnError, String(e));
    assert.equal(e.code, 'DIGEST');
    return true;
  });
  assert.equal(calls, 0);
  // A file without a name for the graph, or without the runtime, is a usage error.
  await assert.rejects(kiln.createOnnxSession(spy, graph, { model }), TypeError);
  await assert.rejects(kiln.createOnnxSession({}, graph, { model, modelPath: 'model.kiln' }), TypeError);
  assert.equal(calls, 0);
});

// ---- headless Chromium ----
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
let chromium = null;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  chromium = null;
}
const skipBrowser = skip || (!existsSync(executablePath) && `no Chromium at ${executablePath}`) || (chromium === null && 'playwright-core not installed');
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

test('Chromium: wasm (and WebGPU where it starts) give the same logits and predictions', { skip: skipBrowser }, async () => {
  const serve = (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
    if (path === '' || path === 'index.html') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><link rel="icon" href="data:,"><title>onnx</title>');
      return true;
    }
    for (const [prefix, base] of [['ort/', ortDist], ['', pkg]]) {
      if (!path.startsWith(prefix)) continue;
      const file = join(base, path.slice(prefix.length));
      if (!file.startsWith(base) || !existsSync(file)) continue;
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
      return true;
    }
    return false;
  };
  const server = await rangeServer({ routes: serve });
  server.files.set('/model.kiln', model);
  server.files.set('/model.kiln.onnx', graph);
  server.files.set('/original.onnx', new Uint8Array(original));
  const profile = mkdtempSync(join(tmpdir(), 'chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--enable-unsafe-webgpu'],
  });
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const outside = [];
    page.on('request', (r) => !r.url().startsWith(server.base) && !r.url().startsWith('data:') && outside.push(r.url()));
    await page.goto(`${server.base}/index.html`);
    const out = await page.evaluate(async (xs) => {
      const kiln = await import('./index.js');
      const ort = await import('./ort/ort.all.min.mjs');
      ort.env.wasm.wasmPaths = new URL('./ort/', location.href).href;
      ort.env.wasm.numThreads = 1;
      const input = new ort.Tensor('float32', Float32Array.from(xs), [32, 64]);
      const bits = (t) => Array.from(new Uint32Array(t.buffer, t.byteOffset, t.length));
      const original = await ort.InferenceSession.create('./original.onnx', { executionProviders: ['wasm'] });
      const want = bits((await original.run({ x: input })).logits.data);
      const results = {};
      for (const ep of ['wasm', 'webgpu']) {
        try {
          const s = await kiln.createOnnxSession(ort, './model.kiln.onnx', { model: './model.kiln', sessionOptions: { executionProviders: [ep] } });
          const got = (await s.run({ x: input })).logits.data;
          results[ep] = { logits: bits(got), same: bits(got).every((v, i) => v === want[i]), raw: Array.from(got) };
        } catch (e) {
          results[ep] = { error: String(e) };
        }
      }
      let refused = null;
      try {
        const bytes = new Uint8Array(await (await fetch('./model.kiln')).arrayBuffer());
        bytes[kiln.parseModel(bytes).tensors.get('fc2.weight').byteOffset] ^= 0x80;
        await kiln.createOnnxSession({ InferenceSession: { create: async () => { throw new Error('runtime called'); } } }, './model.kiln.onnx', { model: bytes, modelPath: 'model.kiln' });
      } catch (e) {
        refused = e.code ?? String(e);
      }
      return { results, refused, gpu: 'gpu' in navigator };
    }, Array.from(x));
    assert.equal(out.results.wasm.error, undefined, out.results.wasm.error);
    assert.ok(out.results.wasm.same, 'wasm EP: logits bit-identical to the original graph');
    assert.deepEqual(argmax(Float32Array.from(out.results.wasm.raw)), ours);
    console.log('onnxruntime-web (Chromium, wasm): 32/32 predictions equal our forward pass, logits bit-identical to the original graph');
    if (out.results.webgpu.error) {
      console.log(`onnxruntime-web (Chromium, webgpu): not run: ${out.results.webgpu.error.slice(0, 200)}`);
    } else {
      assert.deepEqual(argmax(Float32Array.from(out.results.webgpu.raw)), ours);
      console.log(`onnxruntime-web (Chromium, webgpu): 32/32 predictions equal our forward pass; logits bit-identical to wasm: ${out.results.webgpu.same}`);
    }
    assert.equal(out.refused, 'DIGEST');
    assert.deepEqual(outside, [], 'no request left the local server');
  } finally {
    await ctx.close();
    await server.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
