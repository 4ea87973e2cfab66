import { readFileSync } from 'node:fs';

export const ROOT = new URL('../../', import.meta.url);
export const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));

/** The 46 golden cases of spec/kiln-v2-cases.json, with bytes. */
export function goldens() {
  const j = JSON.parse(readFileSync(new URL('spec/kiln-v2-cases.json', ROOT), 'utf8'));
  return j.cases.map((c) => ({ ...c, bytes: hex(c.hex), isDirectory: c.type === 'tensors' && !c.framed }));
}

export function golden(name) {
  const c = goldens().find((g) => g.name === name);
  if (!c) throw new Error(`no golden ${name}`);
  return c.bytes;
}

/** spec/examples/digits-mlp.kiln in a fresh (aligned) ArrayBuffer. */
export function example() {
  const b = readFileSync(new URL('spec/examples/digits-mlp.kiln', ROOT));
  return new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}

/** The example MLP's forward pass: argmax of fc2 @ relu(fc1 @ x + b1) + b2, accumulated in f64. */
export function predict(w1, b1, w2, b2, x) {
  const hidden = b1.length;
  const classes = b2.length;
  const inputs = x.length;
  const h = new Float64Array(hidden);
  for (let j = 0; j < hidden; j++) {
    let s = b1[j];
    for (let i = 0; i < inputs; i++) s += w1[j * inputs + i] * x[i];
    h[j] = s > 0 ? s : 0;
  }
  let best = 0;
  let bestValue = -Infinity;
  for (let k = 0; k < classes; k++) {
    let s = b2[k];
    for (let j = 0; j < hidden; j++) s += w2[k * hidden + j] * h[j];
    if (s > bestValue) { bestValue = s; best = k; }
  }
  return best;
}
