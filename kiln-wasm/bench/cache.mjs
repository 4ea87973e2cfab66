// openRemote + load of every tensor of a sharded model over a local HTTP
// server, side by side in one run: without a cache, the first load with
// the in-memory cache (fetch, check, store), and the reload from it (the
// change check, then every entry checked again). Requests, bytes and time;
// the times are quoted as ratios to the run without a cache.
//   node kiln-wasm/bench/cache.mjs [--tensors N] [--bytes B] [--shards K]
// Default: 400 tensors of 64 KiB over 4 shards (25 MiB). Prints one JSON object.
import * as kiln from '../pkg/index.js';
import { rangeServer } from '../test-support/range-server.mjs';
import { writeSharded } from '../test-support/sharded.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const tensors = arg('--tensors', 400);
const bytes = arg('--bytes', 65536);
const shards = arg('--shards', 4);

const model = writeSharded({ name: 'c', shards, tensors, bytes });
const srv = await rangeServer();
for (const [n, b] of model.files) srv.files.set(`/m/${n}`, b);
const url = `${srv.base}/m/${model.manifest}`;

async function run(options) {
  srv.reset();
  const t0 = performance.now();
  const m = await kiln.openRemote(url, options);
  for (const t of m) await m.load(t.name);
  const ms = performance.now() - t0;
  return { requests: m.requests, bytes: m.bytesFetched, serverBytes: srv.stats.bytes, ms: +ms.toFixed(1) };
}

try {
  await run({}); // warm-up (JIT, sockets)
  const store = kiln.cache.memory();
  const none = await run({});
  const first = await run({ cache: store });
  const reload = await run({ cache: store });
  const usage = await kiln.cache.usage(store);
  console.log(
    JSON.stringify(
      {
        node: process.version,
        model: { tensors: tensors + 6, tensorBytes: bytes, shards },
        none,
        first,
        reload,
        usage,
        ratio: { firstVsNone: +(first.ms / none.ms).toFixed(2), reloadVsNone: +(reload.ms / none.ms).toFixed(2) },
      },
      null,
      2,
    ),
  );
} finally {
  await srv.close();
}
