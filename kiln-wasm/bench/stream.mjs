// DirectoryLoader over a stream against reading the same stream without it.
// The block is a file on disk, read as a web ReadableStream in 1 MiB chunks
// of two kinds:
//   byte   a byte stream whose source reads the file into the view it is
//          handed (a BYOB request, or a 1 MiB chunk it allocates for a
//          default reader), as fetch bodies in Chromium and Node are byte streams
//   plain  Readable.toWeb(fs.createReadStream()): chunks the source allocates
// Measured in one run, the functions taking turns round by round (a full GC
// before each, untimed):
//   drain        read every chunk with the default reader and drop it
//   read + keep  read every chunk into one ArrayBuffer of the file's length
//                (default reader, one copy per chunk: what any reader that
//                keeps the bytes does)
//   arrayBuffer  await new Response(stream).arrayBuffer(): the usual way to
//                read a whole body (fetch's response.arrayBuffer())
//   loader       new DirectoryLoader({totalLength}).consume(stream)
//   loader byob  the same with the BYOB path forced on (byte stream only;
//                the loader does not take it in Node 20: see streamReading)
//   touch        allocate a buffer of the file's length and write one byte
//                per 4 KiB page: the first-touch cost any reader that keeps
//                the bytes pays on top of draining
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { encodeKiln } from '../test-support/encode.mjs';
import { syntheticSpecs } from './core.mjs';

const CHUNK = 1 << 20;
// A full GC before each timed function, so that none pays for freeing the
// previous one's 1 GiB (exposed at run time: node needs no --expose-gc flag).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// A byte stream over a file: the source reads into the view it is given.
function byteStream(path) {
  let fh = null;
  let pos = 0;
  return new ReadableStream({
    type: 'bytes',
    autoAllocateChunkSize: CHUNK,
    async start() {
      fh = await open(path);
    },
    async pull(c) {
      const view = c.byobRequest.view;
      const { bytesRead } = await fh.read(view, 0, Math.min(view.byteLength, CHUNK), pos);
      pos += bytesRead;
      if (bytesRead === 0) {
        await fh.close();
        c.close();
      }
      c.byobRequest.respond(bytesRead);
    },
    async cancel() {
      await fh?.close();
    },
  });
}

