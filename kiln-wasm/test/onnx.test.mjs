// A converted ONNX graph run by onnxruntime-web through createOnnxSession:
// spec/examples/digits-mlp.onnx converted by the `kiln` CLI (`--onnx-graph`),
// its weights read from the Kiln file as ONNX external data. In Node (the
// wasm execution provider) and in headless Chromium (wasm; WebGPU where the
// adapter lets onnxruntime start it): the same logits, bit for bit, as the
// original inline-weights graph in the same runtime, and the same 32
// predictions as our own f64 forward pass. A Kiln file with one flipped
// weight byte is refused before InferenceSession.create is called. The
// runtime's files are served locally: nothing is fetched from the network.
//
// The hand-off rules (R1 inline initializers, R2 the graph's digest, R3 the
// checked list) on graphs and Kiln files built here: what stays inline, what
// is refused by name, subgraphs, kiln.model and the recorded SHA-256, a
// sharded model's manifest, and the list's order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createHash } from 'node:crypto';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { externalInitializers } from '../pkg/onnx.js';
import { rangeServer } from '../test-support/range-server.mjs';
import { encodeKiln, le } from '../test-support/encode.mjs';
import { digestsModelFile, modelFile } from '../test-support/model.mjs';
import { ONNX, attribute, bytes as bytesField, cat, digitsOnnx, graph as graphOf, model as modelOf, node, tensor } from '../test-support/onnx-graph.mjs';
import { writeSharded } from '../test-support/sharded.mjs';

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
let sharded; // file name -> bytes: the manifest model.kiln, its shards, model.kiln.onnx
const outside = []; // URLs fetched in Node other than the local server's

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
  // A sharded output (6 KiB shards: fc1.weight alone, then the rest), for the manifest path.
  mkdirSync(join(dir, 'sharded'));
  execFileSync(bin, ['convert', '-q', join(root, 'spec/examples/digits-mlp.onnx'), '-o', join(dir, 'sharded', 'model.kiln'), '--onnx-graph', join(dir, 'sharded', 'model.kiln.onnx'), '--max-shard-size', '6K'], { stdio: 'pipe' });
  sharded = new Map(readdirSync(join(dir, 'sharded')).map((f) => [f, new Uint8Array(readFileSync(join(dir, 'sharded', f)))]));
  // Nothing but the local server is fetched in Node.
  const realFetch = globalThis.fetch;
  globalThis.fetch = (url, init) => {
    const u = String(url instanceof Request ? url.url : url);
    if (!u.startsWith('http://127.0.0.1:')) outside.push(u);
    return realFetch(url, init);
  };
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
  // Without the runtime, or without a model, is a usage error; a model named otherwise than the graph names it, an Error.
  await assert.rejects(kiln.createOnnxSession({}, graph, { model, modelPath: 'model.kiln' }), TypeError);
  await assert.rejects(kiln.createOnnxSession(spy, graph, {}), TypeError);
  await assert.rejects(kiln.createOnnxSession(spy, graph, { model, modelPath: 'other.kiln' }), /options\.modelPath is "other\.kiln"; the graph's Kiln model \(metadata_props kiln\.model\) is "model\.kiln"/);
  assert.equal(calls, 0);
  // The graph names the file: no modelPath needed.
  await kiln.createOnnxSession(spy, graph, { model });
  assert.equal(calls, 1);
});

// A runtime stand-in that counts calls and passes them on.
function counting() {
  const spy = { calls: 0, InferenceSession: { create: (...a) => { spy.calls += 1; return ort.InferenceSession.create(...a); } } };
  return spy;
}

async function logitsOf(session) {
  const got = (await session.run({ x: new ort.Tensor('float32', Float32Array.from(x), [32, 64]) })).logits.data;
  return new Uint32Array(got.buffer, got.byteOffset, got.length);
}

