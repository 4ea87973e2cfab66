// Node benchmark: node kiln-wasm/bench/node.mjs [--quick] [--first-only]
// 1. parseDirectory + a view of every tensor against safetensors' JSON header +
//    the same views (core.mjs), for 1,000, 10,000 and 100,000 tensors, in one run;
// 2. the first parseDirectory + views after importing the package, in a fresh
//    process, against later calls (first-call.mjs, run as child processes; the
//    import, which instantiates the module, timed apart);
// 3. DirectoryLoader over a 1 GiB file stream (a byte stream and a plain one) against
//    draining it and reading it into one buffer (stream.mjs).
// Writes bench/results/node.json and prints the tables. --quick: 64 MiB instead of 1 GiB.
// --first-only: part 2 alone (the import and the first call), for compare.mjs --first-only.
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { runCase, syntheticSpecs, exampleSpecs, formatFirstCalls, formatResults } from './core.mjs';
import { formatStream, runStream } from './stream.mjs';

const quick = process.argv.includes('--quick');
const log = (m) => console.error(`# ${m}`);
const ex = readFileSync(new URL('../../spec/examples/digits-mlp.kiln', import.meta.url));
const exBytes = new Uint8Array(ex.buffer.slice(ex.byteOffset, ex.byteOffset + ex.length));
const bigBytes = quick ? 64 << 20 : 2 ** 30;

const firstOnly = process.argv.includes('--first-only');
const results = [];
let r = null;
const env = `Node ${process.version} (${process.platform} ${process.arch}), kiln-wasm ${kiln.version()}`;
if (!firstOnly) {
  results.push(await runCase(kiln, 'example (digits-mlp)', exampleSpecs(kiln, exBytes), log));
  results.push(await runCase(kiln, '1,000 tensors, 64 MiB', syntheticSpecs(1000, 64 << 20), log));
  const big = quick ? [10000, 64 << 20, '10,000 tensors, 64 MiB'] : [10000, 1 << 30, '10,000 tensors, 1 GiB'];
  const rss0 = process.memoryUsage().rss;
  r = await runCase(kiln, big[2], syntheticSpecs(big[0], big[1]), log);
  r.rssGrowthMiB = (process.memoryUsage().rss - rss0) / 1048576;
  results.push(r);
  // A block's name heap is at most 64 KiB: 100,000 names do not fit, so these
  // Kiln tensors are unnamed (views keyed by index); safetensors names them.
  const hundredK = quick ? 64 << 20 : 256 << 20;
  results.push(await runCase(kiln, `100,000 tensors (unnamed), ${hundredK >> 20} MiB`, syntheticSpecs(100000, hundredK, { named: false }), log));

  console.log(formatResults(env, results));
  console.log(`10,000-tensor case: process RSS grew ${r.rssGrowthMiB.toFixed(0)} MiB while generating both ${(r.fileBytes.kiln / 1048576).toFixed(0)} MiB files and parsing (payload pages never touched: no payload copy).`);
}

// First call after import, each in a fresh process (three runs per size).
const firstCall = fileURLToPath(new URL('first-call.mjs', import.meta.url));
const first = [];
const sizes = [[1000, 64 << 20], [10000, 64 << 20], [100000, 64 << 20]];
if (!quick) sizes.push([10000, bigBytes]);
for (const [count, bytes] of sizes) {
  for (let i = 0; i < 3; i++) first.push(JSON.parse(execFileSync(process.execPath, [firstCall, String(bytes), String(count)], { encoding: 'utf8' })));
}
console.log(`\n${formatFirstCalls(first)}`);

// The loader over a stream.
const stream = firstOnly ? null : await runStream(kiln, bigBytes, { log });
if (stream) console.log(`\n${formatStream(stream)}`);

mkdirSync(new URL('results/', import.meta.url), { recursive: true });
writeFileSync(new URL('results/node.json', import.meta.url), JSON.stringify({ env, results, firstCall: first, stream }, null, 1));
