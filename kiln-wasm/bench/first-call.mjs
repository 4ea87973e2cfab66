// The first parseDirectory + views after importing the package, in this
// fresh process, against later calls (core.mjs firstCall; the import, which
// instantiates the module, timed apart):
//   node kiln-wasm/bench/first-call.mjs [bytes] [tensors]
// Prints one JSON line.
import { firstCall } from './core.mjs';

const bytes = Number(process.argv[2] ?? 2 ** 30);
const count = Number(process.argv[3] ?? 10000);
console.log(JSON.stringify(await firstCall(() => import('../pkg/index.js'), count, bytes)));
