// DirectoryLoader over an in-memory stream, for Chromium (index.html): the
// same functions as stream.mjs (drain, read + keep, arrayBuffer, loader), over a
// block held in memory and streamed in 1 MiB chunks by a source that copies
// each chunk out of it, as a network stack hands over fresh bytes:
//   byte   a byte stream: the source copies into the view a BYOB read hands
//          it (the loader's own buffer, in Chromium) or into a 1 MiB chunk
//          it allocates for a default reader
//   plain  a default stream: the source enqueues a fresh 1 MiB copy
import { encodeKiln } from '../test-support/encode.mjs';
import { syntheticSpecs } from './core.mjs';

const CHUNK = 1 << 20;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function byteStream(block) {
  let at = 0;
  return new ReadableStream({
    type: 'bytes',
    autoAllocateChunkSize: CHUNK,
    pull(c) {
      const view = c.byobRequest.view;
      const n = Math.min(view.byteLength, CHUNK, block.length - at);
      if (n === 0) {
        c.close();
        c.byobRequest.respond(0);
        return;
      }
      view.set(block.subarray(at, at + n));
      at += n;
      c.byobRequest.respond(n);
    },
  });
}

function plainStream(block) {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= block.length) {
        c.close();
        return;
      }
      c.enqueue(block.slice(at, at + CHUNK));
      at += CHUNK;
    },
  });
}

/** Medians of `rounds` rounds, the functions taking turns; {bytes, medianMs, ratios, samples}. */
export async function runStreamWeb(kiln, totalBytes, { rounds = 5, log = () => {} } = {}) {
  const block = encodeKiln(syntheticSpecs(10000, totalBytes));
  const length = block.length;
  const streams = { byte: () => byteStream(block), plain: () => plainStream(block) };
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
    fns[`${kind} loader`] = async () => {
      const d = await new kiln.DirectoryLoader({ totalLength: length }).consume(stream());
      if (d.length !== 10000) throw new Error('loader: wrong directory');
    };
  }
  const ms = Object.fromEntries(Object.keys(fns).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [k, f] of Object.entries(fns)) {
      const t0 = performance.now();
      await f();
      ms[k].push(performance.now() - t0);
    }
    log(`stream round ${r + 1}: ${Object.entries(ms).map(([k, v]) => `${k} ${v.at(-1).toFixed(0)}`).join(', ')} ms`);
  }
  const med = Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, median(v)]));
  const ratios = Object.fromEntries(Object.keys(streams).map((kind) => [kind, {
    loaderOverDrain: med[`${kind} loader`] / med[`${kind} drain`],
    loaderOverReadKeep: med[`${kind} loader`] / med[`${kind} read + keep`],
    loaderOverArrayBuffer: med[`${kind} loader`] / med[`${kind} arrayBuffer`],
  }]));
  return { bytes: length, medianMs: med, ratios, samples: ms };
}

/** The result as text lines. */
export function formatStreamWeb(s) {
  const m = s.medianMs;
  const lines = [`DirectoryLoader over a ${(s.bytes / 1048576).toFixed(0)} MiB in-memory stream (1 MiB chunks), medians of ${s.samples['byte drain'].length}:`];
  for (const [kind, r] of Object.entries(s.ratios)) {
    lines.push(`  ${kind.padEnd(5)} drain ${m[`${kind} drain`].toFixed(0)} ms | read + keep ${m[`${kind} read + keep`].toFixed(0)} ms | arrayBuffer ${m[`${kind} arrayBuffer`].toFixed(0)} ms | loader ${m[`${kind} loader`].toFixed(0)} ms`
      + ` -> loader/drain ${r.loaderOverDrain.toFixed(2)}x, loader/(read + keep) ${r.loaderOverReadKeep.toFixed(2)}x, loader/arrayBuffer ${r.loaderOverArrayBuffer.toFixed(2)}x`);
  }
  return lines.join('\n');
}
