// Node benchmark: node kiln-wasm/bench/node.mjs [--quick]
// 1. parseDirectory + views against safetensors' JSON header + views (core.mjs);
// 2. the first parseDirectory call in a fresh process against later calls,
//    for the same 10,000-tensor directory with 1 GiB and with 2 MiB of payload
//    (first-call.mjs, run as child processes);
// 3. DirectoryLoader over a 1 GiB file stream (a byte stream and a plain one) against
//    draining it and reading it into one buffer (stream.mjs).
// Writes bench/results/node.json and prints the tables. --quick: 64 MiB instead of 1 GiB.
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { runCase, syntheticSpecs, exampleSpecs, formatResults } from './core.mjs';
import { formatStream, runStream } from './stream.mjs';

const quick = process.argv.includes('--quick');
const log = (m) => console.error(`# ${m}`);
const ex = readFileSync(new URL('../../spec/examples/digits-mlp.kiln', import.meta.url));
const exBytes = new Uint8Array(ex.buffer.slice(ex.byteOffset, ex.byteOffset + ex.length));
const bigBytes = quick ? 64 << 20 : 2 ** 30;

const results = [];
results.push(await runCase(kiln, 'example (digits-mlp)', exampleSpecs(kiln, exBytes), log));
results.push(await runCase(kiln, '1,000 tensors, 64 MiB', syntheticSpecs(1000, 64 << 20), log));
const big = quick ? [10000, 64 << 20, '10,000 tensors, 64 MiB'] : [10000, 1 << 30, '10,000 tensors, 1 GiB'];
const rss0 = process.memoryUsage().rss;
const r = await runCase(kiln, big[2], syntheticSpecs(big[0], big[1]), log);
r.rssGrowthMiB = (process.memoryUsage().rss - rss0) / 1048576;
results.push(r);

const env = `Node ${process.version} (${process.platform} ${process.arch}), kiln-wasm ${kiln.version()}`;
console.log(formatResults(env, results));
console.log(`10,000-tensor case: process RSS grew ${r.rssGrowthMiB.toFixed(0)} MiB while generating both ${(r.fileBytes.kiln / 1048576).toFixed(0)} MiB files and parsing (payload pages never touched: no payload copy).`);

// First call, each in a fresh process (three runs each, the directory the same).
const firstCall = fileURLToPath(new URL('first-call.mjs', import.meta.url));
const first = [];
for (const bytes of [bigBytes, 2 << 20]) {
  for (let i = 0; i < 3; i++) first.push(JSON.parse(execFileSync(process.execPath, [firstCall, String(bytes), '10000'], { encoding: 'utf8' })));
}
console.log('\nfirst parseDirectory call in a fresh process (10,000 tensors; pages of the input resident):');
for (const f of first) {
  console.log(`  ${(f.bytes / 1048576).toFixed(0).padStart(5)} MiB: first ${f.firstMs.toFixed(1)} ms, later calls ${f.laterMedianMs.toFixed(1)} ms (median of 9)`);
}

// The loader over a stream.
const stream = await runStream(kiln, bigBytes, { log });
console.log(`\n${formatStream(stream)}`);

mkdirSync(new URL('results/', import.meta.url), { recursive: true });
writeFileSync(new URL('results/node.json', import.meta.url), JSON.stringify({ env, results, firstCall: first, stream }, null, 1));
