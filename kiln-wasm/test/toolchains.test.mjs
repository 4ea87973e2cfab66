// The package in every toolchain, zero configuration, exactly as its README's
// "Bundlers and runtimes" section shows: each snippet is taken from js/README.md,
// the packed package is installed into a fresh project (`npm install` of the
// tarball), the tools pinned in kiln-wasm/package-lock.json build it, and the
// page runs in headless Chromium: Node ESM and CommonJS, TypeScript (nodenext
// and bundler), vite 5 and the latest vite (build and dev server), esbuild (ESM
// and IIFE), webpack 5, rollup, a module worker (bundled by vite, and without a
// bundler), and kiln-wasm/slim with init() (vite) and init({ wasm }) (esbuild).
// Every page must log the model's metadata and values, with no page error, no
// console error and no failed request. Skipped without Chromium/playwright-core.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, execSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseModel } from '../pkg/index.js';
import { project } from '../test-support/packed.mjs';
import { rangeServer } from '../test-support/range-server.mjs';

const readme = readFileSync(new URL('../js/README.md', import.meta.url), 'utf8');
const modelPath = fileURLToPath(new URL('../../spec/examples/digits-mlp.model.kiln', import.meta.url));
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
let chromium = null;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  chromium = null;
}
const skip = (!existsSync(executablePath) && `no Chromium at ${executablePath}`) || (chromium === null && 'playwright-core not installed (npm ci in kiln-wasm/)');

/** The README's snippets: "```lang name" fences of the Bundlers section, by name. */
function snippets() {
  const start = readme.indexOf('## Bundlers and runtimes');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end);
  const out = new Map();
  for (const m of section.matchAll(/```(\w+) ([^\n`]+)\n([\s\S]*?)\n```/g)) out.set(m[2].trim(), `${m[3]}\n`);
  return out;
}
const S = snippets();

// What every page logs, computed here with the same package.
const model = readFileSync(modelPath);
const m = parseModel(new Uint8Array(model.buffer.slice(model.byteOffset, model.byteOffset + model.length)));
const W0 = m.tensors.get('fc1.weight').viewAs('f32')[0];
const B0 = m.tensors.get('fc1.bias').viewAs('f32')[0];
const LICENSE = m.metadata.get('license');
const EXPECT = {
  main: `kiln: ${LICENSE}, 8 tensors, w[0] = ${W0}, b[0] = ${B0}`,
  worker: `kiln: ${LICENSE}, 8 tensors in a worker`,
  slim: 'kiln: slim, 8 tensors',
};

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.css': 'text/css', '.json': 'application/json' };
let root = null; // the directory the static server serves
let server;
let ctx;
let base;
let profile;
let work;
let latest; // the project with the latest vite, esbuild, webpack, rollup, TypeScript
let five; // the project with vite 5
const timings = [];

function serveStatic(req, res) {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
  if (path.endsWith('.kiln')) return false; // the range server has it
  const file = join(root, path === '' ? 'index.html' : path);
  if (!file.startsWith(root) || !existsSync(file)) return false;
  res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  return true;
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Runs a README shell snippet in `dir` (npx resolves the project's own bins: no download). */
function sh(dir, name) {
  const t0 = Date.now();
  execSync(S.get(name), { cwd: dir, stdio: 'pipe', env: { ...process.env, npm_config_offline: 'true' } });
  timings.push([name, Date.now() - t0]);
}

function write(dir, files) {
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
}

/** dist/ of `dir` moved to work/<name>, with a page for it and the model. */
function collect(dir, name, page = null) {
  const out = join(work, name);
  renameSync(join(dir, 'dist'), out);
  if (page) writeFileSync(join(out, 'index.html'), page);
  return out;
}

const modulePage = '<!doctype html><link rel="icon" href="data:,"><script type="module" src="/main.js"></script>\n';
const classicPage = '<!doctype html><link rel="icon" href="data:,"><script src="/main.js"></script>\n';

/** Loads the page at `url` in Chromium; resolves with the first "kiln:" console line. */
async function visit(url) {
  const page = await ctx.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  // Failed loads are reported by URL below (the console line has none); the browser's own
  // favicon request is not the page's.
  page.on('console', (msg) => msg.type() === 'error' && !msg.text().startsWith('Failed to load resource') && problems.push(`console: ${msg.text()}`));
  page.on('requestfailed', (r) => problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => r.status() >= 400 && !r.url().endsWith('/favicon.ico') && problems.push(`HTTP ${r.status()}: ${r.url()}`));
  try {
    const line = page.waitForEvent('console', { predicate: (msg) => msg.text().startsWith('kiln:'), timeout: 15000 });
    await page.goto(url);
    const text = (await line).text();
    await page.waitForTimeout(50);
    return { text, problems };
  } finally {
    await page.close();
  }
}

async function check(dir, expect) {
  root = dir;
  const { text, problems } = await visit(`${base}/index.html`);
  assert.equal(text, expect);
  assert.deepEqual(problems, []);
}

before(async () => {
  if (skip) return;
  work = mkdtempSync(join(tmpdir(), 'kiln-toolchains-'));
  latest = project('latest', {
    base: work,
    tools: ['vite', 'esbuild', 'webpack', 'webpack-cli', 'rollup', '@rollup/plugin-node-resolve', 'typescript'],
  });
  five = project('vite5', { base: work, tools: [['vite5', 'vite']] });
  for (const dir of [latest, five]) {
    mkdirSync(join(dir, 'public'));
    copyFileSync(modelPath, join(dir, 'public', 'digits-mlp.model.kiln'));
    copyFileSync(modelPath, join(dir, 'digits-mlp.model.kiln'));
    write(dir, { 'main.js': S.get('main.js'), 'index.html': S.get('index.html') });
  }
  server = await rangeServer({ routes: serveStatic });
  server.files.set('/digits-mlp.model.kiln', new Uint8Array(model));
  base = server.base;
  profile = mkdtempSync(join(tmpdir(), 'chromium-'));
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await ctx?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`# build times (ms): ${timings.map(([n, t]) => `${n} ${t}`).join(', ')}`);
});

