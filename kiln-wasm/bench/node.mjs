// Node benchmark: node kiln-wasm/bench/node.mjs [--quick]
// Writes bench/results/node.json and prints a table.
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import * as kiln from '../pkg/node.js';
import { runCase, syntheticSpecs, exampleSpecs, formatResults } from './core.mjs';

const quick = process.argv.includes('--quick');
const log = (m) => console.error(`# ${m}`);
const ex = readFileSync(new URL('../../spec/examples/digits-mlp.kiln', import.meta.url));
const exBytes = new Uint8Array(ex.buffer.slice(ex.byteOffset, ex.byteOffset + ex.length));

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
mkdirSync(new URL('results/', import.meta.url), { recursive: true });
writeFileSync(new URL('results/node.json', import.meta.url), JSON.stringify({ env, results }, null, 1));
