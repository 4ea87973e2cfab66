// Kiln inspector: opens .kiln files (model files and plain tensor directories)
// with the kiln-wasm package (no init call: its entry module instantiates the
// embedded wasm module when it is imported).
import * as kiln from './kiln-wasm/index.js';
// The core's layout and dtype names, through the module the entry above instantiated:
// where the page locates a fault it computes as the validator does.
import { descriptorOffset, layout as blockLayout, payloadBase } from './kiln-wasm/validate.js';
import { dtype_names } from './kiln-wasm/wasm/kiln_wasm.js';
import { drawHistogram, drawHeatmap, summarize } from './charts.js';
import { Mlp } from './mlp.js';
import { gpuDevice, predictAllGPU, toGPUBuffer as localToGPUBuffer } from './gpu-mlp.js';

const $ = (id) => document.getElementById(id);
const fmt = new Intl.NumberFormat('en-US');
const bytesText = (n) => (n < 1024 ? `${fmt.format(n)} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(2)} MiB`);
const shapeText = (s) => `[${s.join(', ')}]`;

const state = { dir: null, source: null, selected: -1, mlp: null, opened: 0 };
window.__kilnDemo = state; // for the browser tests
state.showCacheNote = (...a) => showCacheNote(...a); // the second-visit message, testable before a cache exists

// ---------- plain words for errors ----------
const CODE_WORDS = {
  FRAME: 'The file is not framed as a Kiln v2 model file or tensor directory: its magic, version, profile, flags or a reserved byte is wrong.',
  LIMIT: 'A count or size in the file is above the reader\u2019s limit, or a size computation overflows.',
  EOF: 'The file ends too early: a length inside it points past the end of the data.',
  TYPE: 'A tensor description is inconsistent: its dtype, shape, byte range, name, quantization or placement breaks a rule.',
  UTF8: 'A metadata string, tensor name or layout name is not valid UTF-8 text.',
  TRAILING: 'There are extra bytes after the end of the tensor directory.',
  SCHEMA: 'The frame\u2019s schema hash does not match the expected type.',
};
const HEADER_FIELDS = [[0, 4, 'magic'], [4, 1, 'version'], [5, 1, 'flags'], [6, 2, 'reserved'], [8, 4, 'tensor_count'], [12, 4, 'name_bytes'], [16, 8, 'payload_bytes'], [24, 8, 'directory_bytes'], [32, 32, 'reserved']];
const DESC_FIELDS = [[0, 2, 'dtype'], [2, 1, 'rank'], [3, 1, 'reserved'], [4, 2, 'name_off'], [6, 2, 'name_len'], [8, 2, 'layout_off'], [10, 2, 'layout_len'], [12, 4, 'block_size'], [16, 2, 'quant_scheme'], [18, 2, 'quant_axis'], [20, 4, 'group_size'], [24, 4, 'scale_index'], [28, 4, 'outer_index'], [32, 8, 'byte_offset'], [40, 8, 'byte_length'], ...Array.from({ length: 8 }, (_, k) => [48 + 8 * k, 8, `shape[${k}]`]), [112, 16, 'reserved']];
const FRAME_FIELDS = [[0, 4, 'magic'], [4, 1, 'profile'], [5, 1, 'flags'], [6, 2, 'reserved'], [8, 8, 'schema hash']];
const field = (table, rel) => table.find(([at, len]) => rel >= at && rel < at + len)?.[2] ?? '?';

// Where a model file's parts lie, read from its first bytes, only to explain
// where an error offset falls (the package has already given its verdict):
// the entries of the metadata as far as their lengths go, and where the
// tensor directory starts when the metadata is whole (else null).
function modelLayout(bytes) {
  if (!bytes || !kiln.isModelFile(bytes)) return null;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const word = (at) => (at + 4 <= bytes.length ? dv.getUint32(at, true) : null);
  const count = word(16);
  const entries = [];
  let at = 20;
  for (let i = 0; count !== null && i < count && i < 100000; i++) {
    const kl = word(at);
    const vl = kl === null ? null : word(at + 4 + kl);
    if (vl === null) return { count, entries, start: null };
    const key = new TextDecoder().decode(bytes.subarray(at + 4, at + 4 + kl));
    entries.push({ at, key, valueAt: at + 4 + kl, end: at + 8 + kl + vl });
    at += 8 + kl + vl;
  }
  if (count === null || at > bytes.length) return { count, entries, start: null };
  // A digests record has its digest table (u32 length, 32 bytes a tensor) after the metadata, a
  // shard record its 44-byte shard field and then the table: the block starts where KLNT is.
  const magic = (p) => p !== null && p + 4 <= bytes.length && new TextDecoder().decode(bytes.subarray(p, p + 4)) === 'KLNT';
  const after = (p) => (word(p) === null ? null : p + 4 + word(p));
  const start = [at, after(at), after(at + 44)].find(magic) ?? at;
  return { count, entries, start };
}

