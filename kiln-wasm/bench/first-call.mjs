// The first parseDirectory call in a fresh process against later calls:
// node kiln-wasm/bench/first-call.mjs [bytes] [tensors]
// Prints one JSON line. The input's pages are made resident first (as a
// file read into memory is), so the timings are the parser's, not the
// kernel's first touch of a fresh buffer.
import * as kiln from '../pkg/index.js';
import { encodeKiln } from '../test-support/encode.mjs';

const bytes = Number(process.argv[2] ?? 2 ** 30);
const count = Number(process.argv[3] ?? 10000);
const specs = Array.from({ length: count }, (_, i) => ({ name: `t.${i}`, dtype: 'f32', shape: [Math.max(1, Math.floor(bytes / count / 4))] }));
const input = encodeKiln(specs);
let sum = 0;
for (let i = 0; i < input.length; i += 4096) sum += input[i];
const times = [];
for (let i = 0; i < 10; i++) {
  const t0 = performance.now();
  kiln.parseDirectory(input);
  times.push(performance.now() - t0);
}
const later = times.slice(1).sort((a, b) => a - b);
console.log(JSON.stringify({ bytes: input.length, tensors: count, firstMs: times[0], laterMedianMs: later[Math.floor(later.length / 2)], laterMinMs: later[0], sum }));
