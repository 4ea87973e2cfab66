// The shipped types, checked with `tsc --strict` against the packed package
// (test/types/consumer.ts: narrowing by dtype, viewAs, classes that cannot be
// constructed, model files, init), as a TypeScript user compiles them:
// module nodenext in an ESM project and in a CommonJS project (index.d.cts
// through the "require" condition), and moduleResolution bundler. A copy of
// the package whose types lost the narrowing must fail: the test's
// `@ts-expect-error` lines then go unused.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { devModules, project } from '../test-support/packed.mjs';

const consumer = fileURLToPath(new URL('types/consumer.ts', import.meta.url));
const skip = !existsSync(join(devModules, 'typescript')) && 'typescript not installed (npm ci in kiln-wasm/)';

const base = { strict: true, noEmit: true, target: 'es2022', lib: ['es2022', 'dom'], skipLibCheck: false, types: [] };
const setups = [
  ['nodenext, ESM project', 'module', { module: 'nodenext', moduleResolution: 'nodenext' }],
  ['nodenext, CommonJS project (index.d.cts)', 'commonjs', { module: 'nodenext', moduleResolution: 'nodenext' }],
  ['bundler', 'module', { module: 'preserve', moduleResolution: 'bundler' }],
];

const run = promisify(execFile);

// tsc's output: '' when it passes, its diagnostics when it fails.
async function tsc(dir, ...args) {
  try {
    const { stdout } = await run(process.execPath, [join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir, ...args], { cwd: dir, encoding: 'utf8', maxBuffer: 64 << 20 });
    return args.length ? stdout : '';
  } catch (e) {
    return `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message;
  }
}

// Each test compiles a project of its own with a tsc process of its own: they run side by side
// (a single-threaded compiler each, about 5-11 s).
describe('the shipped types under tsc --strict', { concurrency: true }, () => {
  for (const [name, type, options] of setups) {
    test(`tsc --strict, ${name}: narrowing, viewAs, private constructors, model files`, { skip }, async () => {
      const dir = project('types', { type, tools: ['typescript'] });
      try {
        copyFileSync(consumer, join(dir, 'consumer.ts'));
        writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...base, ...options }, files: ['consumer.ts'] }));
        const out = await tsc(dir);
        assert.equal(out, '', out);
        if (type === 'commonjs') {
          // The CommonJS project really resolved the .d.cts.
          const trace = await tsc(dir, '--traceResolution');
          assert.match(trace, /'kiln-wasm' was successfully resolved to '.*index\.d\.cts'/);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  test('tsc --strict with onnxruntime-web\'s own types: createOnnxSession takes its module and options, returns its session', { skip: skip || (!existsSync(join(devModules, 'onnxruntime-web')) && 'onnxruntime-web not installed') }, async () => {
    const dir = project('types-onnx', { tools: ['typescript', 'onnxruntime-web', 'onnxruntime-common'] });
    try {
      copyFileSync(fileURLToPath(new URL('types/onnx-consumer.ts', import.meta.url)), join(dir, 'consumer.ts'));
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...base, module: 'nodenext', moduleResolution: 'nodenext' }, files: ['consumer.ts'] }));
      const out = await tsc(dir);
      assert.equal(out, '', out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('tsc --strict with @webgpu/types: a real GPUDevice goes in, GPUBuffer comes out', { skip: skip || (!existsSync(join(devModules, '@webgpu', 'types')) && '@webgpu/types not installed') }, async () => {
    const dir = project('types-webgpu', { tools: ['typescript', '@webgpu/types'] });
    try {
      copyFileSync(fileURLToPath(new URL('types/webgpu-consumer.ts', import.meta.url)), join(dir, 'consumer.ts'));
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...base, types: ['@webgpu/types'], module: 'nodenext', moduleResolution: 'nodenext' }, files: ['consumer.ts'] }));
      const out = await tsc(dir);
      assert.equal(out, '', out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the type tests fail when the types regress (unused @ts-expect-error)', { skip }, async () => {
    const dir = project('types-regress', { tools: ['typescript'] });
    try {
      copyFileSync(consumer, join(dir, 'consumer.ts'));
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...base, module: 'nodenext', moduleResolution: 'nodenext' }, files: ['consumer.ts'] }));
      const dts = join(dir, 'node_modules', 'kiln-wasm', 'index.d.ts');
      const good = readFileSync(dts, 'utf8');
      for (const [what, from, to] of [
        ['view() back to the union', 'view(): ViewOf<D>;', 'view(): TensorView;'],
        ['a public Tensor constructor', 'export declare class Tensor<D extends DType = DType> {\n  private constructor();', 'export declare class Tensor<D extends DType = DType> {'],
      ]) {
        assert.ok(good.includes(from), what);
        writeFileSync(dts, good.replace(from, to));
        const out = await tsc(dir);
        assert.match(out, /error TS2578: Unused '@ts-expect-error' directive|error TS2322/, `${what}: ${out}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
