// The npm package as a consumer installs it (`npm pack`, then `npm install`
// of the tarball into a fresh project): Node ESM and CommonJS with the same
// API and no init call, kiln-wasm/slim with init({ wasm }), the exports map,
// what the tarball holds (entries, glue, .wasm, types, README, both licenses).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pkgDir, project, tarball } from '../test-support/packed.mjs';

const example = fileURLToPath(new URL('../../spec/examples/digits-mlp.kiln', import.meta.url));
const exampleModel = fileURLToPath(new URL('../../spec/examples/digits-mlp.model.kiln', import.meta.url));
const version = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version;
let esm;
let cjs;

before(() => {
  esm = project('esm', { type: 'module' });
  cjs = project('cjs', { type: 'commonjs' });
});

after(() => {
  for (const d of [esm, cjs]) if (d) rmSync(d, { recursive: true, force: true });
});

const run = (dir, file, source) => {
  writeFileSync(join(dir, file), source);
  return execFileSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
};

// The same program for both module systems: the example model file, a tensor, a Frozen value, an error.
const body = `
  const b = readFileSync(${JSON.stringify(exampleModel)});
  const bytes = new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
  const { metadata, tensors, isModelFile } = kiln.parseModel(bytes);
  const w = tensors.get('fc1.weight').viewAs('f32');
  const plain = kiln.parseDirectory(readFileSync(${JSON.stringify(example)}));
  const v = kiln.decodeValue(Uint8Array.of(2, 0, 0, 0, 104, 105), 'str');
  let err = null;
  try { kiln.parseDirectory(new Uint8Array(3)); } catch (e) { err = [e instanceof kiln.KilnError, e.code, e.offset]; }
  console.log(JSON.stringify([kiln.version(), isModelFile, metadata.get('license'), tensors.length, w.buffer === bytes.buffer, w.length, plain.length, v, err, Object.keys(kiln).sort()]));
`;

test('import * as kiln from "kiln-wasm": Node ESM, no init call', () => {
  const out = JSON.parse(run(esm, 'main.mjs', `import * as kiln from 'kiln-wasm';\nimport { readFileSync } from 'node:fs';\n${body}`));
  assert.deepEqual(out.slice(0, 9), [version, true, 'MIT OR Apache-2.0', 8, true, 2048, 8, 'hi', [true, 'EOF', 3]]);
  for (const name of ['parseModel', 'parseDirectory', 'isModelFile', 'init', 'openRemote', 'loadTensor', 'loadDirectory', 'loadDirectoryToGPU', 'toGPUBuffer', 'createOnnxSession', 'checkOnnxGraph', 'DirectoryLoader', 'KilnError', 'decodeValue', 'decodeFrame', 'dequantize', 'version']) {
    assert.ok(out[9].includes(name), name);
  }
  assert.ok(out[9].includes('cache'), 'cache (usage, delete, memory)');
  // Deep imports are closed by the exports map.
  writeFileSync(join(esm, 'deep.mjs'), `import 'kiln-wasm/kiln.js';`);
  assert.throws(() => execFileSync(process.execPath, ['deep.mjs'], { cwd: esm, stdio: 'pipe' }), /ERR_PACKAGE_PATH_NOT_EXPORTED/);
});

test('require("kiln-wasm"): CommonJS, synchronous, the same API as the ESM entry', () => {
  const fromEsm = JSON.parse(run(esm, 'main.mjs', `import * as kiln from 'kiln-wasm';\nimport { readFileSync } from 'node:fs';\n${body}`));
  const fromCjs = JSON.parse(run(cjs, 'main.js', `const kiln = require('kiln-wasm');\nconst { readFileSync } = require('node:fs');\n${body}`));
  assert.deepEqual(fromCjs, fromEsm);
  // A .cjs file in an ESM project, and the entry really is the CommonJS build.
  const out = run(esm, 'main.cjs', `const k = require('kiln-wasm'); console.log(require.resolve('kiln-wasm'), typeof k.parseModel);`);
  assert.match(out, /index\.cjs function/);
});

