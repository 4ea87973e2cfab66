// The package as a user gets it: `npm pack` of pkg/, installed into a fresh
// project directory with `npm install <tarball>` (offline: the package has
// no dependencies). Tools for the toolchain tests (bundlers, TypeScript) are
// linked into the project from kiln-wasm/node_modules, as if installed there.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const pkgDir = fileURLToPath(new URL('../pkg/', import.meta.url));
export const devModules = fileURLToPath(new URL('../node_modules/', import.meta.url));

let packed = null;

/** The tarball of pkg/ (packed once per process) and the file list npm reported. */
export function tarball() {
  if (packed === null) {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-pack-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const info = JSON.parse(out)[0];
    packed = { path: join(dir, info.filename), files: info.files.map((f) => f.path).sort(), dir };
  }
  return packed;
}

/**
 * A fresh project with kiln-wasm installed from the tarball. `type`: the
 * project's package.json "type". `tools`: packages from kiln-wasm/node_modules
 * to link in as `name` or `[name, as]` (e.g. ['vite5', 'vite']), with their bins.
 */
export function project(name, { type = 'module', tools = [], base = null } = {}) {
  const dir = mkdtempSync(join(base ?? tmpdir(), `kiln-${name}-`));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `consumer-${name}`, private: true, type }, null, 2));
  const { path } = tarball();
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error', path], { cwd: dir, stdio: 'pipe' });
  const bin = join(dir, 'node_modules', '.bin');
  mkdirSync(bin, { recursive: true });
  for (const t of tools) {
    const [from, as] = Array.isArray(t) ? t : [t, t];
    const target = join(dir, 'node_modules', as);
    mkdirSync(join(target, '..'), { recursive: true });
    if (!existsSync(target)) symlinkSync(join(devModules, from), target, 'dir');
    // Its bins, as npm would link them.
    const meta = JSON.parse(execFileSync(process.execPath, ['-p', `JSON.stringify(require(${JSON.stringify(join(devModules, from, 'package.json'))}))`], { encoding: 'utf8' }));
    const bins = typeof meta.bin === 'string' ? { [meta.name.split('/').pop()]: meta.bin } : (meta.bin ?? {});
    for (const [b, rel] of Object.entries(bins)) {
      const link = join(bin, b);
      if (!existsSync(link)) symlinkSync(join(target, rel), link);
    }
  }
  return dir;
}

/** Copies a fixture directory's files into a project. */
export function copyInto(fromDir, dir) {
  for (const f of readdirSync(fromDir)) cpSync(join(fromDir, f), join(dir, f), { recursive: true });
}
