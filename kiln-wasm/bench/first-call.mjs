// The first parseDirectory + views after importing the package, in this
// fresh process, against later calls (core.mjs firstCall; the import, which
// instantiates the module, timed apart), in wall and CPU time (the process's,
// every thread: compiling a wasm module uses helper threads):
//   node kiln-wasm/bench/first-call.mjs [bytes] [tensors]
// Prints one JSON line.
import { firstCall } from './core.mjs';

const bytes = Number(process.argv[2] ?? 2 ** 30);
const count = Number(process.argv[3] ?? 10000);
const cpu = async () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
console.log(JSON.stringify(await firstCall(() => import('../pkg/index.js'), count, bytes, cpu)));
