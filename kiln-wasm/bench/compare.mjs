// The opening benchmarks of two builds of the package side by side, in one run:
//   node kiln-wasm/bench/compare.mjs BASE_PKG NEW_PKG [--rounds N] [--full] [--node-only | --chromium-only] [--first-only]
// BASE_PKG and NEW_PKG are built package folders (kiln-wasm/pkg of two checkouts, each made by
// its kiln-wasm/build.sh). Each round runs bench/node.mjs and bench/chromium.mjs (--quick: 64 MiB
// files; --full: the 1 GiB ones) once per package, alternating which goes first, both over this
// checkout's benchmark code: a temporary tree per package holds a copy of bench/, with pkg/
// linked to that package and test-support/, spec/examples/ and node_modules/ to this checkout's.
// Prints, for each figure (parse + views per case, the first call after import, in wall and
// CPU time (first-call.mjs, chromium.mjs), the stream loader), the median over the rounds of
// each package and NEW / BASE (below 1: NEW is faster). --first-only: the import and first-call
// figures alone (node.mjs and chromium.mjs --first-only), quick enough for many rounds.
// Writes bench/results/compare.json.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const roundsAt = args.indexOf('--rounds');
const rounds = roundsAt >= 0 ? Number(args[roundsAt + 1]) : 5;
const pkgs = args.filter((a, i) => !a.startsWith('--') && !(roundsAt >= 0 && i === roundsAt + 1));
if (pkgs.length !== 2 || !(rounds >= 1)) {
  console.error('usage: node kiln-wasm/bench/compare.mjs BASE_PKG NEW_PKG [--rounds N] [--full] [--node-only | --chromium-only] [--first-only]');
  process.exit(2);
}
const sides = ['base', 'new'];
const here = fileURLToPath(new URL('.', import.meta.url));
const wasmDir = resolve(here, '..');
const repo = resolve(wasmDir, '..');
const size = flag('--full') ? [] : ['--quick'];
const only = flag('--first-only') ? ['--first-only'] : [];
const benches = [...(flag('--chromium-only') ? [] : ['node']), ...(flag('--node-only') ? [] : ['chromium'])];

// One tree per package: <tmp>/kiln-wasm/{bench (a copy), pkg, test-support, node_modules}, <tmp>/spec/examples.
const trees = pkgs.map((pkg, i) => {
  const root = mkdtempSync(join(tmpdir(), `kiln-compare-${sides[i]}-`));
  const w = join(root, 'kiln-wasm');
  mkdirSync(w);
  cpSync(here, join(w, 'bench'), { recursive: true, filter: (p) => !p.includes('/results') });
  symlinkSync(resolve(pkg), join(w, 'pkg'), 'dir');
  symlinkSync(join(wasmDir, 'test-support'), join(w, 'test-support'), 'dir');
  symlinkSync(join(wasmDir, 'node_modules'), join(w, 'node_modules'), 'dir');
  mkdirSync(join(root, 'spec'));
  symlinkSync(join(repo, 'spec', 'examples'), join(root, 'spec', 'examples'), 'dir');
  return { root, w };
});

/** The figures of one run, flattened: {name: ms}. */
function figures(bench, json) {
  const out = {};
  for (const r of json.results) {
    out[`${bench}: parse + views, ${r.label}`] = r.ms.kilnParseAndViews;
    out[`${bench}: parse, ${r.label}`] = r.ms.kilnParse;
  }
  const firsts = new Map();
  for (const f of json.firstCall ?? []) {
    const k = `${f.tensors} tensors`;
    firsts.set(k, [...(firsts.get(k) ?? []), f]);
  }
  for (const [k, fs] of firsts) {
    out[`${bench}: import (first call's page/process), ${k}`] = median(fs.map((f) => f.importMs));
    out[`${bench}: first parse + views after import, ${k}`] = median(fs.map((f) => f.firstMs));
    if (fs.every((f) => f.importCpuMs !== undefined)) {
      out[`${bench}: import, CPU time, ${k}`] = median(fs.map((f) => f.importCpuMs));
      out[`${bench}: first parse + views after import, CPU time, ${k}`] = median(fs.map((f) => f.firstCpuMs));
    }
  }
  for (const [k, v] of Object.entries(json.stream?.medianMs ?? {})) {
    if (k.endsWith(' loader')) out[`${bench}: stream, ${k}`] = v;
  }
  return out;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const samples = sides.map(() => ({}));
const loads = [];
try {
  for (let r = 0; r < rounds; r++) {
    // Alternate which package goes first, so a drift in the machine's load hits both alike.
    const order = r % 2 === 0 ? [0, 1] : [1, 0];
    for (const bench of benches) {
      for (const i of order) {
        loads.push(loadavg()[0]);
        execFileSync(process.execPath, [join(trees[i].w, 'bench', `${bench}.mjs`), ...size, ...only], { stdio: ['ignore', 'ignore', 'inherit'] });
        const json = JSON.parse(readFileSync(join(trees[i].w, 'bench', 'results', `${bench}.json`), 'utf8'));
        for (const [k, v] of Object.entries(figures(bench, json))) (samples[i][k] ??= []).push(v);
        console.error(`# round ${r + 1}/${rounds}: ${bench} on ${sides[i]} done`);
      }
    }
  }
} finally {
  for (const t of trees) rmSync(t.root, { recursive: true, force: true });
}

const rows = Object.keys(samples[0]).filter((k) => k in samples[1]).map((k) => {
  const [b, n] = [median(samples[0][k]), median(samples[1][k])];
  return { figure: k, baseMs: b, newMs: n, ratio: n / b };
});
const w = Math.max(...rows.map((r) => r.figure.length));
console.log(`base ${resolve(pkgs[0])}\nnew  ${resolve(pkgs[1])}\n${rounds} rounds (${size.length ? '64 MiB quick' : 'full'} sizes${only.length ? ', first calls only' : ''}), medians; load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} at the runs' starts\n`);
console.log(`${'figure'.padEnd(w)}  ${'base ms'.padStart(9)}  ${'new ms'.padStart(9)}  new/base`);
for (const r of rows) console.log(`${r.figure.padEnd(w)}  ${r.baseMs.toFixed(2).padStart(9)}  ${r.newMs.toFixed(2).padStart(9)}  ${r.ratio.toFixed(3)}`);
const ratios = rows.map((r) => r.ratio);
console.log(`\nnew/base over the ${rows.length} figures: median ${median(ratios).toFixed(3)}, range ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}`);
mkdirSync(join(here, 'results'), { recursive: true });
writeFileSync(join(here, 'results', 'compare.json'), JSON.stringify({ base: resolve(pkgs[0]), new: resolve(pkgs[1]), rounds, loads, rows, samples }, null, 1));
