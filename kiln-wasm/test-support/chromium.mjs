// What the Chromium tests and benchmarks share: the browser (Debian's, driven
// by playwright-core), why a test skips without it, the flags, and a route
// that serves the built package (pkg/) next to the range server's files.
import { existsSync, readFileSync } from 'node:fs';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

export const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** playwright-core's chromium, or null when it is not installed. */
export let chromium = null;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  chromium = null;
}

/** Why a Chromium test cannot run here (false when it can: node:test skips on any string, even an empty one). */
export const chromiumSkip =
  (!existsSync(executablePath) && `no Chromium at ${executablePath}`) || (chromium === null && 'playwright-core not installed (npm ci in kiln-wasm/)');

/** Headless, no sandbox (containers), no background traffic; add WEBGPU for a SwiftShader adapter. */
export const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
export const WEBGPU = '--enable-unsafe-webgpu';

const pkg = fileURLToPath(new URL('../pkg/', import.meta.url));
const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

/** A rangeServer `routes` handler: an empty page titled `title` at / and the files of pkg/ (never a .kiln). */
export function pkgRoute(title) {
  return (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^[/\\]+/, '');
    if (path === '' || path === 'index.html') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><link rel="icon" href="data:,"><title>${title}</title>`);
      return true;
    }
    const file = join(pkg, path);
    if (path.endsWith('.kiln') || !file.startsWith(pkg) || !existsSync(file)) return false;
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
    return true;
  };
}