test('one KilnError class across the ESM and CommonJS copies of the package', () => {
  const out = run(esm, 'both.mjs', `
    import * as esm from 'kiln-wasm';
    import { createRequire } from 'node:module';
    const cjs = createRequire(import.meta.url)('kiln-wasm');
    const caught = (k) => { try { k.parseDirectory(new Uint8Array(1)); } catch (e) { return e; } };
    const a = caught(esm);
    const b = caught(cjs);
    class Mine extends esm.KilnError {}
    console.log(JSON.stringify([esm.KilnError !== cjs.KilnError, a instanceof cjs.KilnError, b instanceof esm.KilnError, new Error('x') instanceof esm.KilnError, a instanceof Mine]));
  `);
  assert.deepEqual(JSON.parse(out), [true, true, true, false, false]);
});

test('Directory and Tensor cannot be constructed', () => {
  const out = run(esm, 'construct.mjs', `
    import { Directory, Tensor, RemoteDirectory } from 'kiln-wasm';
    const msg = (C) => { try { new C(); return 'constructed'; } catch (e) { return e.constructor.name + ': ' + e.message; } };
    console.log(JSON.stringify([msg(Directory), msg(Tensor), msg(RemoteDirectory)]));
  `);
  const [d, t, r] = JSON.parse(out);
  assert.match(d, /^TypeError: kiln-wasm: Directory cannot be constructed directly: use parseDirectory/);
  assert.match(t, /^TypeError: kiln-wasm: Tensor cannot be constructed directly/);
  assert.match(r, /^TypeError: kiln-wasm: RemoteDirectory cannot be constructed directly: use openRemote/);
});

test('kiln-wasm/slim: a clear error before init, then init({ wasm }) with bytes or a compiled module', () => {
  for (const [label, wasmExpr] of [
    ['bytes', `readFileSync(wasmPath)`],
    ['a WebAssembly.Module', `new WebAssembly.Module(readFileSync(wasmPath))`],
    ['a promise of bytes', `Promise.resolve(readFileSync(wasmPath))`],
  ]) {
    const out = run(esm, 'slim.mjs', `
      import * as kiln from 'kiln-wasm/slim';
      import { readFileSync } from 'node:fs';
      import { createRequire } from 'node:module';
      const wasmPath = createRequire(import.meta.url).resolve('kiln-wasm/kiln_wasm_bg.wasm');
      let before;
      try { kiln.parseDirectory(new Uint8Array(64)); } catch (e) { before = e.message; }
      await kiln.init({ wasm: ${wasmExpr} });
      await kiln.init(); // later calls resolve at once
      const d = kiln.parseDirectory(readFileSync(${JSON.stringify(example)}));
      console.log(JSON.stringify([before, d.length, kiln.version()]));
    `);
    const [before, n, v] = JSON.parse(out);
    assert.match(before, /kiln-wasm: the WebAssembly module is not initialised: kiln-wasm\/slim needs `await init\(\)`/, label);
    assert.deepEqual([n, v], [8, version], label);
  }
  // The default entry's init resolves at once.
  assert.equal(run(esm, 'init.mjs', `import { init, version } from 'kiln-wasm'; await init(); console.log(version());`).trim(), version);
});

test('npm pack ships the entries, the glue, the .wasm, the types, the README and both licenses', () => {
  const { files } = tarball();
  assert.deepEqual(files, [
    'LICENSE-APACHE', 'LICENSE-MIT', 'README.md', 'cache.js', 'directory.js', 'elements.js', 'frozen.js', 'gpu.js', 'index.cjs', 'index.d.cts', 'index.d.ts',
    'index.js', 'kiln.js', 'loader.js', 'modules.js', 'onnx.js', 'package.json', 'progress.js', 'ready.js', 'remote.js', 'slim.js', 'validate.js',
    'wasm/kiln_full.js', 'wasm/kiln_full_inline.js', 'wasm/kiln_wasm.js', 'wasm/kiln_wasm_bg.wasm',
  ]);
  const dry = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }))[0];
  assert.deepEqual(dry.files.map((f) => f.path).sort(), files, 'npm pack --dry-run lists the same files');
  const installed = join(esm, 'node_modules', 'kiln-wasm');
  assert.match(readFileSync(join(installed, 'LICENSE-MIT'), 'utf8'), /^MIT License\n\nCopyright \(c\) The Kiln authors\n\nPermission is hereby granted/);
  assert.match(readFileSync(join(installed, 'LICENSE-APACHE'), 'utf8'), /Apache License\s+Version 2\.0, January 2004[\s\S]*END OF TERMS AND CONDITIONS/);
  const meta = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  assert.equal(meta.name, 'kiln-wasm');
  assert.equal(meta.license, 'MIT OR Apache-2.0');
  assert.deepEqual(meta.exports['.'].import, { types: './index.d.ts', default: './index.js' });
  assert.deepEqual(meta.exports['.'].require, { types: './index.d.cts', default: './index.cjs' });
  // No top-level await in the ES module graph: Node's require() of an ES module refuses one
  // (ERR_REQUIRE_ASYNC_MODULE, the failure of earlier versions). No import.meta outside slim.js.
  const out = run(cjs, 'esm-graph.js', `
    const a = require('./node_modules/kiln-wasm/index.js');
    const b = require('./node_modules/kiln-wasm/slim.js');
    console.log(typeof a.parseModel, typeof b.init);
  `);
  assert.equal(out.trim(), 'function function');
  for (const f of files.filter((f) => /\.c?js$/.test(f) && f !== 'slim.js')) {
    assert.doesNotMatch(readFileSync(join(installed, f), 'utf8'), /import\.meta/, `${f}: import.meta`);
  }
});

