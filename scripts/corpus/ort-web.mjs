// One corpus model in onnxruntime-web under Node (wasm execution provider, one thread, graph
// optimizations off): the original ONNX file through InferenceSession.create, the converted
// graph through the npm package's createOnnxSession with the Kiln file's bytes. run.py calls it:
//
//   node scripts/corpus/ort-web.mjs JOB.json
//
// JOB.json: {original, graph, kiln, pkg (kiln-wasm/pkg), ortModule (onnxruntime-web's Node entry),
// inputs: [{name, type, dims, file}]} with each input's raw little-endian bytes in `file`.
// Prints one JSON line: {original: RESULT, converted: RESULT}, RESULT = {ok: true, outputs:
// {name: {type, dims, sha256}}} or {ok: false, error}. run.py compares the two.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';

const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const ort = await import(pathToFileURL(job.ortModule).href);
const kiln = await import(pathToFileURL(`${job.pkg}/index.js`).href);
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = `${dirname(job.ortModule)}/`;
ort.env.logLevel = 'error';
const sessionOptions = { executionProviders: ['wasm'], graphOptimizationLevel: 'disabled' };

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array, float16: Uint16Array,
};

function feeds() {
  const out = {};
  for (const i of job.inputs) {
    const raw = readFileSync(i.file);
    const Ctor = ARRAYS[i.type];
    if (!Ctor) throw new Error(`input ${i.name}: type ${i.type} not handled`);
    const copy = new Uint8Array(raw.byteLength);
    copy.set(raw);
    out[i.name] = new ort.Tensor(i.type, new Ctor(copy.buffer, 0, raw.byteLength / Ctor.BYTES_PER_ELEMENT), i.dims);
  }
  return out;
}

async function run(make) {
  try {
    const session = await make();
    const result = await session.run(feeds());
    const outputs = {};
    for (const name of session.outputNames) {
      const t = result[name];
      const d = t.data;
      const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
      outputs[name] = { type: t.type, dims: Array.from(t.dims), sha256: createHash('sha256').update(bytes).digest('hex') };
    }
    await session.release?.();
    return { ok: true, outputs };
  } catch (e) {
    return { ok: false, error: String(e?.message ?? e).split('\n')[0].slice(0, 400) };
  }
}

const original = await run(() => ort.InferenceSession.create(new Uint8Array(readFileSync(job.original)), sessionOptions));
const converted = await run(async () =>
  kiln.createOnnxSession(ort, new Uint8Array(readFileSync(job.graph)), { model: new Uint8Array(readFileSync(job.kiln)), sessionOptions }),
);
process.stdout.write(`${JSON.stringify({ original, converted })}\n`);