test('Node: URLs, a sharded model through its manifest, and graphs that do not match the files', { skip }, async () => {
  const server = await rangeServer();
  try {
    server.files.set('/one/model.kiln', model);
    server.files.set('/one/model.kiln.onnx', graph);
    for (const [name, bytes] of sharded) server.files.set(`/sharded/${name}`, bytes);
    const opts = { sessionOptions: { executionProviders: ['wasm'] } };
    const inline = await ort.InferenceSession.create(new Uint8Array(original), opts.sessionOptions);
    const want = await logitsOf(inline);
    // One model file by URL (streamed in and checked as it arrives).
    const one = await kiln.createOnnxSession(ort, `${server.base}/one/model.kiln.onnx`, { ...opts, model: `${server.base}/one/model.kiln` });
    assert.deepEqual(await logitsOf(one), want);
    // A sharded model: the manifest (Range requests), then each shard whole, held against the manifest.
    const shardGraph = sharded.get('model.kiln.onnx');
    const locations = new Set(externalInitializers(shardGraph).map((r) => r.location));
    assert.deepEqual([...locations].sort(), ['model-00001-of-00002.kiln', 'model-00002-of-00002.kiln']);
    server.reset();
    const spy = counting();
    const s = await kiln.createOnnxSession(spy, `${server.base}/sharded/model.kiln.onnx`, { ...opts, model: `${server.base}/sharded/model.kiln` });
    assert.deepEqual(await logitsOf(s), want);
    assert.equal(spy.calls, 1);
    console.log(`sharded model: ${server.stats.requests} requests, ${server.stats.bytes} bytes (graph, manifest, 2 shards)`);
    // A shard of another length, a flipped weight byte in a shard: the shard's KilnError, no runtime call.
    const second = sharded.get('model-00002-of-00002.kiln');
    const bad = second.slice();
    bad[kiln.parseModel(second).tensors.get('fc2.weight').byteOffset + 7] ^= 0x10;
    server.files.set('/sharded/model-00002-of-00002.kiln', bad);
    await assert.rejects(kiln.createOnnxSession(spy, `${server.base}/sharded/model.kiln.onnx`, { model: `${server.base}/sharded/model.kiln` }), (e) => {
      assert.ok(e instanceof kiln.KilnError, String(e));
      assert.deepEqual([e.code, e.file, e.shard], ['DIGEST', 'model-00002-of-00002.kiln', 2]);
      return true;
    });
    server.files.set('/sharded/model-00002-of-00002.kiln', sharded.get('model-00001-of-00002.kiln'));
    await assert.rejects(kiln.createOnnxSession(spy, `${server.base}/sharded/model.kiln.onnx`, { model: `${server.base}/sharded/model.kiln` }), (e) => {
      assert.deepEqual([e.code, e.rule, e.file], ['SHARD', 'ShardLength', 'model-00002-of-00002.kiln']);
      return true;
    });
    // The one-file model for the sharded graph: it records another graph's SHA-256. The shards without their manifest.
    await assert.rejects(kiln.createOnnxSession(spy, shardGraph, { model }), /the graph's SHA-256 is [0-9a-f]{64}; model\.kiln records [0-9a-f]{64}: the graph was changed or belongs to another conversion/);
    const shardFiles = [...locations].map((path) => ({ path, data: sharded.get(path) }));
    await assert.rejects(kiln.createOnnxSession(spy, shardGraph, { files: shardFiles }), /the graph's Kiln model "model\.kiln" \(metadata_props kiln\.model\) is not among options\.files/);
    assert.equal(spy.calls, 1);
    // The manifest and its shards given as files (bytes): the manifest checked by openRemote's reader, each shard whole against it.
    const byFiles = await kiln.createOnnxSession(spy, shardGraph, { ...opts, files: [{ path: 'model.kiln', data: sharded.get('model.kiln') }, ...shardFiles] });
    assert.deepEqual(await logitsOf(byFiles), want);
  } finally {
    await server.close();
  }
  assert.deepEqual(outside, [], 'nothing fetched but the local server');
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
  for (const [name, bytes] of sharded) server.files.set(`/sharded/${name}`, bytes);
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
      // A sharded model through its manifest (a relative URL, resolved against the page).
      try {
        const s = await kiln.createOnnxSession(ort, './sharded/model.kiln.onnx', { model: './sharded/model.kiln', sessionOptions: { executionProviders: ['wasm'] } });
        const got = (await s.run({ x: input })).logits.data;
        results.sharded = { same: bits(got).every((v, i) => v === want[i]) };
      } catch (e) {
        results.sharded = { error: String(e) };
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
    assert.deepEqual(out.results.sharded, { same: true }, 'the sharded model (manifest URL): logits bit-identical to the original graph');
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

// ---- the hand-off rules, on graphs and Kiln files built here ----
const DIGEST_KEY = 'kiln.convert.onnx_graph_sha256';
const sha256 = (b) => createHash('sha256').update(b).digest('hex');
const f32 = (n, seed = 1) => le(Float32Array.from({ length: n }, (_, i) => ((i * 37 + seed * 11) % 101) / 16 - 3));

/**
 * A graph and its Kiln model file, paired as kiln convert pairs them: the
 * Kiln file holds `tensors` (encodeKiln specs) and records the graph's
 * SHA-256; `build(place)` makes the graph, `place(name)` giving a tensor's
 * external data in the file. `record(sha)`: the value recorded instead
 * (null: no key; the same length keeps the offsets).
 */
function pair(tensors, build, { name = 'm.kiln', record = (sha) => sha } = {}) {
  const block = encodeKiln(tensors);
  const fileFor = (v) => digestsModelFile(v === null ? [] : [[DIGEST_KEY, v]], block);
  const placed = kiln.parseModel(fileFor('0'.repeat(64))).tensors;
  const place = (n) => ({ location: name, offset: placed.get(n).byteOffset, length: placed.get(n).byteLength });
  const graph = build(place);
  return { graph, model: fileFor(record(sha256(graph))), sha: sha256(graph) };
}

// A model whose main graph holds `initializers` and `nodes`, naming its Kiln model.
const onnxWith = ({ initializers = [], nodes = [], metadata = [['kiln.model', 'm.kiln']] }) => modelOf({ graph: graphOf({ name: 'main', nodes, initializers }), metadata });

// A runtime stand-in that records its calls and creates nothing.
function spyRuntime() {
  const spy = { calls: [], InferenceSession: { create: async (...a) => { spy.calls.push(a); return { spy: true }; } } };
  return spy;
}

// The checked list (checkOnnxGraph) for an all-inline graph paired with an empty Kiln model.
async function inlineVerdict(initializers, nodes = []) {
  const { graph, model } = pair([], () => onnxWith({ initializers, nodes }));
  try {
    return (await kiln.checkOnnxGraph(graph, { model })).checked;
  } catch (e) {
    return e;
  }
}

// A standard-domain node (or one of `domain`) taking `inputs`.
const takes = (op, inputs, domain = null) => node({ op, name: op.toLowerCase(), inputs, outputs: [`${op}.out`], domain });
// An int64 vector of n elements (a shape, axes, indices), zeros.
const i64 = (name, n) => tensor({ name, dataType: ONNX.INT64, dims: [n], rawLength: 8 * n });

test('R1: what a node reads as data stays inline (under 64 KiB); any other inline initializer is refused by name, whatever its size', async () => {
  // A Reshape's shape, a Resize's scales (by position in the table, whatever the type), Range's scalars (one element each).
  const ok = await inlineVerdict(
    [i64('shape', 2), tensor({ name: 'scales', dims: [4], rawLength: 16 }), tensor({ name: 's', dataType: ONNX.DOUBLE, rawLength: 8 })],
    [takes('Reshape', ['x', 'shape']), takes('Resize', ['x', '', 'scales']), takes('Range', ['s', 's', 's'])],
  );
  assert.deepEqual(ok, [['shape', 'inline'], ['scales', 'inline'], ['s', 'inline']]);
  // ai.onnx is the standard domain too (1,600 bytes: past another domain's limit).
  assert.deepEqual(await inlineVerdict([i64('shape', 200)], [takes('Reshape', ['x', 'shape'], 'ai.onnx')]), [['shape', 'inline']]);
  // A float bias that no node reads as data: refused by name, at 16 bytes as at 16 KiB, and with no node at all.
  const bias = await inlineVerdict([tensor({ name: 'b', dims: [4], rawLength: 16 })], [takes('Add', ['x', 'b'])]);
  assert.ok(bias instanceof Error && !(bias instanceof kiln.KilnError), String(bias));
  assert.match(bias.message, /initializer "b" is stored in the graph \(16 bytes; no node reads it as data while the graph is resolved\): only what shape inference reads \(a shape, axes, scales, \.\.\.\) or a type Kiln cannot hold stays in the graph; the rest must be external data in the Kiln file/);
  assert.equal(bias.initializer, 'b');
  assert.equal((await inlineVerdict([tensor({ name: 'b', dims: [4096], rawLength: 16384 })], [takes('Add', ['x', 'b'])])).initializer, 'b');
  assert.equal((await inlineVerdict([tensor({ name: 'b', dims: [4], rawLength: 16 })])).initializer, 'b');
  // The position counts: a Reshape's data input is a weight.
  assert.equal((await inlineVerdict([tensor({ name: 'w', dims: [2], rawLength: 8 })], [takes('Reshape', ['w', 'shape'])])).initializer, 'w');
  // Read as data: under 65,536 payload bytes.
  assert.deepEqual(await inlineVerdict([i64('shape', 8191)], [takes('Reshape', ['x', 'shape'])]), [['shape', 'inline']]);
  const long = await inlineVerdict([i64('shape', 8192)], [takes('Reshape', ['x', 'shape'])]);
  assert.match(long.message, /initializer "shape" is stored in the graph \(65536 bytes; a node reads it as data, but only under 65536 bytes may stay\)/);
  assert.equal(long.initializer, 'shape');
  // An int32/int64 tensor of rank 0 or 1 that any standard node takes (shape data propagates through it: a Gather's indices).
  const gathered = (t) => inlineVerdict([t], [takes('Gather', ['x', 'i'])]);
  assert.deepEqual(await gathered(i64('i', 1)), [['i', 'inline']]);
  assert.deepEqual(await gathered(tensor({ name: 'i', dataType: ONNX.INT32, rawLength: 4 })), [['i', 'inline']]);
  assert.equal((await gathered(tensor({ name: 'i', dataType: ONNX.INT64, dims: [1, 1], rawLength: 8 }))).initializer, 'i', 'rank 2');
  assert.equal((await gathered(tensor({ name: 'i', dataType: ONNX.INT8, dims: [4], rawLength: 4 }))).initializer, 'i', 'int8');
  assert.match((await gathered(i64('i', 8192))).message, /"i" is stored in the graph \(65536 bytes; a node reads it as data/);
  // An input of another domain's operator (whose shape inference the table does not know): under 1,024 bytes.
  const other = (t) => inlineVerdict([t], [takes('MatMulNBits', ['x', 'q', 'scales'], 'com.microsoft')]);
  assert.deepEqual(await other(tensor({ name: 'scales', dims: [255], rawLength: 1020 })), [['scales', 'inline']]);
  const big = await other(tensor({ name: 'scales', dims: [256], rawLength: 1024 }));
  assert.match(big.message, /initializer "scales" is stored in the graph \(1024 bytes; a node reads it as data, but only under 1024 bytes may stay\)/);
  assert.equal(big.initializer, 'scales');
  // The size is the dims' (times the width), not the bytes present; 4-bit types round up.
  assert.equal((await other(tensor({ name: 'scales', dims: [16, 16], rawLength: 4 }))).initializer, 'scales');
  assert.deepEqual(await other(tensor({ name: 'q', dataType: ONNX.UINT4, dims: [2046], rawLength: 1023 })), [['q', 'inline']]);
  assert.match((await other(tensor({ name: 'q', dataType: ONNX.UINT4, dims: [2047], rawLength: 1024 }))).message, /"q" is stored in the graph \(1024 bytes;/);
  assert.match((await inlineVerdict([tensor({ name: 'n', dims: [-1, 4], rawLength: 0 })])).message, /initializer "n" has a negative dimension/);
  // Whatever its type (kiln-onnx refuses it too).
  assert.equal((await inlineVerdict([tensor({ name: 'n', dataType: ONNX.STRING, dims: [-1], strings: [] })])).initializer, 'n');
  // Empty and zero-size tensors read as data are inline (unread, they go to Kiln like any other); dims whose
  // product passes 2^64 are refused without computing it.
  assert.deepEqual(await inlineVerdict([tensor({ name: 'e', dims: [0, 100000], rawLength: 0 })], [takes('Slice', ['x', 'e'])]), [['e', 'inline']]);
  assert.equal((await inlineVerdict([tensor({ name: 'e', dims: [0, 100000], rawLength: 0 })])).initializer, 'e');
  assert.deepEqual(await inlineVerdict([tensor({ name: 'e', dims: [...Array(5000).fill(2 ** 40), 0], rawLength: 0 })], [takes('Slice', ['x', 'e'])]), [['e', 'inline']]);
  assert.match((await inlineVerdict([tensor({ name: 'h', dims: Array(100000).fill(2 ** 40), rawLength: 0 })], [takes('Slice', ['x', 'h'])])).message, /"h" is stored in the graph \(over 2\^64 bytes; a node reads it as data/);
});

test('R1: initializers of a type Kiln cannot hold stay inline whatever their size', async () => {
  const strings = Array.from({ length: 3000 }, (_, i) => `token ${i}`);
  const got = await inlineVerdict([
    tensor({ name: 'vocab', dataType: ONNX.STRING, dims: [3000], strings }),
    tensor({ name: 'c', dataType: ONNX.COMPLEX64, dims: [1000], rawLength: 8000 }),
    tensor({ name: 'fnuz', dataType: ONNX.FLOAT8E4M3FNUZ, dims: [4096], rawLength: 4096 }),
    tensor({ name: 'future', dataType: 99, dims: [4096], rawLength: 4096 }),
  ]);
  assert.deepEqual(got, [['vocab', 'inline'], ['c', 'inline'], ['fnuz', 'inline'], ['future', 'inline']]);
});

// If(cond) whose then_branch holds `thenInits` (and the nodes `thenNodes`) and else_branch `elseInits`.
const ifNode = (thenInits, elseInits = [], name = 'if', thenNodes = []) =>
  node({
    op: 'If',
    name,
    inputs: ['cond'],
    outputs: ['y'],
    attributes: [
      attribute({ name: 'then_branch', g: graphOf({ name: 'then', nodes: thenNodes, initializers: thenInits }) }),
      attribute({ name: 'else_branch', g: graphOf({ name: 'else', initializers: elseInits }) }),
    ],
  });

test("R1 in subgraphs: the same rule, a read in any graph counting; external data on any graph's initializers, nowhere else", async () => {
  // A shape read by a Reshape in its own subgraph, or by one in the main graph (ONNX names are the model's): inline.
  const small = i64('t', 2);
  const reshape = takes('Reshape', ['x', 't']);
  assert.deepEqual(await inlineVerdict([], [ifNode([small], [], 'if', [reshape])]), [['t', 'inline']]);
  assert.deepEqual(await inlineVerdict([], [reshape, ifNode([small])]), [['t', 'inline']]);
  // ... or by a node of a function's body.
  const inFunction = pair([], () => cat([onnxWith({ nodes: [ifNode([small])] }), bytesField(25, bytesField(7, reshape))]));
  assert.deepEqual((await kiln.checkOnnxGraph(inFunction.graph, { model: inFunction.model })).checked, [['t', 'inline']]);
  // Read by nothing: refused, named with its subgraph.
  assert.equal((await inlineVerdict([], [ifNode([small])])).initializer, 't');
  const big = await inlineVerdict([], [ifNode([], [tensor({ name: 'e', dims: [300], rawLength: 1200 })])]);
  assert.match(big.message, /initializer "e" of subgraph "else" \(attribute "else_branch" of node "if" \(If\)\) is stored in the graph \(1200 bytes; no node reads it as data while the graph is resolved\)/);
  assert.equal(big.initializer, 'e');
  // External data on a subgraph's initializer: listed in R3's order, held against its Kiln tensor.
  const tensors = [{ name: 'a', dtype: 'f32', shape: [300], data: f32(300) }, { name: 'x', dtype: 'f32', shape: [300], data: f32(300) }];
  const sub = pair(tensors, (place) => onnxWith({
    initializers: [tensor({ name: 'a', dims: [300], external: place('a') })],
    nodes: [reshape, ifNode([tensor({ name: 'x', dims: [300], external: place('x') })], [small])],
  }));
  assert.deepEqual((await kiln.checkOnnxGraph(sub.graph, { model: sub.model })).checked, [['a', 'kiln'], ['x', 'kiln'], ['t', 'inline']]);
  assert.deepEqual(externalInitializers(sub.graph).map((r) => r.name), ['a', 'x']);
  const spy = spyRuntime();
  await kiln.createOnnxSession(spy, sub.graph, { model: sub.model });
  assert.deepEqual(spy.calls[0][1].externalData, [{ path: 'm.kiln', data: sub.model }], 'externalData covers every graph');
  const wrong = pair(tensors, (place) => onnxWith({ nodes: [ifNode([tensor({ name: 'x', dims: [300], external: place('a') })])] }));
  await assert.rejects(kiln.checkOnnxGraph(wrong.graph, { model: wrong.model }), (e) => e.initializer === 'x' && /"x" \(m\.kiln, offset \d+, length 1200\) is not that tensor's payload/.test(e.message));
  // External data in a Constant's value, a function's subgraph, anywhere but a graph's initializers: refused.
  const ext = { location: 'm.kiln', offset: '0', length: '1200' };
  const constant = (t) => node({ op: 'Constant', name: 'k', outputs: ['k'], attributes: [attribute({ name: 'value', t })] });
  assert.match((await inlineVerdict([], [constant(tensor({ name: 'k', dims: [300], external: ext }))])).message, /attribute "value" of node "k" \(Constant\) is external data/);
  // A sparse initializer's values as external data: refused, named by its values' name.
  const sparse = pair([], () => modelOf({ graph: cat([graphOf({ name: 'main' }), bytesField(15, bytesField(1, tensor({ name: 'sv', dims: [300], external: ext })))]), metadata: [['kiln.model', 'm.kiln']] }));
  await assert.rejects(kiln.checkOnnxGraph(sparse.graph, { model: sparse.model }), (e) => e.initializer === 'sv' && /sparse initializer "sv" is external data/.test(e.message));
  // An initializer of a function's subgraph as external data: refused by name (a function holds no weights of the conversion).
  const fnNode = ifNode([tensor({ name: 'fx', dims: [300], external: ext })]);
  const fn = pair([], () => cat([onnxWith({}), bytesField(25, bytesField(7, fnNode))]));
  await assert.rejects(kiln.checkOnnxGraph(fn.graph, { model: fn.model }), (e) => e.initializer === 'fx' && /initializer "fx" .* of a function is external data/.test(e.message));
  // ... whose inline ones are not held to R1 nor listed (the converter leaves a function as it is).
  const fnInline = pair([], () => cat([onnxWith({}), bytesField(25, bytesField(7, ifNode([tensor({ name: 'big', dims: [300], rawLength: 1200 })])))]));
  assert.deepEqual((await kiln.checkOnnxGraph(fnInline.graph, { model: fnInline.model })).checked, []);
  // Constants are nodes, not initializers: kept, not listed (the converter lifts the large ones).
  assert.deepEqual(await inlineVerdict([], [constant(tensor({ name: 'k', dims: [300], rawLength: 1200 }))]), []);
  // Nested 30 deep: accepted; 31: refused, not a stack overflow (kiln-onnx's bound too).
  const nested = (depth) => {
    let g = graphOf({ name: 'leaf', nodes: [takes('Unsqueeze', ['x', 'leaf'])], initializers: [i64('leaf', 1)] });
    for (let i = 1; i < depth; i++) g = graphOf({ name: `g${i}`, nodes: [node({ op: 'If', name: `n${i}`, attributes: [attribute({ name: 'then_branch', g })] })] });
    return node({ op: 'If', name: 'top', attributes: [attribute({ name: 'then_branch', g })] });
  };
  assert.deepEqual(await inlineVerdict([], [nested(30)]), [['leaf', 'inline']]);
  assert.match((await inlineVerdict([], [nested(31)])).message, /subgraphs nested more than 30 deep/);
  // Two `g` in one attribute (protobuf's parsers would merge them): refused.
  const two = [attribute({ name: 'then_branch', g: graphOf({ name: 'a' }) }), attribute({ name: 'then_branch', g: graphOf({ name: 'b' }) })];
  const twice = node({ op: 'If', name: 'two', attributes: [cat(two)] });
  assert.match((await inlineVerdict([], [twice])).message, /attribute "then_branch" of node "two" \(If\) gives its graph \(g\) 2 times/);
});

test("R1: external data is location, offset and length, exactly, naming a file in the graph's folder", async () => {
  const w = f32(300);
  const verdict = async (external, extra = {}) => {
    const { graph, model } = pair([{ name: 'w', dtype: 'f32', shape: [300], data: w }], (place) =>
      onnxWith({ initializers: [tensor({ name: 'w', dims: [300], external: external(place('w')), ...extra })] }),
    );
    try {
      return (await kiln.checkOnnxGraph(graph, { model })).checked;
    } catch (e) {
      return e.message;
    }
  };
  assert.deepEqual(await verdict((p) => p), [['w', 'kiln']]);
  assert.match(await verdict((p) => ({ ...p, checksum: 'x' })), /external_data keys \["checksum","length","location","offset"\]; exactly location, offset and length are expected/);
  assert.match(await verdict(({ location, offset }) => ({ location, offset })), /exactly location, offset and length/);
  assert.match(await verdict((p) => [...Object.entries(p), ['offset', String(p.offset)]]), /external_data key "offset" given twice/);
  assert.match(await verdict((p) => ({ ...p, location: '../m.kiln' })), /location "\.\.\/m\.kiln" is not a plain file name/);
  assert.match(await verdict((p) => ({ ...p, location: '..' })), /location "\.\." is not a plain file name/);
  assert.match(await verdict((p) => ({ ...p, location: 'm\u0001.kiln' })), /is not a plain file name/); // the core's shard-name rule: no control character
  assert.match(await verdict((p) => ({ ...p, offset: '0x40' })), /external data offset "0x40" is not a decimal number/);
  assert.match(await verdict((p) => ({ ...p, offset: '18446744073709551616' })), /offset "18446744073709551616" is not a decimal number/);
  assert.match(await verdict((p) => p, { rawLength: 4 }), /initializer "w" is external data and also holds data in the graph/);
  assert.match(await verdict((p) => ({ ...p, offset: String(p.offset + 64) })), /initializer "w" \(m\.kiln, offset \d+, length 1200\) is not that tensor's payload/);
});

test('R2: the graph names its Kiln model, which records the graph\'s SHA-256', async () => {
  const w = f32(300);
  const tensors = [{ name: 'w', dtype: 'f32', shape: [300], data: w }];
  const build = (place) => onnxWith({ initializers: [tensor({ name: 'w', dims: [300], external: place('w') })] });
  const spy = spyRuntime();
  const good = pair(tensors, build);
  const ok = await kiln.checkOnnxGraph(good.graph, { model: good.model });
  assert.equal(ok.sha256, good.sha);
  assert.equal(ok.model, 'm.kiln');
  assert.deepEqual(ok.files.map((f) => f.path), ['m.kiln']);
  assert.equal(ok.files[0].data, good.model, 'the checked bytes themselves');
  await kiln.createOnnxSession(spy, good.graph, { model: good.model });
  assert.equal(spy.calls.length, 1);
  assert.deepEqual(spy.calls[0][1].externalData, [{ path: 'm.kiln', data: good.model }]);

  const refusals = [
    // No kiln.model in metadata_props.
    [pair(tensors, (p) => onnxWith({ initializers: [tensor({ name: 'w', dims: [300], external: p('w') })], metadata: [['other', 'm.kiln']] })),
      /the graph names no Kiln model \(metadata_props kiln\.model\): convert it again with kiln convert --onnx-graph/],
    [pair(tensors, (p) => onnxWith({ initializers: [tensor({ name: 'w', dims: [300], external: p('w') })], metadata: [['kiln.model', 'a/m.kiln']] })),
      /metadata_props kiln\.model "a\/m\.kiln" is not a plain file name/],
    // The Kiln model records no digest, another graph's, or the key in upper case.
    [pair(tensors, build, { record: () => null }), /m\.kiln records no kiln\.convert\.onnx_graph_sha256 in its metadata/],
    [pair(tensors, build, { record: (sha) => sha.replace(/^./, (c) => (c === '0' ? '1' : '0')) }), new RegExp(`the graph's SHA-256 is ${good.sha}; m\\.kiln records [0-9a-f]{64}: the graph was changed or belongs to another conversion`)],
    [pair(tensors, build, { record: (sha) => sha.toUpperCase() }), /records [0-9A-F]{64}: the graph was changed/],
  ];
  for (const [{ graph, model }, want] of refusals) {
    await assert.rejects(kiln.checkOnnxGraph(graph, { model }), want);
    await assert.rejects(kiln.createOnnxSession(spy, graph, { model }), want);
  }
  // One byte of the graph changed (the producer's name): its SHA-256 is no longer the one recorded.
  const changed = good.graph.slice();
  changed[changed.indexOf(0x6b /* k of 'kiln-wasm tests' */)] ^= 0x20;
  await assert.rejects(kiln.createOnnxSession(spy, changed, { model: good.model }), new RegExp(`the graph's SHA-256 is ${sha256(changed)}; m\\.kiln records ${good.sha}`));
  // A graph whose initializers are all inline (a shape a Reshape reads) is valid, its model checked all the same.
  const inline = pair(tensors, () => onnxWith({ initializers: [i64('shape', 2)], nodes: [takes('Reshape', ['x', 'shape'])] }));
  assert.deepEqual((await kiln.checkOnnxGraph(inline.graph, { model: inline.model })).checked, [['shape', 'inline']]);
  await kiln.createOnnxSession(spy, inline.graph, { model: inline.model, sessionOptions: { executionProviders: ['wasm'] } });
  assert.deepEqual(spy.calls.at(-1)[1], { executionProviders: ['wasm'], externalData: [] });
  await assert.rejects(kiln.createOnnxSession(spy, inline.graph, { model: pair(tensors, build).model }), /the graph's SHA-256 is/);
  // The model must carry digests (unless requireDigests: false), and is checked whole: a flipped payload byte.
  const plain = modelFile([[DIGEST_KEY, inline.sha]], encodeKiln(tensors));
  await assert.rejects(kiln.createOnnxSession(spy, inline.graph, { model: plain }), /m\.kiln has no digests/);
  await kiln.createOnnxSession(spy, inline.graph, { model: plain, requireDigests: false });
  const flipped = good.model.slice();
  flipped[kiln.parseModel(good.model).tensors.get('w').byteOffset + 3] ^= 1;
  await assert.rejects(kiln.createOnnxSession(spy, good.graph, { model: flipped }), (e) => e instanceof kiln.KilnError && e.code === 'DIGEST');
  // options.files: the model under the name the graph gives it.
  await kiln.checkOnnxGraph(good.graph, { files: [{ path: 'm.kiln', data: good.model }] });
  await assert.rejects(kiln.checkOnnxGraph(good.graph, { files: [{ path: 'n.kiln', data: good.model }] }), /the graph's Kiln model "m\.kiln" \(metadata_props kiln\.model\) is not among options\.files \(n\.kiln\)/);
  assert.equal(spy.calls.length, 3, 'no session after any refusal');
});

test('R3: the checked list, main graph first, then each node\'s subgraphs pre-order', async () => {
  const data = (n) => ({ dtype: 'f32', shape: [n], data: f32(n, n) });
  const tensors = [{ name: 'a', ...data(400) }, { name: 'z', ...data(300) }];
  const small = (name) => i64(name, 2); // inline: the Concat below takes every one (shape data)
  const loop = node({
    op: 'Loop',
    name: 'loop',
    attributes: [attribute({ name: 'body', g: graphOf({ name: 'body', initializers: [small('d1'), small('d2')] }) })],
  });
  const build = (place) =>
    onnxWith({
      // ONNX writes a graph's nodes first: the list still starts with the main graph's initializers.
      nodes: [
        takes('Concat', ['b', 'c', 'd1', 'd2', 'e', 'f', 'g', 'h', 'i']),
        node({
          op: 'If',
          name: 'if',
          attributes: [
            attribute({ name: 'then_branch', g: graphOf({ name: 'then', initializers: [small('c')], nodes: [loop] }) }),
            attribute({ name: 'else_branch', g: graphOf({ name: 'else', initializers: [small('e')] }) }),
          ],
        }),
        node({ op: 'Custom', name: 'multi', attributes: [attribute({ name: 'branches', graphs: [graphOf({ name: 'f', initializers: [small('f')] }), graphOf({ name: 'g', initializers: [small('g')] })] })] }),
        // One attribute with both: its g before its graphs.
        node({ op: 'Custom', name: 'both', attributes: [attribute({ name: 'x', g: graphOf({ initializers: [small('h')] }), graphs: [graphOf({ initializers: [small('i')] })] })] }),
      ],
      initializers: [tensor({ name: 'a', dims: [400], external: place('a') }), small('b'), tensor({ name: 'z', dims: [300], external: place('z') })],
    });
  const { graph, model } = pair(tensors, build);
  const got = await kiln.checkOnnxGraph(graph, { model });
  assert.deepEqual(got.checked, [['a', 'kiln'], ['b', 'inline'], ['z', 'kiln'], ['c', 'inline'], ['d1', 'inline'], ['d2', 'inline'], ['e', 'inline'], ['f', 'inline'], ['g', 'inline'], ['h', 'inline'], ['i', 'inline']]);
  assert.deepEqual(externalInitializers(graph).map((r) => r.name), ['a', 'z']);
});

test('R2 for a sharded model: the manifest records the SHA-256 (a URL, or bytes among options.files)', async () => {
  // A sharded model by the core's writer (t.0 .. t.3 of 1,200 bytes over 2 shards), a graph reading both shards.
  const write = (recorded) => writeSharded({ name: 'onnx', shards: 2, tensors: 4, bytes: 1200, metadata: [[DIGEST_KEY, recorded]] });
  const draft = write('0'.repeat(64));
  const buildGraph = (files) => {
    const inits = [];
    for (const [name, bytes] of files) {
      if (name === 'onnx.kiln') continue;
      for (const t of kiln.parseModel(bytes).tensors) {
        if (!t.name.startsWith('t.')) continue;
        inits.push(tensor({ name: t.name, dims: [...t.shape], external: { location: name, offset: t.byteOffset, length: t.byteLength } }));
      }
    }
    return onnxWith({ initializers: inits, metadata: [['kiln.model', 'onnx.kiln']] });
  };
  const graph = buildGraph(draft.files);
  const m = write(sha256(graph));
  assert.deepEqual(buildGraph(m.files), graph, 'the same places with the digest recorded');
  const server = await rangeServer();
  try {
    for (const [n, b] of m.files) server.files.set(`/s/${n}`, b);
    const got = await kiln.checkOnnxGraph(graph, { model: `${server.base}/s/onnx.kiln` });
    assert.deepEqual(got.checked, ['t.0', 't.1', 't.2', 't.3'].map((n) => [n, 'kiln']));
    assert.deepEqual(got.files.map((f) => f.path).sort(), ['onnx-00001-of-00002.kiln', 'onnx-00002-of-00002.kiln']);
    // The manifest recording another digest (the draft's): refused before a shard is fetched.
    for (const [n, b] of draft.files) server.files.set(`/o/${n}`, b);
    await assert.rejects(kiln.checkOnnxGraph(graph, { model: `${server.base}/o/onnx.kiln` }), new RegExp(`the graph's SHA-256 is ${sha256(graph)}; onnx\\.kiln records 0{64}`));
    assert.deepEqual(server.stats.log.filter(([path]) => path.startsWith('/o/onnx-')), [], 'no shard fetched');
  } finally {
    await server.close();
  }
  // The manifest as bytes among options.files, with every shard.
  const files = [...m.files].map(([path, data]) => ({ path, data }));
  assert.equal((await kiln.checkOnnxGraph(graph, { files })).checked.length, 4);
  await assert.rejects(kiln.checkOnnxGraph(graph, { files: files.filter((f) => f.path !== 'onnx-00002-of-00002.kiln') }), /shard 2 of onnx\.kiln, onnx-00002-of-00002\.kiln, is not among options\.files/);
  // A flipped payload byte in the second shard: its KilnError, naming it.
  const flipped = files.map((f) => {
    if (f.path !== 'onnx-00002-of-00002.kiln') return f;
    const data = f.data.slice();
    data[kiln.parseModel(data).tensors.get('t.3').byteOffset] ^= 4;
    return { ...f, data };
  });
  await assert.rejects(kiln.checkOnnxGraph(graph, { files: flipped }), (e) => e instanceof kiln.KilnError && e.code === 'DIGEST' && e.file === 'onnx-00002-of-00002.kiln');
  // As bytes in options.model: the shards cannot be fetched.
  await assert.rejects(kiln.checkOnnxGraph(graph, { model: m.files.get('onnx.kiln') }), /onnx\.kiln is a sharded model's manifest, given as bytes: pass its URL/);
});

test('Node: graphs built here run on their Kiln file, bit-identical to the inline graph (every weight external however small; a shape inline)', { skip: ort === null && 'onnxruntime-web not installed' }, async () => {
  ort.env.wasm.numThreads = 1;
  if (ortDist) ort.env.wasm.wasmPaths = ortDist;
  const floats = (n, seed) => new Float32Array(f32(n, seed).buffer);
  const bits = (t) => new Uint32Array(t.buffer, t.byteOffset, t.length);
  const w = { w1: floats(2048, 1), b1: floats(32, 2), w2: floats(320, 3), b2: floats(10, 4) };
  const tensors = [
    { name: 'fc1.weight', dtype: 'f32', shape: [32, 64], data: le(w.w1) },
    { name: 'fc1.bias', dtype: 'f32', shape: [32], data: le(w.b1) },
    { name: 'fc2.weight', dtype: 'f32', shape: [10, 32], data: le(w.w2) },
    { name: 'fc2.bias', dtype: 'f32', shape: [10], data: le(w.b2) },
  ];
  const names = tensors.map((t) => t.name);
  const externalAll = (place) => Object.fromEntries(names.map((n) => [n, place(n)]));
  const { graph, model } = pair(tensors, (place) => digitsOnnx(w, { external: externalAll(place), metadata: [['kiln.model', 'm.kiln']] }));
  assert.deepEqual((await kiln.checkOnnxGraph(graph, { model })).checked, names.map((n) => [n, 'kiln']));
  const input = new ort.Tensor('float32', Float32Array.from({ length: 4 * 64 }, (_, i) => (i % 17) / 8), [4, 64]);
  const session = await kiln.createOnnxSession(ort, graph, { model, sessionOptions: { executionProviders: ['wasm'] } });
  const got = (await session.run({ x: input })).logits.data;
  const inline = await ort.InferenceSession.create(digitsOnnx(w), { executionProviders: ['wasm'] });
  const want = (await inline.run({ x: input })).logits.data;
  assert.deepEqual(bits(got), bits(want));
  // The biases left inline (128 and 40 bytes; no node reads them as data): refused, the first by name, before the runtime.
  const spy = spyRuntime();
  const weights = (place) => ({ 'fc1.weight': place('fc1.weight'), 'fc2.weight': place('fc2.weight') });
  const biases = pair(tensors, (place) => digitsOnnx(w, { external: weights(place), metadata: [['kiln.model', 'm.kiln']] }));
  await assert.rejects(kiln.createOnnxSession(spy, biases.graph, { model: biases.model }), (e) => e.initializer === 'fc1.bias' && /\(128 bytes; no node reads it as data/.test(e.message));
  assert.equal(spy.calls.length, 0);

  // y = Reshape(x @ w, shape) + b: the shape (read as data while the graph resolves) inline, w and a 16-byte b external.
  const shapeOf = le(BigInt64Array.from([8n, 4n]));
  const mw = floats(512, 5);
  const mb = floats(4, 6);
  const reshaped = (place) =>
    modelOf({
      graph: graphOf({
        name: 'main',
        nodes: [
          node({ op: 'MatMul', inputs: ['x', 'w'], outputs: ['h'] }),
          node({ op: 'Reshape', inputs: ['h', 'shape'], outputs: ['h4'] }),
          node({ op: 'Add', inputs: ['h4', 'b'], outputs: ['y'] }),
        ],
        initializers: [
          tensor({ name: 'w', dims: [16, 32], ...(place ? { external: place('w') } : { raw: le(mw) }) }),
          tensor({ name: 'shape', dataType: ONNX.INT64, dims: [2], raw: shapeOf }),
          tensor({ name: 'b', dims: [4], ...(place ? { external: place('b') } : { raw: le(mb) }) }),
        ],
        inputs: [['x', [1, 16]]],
        outputs: [['y', [8, 4]]],
      }),
      metadata: place ? [['kiln.model', 'm.kiln']] : [],
    });
  const m = pair([{ name: 'w', dtype: 'f32', shape: [16, 32], data: le(mw) }, { name: 'b', dtype: 'f32', shape: [4], data: le(mb) }], reshaped);
  assert.deepEqual((await kiln.checkOnnxGraph(m.graph, { model: m.model })).checked, [['w', 'kiln'], ['shape', 'inline'], ['b', 'kiln']]);
  const x16 = new ort.Tensor('float32', Float32Array.from({ length: 16 }, (_, i) => (i % 5) / 4 - 0.5), [1, 16]);
  const y = (await (await kiln.createOnnxSession(ort, m.graph, { model: m.model, sessionOptions: { executionProviders: ['wasm'] } })).run({ x: x16 })).y;
  const yWant = (await (await ort.InferenceSession.create(reshaped(null), { executionProviders: ['wasm'] })).run({ x: x16 })).y;
  assert.deepEqual(y.dims, [8, 4]);
  assert.deepEqual(bits(y.data), bits(yWant.data));
});

test('Node: weights in subgraphs, external data where they stand, run bit-identical to the original (handed to the runtime inline)', { skip }, async () => {
  ort.env.wasm.numThreads = 1;
  if (ortDist) ort.env.wasm.wasmPaths = ortDist;
  const n = 300; // 1,200 bytes: external data by R1
  const branch = (name, op, w, seed, out) =>
    graphOf({ name, nodes: [node({ op, inputs: ['x', w], outputs: [out] })], initializers: [tensor({ name: w, dims: [n], raw: f32(n, seed) })], outputs: [[out, [n]]] });
  const ifNode = node({
    op: 'If',
    name: 'branch',
    inputs: ['cond'],
    outputs: ['y'],
    attributes: [attribute({ name: 'then_branch', g: branch('then', 'Add', 'then.a', 5, 'ya') }), attribute({ name: 'else_branch', g: branch('else', 'Mul', 'else.b', 6, 'yb') })],
  });
  const original = modelOf({ graph: graphOf({ name: 'main', nodes: [ifNode], inputs: [['cond', [], 9], ['x', [n]]], outputs: [['y', [n]]] }) });
  const folder = mkdtempSync(join(tmpdir(), 'kiln-onnx-if-'));
  try {
    writeFileSync(join(folder, 'if.onnx'), original);
    execFileSync(bin, ['convert', '-q', join(folder, 'if.onnx'), '-o', join(folder, 'if.kiln'), '--onnx-graph', join(folder, 'if.kiln.onnx')]);
    const graph = new Uint8Array(readFileSync(join(folder, 'if.kiln.onnx')));
    const model = new Uint8Array(readFileSync(join(folder, 'if.kiln')));
    assert.deepEqual((await kiln.checkOnnxGraph(graph, { model })).checked, [['then.a', 'kiln'], ['else.b', 'kiln']]);
    assert.deepEqual(externalInitializers(graph).map((r) => [r.name, r.subgraph]), [['then.a', true], ['else.b', true]]);
    const opts = { executionProviders: ['wasm'] };
    const session = await kiln.createOnnxSession(ort, graph, { model, sessionOptions: opts });
    const reference = await ort.InferenceSession.create(original, opts);
    const x = new ort.Tensor('float32', Float32Array.from({ length: n }, (_, i) => (i % 23) / 7 - 1), [n]);
    for (const c of [true, false]) {
      const feeds = { cond: new ort.Tensor('bool', [c], []), x };
      const got = (await session.run(feeds)).y.data;
      const want = (await reference.run(feeds)).y.data;
      assert.deepEqual(new Uint32Array(got.buffer, got.byteOffset, got.length), new Uint32Array(want.buffer, want.byteOffset, want.length), String(c));
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});