function whereInMetadata(offset, layout) {
  if (offset < 16) return `in the model file's 16-byte frame, field <code>${field(FRAME_FIELDS, offset)}</code>`;
  if (offset < 20) return 'in the metadata\u2019s entry count';
  const i = layout.entries.findIndex((e) => offset < e.end);
  if (i < 0) return 'in the metadata';
  const e = layout.entries[i];
  const part = offset < e.at + 4 ? 'key length' : offset < e.valueAt ? 'key' : offset < e.valueAt + 4 ? 'value length' : 'value';
  return `in metadata entry ${i} (<code>${escapeHtml(e.key)}</code>), its ${part}`;
}

function where(offset, layout, head, size) {
  if (offset >= size) return `at the end of the file (byte ${fmt.format(offset)})`;
  const start = layout ? layout.start : 0;
  if (layout && (start === null || offset < start)) return whereInMetadata(offset, layout);
  const rel = offset - start;
  const block = layout ? ' of the tensor directory' : '';
  const { HEADER_LEN, DESCRIPTOR_LEN } = blockLayout();
  if (rel < HEADER_LEN) return `in the ${HEADER_LEN}-byte header${block}, field <code>${field(HEADER_FIELDS, rel)}</code>`;
  if (!head || head.length < HEADER_LEN) return '';
  const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const count = dv.getUint32(8, true);
  const names = dv.getUint32(12, true);
  const descEnd = descriptorOffset(count);
  if (rel < descEnd) {
    const i = Math.floor((rel - HEADER_LEN) / DESCRIPTOR_LEN);
    return `in descriptor ${i} (of ${fmt.format(count)}), field <code>${field(DESC_FIELDS, (rel - HEADER_LEN) % DESCRIPTOR_LEN)}</code>`;
  }
  if (rel < descEnd + names) return 'in the name heap';
  const base = payloadBase(count, names);
  if (rel < base) return 'in the zero padding before the payloads';
  return `in the payload region, ${fmt.format(rel - base)} bytes in`;
}

function hexDump(bytes, from, hit) {
  const lines = [];
  for (let row = from - (from % 16); row < from + bytes.length; row += 16) {
    let hex = '';
    let text = '';
    for (let k = 0; k < 16; k++) {
      const at = row + k;
      const i = at - from;
      if (i < 0 || i >= bytes.length) { hex += '   '; continue; }
      const b = bytes[i];
      const h = b.toString(16).padStart(2, '0');
      const ch = b >= 32 && b < 127 ? String.fromCharCode(b).replace(/[<&>]/g, (c) => `&#${c.charCodeAt(0)};`) : '·';
      hex += at === hit ? `<span class="hit">${h}</span> ` : `${h} `;
      text += at === hit ? `<span class="hit">${ch}</span>` : ch;
    }
    lines.push(`<span class="off">${row.toString(16).padStart(8, '0')}</span>  ${hex} ${text}`);
  }
  return lines.join('\n');
}

let dtypeNames = null;
// The raw fields of the descriptor an error points into, as the file states them.
function describeDescriptor(i, d) {
  dtypeNames ??= dtype_names();
  const dv = new DataView(d.buffer, d.byteOffset, blockLayout().DESCRIPTOR_LEN);
  const code = dv.getUint16(0, true);
  const rank = d[2];
  const dims = [];
  for (let k = 0; k < Math.min(rank, 8); k++) dims.push(dv.getBigUint64(48 + 8 * k, true).toLocaleString('en-US'));
  const named = code === 0 ? '?' : dtypeNames[code - 1];
  const dtype = named ?? (code >= 4096 && code <= 32767 ? `opaque:${code}` : `unknown code ${code}`);
  return `Descriptor ${i} as the file states it: dtype <b>${dtype}</b>, rank ${rank}, shape <b>[${dims.join(', ')}]</b>, ` +
    `byte_offset ${dv.getBigUint64(32, true).toLocaleString('en-US')}, byte_length <b>${dv.getBigUint64(40, true).toLocaleString('en-US')}</b>` +
    (dv.getUint16(16, true) ? `, quant_scheme ${dv.getUint16(16, true)}` : '');
}

