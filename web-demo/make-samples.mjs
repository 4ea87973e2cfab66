// Writes the demo's example files into www/examples/: the example model in
// both forms (the model file kiln convert writes, and the plain directory)
// and a few damaged files (from the spec's goldens and from the model), with
// a damaged.json index the page reads.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const out = new URL('www/examples/', import.meta.url);
mkdirSync(out, { recursive: true });

const model = readFileSync(new URL('spec/examples/digits-mlp.kiln', root));
writeFileSync(new URL('digits-mlp.kiln', out), model);
const modelFile = readFileSync(new URL('spec/examples/digits-mlp.model.kiln', root));
writeFileSync(new URL('digits-mlp.model.kiln', out), modelFile);
// Where the model file's metadata ends and its directory starts: the example's
// first metadata value is the description, whose text we know.
const at = (needle) => modelFile.indexOf(Buffer.from(needle));
const editModel = (f) => { const b = Buffer.from(modelFile); f(b); return b; };

const cases = JSON.parse(readFileSync(new URL('spec/kiln-v2-cases.json', root), 'utf8')).cases;
const golden = (name) => Buffer.from(cases.find((c) => c.name === name).hex, 'hex');
const edit = (f) => { const b = Buffer.from(model); f(b); return b; };

const damaged = [
  ['not-a-kiln-file.kiln', 'Not a Kiln file at all', Buffer.from('{"weights": "this is JSON, not a tensor directory"}\n')],
  ['cut-short.kiln', 'The example model, cut short', model.subarray(0, 12000)],
  ['wrong-shape.kiln', 'A shape that does not match the bytes', edit((b) => b.writeBigUInt64LE(65n, 64 + 48 + 8))],
  ['dirty-gap.kiln', 'A nonzero byte between two tensors', edit((b) => { b[10860] = 0x2a; })],
  ['extra-bytes.kiln', 'Extra bytes after the directory', Buffer.concat([model, Buffer.from('PADDING')])],
  ['bad-utf8.kiln', 'A tensor name that is not UTF-8 (golden)', golden('kiln-v2-bad-utf8')],
  ['overlap.kiln', 'Two tensors sharing bytes (golden)', golden('kiln-v2-overlap')],
  ['bool-byte.kiln', 'A bool that is 2 (golden)', golden('kiln-v2-bool-byte')],
  ['count-cap.kiln', '16,777,217 tensors claimed (golden)', golden('kiln-v2-count-cap')],
  ['model-bad-utf8.kiln', 'A model file whose metadata is not UTF-8', editModel((b) => { b[at('handwritten')] = 0xff; })],
  ['model-cut-metadata.kiln', 'A model file cut inside its metadata', modelFile.subarray(0, at('handwritten') + 20)],
  ['model-wrong-shape.kiln', 'A model file with a shape that does not match', editModel((b) => b.writeBigUInt64LE(65n, modelFile.indexOf(model.subarray(0, 64)) + 64 + 48 + 8))],
];
for (const [file, , bytes] of damaged) writeFileSync(new URL(file, out), bytes);
writeFileSync(new URL('damaged.json', out), JSON.stringify(damaged.map(([file, label]) => ({ file, label })), null, 1));
