// DirectoryLoader over a stream against reading the same stream without it.
// The stream is a file on disk read as a web ReadableStream (1 MiB chunks),
// as File.stream() or a fetch body delivers one. Measured in one run, the
// functions taking turns round by round:
//   drain        read every chunk and drop it
//   read + keep  read every chunk into one ArrayBuffer of the file's length
//                (what any reader that keeps the bytes does)
//   loader       new DirectoryLoader({totalLength}).consume(stream)
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { encodeKiln } from '../test-support/encode.mjs';
import { syntheticSpecs } from './core.mjs';

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function runStream(kiln, totalBytes, { rounds = 5, log = () => {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-stream-'));
  const path = join(dir, 'block.kiln');
  try {
    let block = encodeKiln(syntheticSpecs(10000, totalBytes));
    const length = block.length;
    writeFileSync(path, block);
    block = null;
    const stream = () => Readable.toWeb(createReadStream(path, { highWaterMark: 1 << 20 }));
    const fns = {
      drain: async () => {
        const r = stream().getReader();
        for (;;) if ((await r.read()).done) break;
      },
      'read + keep': async () => {
        const out = new Uint8Array(length);
        const r = stream().getReader();
        for (let at = 0; ;) {
          const { done, value } = await r.read();
          if (done) break;
          out.set(value, at);
          at += value.length;
        }
      },
      loader: async () => {
        const d = await new kiln.DirectoryLoader({ totalLength: length }).consume(stream());
        if (d.length !== 10000) throw new Error('loader: wrong directory');
      },
    };
    const ms = Object.fromEntries(Object.keys(fns).map((k) => [k, []]));
    for (let r = 0; r < rounds; r++) {
      for (const [k, f] of Object.entries(fns)) {
        const t0 = performance.now();
        await f();
        ms[k].push(performance.now() - t0);
      }
      log(`stream round ${r + 1}: ${Object.entries(ms).map(([k, v]) => `${k} ${v.at(-1).toFixed(0)} ms`).join(', ')}`);
    }
    const med = Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, median(v)]));
    return {
      bytes: length,
      medianMs: med,
      loaderOverReadKeep: med.loader / med['read + keep'],
      loaderOverDrain: med.loader / med.drain,
      samples: ms,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