test('the README has every snippet the toolchains use', () => {
  for (const name of ['main.js', 'node-esm.mjs', 'node-cjs.cjs', 'tsconfig-nodenext.json', 'tsconfig-bundler.json', 'check.ts', 'index.html', 'vite', 'esbuild-esm', 'esbuild-iife', 'webpack', 'rollup.config.mjs', 'rollup', 'worker.js', 'main-worker.js', 'slim.js', 'esbuild-slim']) {
    assert.ok(S.has(name), name);
  }
});

test('Node: the ESM and the CommonJS snippets', { skip }, () => {
  write(latest, { 'node-esm.mjs': S.get('node-esm.mjs'), 'node-cjs.cjs': S.get('node-cjs.cjs') });
  for (const f of ['node-esm.mjs', 'node-cjs.cjs']) {
    const out = execFileSync(process.execPath, [f], { cwd: latest, encoding: 'utf8' });
    assert.equal(out.trim(), `${LICENSE} ${W0}`, f);
  }
});

test('TypeScript: the snippet under nodenext and bundler, --strict', { skip }, () => {
  write(latest, { 'check.ts': S.get('check.ts'), 'tsconfig-nodenext.json': S.get('tsconfig-nodenext.json'), 'tsconfig-bundler.json': S.get('tsconfig-bundler.json') });
  for (const cfg of ['tsconfig-nodenext.json', 'tsconfig-bundler.json']) {
    const t0 = Date.now();
    try {
      execFileSync(process.execPath, [join(latest, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', cfg], { cwd: latest, encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      assert.fail(`${cfg}: ${e.stdout}${e.stderr}`);
    }
    timings.push([`tsc ${cfg}`, Date.now() - t0]);
  }
});

for (const [label, which] of [['vite 5', 'five'], ['the latest vite', 'latest']]) {
  test(`${label}: vite build, then the page`, { skip }, async () => {
    const dir = which === 'five' ? five : latest;
    const version = JSON.parse(readFileSync(join(dir, 'node_modules', 'vite', 'package.json'), 'utf8')).version;
    write(dir, { 'index.html': S.get('index.html') });
    sh(dir, 'vite');
    await check(collect(dir, `vite-${version}`), EXPECT.main);
  });

  test(`${label}: the dev server`, { skip }, async () => {
    const dir = which === 'five' ? five : latest;
    write(dir, { 'index.html': S.get('index.html') });
    const port = await freePort();
    // No colours (CI sets CI=true, which turns them on): the log is matched as text.
    const env = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' };
    const vite = spawn(process.execPath, [join(dir, 'node_modules', 'vite', 'bin', 'vite.js'), '--port', String(port), '--strictPort', '--host', '127.0.0.1'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const plain = (d) => String(d).replace(/\x1b\[[0-9;]*m/g, '');
    vite.stdout.on('data', (d) => { log += plain(d); });
    vite.stderr.on('data', (d) => { log += plain(d); });
    try {
      for (let i = 0; i < 200 && !/Local:/.test(log); i++) await new Promise((r) => setTimeout(r, 50));
      assert.match(log, /Local:/, log);
      const { text, problems } = await visit(`http://127.0.0.1:${port}/`);
      assert.equal(text, EXPECT.main);
      assert.deepEqual(problems, []);
      assert.doesNotMatch(log, /error/i, log);
    } finally {
      vite.kill();
    }
  });
}

test('esbuild: ESM and IIFE bundles', { skip }, async () => {
  sh(latest, 'esbuild-esm');
  await check(collect(latest, 'esbuild-esm', modulePage), EXPECT.main);
  sh(latest, 'esbuild-iife');
  await check(collect(latest, 'esbuild-iife', classicPage), EXPECT.main);
});

test('webpack 5', { skip }, async () => {
  sh(latest, 'webpack');
  const out = collect(latest, 'webpack', classicPage);
  // webpack emitted no .wasm asset: nothing in the package points at one.
  assert.deepEqual(readdir(out).filter((f) => f.endsWith('.wasm')), []);
  await check(out, EXPECT.main);
});

test('rollup', { skip }, async () => {
  write(latest, { 'rollup.config.mjs': S.get('rollup.config.mjs') });
  sh(latest, 'rollup');
  await check(collect(latest, 'rollup', modulePage), EXPECT.main);
});

test('a module worker: bundled by vite, and without a bundler', { skip }, async () => {
  write(latest, { 'worker.js': S.get('worker.js'), 'main-worker.js': S.get('main-worker.js'), 'index.html': S.get('index.html').replace('/main.js', '/main-worker.js') });
  const t0 = Date.now();
  execFileSync(process.execPath, [join(latest, 'node_modules', 'vite', 'bin', 'vite.js'), 'build'], { cwd: latest, stdio: 'pipe' });
  timings.push(['vite worker', Date.now() - t0]);
  await check(collect(latest, 'vite-worker'), EXPECT.worker);
  // No bundler: the page and the worker are the snippets, the worker importing the package by path.
  const plain = join(work, 'plain-worker');
  mkdirSync(plain);
  write(plain, {
    'index.html': '<!doctype html><link rel="icon" href="data:,"><script type="module" src="/main-worker.js"></script>\n',
    'main-worker.js': S.get('main-worker.js'),
    'worker.js': S.get('worker.js').replace("from 'kiln-wasm'", "from '/node_modules/kiln-wasm/index.js'"),
  });
  execFileSync('cp', ['-r', join(latest, 'node_modules', 'kiln-wasm'), join(plain, 'node_modules-kiln')]);
  mkdirSync(join(plain, 'node_modules'));
  renameSync(join(plain, 'node_modules-kiln'), join(plain, 'node_modules', 'kiln-wasm'));
  await check(plain, EXPECT.worker);
});

test('kiln-wasm/slim: init({ wasm }) with esbuild, init() with the .wasm vite emits', { skip }, async () => {
  write(latest, { 'slim.js': S.get('slim.js') });
  sh(latest, 'esbuild-slim');
  await check(collect(latest, 'esbuild-slim', modulePage), EXPECT.slim);
  // vite: no argument; vite emits wasm/kiln_wasm_bg.wasm from slim.js's new URL(..., import.meta.url).
  write(latest, {
    'main-slim.js': "import { init, parseModel } from 'kiln-wasm/slim';\n\ninit().then(async () => {\n  const bytes = new Uint8Array(await (await fetch('/digits-mlp.model.kiln')).arrayBuffer());\n  console.log(`kiln: slim, ${parseModel(bytes).tensors.length} tensors`);\n});\n",
    'index.html': S.get('index.html').replace('/main.js', '/main-slim.js'),
  });
  execFileSync(process.execPath, [join(latest, 'node_modules', 'vite', 'bin', 'vite.js'), 'build'], { cwd: latest, stdio: 'pipe' });
  const out = collect(latest, 'vite-slim');
  assert.ok(readdir(join(out, 'assets')).some((f) => f.endsWith('.wasm')), 'vite emitted the .wasm');
  await check(out, EXPECT.slim);
});

function readdir(dir) {
  return execFileSync('ls', ['-1', dir], { encoding: 'utf8' }).split('\n').filter(Boolean);
}
