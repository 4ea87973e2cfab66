// The example model (spec/examples/digits-mlp.kiln): 64 -> hidden (ReLU) -> 10.
// Weights are read as zero-copy views over the file's bytes; the MXFP4 first
// layer is dequantized once (e2m1 code x 2^(e8m0 - 127) per group of 32).
import { dequantize } from './kiln-wasm/index.js';

export class Mlp {
  static from(dir) {
    const need = ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'];
    if (!need.every((n) => dir.get(n)?.dtype === 'f32')) return null;
    const w1 = dir.get('fc1.weight');
    if (w1.rank !== 2 || w1.shape[1] !== 64) return null;
    return new Mlp(dir);
  }

  constructor(dir) {
    this.w1 = dir.get('fc1.weight').view();
    this.b1 = dir.get('fc1.bias').view();
    this.w2 = dir.get('fc2.weight').view();
    this.b2 = dir.get('fc2.bias').view();
    this.hidden = this.b1.length;
    this.classes = this.b2.length;
    const q = dir.get('fc1.weight.mxfp4');
    this.hasMx = !!(q && q.quant && q.elementCount === this.w1.length);
    this.w1q = this.hasMx ? dequantize(q) : null;
    const xs = dir.get('samples.x');
    const ys = dir.get('samples.y');
    this.xs = xs && xs.dtype === 'f32' && xs.shape[1] === 64 ? xs.view() : new Float32Array(0);
    this.ys = ys ? ys.view() : new Uint8Array(0);
    this.sampleCount = Math.min(this.xs.length / 64, this.ys.length);
  }

  sample(s) {
    return this.xs.subarray(s * 64, s * 64 + 64);
  }

  label(s) {
    return this.ys[s];
  }

  predict(x, mx) {
    const w1 = mx ? this.w1q : this.w1;
    const h = new Float64Array(this.hidden);
    for (let j = 0; j < this.hidden; j++) {
      let s = this.b1[j];
      for (let i = 0; i < 64; i++) s += w1[j * 64 + i] * x[i];
      h[j] = s > 0 ? s : 0;
    }
    const logits = new Float64Array(this.classes);
    let best = 0;
    for (let k = 0; k < this.classes; k++) {
      let s = this.b2[k];
      for (let j = 0; j < this.hidden; j++) s += this.w2[k * this.hidden + j] * h[j];
      logits[k] = s;
      if (s > logits[best]) best = k;
    }
    const m = logits[best];
    const e = logits.map((v) => Math.exp(v - m));
    const z = e.reduce((a, b) => a + b, 0);
    return { digit: best, probs: e.map((v) => v / z), logits };
  }
}
