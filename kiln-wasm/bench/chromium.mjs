// Chromium benchmark: node kiln-wasm/bench/chromium.mjs [--quick] [--first-only]
// Serves kiln-wasm/ with python3 -m http.server, runs bench/index.html (parse + views
// for 1,000, 10,000 and 100,000 tensors against JSON.parse + views, and DirectoryLoader
// over in-memory streams: stream-web.mjs) in headless Chromium (playwright-core,
// /usr/bin/chromium), then the first call after import, each in a fresh page
// (index.html?first=N; in wall time and in the page's main-thread CPU time, read
// through the DevTools protocol), and writes bench/results/chromium.json. --first-only: the
// first calls alone (compare.mjs --first-only).
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, symlinkSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { formatFirstCalls } from './core.mjs';

const quick = process.argv.includes('--quick');
const root = fileURLToPath(new URL('..', import.meta.url));
// The page fetches ../../spec-example/digits-mlp.kiln: link the example next to the served tree.
const served = mkdtempSync(join(tmpdir(), 'kiln-bench-'));
symlinkSync(root, join(served, 'kiln-wasm'), 'dir');
symlinkSync(fileURLToPath(new URL('../../spec/examples/', import.meta.url)), join(served, 'spec-example'), 'dir');

const port = await new Promise((r) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => r(p)); }); });
const py = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', served], { stdio: 'ignore' });
const profile = mkdtempSync(join(tmpdir(), 'chromium-'));
let ctx;
try {
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(`http://127.0.0.1:${port}/kiln-wasm/bench/index.html`)).ok) break; } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on('console', (m) => console.error(`# ${m.text()}`));
  let result = { results: [] };
  if (!process.argv.includes('--first-only')) {
    const bytes = quick ? 64 << 20 : 2 ** 30;
    await page.goto(`http://127.0.0.1:${port}/kiln-wasm/bench/index.html?bytes=${bytes}`);
    await page.waitForFunction(() => window.__bench !== undefined, null, { timeout: 300000 });
    result = await page.evaluate(() => window.__bench);
    if (result.error) throw new Error(result.error);
    console.log(await page.locator('#out').innerText());
  }
  // The first call after import, each in a fresh page (three per size).
  const first = [];
  for (const count of [1000, 10000, 100000]) {
    for (let i = 0; i < 3; i++) {
      const p = await ctx.newPage();
      p.on('console', (m) => console.error(`# ${m.text()}`));
      // The page's main-thread CPU time (ms), for firstCall's CPU timings.
      const cdp = await ctx.newCDPSession(p);
      await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
      await p.exposeFunction('__threadTime', async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'ThreadTime').value * 1000);
      await p.goto(`http://127.0.0.1:${port}/kiln-wasm/bench/index.html?first=${count}&bytes=${64 << 20}`);
      await p.waitForFunction(() => window.__bench !== undefined, null, { timeout: 300000 });
      const f = await p.evaluate(() => window.__bench);
      await p.close();
      if (f.error) throw new Error(f.error);
      first.push(f);
    }
  }
  console.log(`\n${formatFirstCalls(first)}`);
  result.firstCall = first;
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(join(root, 'bench', 'results', 'chromium.json'), JSON.stringify(result, null, 1));
} finally {
  await ctx?.close();
  py.kill();
  rmSync(profile, { recursive: true, force: true });
  rmSync(served, { recursive: true, force: true });
}