export async function runStream(kiln, totalBytes, { rounds = 5, log = () => {} } = {}) {
  const { streamReading } = await import('../pkg/loader.js');
  const dir = mkdtempSync(join(tmpdir(), 'kiln-stream-'));
  const path = join(dir, 'block.kiln');
  try {
    let block = encodeKiln(syntheticSpecs(10000, totalBytes));
    const length = block.length;
    writeFileSync(path, block);
    block = null;
    const streams = {
      byte: () => byteStream(path),
      plain: () => Readable.toWeb(createReadStream(path, { highWaterMark: CHUNK })),
    };
    const loader = async (stream, byob) => {
      const saved = streamReading.byob;
      streamReading.byob = byob ?? saved;
      try {
        const d = await new kiln.DirectoryLoader({ totalLength: length }).consume(stream);
        if (d.length !== 10000) throw new Error('loader: wrong directory');
      } finally {
        streamReading.byob = saved;
      }
    };
    const fns = {};
    for (const [kind, stream] of Object.entries(streams)) {
      fns[`${kind} drain`] = async () => {
        const r = stream().getReader();
        for (;;) if ((await r.read()).done) break;
      };
      fns[`${kind} read + keep`] = async () => {
        const out = new Uint8Array(length);
        const r = stream().getReader();
        for (let at = 0; ;) {
          const { done, value } = await r.read();
          if (done) break;
          out.set(value, at);
          at += value.length;
        }
      };
      // What a page does without the loader: the whole body, then parseDirectory.
      fns[`${kind} arrayBuffer`] = async () => {
        if ((await new Response(stream()).arrayBuffer()).byteLength !== length) throw new Error('arrayBuffer: short');
      };
      fns[`${kind} loader`] = () => loader(stream());
    }
    // Node 20's BYOB transfers cost a GC each: a 1 GiB stream takes seconds; a smaller one shows the trend.
    if (length <= 256 << 20) fns['byte loader byob'] = () => loader(streams.byte(), true);
    fns.touch = async () => {
      const out = new Uint8Array(length);
      for (let i = 0; i < length; i += 4096) out[i] = 1;
    };
    // Wall-clock time, and the process's CPU time (user + system, all
    // threads: the file reads run on libuv's pool), which other processes
    // on a shared machine disturb less.
    const ms = Object.fromEntries(Object.keys(fns).map((k) => [k, []]));
    const cpu = Object.fromEntries(Object.keys(fns).map((k) => [k, []]));
    for (let r = 0; r < rounds; r++) {
      for (const [k, f] of Object.entries(fns)) {
        gc();
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await f();
        ms[k].push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        cpu[k].push((c.user + c.system) / 1000);
      }
      log(`stream round ${r + 1}: ${Object.keys(ms).map((k) => `${k} ${ms[k].at(-1).toFixed(0)} (cpu ${cpu[k].at(-1).toFixed(0)})`).join(', ')} ms`);
    }
    const medians = (xs) => Object.fromEntries(Object.entries(xs).map(([k, v]) => [k, median(v)]));
    const ratiosOf = (med) => Object.fromEntries(Object.keys(streams).map((kind) => [kind, {
      loaderOverDrain: med[`${kind} loader`] / med[`${kind} drain`],
      loaderOverReadKeep: med[`${kind} loader`] / med[`${kind} read + keep`],
      loaderOverDrainPlusTouch: med[`${kind} loader`] / (med[`${kind} drain`] + med.touch),
      loaderOverArrayBuffer: med[`${kind} loader`] / med[`${kind} arrayBuffer`],
    }]));
    const medianMs = medians(ms);
    const medianCpuMs = medians(cpu);
    return { bytes: length, medianMs, medianCpuMs, ratios: ratiosOf(medianMs), cpuRatios: ratiosOf(medianCpuMs), samples: ms, cpuSamples: cpu };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The result as text lines. */
export function formatStream(s) {
  const lines = [`DirectoryLoader over a ${(s.bytes / 1048576).toFixed(0)} MiB file stream (1 MiB chunks), medians of ${s.samples.touch.length} (wall clock; process CPU time):`];
  const t = (k) => `${s.medianMs[k].toFixed(0)}; ${s.medianCpuMs[k].toFixed(0)}`;
  const x = (r) => `${r.toFixed(2)}x`;
  for (const kind of Object.keys(s.ratios)) {
    const [r, c] = [s.ratios[kind], s.cpuRatios[kind]];
    lines.push(`  ${kind.padEnd(5)} drain ${t(`${kind} drain`)} ms | read + keep ${t(`${kind} read + keep`)} ms | arrayBuffer ${t(`${kind} arrayBuffer`)} ms | loader ${t(`${kind} loader`)} ms`);
    lines.push(`        loader/drain ${x(r.loaderOverDrain)}; ${x(c.loaderOverDrain)} | loader/(read + keep) ${x(r.loaderOverReadKeep)}; ${x(c.loaderOverReadKeep)}`
      + ` | loader/(drain + touch) ${x(r.loaderOverDrainPlusTouch)}; ${x(c.loaderOverDrainPlusTouch)}`
      + ` | loader/arrayBuffer ${x(r.loaderOverArrayBuffer)}; ${x(c.loaderOverArrayBuffer)}`);
  }
  lines.push(`  touch (first write to each page of a fresh buffer of the file's length) ${t('touch')} ms`);
  if (s.medianMs['byte loader byob'] !== undefined) lines.push(`  byte loader with BYOB forced on (Node 20) ${t('byte loader byob')} ms`);
  return lines.join('\n');
}

// Run alone: node --max-old-space-size=4096 kiln-wasm/bench/stream.mjs [rounds]
// (after kiln-wasm/build.sh; bench/node.mjs runs it with the other benchmarks).
if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const kiln = await import('../pkg/index.js');
  const s = await runStream(kiln, 1 << 30, { rounds: Number(process.argv[2] ?? 5), log: console.log });
  console.log(formatStream(s));
}