test('the shipped modules: no test-only export, one embedded copy, one .wasm file', async () => {
  const { files } = tarball();
  const installed = join(esm, 'node_modules', 'kiln-wasm');
  const { bytesOf, wasmFromText } = await import(join(installed, 'modules.js'));
  const text = readFileSync(join(installed, 'wasm', 'kiln_full_inline.js'), 'utf8');
  // ASCII only: a classic script (webpack's, an IIFE) is decoded in the page's charset.
  assert.ok(/^[\x00-\x7f]*$/.test(text), 'kiln_full_inline.js is ASCII');
  const full = bytesOf(wasmFromText(text));
  assert.deepEqual(full, bytesOf((await import(join(installed, 'wasm', 'kiln_full_inline.js'))).wasm), 'index.cjs and index.js read the same bytes');
  const open = readFileSync(join(installed, 'wasm', 'kiln_wasm_bg.wasm'));
  assert.deepEqual(files.filter((f) => f.endsWith('.wasm')), ['wasm/kiln_wasm_bg.wasm']);
  const exportsOf = (bytes) => WebAssembly.Module.exports(new WebAssembly.Module(bytes)).map((e) => e.name);
  const has = (bytes, prefix) => exportsOf(bytes).some((n) => n.startsWith(prefix));
  for (const [name, bytes] of [['open', open], ['full', full]]) {
    for (const t of ['check_direct', 'table_layout', 'dtype_bits']) assert.ok(!exportsOf(bytes).includes(t), `${name}: ${t}`);
  }
  for (const f of ['wasm/kiln_wasm.js', 'wasm/kiln_full.js']) {
    for (const t of ['check_direct', 'table_layout', 'dtype_bits']) assert.doesNotMatch(readFileSync(join(installed, f), 'utf8'), new RegExp(`\\b${t}\\b`), `${f}: ${t}`);
  }
  // The open module has no manifest reader and no Frozen checker; the full one has both.
  assert.deepEqual([open, full].map((b) => [has(b, 'validator_'), has(b, 'manifestreader_'), has(b, 'frozenchecker_')]), [[true, false, false], [true, true, true]]);
  // The embedded module is in its inline file and nowhere else.
  const head = text.slice(200, 4096);
  assert.deepEqual(files.filter((f) => /\.c?js$/.test(f) && readFileSync(join(installed, f), 'utf8').includes(head)), ['wasm/kiln_full_inline.js']);
});

test('bytesOf decodes the embedded text as build.sh writes it: both escapes, every byte, past a memory page', async () => {
  const { bytesOf } = await import(join(pkgDir, 'modules.js'));
  // Character c below 0x7e is byte c; 0x7e then c is byte c + 0x80; 0x7f then c is byte c (0x7e, 0x7f).
  assert.deepEqual([...bytesOf('')], []);
  assert.deepEqual([...bytesOf('\0A}\x7e\0\x7e\x7f\x7f\x7e\x7f\x7f')], [0, 0x41, 0x7d, 0x80, 0xff, 0x7e, 0x7f]);
  // Every byte value, and the text longer than a 64 KiB page and ending in an escape.
  const bytes = Array.from({ length: 70000 }, (_, i) => (i * 7 + (i >> 8)) & 0xff);
  bytes[bytes.length - 1] = 0xfe;
  const text = bytes.map((b) => (b >= 0x80 ? '\x7e' + String.fromCharCode(b - 0x80) : b >= 0x7e ? '\x7f' + String.fromCharCode(b) : String.fromCharCode(b))).join('');
  assert.ok(text.length > 65536 && text.endsWith('\x7e~'));
  assert.deepEqual(bytesOf(text), Uint8Array.from(bytes));
});

