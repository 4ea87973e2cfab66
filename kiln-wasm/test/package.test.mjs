// The npm package as a consumer sees it: `import ... from 'kiln-wasm'` with no
// init call, the exports map, the shipped types, and the packed file list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, symlinkSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('../pkg/', import.meta.url));
const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
const example = fileURLToPath(new URL('../../spec/examples/digits-mlp.kiln', import.meta.url));

function consumer() {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-consumer-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(pkg, join(dir, 'node_modules', 'kiln-wasm'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', private: true }));
  return dir;
}

test('import * as kiln from "kiln-wasm" works in Node with no init call', () => {
  const dir = consumer();
  try {
    writeFileSync(join(dir, 'main.mjs'), `
      import * as kiln from 'kiln-wasm';
      import { readFileSync } from 'node:fs';
      const b = readFileSync(${JSON.stringify(example)});
      const bytes = new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
      const dir = kiln.parseDirectory(bytes);
      const w = dir.get('fc1.weight');
      const v = kiln.decodeValue(Uint8Array.of(2, 0, 0, 0, 104, 105), 'str');
      console.log(JSON.stringify([kiln.version(), dir.length, w.dtype, w.view().buffer === bytes.buffer, v]));
    `);
    const out = execFileSync(process.execPath, ['main.mjs'], { cwd: dir, encoding: 'utf8' });
    const version = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).version;
    assert.deepEqual(JSON.parse(out), [version, 8, 'f32', true, 'hi']);
    // Deep imports are closed by the exports map.
    writeFileSync(join(dir, 'deep.mjs'), `import 'kiln-wasm/kiln.js';`);
    assert.throws(() => execFileSync(process.execPath, ['deep.mjs'], { cwd: dir, stdio: 'pipe' }), /ERR_PACKAGE_PATH_NOT_EXPORTED/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the shipped types check a typical consumer (tsc --strict)', { skip: !existsSync(tsc) && 'typescript not installed (npm ci in kiln-wasm/)' }, () => {
  const dir = consumer();
  try {
    writeFileSync(join(dir, 'main.ts'), `
      import { parseDirectory, KilnError, DirectoryLoader, loadTensor, openRemote, dequantize, decodeValue, decodeFrame, Directory, type Tensor, type KilnErrorCode, type FrozenValue } from 'kiln-wasm';
      const dir = parseDirectory(new Uint8Array(64), { countCap: 10 });
      const t: Tensor | undefined = dir.get('w');
      if (t) {
        const v = t.view();
        const f: Float32Array = t.toFloat32();
        const shape: readonly number[] = t.shape;
        const scale: Tensor | undefined = t.quant?.scale;
        const n: number = v.length + f.length + shape.length + t.byteOffset + (scale ? 1 : 0);
        const deq: Float32Array = dequantize(t);
        void n; void deq;
      }
      try { parseDirectory(new Uint8Array(1)); } catch (e) {
        if (e instanceof KilnError) { const c: KilnErrorCode = e.code; const o: number = e.offset; const r: string = e.rule; void c; void o; void r; }
      }
      const loader = new DirectoryLoader({ totalLength: 10, onDirectory: (d) => d.tensors().length, onProgress: (a, b) => a + (b ?? 0) });
      loader.push(new Uint8Array(10));
      async function remote() { const x = await loadTensor('http://h/m.kiln', 'w'); const r = await openRemote('http://h/m.kiln'); await r.load(0); return x.name ?? r.size; }
      void remote;
      for (const x of dir) void x.dtype;
      const fv: FrozenValue = decodeValue(new Uint8Array(8), 'i64', { countCap: 4 });
      const typed = decodeValue<{ id: bigint; batch: Directory; xs: Float32Array }>(new Uint8Array(0), 'struct{id:i64,batch:tensors,xs:list<f32>,}');
      const idPlusOne: bigint = typed.id + 1n;
      const firstX: number = typed.xs[0];
      const framed = decodeFrame(new ArrayBuffer(16), 'struct{}');
      if (framed instanceof Map) { for (const [k, v] of framed) { const key: string = k; void key; void v; } }
      try { decodeValue(new Uint8Array(1), 'u8'); } catch (e) { if (e instanceof KilnError) { const t: boolean = e.inTypeText; void t; } }
      void fv; void idPlusOne; void firstX; void typed.batch.length;
    `);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022', 'dom'], skipLibCheck: false },
      files: ['main.ts'],
    }));
    execFileSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout ?? ''}${e.stderr ?? ''}${e.message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('npm pack ships the entries, the glue, the .wasm, the types and the README', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: pkg, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const files = JSON.parse(out)[0].files.map((f) => f.path).sort();
  for (const f of ['index.js', 'node.js', 'kiln.js', 'kiln.d.ts', 'README.md', 'package.json', 'wasm/kiln_wasm.js', 'wasm/kiln_wasm_bg.wasm']) {
    assert.ok(files.includes(f), `${f} in ${files}`);
  }
  const meta = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));
  assert.equal(meta.name, 'kiln-wasm');
  assert.equal(meta.exports['.'].types, './kiln.d.ts');
});