async function showError(err, source) {
  // A file opened meanwhile wins: this one's late reads must not overwrite its card.
  const opened = state.opened;
  const current = () => state.opened === opened;
  document.body.dataset.state = 'error';
  $('progress-card').hidden = true;
  $('error-card').hidden = false;
  $('error-card').scrollIntoView({ block: 'nearest' });
  if (!(err instanceof kiln.KilnError)) {
    $('error-code').textContent = 'ERROR';
    $('error-title').textContent = 'This file could not be read';
    $('error-where').textContent = '';
    $('error-plain').textContent = String(err?.message ?? err);
    $('error-rule').textContent = '';
    $('error-desc').hidden = true;
    $('error-hex').hidden = true;
    return;
  }
  $('error-code').textContent = err.code;
  $('error-title').textContent = `${source.name} is not a valid Kiln file`;
  $('error-plain').textContent = CODE_WORDS[err.code] ?? err.message;
  $('error-rule').innerHTML = `What broke: <b>${escapeHtml(err.description)}</b> <span class="mono">(rule ${escapeHtml(err.rule)})</span>`;
  const size = source.size ?? Infinity;
  // A model file's metadata comes first: read enough of the file to see where the directory starts.
  const first = await source.read(0, Math.min(size, 1 << 20)).catch(() => null);
  if (!current()) return;
  const layout = modelLayout(first);
  const start = layout ? layout.start : 0;
  const { HEADER_LEN, DESCRIPTOR_LEN } = blockLayout();
  const head = start === null || !first ? null : first.subarray(start, start + HEADER_LEN);
  const place = where(err.offset, layout, head, size);
  $('error-where').innerHTML = `at byte <b class="mono">${fmt.format(err.offset)}</b> (0x${err.offset.toString(16)})${place ? ` — ${place}` : ''}`;
  $('error-desc').hidden = true;
  if (head && head.length >= HEADER_LEN && err.offset >= start + HEADER_LEN) {
    const count = new DataView(head.buffer, head.byteOffset, HEADER_LEN).getUint32(8, true);
    const i = Math.floor((err.offset - start - HEADER_LEN) / DESCRIPTOR_LEN);
    if (i < count) {
      const at = start + descriptorOffset(i);
      const d = await source.read(at, at + DESCRIPTOR_LEN).catch(() => null);
      if (!current()) return;
      if (d && d.length === DESCRIPTOR_LEN) {
        $('error-desc').hidden = false;
        $('error-desc').innerHTML = describeDescriptor(i, d);
      }
    }
  }
  const from = Math.max(0, err.offset - 32);
  const bytes = await source.read(from, err.offset + 32).catch(() => null);
  if (!current()) return;
  // No empty boxes: the dump only when there are bytes around the offset.
  $('error-hex').hidden = !bytes || bytes.length === 0;
  $('error-hex').innerHTML = bytes && bytes.length ? hexDump(bytes, from, err.offset) : '';
}

// ---------- loading ----------
function sourceOfFile(file) {
  return { name: file.name, size: file.size, stream: () => file.stream(), read: async (a, b) => new Uint8Array(await file.slice(a, b).arrayBuffer()) };
}

// The file name of a URL: its path's last part, without the query or the fragment.
function nameOfUrl(url) {
  try {
    const path = new URL(url, location.href).pathname;
    return decodeURIComponent(path.slice(path.lastIndexOf('/') + 1)) || url;
  } catch {
    return url;
  }
}

function sourceOfUrl(url, name = nameOfUrl(url)) {
  let whole = null;
  const source = {
    name,
    size: undefined,
    stream: async () => {
      const res = await fetch(url);
      if (!res.ok) throw new Error(`HTTP ${res.status} for ${url}`);
      const len = Number(res.headers.get('content-length'));
      if (len > 0 && !res.headers.get('content-encoding')) source.size = len;
      return res.body;
    },
    read: async (a, b) => {
      whole ??= new Uint8Array(await (await fetch(url)).arrayBuffer());
      return whole.subarray(a, b);
    },
  };
  return source;
}

// The cache backend for the bundled examples: the Origin Private File System
// where there is one, else the Cache Storage API (both need a secure context:
// https or localhost); none when the package has no cache.
function cacheBackend() {
  if (typeof kiln.cache !== 'object' || !isSecureContext) return undefined;
  if (navigator.storage?.getDirectory) return 'opfs';
  if (globalThis.caches) return 'cache-api';
  return undefined;
}

