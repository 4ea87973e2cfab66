// Model files for tests (spec/model-file.md): the KLN0 frame of the model
// record, a dict<str,str> of metadata, then a directory block. The Rust
// writer is kiln_nostd::model::ModelWriter; this one lets JS build inputs.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ROOT } from './goldens.mjs';

export const MODEL_TYPE = 'struct{metadata:dict<str,str>,tensors:tensors,}';
/** FNV-1a 64 of MODEL_TYPE. */
export const MODEL_HASH = 0x8386294c73adbc61n;
/** FNV-1a 64 of the digests record's type, struct{metadata:dict<str,str>,digests:list<u8>,tensors:tensors,}. */
export const DIGESTS_HASH = 0x869b39ce80b385efn;
export const PAD_KEY = 'kiln.convert.pad';

const enc = new TextEncoder();

function compareBytes(a, b) {
  const x = enc.encode(a);
  const y = enc.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/** The frame and the metadata dict for `entries` ([key, value] pairs, any order; sorted here). */
export function modelHead(entries) {
  const sorted = [...entries].sort(([a], [b]) => compareBytes(a, b));
  const parts = sorted.flatMap(([k, v]) => [enc.encode(k), enc.encode(v)]);
  const len = 16 + 4 + parts.reduce((a, p) => a + 4 + p.length, 0);
  const out = new Uint8Array(len);
  const dv = new DataView(out.buffer);
  out.set([0x4b, 0x4c, 0x4e, 0x30]);
  dv.setBigUint64(8, MODEL_HASH, true);
  dv.setUint32(16, sorted.length, true);
  let at = 20;
  for (const p of parts) {
    dv.setUint32(at, p.length, true);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

/**
 * A model file: the head for `entries`, then `block` (a directory block, e.g.
 * from encodeKiln). With `align`, a padding key puts the payload region at a
 * multiple of `align` in the file (`payloadBase` is the block's prefix length).
 * `upto` keeps only the file's first bytes (for sparse files).
 */
export function modelFile(entries, block, { align = 0, payloadBase = 0, padLength = null } = {}) {
  let all = entries;
  if (align > 0 || padLength !== null) {
    let pad = padLength ?? 0;
    if (padLength === null) {
      const without = modelHead([...entries, [PAD_KEY, '']]).length;
      pad = (align - ((without + payloadBase) % align)) % align;
    }
    all = [...entries, [PAD_KEY, ' '.repeat(pad)]];
  }
  const head = modelHead(all);
  const out = new Uint8Array(head.length + block.length);
  out.set(head);
  out.set(block, head.length);
  return out;
}

/**
 * A digests record (spec/model-file.md): the frame and metadata for
 * `entries`, the SHA-256 of each payload of `block` (a directory block, e.g.
 * from encodeKiln) in descriptor order, then the block.
 */
export function digestsModelFile(entries, block) {
  const head = modelHead(entries);
  new DataView(head.buffer).setBigUint64(8, DIGESTS_HASH, true);
  const dv = new DataView(block.buffer, block.byteOffset, block.byteLength);
  const count = dv.getUint32(8, true);
  // The payload region starts at the first multiple of 64 after the header and the directory.
  const base = Math.ceil((64 + Number(dv.getBigUint64(24, true))) / 64) * 64;
  const table = new Uint8Array(4 + 32 * count);
  new DataView(table.buffer).setUint32(0, 32 * count, true);
  for (let i = 0; i < count; i++) {
    const off = base + Number(dv.getBigUint64(64 + i * 128 + 32, true));
    const len = Number(dv.getBigUint64(64 + i * 128 + 40, true));
    table.set(createHash('sha256').update(block.subarray(off, off + len)).digest(), 4 + 32 * i);
  }
  const out = new Uint8Array(head.length + table.length + block.length);
  out.set(head);
  out.set(table, head.length);
  out.set(block, head.length + table.length);
  return out;
}

/** spec/examples/digits-mlp.model.kiln in a fresh ArrayBuffer. */
export function exampleModel() {
  const b = readFileSync(new URL('spec/examples/digits-mlp.model.kiln', ROOT));
  return new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}
