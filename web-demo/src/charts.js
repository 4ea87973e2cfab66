// Histogram and heatmap on plain 2-D canvases.

export function summarize(values) {
  let min = Infinity, max = -Infinity, sum = 0, sq = 0, n = 0, zeros = 0, nonFinite = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) { nonFinite++; continue; }
    if (v < min) min = v;
    if (v > max) max = v;
    if (v === 0) zeros++;
    sum += v;
    sq += v * v;
    n++;
  }
  if (n === 0) { min = 0; max = 0; }
  const mean = n ? sum / n : 0;
  const std = n ? Math.sqrt(Math.max(0, sq / n - mean * mean)) : 0;
  return { min, max, mean, std, zeros, nonFinite, n };
}

// The drawing size is the canvas's width/height attributes at first use (kept
// in data-w/data-h, since the backing store is then scaled by the pixel
// ratio); on screen it shrinks with its box (max-width: 100%, height: auto).
function setupCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  canvas.dataset.w ??= canvas.getAttribute('width');
  canvas.dataset.h ??= canvas.getAttribute('height');
  const w = Number(canvas.dataset.w);
  const h = Number(canvas.dataset.h);
  canvas.style.width = `${w}px`;
  if (canvas.width !== w * ratio) { canvas.width = w * ratio; canvas.height = h * ratio; }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return { ctx, w, h };
}

const nice = (v) => (v === 0 ? '0' : Math.abs(v) >= 1000 || Math.abs(v) < 0.01 ? v.toExponential(2) : v.toPrecision(3));

/**
 * Count-axis ticks for a histogram whose tallest bin holds `top`: 0, the
 * middle and the top, as whole counts, without repeats (a top of 1 gives
 * 0 and 1, not "0, 1, 1"). Each is drawn at its own height.
 */
export function countTicks(top) {
  const ticks = [0, Math.round(top / 2), top];
  return ticks.filter((v, i) => ticks.indexOf(v) === i);
}

export function drawHistogram(canvas, values, s = summarize(values)) {
  const { ctx, w, h } = setupCanvas(canvas);
  const pad = { l: 44, r: 12, t: 10, b: 30 };
  const bins = 64;
  const counts = new Float64Array(bins);
  const span = s.max - s.min || 1;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) continue;
    let k = Math.floor(((v - s.min) / span) * bins);
    if (k >= bins) k = bins - 1;
    counts[k]++;
  }
  const top = Math.max(1, ...counts);
  const pw = w - pad.l - pad.r;
  const ph = h - pad.t - pad.b;
  ctx.strokeStyle = '#e3e6eb';
  ctx.fillStyle = '#667085';
  ctx.font = '11px ui-monospace, monospace';
  ctx.lineWidth = 1;
  const labels = [];
  for (const v of countTicks(top)) {
    const y = pad.t + ph * (1 - v / top);
    ctx.beginPath(); ctx.moveTo(pad.l, y + 0.5); ctx.lineTo(w - pad.r, y + 0.5); ctx.stroke();
    ctx.textAlign = 'right';
    ctx.fillText(String(v), pad.l - 6, y + 4);
    labels.push(String(v));
  }
  canvas.dataset.yLabels = labels.join(',');
  const bw = pw / bins;
  for (let k = 0; k < bins; k++) {
    const bh = (counts[k] / top) * ph;
    const mid = s.min + ((k + 0.5) / bins) * span;
    ctx.fillStyle = mid < 0 ? '#5b8def' : '#f08c4a';
    ctx.fillRect(pad.l + k * bw + 0.5, pad.t + ph - bh, Math.max(1, bw - 1), bh);
  }
  ctx.fillStyle = '#667085';
  ctx.textAlign = 'left';
  ctx.fillText(nice(s.min), pad.l, h - 10);
  ctx.textAlign = 'right';
  ctx.fillText(nice(s.max), w - pad.r, h - 10);
  if (s.min < 0 && s.max > 0) {
    const x = pad.l + ((0 - s.min) / span) * pw;
    ctx.strokeStyle = '#1d2330';
    ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(x + 0.5, pad.t); ctx.lineTo(x + 0.5, pad.t + ph); ctx.stroke();
    ctx.setLineDash([]);
    ctx.textAlign = 'center';
    ctx.fillText('0', x, h - 10);
  }
}

// Diverging blue-white-orange for signed data, a sequential ramp otherwise.
const SEQ = [[13, 8, 135], [126, 3, 168], [204, 71, 120], [248, 149, 64], [240, 249, 33]];
function seq(t) {
  const x = Math.max(0, Math.min(1, t)) * (SEQ.length - 1);
  const i = Math.min(SEQ.length - 2, Math.floor(x));
  const f = x - i;
  return SEQ[i].map((c, k) => Math.round(c + (SEQ[i + 1][k] - c) * f));
}
function div(t) {
  // t in [-1, 1]
  const a = Math.min(1, Math.abs(t));
  const end = t < 0 ? [37, 99, 235] : [217, 72, 15];
  return [255, 255, 255].map((c, k) => Math.round(c + (end[k] - c) * a));
}

export function drawHeatmap(canvas, values, rows, cols, s, legend) {
  const maxSide = 520;
  const cell = Math.max(1, Math.min(14, Math.floor(maxSide / Math.max(rows, cols))));
  const srcW = Math.min(cols, maxSide);
  const srcH = Math.min(rows, maxSide);
  const w = Math.max(8, Math.min(maxSide, cols * cell));
  const h = Math.max(8, Math.min(maxSide, rows * cell));
  canvas.setAttribute('width', String(w));
  canvas.setAttribute('height', String(h));
  canvas.width = w;
  canvas.height = h;
  canvas.style.width = `${w}px`;
  const signed = s.min < 0;
  const scale = signed ? Math.max(Math.abs(s.min), Math.abs(s.max)) || 1 : (s.max - s.min) || 1;
  const tmp = document.createElement('canvas');
  tmp.width = srcW;
  tmp.height = srcH;
  const tctx = tmp.getContext('2d');
  const img = tctx.createImageData(srcW, srcH);
  for (let y = 0; y < srcH; y++) {
    const r = Math.floor((y * rows) / srcH);
    for (let x = 0; x < srcW; x++) {
      const c = Math.floor((x * cols) / srcW);
      const v = values[r * cols + c];
      const rgb = !Number.isFinite(v) ? [0, 0, 0] : signed ? div(v / scale) : seq((v - s.min) / scale);
      img.data.set([rgb[0], rgb[1], rgb[2], 255], (y * srcW + x) * 4);
    }
  }
  tctx.putImageData(img, 0, 0);
  const ctx = canvas.getContext('2d');
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(tmp, 0, 0, w, h);
  if (legend) {
    const bar = document.createElement('canvas');
    bar.width = 120;
    bar.height = 10;
    const b = bar.getContext('2d');
    for (let x = 0; x < 120; x++) {
      const t = x / 119;
      const rgb = signed ? div(t * 2 - 1) : seq(t);
      b.fillStyle = `rgb(${rgb})`;
      b.fillRect(x, 0, 1, 10);
    }
    legend.replaceChildren(document.createTextNode(nice(signed ? -scale : s.min)), bar, document.createTextNode(nice(signed ? scale : s.max)));
  }
}