// The bundled examples: opened with range requests through the package's
// persistent cache, so that a second visit downloads no payload byte (at most
// one small request checks that the file on the server is unchanged). A
// server that ignores Range gets the stream loader instead.
async function openCached(url) {
  const source = sourceOfUrl(url);
  const cache = cacheBackend();
  state.opened += 1;
  const opened = state.opened;
  begin(source);
  const from = { network: 0, cache: 0 };
  const started = performance.now();
  let remote;
  try {
    remote = await kiln.openRemote(url, { cache });
  } catch (err) {
    if (opened !== state.opened) return;
    if (err instanceof kiln.KilnError) return showError(err, source);
    console.info(`range requests failed (${err.message}): reading the whole file`);
    return open(source);
  }
  try {
    if (opened !== state.opened) return;
    $('progress-label').textContent = `Directory checked: ${fmt.format(remote.length)} tensors — loading the payload…`;
    renderTable(remote, true);
    const tensors = remote.tensors();
    const grand = tensors.reduce((a, t) => a + t.byteLength, 0) || 1;
    let done = 0;
    for (const t of tensors) {
      await remote.load(t.index, {
        onProgress: (got, total, info) => {
          if (opened !== state.opened) return;
          if (got === total && info?.source in from) from[info.source] += total;
          const now = Math.min(done + got, grand);
          $('progress-bar').value = Math.min(100, (100 * now) / grand);
          $('progress-bytes').textContent = `${bytesText(now)} of ${bytesText(grand)} ${info?.source === 'cache' ? 'from the cache' : 'from the network'}`;
        },
      });
      done += t.byteLength;
      markLoaded(t.index);
    }
    if (opened !== state.opened) return;
    $('progress-bar').value = 100;
    loaded(remote, source, performance.now() - started);
    showCacheNote(from, undefined, cache);
  } catch (err) {
    if (opened === state.opened) await showError(err, source);
  }
}

// The page's state while a file is read.
function begin(source) {
  state.dir = null;
  state.source = source;
  document.body.dataset.state = 'loading';
  document.body.dataset.cache = '';
  for (const id of ['intro', 'error-card', 'summary', 'metadata-card', 'table-card', 'detail', 'mlp']) $(id).hidden = true;
  $('progress-card').hidden = false;
  $('progress-label').textContent = `Reading ${source.name}…`;
  $('progress-bar').value = 0;
  $('cache-note').hidden = true;
  $('progress-bytes').textContent = '';
}

async function open(source) {
  state.opened += 1;
  begin(source);
  const from = { network: 0, cache: 0 };
  const started = performance.now();
  try {
    const stream = await source.stream();
    const loader = new kiln.DirectoryLoader({
      totalLength: source.size,
      onDirectory: (pending) => {
        $('progress-label').textContent = `Directory checked: ${fmt.format(pending.length)} tensors — loading the payload…`;
        renderTable(pending, true);
      },
      onProgress: (got, total, info) => {
        markArrived(loader.directory, got);
        const of = total ?? source.size;
        if (info?.source in from) from[info.source] = got;
        $('progress-bar').value = of ? Math.min(100, (100 * got) / of) : 30;
        const where = info?.source === 'cache' ? ' from the cache' : info?.source === 'network' ? ' from the network' : '';
        $('progress-bytes').textContent = (of ? `${bytesText(got)} of ${bytesText(of)}` : bytesText(got)) + where;
      },
    });
    const dir = await loader.consume(stream);
    const ms = performance.now() - started;
    $('progress-bar').value = 100;
    loaded(dir, source, ms);
    showCacheNote(from, source.cached);
  } catch (err) {
    await showError(err, source);
  }
}

function loaded(dir, source, ms) {
  state.dir = dir;
  document.body.dataset.state = 'loaded';
  $('progress-card').hidden = true;
  $('summary').hidden = false;
  $('sum-file').textContent = source.name;
  $('sum-kind').textContent = dir.metadata ? 'model file' : 'tensor directory';
  $('sum-size').textContent = bytesText(dir.byteOffset + dir.byteLength);
  $('sum-count').textContent = fmt.format(dir.length);
  $('sum-payload').textContent = `byte ${fmt.format(dir.payloadOffset)}`;
  $('sum-time').textContent = `${ms.toFixed(1)} ms`;
  const tensors = dir.tensors();
  // In place: a typed array over the bytes as read (the file's buffer, or for a
  // range-read file the buffer each tensor's bytes were fetched into).
  const remote = dir instanceof kiln.RemoteDirectory;
  const inPlace = tensors.filter((t) => t.isView && (remote || t.view().buffer === dir.source.buffer)).length;
  $('sum-views').textContent = `${inPlace} of ${tensors.length}`;
  $('sum-views').className = `v ${inPlace === tensors.length ? 'good' : ''}`;
  renderMetadata(dir);
  renderTable(dir, false);
  state.mlp = Mlp.from(dir);
  $('mlp').hidden = !state.mlp;
  if (state.mlp) {
    setupMlp(state.mlp, dir);
    runAll(state.mlp, dir, state.opened);
  }
  if (dir.length > 0) select(0);
}

