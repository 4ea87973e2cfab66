// What a page downloads before its first call, gzipped (-9): the program
// `source` (an ES module importing from pkg/), bundled and minified by esbuild
// with code splitting, counting the entry chunk and the chunks it imports
// statically (a dynamic import's chunk is fetched only when called), plus the
// .wasm files named in `wasm` (pkg/-relative). Prints the bytes.
// Usage: node page-size.mjs PKG_DIR 'import …' [wasm/kiln_wasm_bg.wasm …]
import { build } from 'esbuild';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const [pkg, source, ...wasm] = process.argv.slice(2);
const out = mkdtempSync(join(tmpdir(), 'kiln-page-'));
try {
  const r = await build({
    stdin: { contents: source, resolveDir: pkg, loader: 'js' },
    bundle: true,
    splitting: true,
    format: 'esm',
    minify: true,
    charset: 'utf8',
    outdir: out,
    metafile: true,
    logLevel: 'warning',
  });
  const outputs = r.metafile.outputs;
  const entry = Object.keys(outputs).find((k) => outputs[k].entryPoint !== undefined);
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const i of outputs[file].imports) if (i.kind === 'import-statement' && outputs[i.path]) visit(i.path);
  };
  visit(entry);
  const gz = (bytes) => gzipSync(bytes, { level: 9 }).length;
  let total = 0;
  for (const f of seen) total += gz(readFileSync(f));
  for (const w of wasm) total += gz(readFileSync(join(pkg, w)));
  console.log(total);
} finally {
  rmSync(out, { recursive: true, force: true });
}
