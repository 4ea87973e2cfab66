// Tensor values as f32 on two builds of the package, in one process:
//   node kiln-wasm/bench/dequant.mjs BASE_PKG NEW_PKG [MiB]
// For each case (a 16 MiB payload by default: f16, bf16, i8, i32, e2m1 with toFloat32, e2m1
// with e8m0 scales in groups of 32 and f16 scheme 2 with dequantize), the median of 15 calls on
// each package, alternating, with the values checked equal bit for bit. NEW / BASE above 1: NEW
// is slower (the new package copies the payload through the module's 64 KiB window; the old one
// converted in JavaScript).
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { encodeKiln } from '../test-support/encode.mjs';

const [basePkg, newPkg, mibArg] = process.argv.slice(2);
if (!basePkg || !newPkg) {
  console.error('usage: node kiln-wasm/bench/dequant.mjs BASE_PKG NEW_PKG [MiB]');
  process.exit(2);
}
const bytes = Number(mibArg ?? 16) * 1048576;
const kilns = await Promise.all([basePkg, newPkg].map((p) => import(pathToFileURL(resolve(p, 'index.js')).href)));

// Deterministic payload bytes (a xorshift), so every dtype sees varied values.
function payload(n) {
  const out = new Uint8Array(n);
  let x = 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
const data = payload(bytes);
// e8m0 scales near 1 (127 +- 8), f16 scales and one f32 outer scale.
const e8m0 = (n) => Uint8Array.from({ length: n }, (_, i) => 119 + (i % 17));
const f16s = (n) => new Uint8Array(Uint16Array.from({ length: n }, (_, i) => 0x3c00 + (i % 64)).buffer);

const cases = [
  ['f16 toFloat32', [{ name: 'x', dtype: 'f16', shape: [bytes / 2], data }]],
  ['bf16 toFloat32', [{ name: 'x', dtype: 'bf16', shape: [bytes / 2], data }]],
  ['i8 toFloat32', [{ name: 'x', dtype: 'i8', shape: [bytes], data }]],
  ['i32 toFloat32', [{ name: 'x', dtype: 'i32', shape: [bytes / 4], data }]],
  ['e2m1 toFloat32', [{ name: 'x', dtype: 'e2m1', shape: [bytes * 2], data }]],
  ['e2m1 x e8m0 (MXFP4) dequantize', [
    { name: 'x', dtype: 'e2m1', shape: [bytes / 64, 128], data, quant: { scheme: 1, axis: 1, groupSize: 32, scale: 1 } },
    { name: 's', dtype: 'e8m0', shape: [bytes / 64, 4], data: e8m0(bytes / 16) },
  ], true],
  ['f16 scheme 2 dequantize', [
    { name: 'x', dtype: 'f16', shape: [bytes / 512, 256], data, quant: { scheme: 2, axis: 1, groupSize: 64, scale: 1, outer: 2 } },
    { name: 's', dtype: 'f16', shape: [bytes / 512, 4], data: f16s(bytes / 128) },
    { name: 'o', dtype: 'f32', shape: [1], data: new Uint8Array(new Float32Array([0.5]).buffer) },
  ], true],
];

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`${(bytes / 1048576).toFixed(0)} MiB payloads, median of 15 calls each, alternating; Node ${process.version}`);
console.log(`${'case'.padEnd(32)}  ${'base ms'.padStart(8)}  ${'new ms'.padStart(8)}  new/base`);
for (const [label, specs, quantized] of cases) {
  const file = encodeKiln(specs);
  const tensors = kilns.map((k) => k.parseDirectory(file).get('x'));
  const run = (i) => (quantized ? kilns[i].dequantize(tensors[i]) : tensors[i].toFloat32());
  const a = new Uint32Array(run(0).buffer);
  const b = new Uint32Array(run(1).buffer);
  let diff = a.length === b.length ? 0 : 1;
  for (let i = 0; i < a.length && diff === 0; i++) {
    // A NaN may carry another payload; any NaN is the same value.
    const nan = (v) => (v & 0x7f800000) === 0x7f800000 && (v & 0x7fffff) !== 0;
    if (a[i] !== b[i] && !(nan(a[i]) && nan(b[i]))) diff = i + 1;
  }
  if (diff !== 0) throw new Error(`${label}: the packages disagree at element ${diff - 1}`);
  const ms = [[], []];
  for (let r = 0; r < 15; r++) {
    for (const i of r % 2 ? [1, 0] : [0, 1]) {
      const t0 = performance.now();
      run(i);
      ms[i].push(performance.now() - t0);
    }
  }
  const [mb, mn] = ms.map(median);
  console.log(`${label.padEnd(32)}  ${mb.toFixed(1).padStart(8)}  ${mn.toFixed(1).padStart(8)}  ${(mn / mb).toFixed(2)}`);
}