// Whether the bytes came from the package's cache (onProgress's third argument
// says 'cache' or 'network'; a source may also say so itself).
function showCacheNote(from, cached, backend) {
  const note = $('cache-note');
  const hit = cached === true || (from.cache > 0 && from.network === 0);
  const where = backend === 'opfs' ? ' (the browser\u2019s private file system)' : backend === 'cache-api' ? ' (Cache Storage)' : '';
  note.hidden = !hit && !(from.cache > 0);
  note.textContent = hit
    ? `The model came from the cache${where}: no payload byte was downloaded.`
    : from.cache > 0
      ? `Part of the model came from the cache${where}.`
      : '';
  document.body.dataset.cache = hit ? 'hit' : from.cache > 0 ? 'partial' : 'miss';
}

// ---------- metadata ----------
function renderMetadata(dir) {
  const meta = dir.metadata;
  $('metadata-card').hidden = meta === null;
  if (meta === null) return;
  $('metadata').innerHTML = meta.size === 0
    ? '<dd class="muted">(no metadata)</dd>'
    : [...meta].map(([k, v]) => `<dt${k.startsWith('kiln.') ? ' class="reserved"' : ''}>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join('');
  $('metadata-note').textContent = `The tensor directory starts at byte ${fmt.format(dir.byteOffset)}, after the 16-byte frame and the metadata` +
    ` (the converter's alignment padding, kiln.convert.pad, is not shown: it puts the payload at byte ${fmt.format(dir.payloadOffset)}).`;
}

// ---------- table ----------
function quantText(t) {
  const q = t.quant;
  if (!q) return '';
  const outer = q.outer ? ` · outer <span class="mono">${q.outer.name ?? `#${q.outer.index}`}</span>` : '';
  return `scheme ${q.scheme} · ${q.scale.dtype} scales <span class="mono">${q.scale.name ?? `#${q.scale.index}`}</span> ${shapeText(q.scale.shape)} · axis ${q.axis} · group ${q.groupSize}${outer}`;
}

function dtypeClass(t) {
  if (t.quant || ['e2m1', 'e8m0', 'f8e4m3', 'f8e5m2', 'i4', 'u4'].includes(t.dtype)) return 'dtype q';
  if (/^[iu]\d|bool/.test(t.dtype)) return 'dtype i';
  return 'dtype';
}

function renderTable(dir, pending) {
  $('table-card').hidden = false;
  const body = $('tensors').querySelector('tbody');
  const rows = [];
  const shown = Math.min(dir.length, 2000);
  for (let i = 0; i < shown; i++) {
    const t = dir.at(i);
    const view = pending ? '<span class="pending">arriving…</span>' : t.isView ? '<span class="yes" title="a typed array over your ArrayBuffer">✓ in place</span>' : '<span class="no" title="misaligned or big-endian: a copy">copy</span>';
    rows.push(`<tr data-i="${i}"><td class="num">${i}</td><td class="name">${escapeHtml(t.name ?? '(unnamed)')}</td><td><span class="${dtypeClass(t)}">${t.dtype}</span></td><td class="mono">${shapeText(t.shape)}</td><td class="num">${fmt.format(t.byteLength)}</td><td class="num">${fmt.format(t.byteOffset)}</td><td class="quant">${quantText(t)}</td><td class="mono">${t.layout ? `${escapeHtml(t.layout)} · ${t.blockSize} B blocks` : ''}</td><td>${view}</td></tr>`);
  }
  if (dir.length > shown) rows.push(`<tr><td colspan="9" class="muted">…and ${fmt.format(dir.length - shown)} more</td></tr>`);
  body.innerHTML = rows.join('');
}

// While the payload streams in, mark each tensor whose bytes have all arrived.
// A row's view cell says its bytes are in.
function markCell(cell) {
  if (!cell || cell.dataset.arrived) return;
  cell.dataset.arrived = '1';
  cell.innerHTML = '<span class="muted">received</span>';
}

function markLoaded(index) {
  markCell($('tensors').querySelector(`tbody tr[data-i="${index}"]`)?.lastElementChild);
}

function markArrived(dir, received) {
  if (!dir || state.dir) return;
  for (const tr of $('tensors').querySelectorAll('tbody tr[data-i]')) {
    if (tr.lastElementChild.dataset.arrived) continue;
    const t = dir.at(Number(tr.dataset.i));
    if (t.byteOffset + t.byteLength <= received) markCell(tr.lastElementChild);
  }
}

function escapeHtml(s) {
  return s.replace(/[<&>"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

$('tensors').addEventListener('click', (e) => {
  const tr = e.target.closest('tr[data-i]');
  if (tr && state.dir) select(Number(tr.dataset.i));
});

// ---------- detail ----------
function select(i) {
  state.selected = i;
  for (const tr of $('tensors').querySelectorAll('tr.selected')) tr.classList.remove('selected');
  $('tensors').querySelector(`tr[data-i="${i}"]`)?.classList.add('selected');
  const t = state.dir.at(i);
  $('detail').hidden = false;
  $('detail-title').textContent = `${t.name ?? `tensor ${i}`} · ${t.dtype} ${shapeText(t.shape)}`;
  $('dequant-toggle').hidden = !t.quant;
  if (!t.quant) $('dequant').checked = false;
  const v = t.view();
  const name = JSON.stringify(t.name ?? '');
  $('detail-code').innerHTML = `const t = dir.get(${escapeHtml(name)});\nt.view();     <span class="c">// ${v.constructor.name}(${fmt.format(v.length)}) ${t.isView ? `over your ArrayBuffer at byte ${fmt.format(v.byteOffset)}` : '(a copy: misaligned or big-endian)'}</span>\nt.toFloat32(); <span class="c">// element values as a new Float32Array${t.quant ? '; kiln.dequantize(t) applies the scales' : ''}</span>`;
  if (t.dtype.startsWith('opaque')) {
    $('detail-stats').textContent = `opaque layout ${t.layout}: ${fmt.format(t.byteLength)} bytes in ${t.blockSize}-byte blocks. Kiln does not interpret them; the histogram shows byte values.`;
    drawHistogram($('hist'), Float32Array.from(t.bytes()));
    $('heat-fig').hidden = true;
    return;
  }
  const values = t.quant && $('dequant').checked ? kiln.dequantize(t) : t.toFloat32();
  const s = summarize(values);
  $('detail-stats').textContent = `${fmt.format(values.length)} values · min ${s.min.toPrecision(4)} · max ${s.max.toPrecision(4)} · mean ${s.mean.toPrecision(4)} · std ${s.std.toPrecision(4)} · zeros ${fmt.format(s.zeros)}${s.nonFinite ? ` · NaN/Inf ${fmt.format(s.nonFinite)}` : ''}`;
  drawHistogram($('hist'), values, s);
  const two = t.rank === 2;
  $('heat-fig').hidden = !two;
  if (two) {
    $('heat-caption').textContent = `Heatmap · ${t.shape[0]} rows × ${t.shape[1]} columns`;
    drawHeatmap($('heat'), values, t.shape[0], t.shape[1], s, $('heat-legend'));
  }
}
$('dequant').addEventListener('change', () => state.selected >= 0 && select(state.selected));

// ---------- the MLP ----------
// All 32 samples at once: on WebGPU when there is an adapter (and no ?cpu in
// the URL), on the CPU otherwise. The page says which ran.
let gpu; // Promise<{device, name} | null>, asked once
async function runAll(mlp, dir, opened) {
  const out = $('backend');
  out.textContent = 'Running the 32 test images…';
  document.body.dataset.backend = '';
  const forceCpu = new URLSearchParams(location.search).has('cpu');
  let digits;
  let where;
  const started = performance.now();
  try {
    gpu ??= forceCpu ? Promise.resolve(null) : gpuDevice();
    const g = await gpu;
    if (g) {
      const upload = typeof kiln.toGPUBuffer === 'function' ? kiln.toGPUBuffer : localToGPUBuffer;
      digits = await predictAllGPU(g.device, dir, upload);
      where = 'webgpu';
    }
  } catch (err) {
    console.info(`WebGPU run failed, using the CPU: ${err.message}`);
  }
  if (!digits) {
    digits = [];
    for (let s = 0; s < mlp.sampleCount; s++) digits.push(mlp.predict(mlp.sample(s), false).digit);
    where = 'cpu';
  }
  if (opened !== state.opened) return;
  const ms = performance.now() - started;
  const right = digits.filter((d, s) => d === mlp.label(s)).length;
  const why = where === 'cpu' ? (forceCpu ? ' (forced by ?cpu)' : ' (no WebGPU adapter)') : '';
  out.textContent = `${where === 'webgpu' ? 'Ran on WebGPU' : 'Ran on the CPU'}${why}: ${right}/${digits.length} test images right, in ${ms.toFixed(1)} ms.`;
  state.batch = { backend: where, digits, ms };
  document.body.dataset.backend = where;
}

function setupMlp(mlp, dir) {
  const box = $('samples');
  box.innerHTML = '';
  for (let s = 0; s < mlp.sampleCount; s++) {
    const b = document.createElement('button');
    b.className = 'sample';
    b.dataset.sample = String(s);
    b.title = `test image ${s}, label ${mlp.label(s)}`;
    const c = document.createElement('canvas');
    c.width = 8;
    c.height = 8;
    paint8x8(c, mlp.sample(s));
    b.append(c, document.createTextNode(String(mlp.label(s))));
    b.addEventListener('click', () => {
      for (const x of box.querySelectorAll('.selected')) x.classList.remove('selected');
      b.classList.add('selected');
      pad.showImage(mlp.sample(s));
      run(mlp.sample(s));
    });
    box.append(b);
  }
  $('pred-mx-box').hidden = !mlp.hasMx;
  pad.clear();
  if (mlp.sampleCount > 0) box.firstChild.click();
}

function paint8x8(canvas, x) {
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const img = ctx.createImageData(8, 8);
  for (let i = 0; i < 64; i++) {
    const v = 255 - Math.round(Math.max(0, Math.min(1, x[i])) * 255);
    img.data.set([v, v, v, 255], i * 4);
  }
  ctx.putImageData(img, 0, 0);
}

function bars(el, probs, best) {
  el.innerHTML = Array.from(probs, (p, k) => `<div class="bar${k === best ? ' top' : ''}"><span>${k}</span><div class="track"><div class="fill" style="width:${(100 * p).toFixed(1)}%"></div></div><span class="p">${(100 * p).toFixed(1)}%</span></div>`).join('');
}

function run(x) {
  const mlp = state.mlp;
  paint8x8($('preview'), x);
  const a = mlp.predict(x, false);
  bars($('bars-f32'), a.probs, a.digit);
  $('pred-f32').textContent = String(a.digit);
  if (mlp.hasMx) {
    const b = mlp.predict(x, true);
    bars($('bars-mx'), b.probs, b.digit);
    $('pred-mx').textContent = String(b.digit);
    $('agree').textContent = a.digit === b.digit ? 'Both networks agree.' : 'The 4-bit first layer changed the answer.';
  }
  document.body.dataset.predicted = String(a.digit);
}

// A drawing pad whose ink is turned into an 8x8 image like the training data:
// crop to the ink, fit into 32x32 keeping the aspect ratio, count ink per
// 4x4 block (0..16), divide by 16.
const pad = (() => {
  const canvas = $('draw');
  // Read back on every stroke (toImage), so kept in memory the CPU reads.
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  let drawing = false;
  let last = null;
  let timer = 0;
  function clear() {
    ctx.fillStyle = '#0d1117';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
  }
  function pos(e) {
    const r = canvas.getBoundingClientRect();
    return [((e.clientX - r.left) * canvas.width) / r.width, ((e.clientY - r.top) * canvas.height) / r.height];
  }
  function stroke(p) {
    ctx.strokeStyle = '#fff';
    ctx.fillStyle = '#fff';
    ctx.lineWidth = 20;
    ctx.lineCap = 'round';
    ctx.lineJoin = 'round';
    ctx.beginPath();
    if (last) {
      ctx.moveTo(last[0], last[1]);
      ctx.lineTo(p[0], p[1]);
      ctx.stroke();
    } else {
      ctx.arc(p[0], p[1], 10, 0, 2 * Math.PI);
      ctx.fill();
    }
    last = p;
    clearTimeout(timer);
    timer = setTimeout(() => state.mlp && run(toImage()), 30);
  }
  canvas.addEventListener('pointerdown', (e) => {
    if (!state.mlp) return;
    if (canvas.dataset.mode === 'image') clear();
    canvas.dataset.mode = 'ink';
    for (const x of $('samples').querySelectorAll('.selected')) x.classList.remove('selected');
    drawing = true;
    last = null;
    canvas.setPointerCapture(e.pointerId);
    stroke(pos(e));
  });
  canvas.addEventListener('pointermove', (e) => drawing && stroke(pos(e)));
  canvas.addEventListener('pointerup', () => { drawing = false; last = null; });
  canvas.addEventListener('pointercancel', () => { drawing = false; last = null; });
  $('clear').addEventListener('click', () => {
    clear();
    canvas.dataset.mode = 'ink';
    paint8x8($('preview'), new Float32Array(64));
  });
  function toImage() {
    const { width: w, height: h } = canvas;
    const px = ctx.getImageData(0, 0, w, h).data;
    let x0 = w, y0 = h, x1 = -1, y1 = -1;
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        if (px[(y * w + x) * 4] > 128) {
          if (x < x0) x0 = x;
          if (x > x1) x1 = x;
          if (y < y0) y0 = y;
          if (y > y1) y1 = y;
        }
      }
    }
    const out = new Float32Array(64);
    if (x1 < 0) return out;
    const bw = x1 - x0 + 1;
    const bh = y1 - y0 + 1;
    const side = Math.max(bw, bh);
    const small = document.createElement('canvas');
    small.width = 32;
    small.height = 32;
    const sctx = small.getContext('2d', { willReadFrequently: true });
    sctx.fillStyle = '#000';
    sctx.fillRect(0, 0, 32, 32);
    const scale = 32 / side;
    sctx.drawImage(canvas, x0, y0, bw, bh, (32 - bw * scale) / 2, (32 - bh * scale) / 2, bw * scale, bh * scale);
    const sp = sctx.getImageData(0, 0, 32, 32).data;
    for (let y = 0; y < 32; y++) {
      for (let x = 0; x < 32; x++) {
        if (sp[(y * 32 + x) * 4] > 100) out[(y >> 2) * 8 + (x >> 2)] += 1 / 16;
      }
    }
    return out;
  }
  function showImage(x) {
    clear();
    canvas.dataset.mode = 'image';
    const cell = canvas.width / 8;
    for (let i = 0; i < 64; i++) {
      const v = Math.round(Math.max(0, Math.min(1, x[i])) * 255);
      ctx.fillStyle = `rgb(${v},${v},${v})`;
      ctx.fillRect((i % 8) * cell, Math.floor(i / 8) * cell, cell, cell);
    }
  }
  clear();
  return { clear, toImage, showImage };
})();

// ---------- wiring ----------
$('version').textContent = kiln.version();
$('file-input').addEventListener('change', (e) => {
  const f = e.target.files?.[0];
  if (f) open(sourceOfFile(f));
  e.target.value = '';
});
$('load-example').addEventListener('click', () => openCached('examples/digits-mlp.model.kiln'));
$('load-example-plain').addEventListener('click', () => openCached('examples/digits-mlp.kiln'));
$('intro-example').addEventListener('click', () => $('load-example').click());
$('damaged').addEventListener('change', (e) => {
  const v = e.target.value;
  if (v) open(sourceOfUrl(`examples/${v}`, v));
  e.target.value = '';
});

let dragDepth = 0;
addEventListener('dragenter', (e) => { e.preventDefault(); dragDepth++; $('drop-overlay').hidden = false; });
addEventListener('dragover', (e) => e.preventDefault());
addEventListener('dragleave', () => { if (--dragDepth <= 0) { dragDepth = 0; $('drop-overlay').hidden = true; } });
addEventListener('drop', (e) => {
  e.preventDefault();
  dragDepth = 0;
  $('drop-overlay').hidden = true;
  const f = e.dataTransfer?.files?.[0];
  if (f) open(sourceOfFile(f));
});

fetch('examples/damaged.json')
  .then((r) => (r.ok ? r.json() : []))
  .then((list) => {
    for (const { file, label } of list) $('damaged').append(new Option(label, file));
  })
  .catch(() => {});

document.body.dataset.state = 'ready';
// ?example opens the bundled model file (?example=plain the plain directory);
// ?url=... opens any .kiln URL the page may fetch.
const params = new URLSearchParams(location.search);
if (params.has('example')) $(params.get('example') === 'plain' ? 'load-example-plain' : 'load-example').click();
else if (params.get('url')) open(sourceOfUrl(params.get('url')));