test('the default entries have the Frozen part at once (ESM and CommonJS)', () => {
  const probe = `
    const before = kiln.decodeValue(Uint8Array.of(7, 0, 0, 0), 'u32');
    console.log(JSON.stringify(before));
  `;
  assert.equal(run(esm, 'lazy.mjs', `import * as kiln from 'kiln-wasm';\n${probe}`).trim(), '7');
  assert.equal(run(cjs, 'lazy.js', `const kiln = require('kiln-wasm');\n${probe}`).trim(), '7');
});

test('kiln-wasm/slim: toFloat32 of f32 needs only init(); dequantize says how to load the values part, then gives the default entry\'s values', () => {
  // The first quantized tensor of the example, dequantized (its values joined), by an entry.
  const values = (entry) => `
    const tensors = kiln.parseDirectory(readFileSync(${JSON.stringify(example)})).tensors();
    const q = tensors.find((t) => t.quant !== null);
    console.log(JSON.stringify([q.dtype, [...kiln.dequantize(q)].join()]));`;
  const out = run(esm, 'slim-values.mjs', `
    import * as kiln from 'kiln-wasm/slim';
    import { readFileSync } from 'node:fs';
    import { createRequire } from 'node:module';
    const dir = createRequire(import.meta.url).resolve('kiln-wasm/kiln_wasm_bg.wasm').replace(/kiln_wasm_bg\\.wasm$/, '');
    await kiln.init({ wasm: readFileSync(dir + 'kiln_wasm_bg.wasm') });
    const f32 = kiln.parseDirectory(readFileSync(${JSON.stringify(example)})).tensors().find((t) => t.dtype === 'f32');
    let before;
    try { kiln.dequantize(kiln.parseDirectory(readFileSync(${JSON.stringify(example)})).tensors().find((t) => t.quant !== null)); } catch (e) { before = e.message; }
    console.log(JSON.stringify([f32.toFloat32().length === f32.elementCount, before]));
    await kiln.init({ values: true });
    ${values()}
  `).trim().split('\n');
  const [plain, before] = JSON.parse(out[0]);
  assert.equal(plain, true, 'toFloat32 of f32 before the values part');
  assert.match(before, /the values module is not loaded: with kiln-wasm\/slim, call `await init\(\{ values: true \}\)`/);
  const def = run(esm, 'default-values.mjs', `import * as kiln from 'kiln-wasm';\nimport { readFileSync } from 'node:fs';\n${values()}`).trim();
  assert.equal(out[1], def);
  assert.notEqual(JSON.parse(def)[0], 'f32', 'a narrow dtype');
});

test('kiln-wasm/slim: decodeValue says how to load the Frozen part, then works after init({ frozen: true })', () => {
  const out = run(esm, 'slim-frozen.mjs', `
    import * as kiln from 'kiln-wasm/slim';
    import { readFileSync } from 'node:fs';
    import { createRequire } from 'node:module';
    const dir = createRequire(import.meta.url).resolve('kiln-wasm/kiln_wasm_bg.wasm').replace(/kiln_wasm_bg\.wasm$/, '');
    await kiln.init({ wasm: readFileSync(dir + 'kiln_wasm_bg.wasm') });
    let before;
    try { kiln.decodeValue(Uint8Array.of(2, 0, 0, 0, 104, 105), 'str'); } catch (e) { before = e.message; }
    await kiln.init({ frozen: true });
    console.log(JSON.stringify([before, kiln.decodeValue(Uint8Array.of(2, 0, 0, 0, 104, 105), 'str')]));
  `);
  const [before, v] = JSON.parse(out);
  assert.match(before, /the frozen module is not loaded: with kiln-wasm\/slim, call `await init\(\{ frozen: true \}\)`/);
  assert.equal(v, 'hi');
});
