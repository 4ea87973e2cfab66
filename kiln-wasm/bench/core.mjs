// The benchmark, shared by Node (node.mjs) and Chromium (index.html via chromium.mjs).
// Kiln: parseDirectory (full validation by the Rust core) + a typed-array view per tensor.
// Baseline: what a JS user does with safetensors today: read the u64 header length,
// JSON.parse the header, and make a typed-array view per tensor. Same tensors, same names.
import { encodeKiln, byteLengthOf, CODES } from '../test-support/encode.mjs';

const ST_DTYPE = { f64: 'F64', f32: 'F32', f16: 'F16', bf16: 'BF16', i8: 'I8', u8: 'U8', i16: 'I16', u16: 'U16', i32: 'I32', u32: 'U32', i64: 'I64', u64: 'U64', bool: 'BOOL' };
const ST_CTOR = { F64: Float64Array, F32: Float32Array, F16: Uint16Array, BF16: Uint16Array, I8: Int8Array, U8: Uint8Array, I16: Int16Array, U16: Uint16Array, I32: Int32Array, U32: Uint32Array, I64: BigInt64Array, U64: BigUint64Array, BOOL: Uint8Array };

/** A safetensors file of the same tensors (packed/narrow dtypes stored as U8 bytes). */
export function encodeSafetensors(specs) {
  const header = {};
  let off = 0;
  for (const s of specs) {
    const len = s.data ? s.data.length : byteLengthOf(CODES[s.dtype] ?? s.dtype, s.shape);
    const dtype = ST_DTYPE[s.dtype] ?? 'U8';
    const shape = ST_DTYPE[s.dtype] ? s.shape : [len];
    header[s.name] = { dtype, shape, data_offsets: [off, off + len] };
    s._stLen = len;
    off += len;
  }
  let json = JSON.stringify(header);
  // Pad with spaces so the data starts 8-byte aligned (as the reference writer does).
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
  const head = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + head.length + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const s of specs) {
    if (s.data) out.set(s.data, at);
    at += s._stLen;
  }
  return out;
}

/** The baseline reader: header JSON.parse + one view per tensor. */
export function readSafetensors(bytes) {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const base = bytes.byteOffset + 8 + n;
  const views = new Map();
  for (const name in header) {
    if (name === '__metadata__') continue;
    const t = header[name];
    const C = ST_CTOR[t.dtype];
    const [a, b] = t.data_offsets;
    views.set(name, new C(bytes.buffer, base + a, (b - a) / C.BYTES_PER_ELEMENT));
  }
  return views;
}

/** Kiln: full validation + one view per tensor (keyed by name; by index when unnamed). */
export function readKiln(kiln, bytes) {
  const dir = kiln.parseDirectory(bytes);
  const views = new Map();
  for (const t of dir.tensors()) views.set(t.name ?? t.index, t.view());
  return views;
}

/**
 * The least any checking reader of `bytes` does for the benchmark, as a
 * function to time: decode the name heap and slice each name, make each
 * view and Map entry (what readKiln and readSafetensors both build), and
 * read each alignment gap's bytes, which the spec says a reader checks
 * are zero and JSON.parse + views never read. Nothing else: the offsets,
 * lengths and name positions come from a parse made here, outside the
 * timing, and no rule is checked. A ratio to safetensors below this one's
 * is out of reach of any reader that checks the gaps (ASCII names only:
 * the benchmark's).
 */
export function floorReader(kiln, bytes) {
  const dir = kiln.parseDirectory(bytes);
  const ts = dir.tensors();
  const heapStart = 64 + 128 * ts.length;
  const heapText = new TextDecoder().decode(bytes.subarray(heapStart, dir.payloadOffset));
  let cursor = 0;
  const rows = ts.map((t, i) => {
    let at = -1;
    if (t.name !== null) {
      at = heapText.indexOf(t.name, cursor);
      cursor = at + t.name.length;
    }
    const end = t.byteOffset + t.byteLength;
    const next = i + 1 < ts.length ? ts[i + 1].byteOffset : dir.byteOffset + dir.byteLength;
    return { offset: t.byteOffset, elements: t.byteLength / 4, at, len: t.name?.length ?? 0, end, next, index: i };
  });
  if (ts.some((t) => t.dtype !== 'f32')) return null;
  const heapEnd = heapStart + cursor;
  const decoder = new TextDecoder();
  return () => {
    const heap = decoder.decode(bytes.subarray(heapStart, heapEnd));
    const views = new Map();
    let gaps = 0;
    for (const r of rows) {
      for (let j = r.end; j < r.next; j++) gaps |= bytes[j];
      views.set(r.at < 0 ? r.index : heap.slice(r.at, r.at + r.len), new Float32Array(bytes.buffer, bytes.byteOffset + r.offset, r.elements));
    }
    if (gaps !== 0) throw new Error('a nonzero gap byte');
    return views;
  };
}

/**
 * `count` f32 tensors sharing `totalBytes`, named t.0, t.1, ... With
 * `named` false the Kiln file leaves them unnamed (a block's name heap is at
 * most 64 KiB: 100,000 names do not fit) and safetensors still names them.
 */
export function syntheticSpecs(count, totalBytes, { named = true } = {}) {
  const each = Math.max(1, Math.floor(totalBytes / count / 4));
  return Array.from({ length: count }, (_, i) => ({ name: `t.${i}`, kilnName: named ? `t.${i}` : null, dtype: 'f32', shape: [each] }));
}

/** The specs as the Kiln encoder takes them (kilnName, when given, replaces name). */
export function kilnSpecs(specs) {
  return specs.map((s) => ('kilnName' in s ? { ...s, name: s.kilnName } : s));
}

/**
 * The first parseDirectory + views after importing the package, against
 * later calls: `load` imports the package (timed apart: instantiation is
 * at import). Run in a fresh process (Node) or a fresh page (Chromium).
 * `cpu`, when given, reads a CPU clock in ms (Node: the process's, every
 * thread; Chromium: the page's main thread, through the DevTools protocol):
 * the import and the first call are then also timed in CPU time, which a
 * busy machine disturbs far less than the wall clock (a process waiting for
 * a core costs wall time, not CPU time). It is read outside the wall timings.
 */
export async function firstCall(load, count, bytes, cpu = null) {
  const i0 = cpu === null ? 0 : await cpu();
  const t0 = performance.now();
  const kiln = await load();
  const importMs = performance.now() - t0;
  const i1 = cpu === null ? 0 : await cpu();
  const input = encodeKiln(kilnSpecs(syntheticSpecs(count, bytes, { named: count <= 10000 })));
  // The input's pages resident first (as a file read into memory is): the timings are the parser's.
  let sum = 0;
  for (let i = 0; i < input.length; i += 4096) sum += input[i];
  const times = [];
  let f0 = 0;
  let f1 = 0;
  for (let i = 0; i < 10; i++) {
    if (i === 0 && cpu !== null) f0 = await cpu();
    const c0 = performance.now();
    if (readKiln(kiln, input).size !== count) throw new Error('tensor count mismatch');
    times.push(performance.now() - c0);
    if (i === 0 && cpu !== null) f1 = await cpu();
  }
  const later = times.slice(1).sort((a, b) => a - b);
  const cpuMs = cpu === null ? {} : { importCpuMs: i1 - i0, firstCpuMs: f1 - f0 };
  return { tensors: count, bytes: input.length, importMs, firstMs: times[0], laterMedianMs: later[Math.floor(later.length / 2)], laterMinMs: later[0], ...cpuMs, sum };
}

export function formatFirstCalls(first) {
  const lines = ['first parseDirectory + views after import (each a fresh process or page; input pages resident):'];
  for (const f of first) {
    lines.push(
      `  ${String(f.tensors).padStart(7)} tensors, ${(f.bytes / 1048576).toFixed(0).padStart(5)} MiB: import ${f.importMs.toFixed(1)} ms, ` +
        `first call ${f.firstMs.toFixed(1)} ms, later calls ${f.laterMedianMs.toFixed(1)} ms (median of 9): first/later ${(f.firstMs / f.laterMedianMs).toFixed(2)}x` +
        (f.importCpuMs === undefined ? '' : `; CPU: import ${f.importCpuMs.toFixed(1)} ms, first call ${f.firstCpuMs.toFixed(1)} ms`),
    );
  }
  return lines.join('\n');
}

export function exampleSpecs(kiln, bytes) {
  const dir = kiln.parseDirectory(bytes);
  return dir.tensors().map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape], data: t.bytes() }));
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function calibrate(fn, batchMs) {
  let k = 1;
  for (;;) {
    const t0 = performance.now();
    for (let i = 0; i < k; i++) fn();
    if (performance.now() - t0 >= batchMs || k >= 1 << 16) return k;
    k *= 2;
  }
}

/**
 * Median ms per call of each function. Calls are timed in batches long
 * enough (>= batchMs) that a coarse clock (Chromium without cross-origin
 * isolation: 0.1 ms) does not matter, and the functions take turns batch by
 * batch, so garbage collection and warm-up hit them alike.
 */
export function compare(fns, { rounds = 15, batchMs = 12 } = {}) {
  for (const fn of fns) for (let i = 0; i < 3; i++) fn();
  const ks = fns.map((fn) => calibrate(fn, batchMs));
  const samples = fns.map(() => []);
  for (let r = 0; r < rounds; r++) {
    fns.forEach((fn, i) => {
      const t0 = performance.now();
      for (let j = 0; j < ks[i]; j++) fn();
      samples[i].push((performance.now() - t0) / ks[i]);
    });
  }
  return samples.map((xs) => ({ median: median(xs), min: Math.min(...xs), runs: xs.length * ks[samples.indexOf(xs)] }));
}

function checkZeroCopy(views, bytes) {
  for (const v of views.values()) if (v.buffer !== bytes.buffer) return false;
  return true;
}

/** Runs one case: returns timings and checks. */
export async function runCase(kiln, label, specs, log = () => {}) {
  const t0 = performance.now();
  const kbytes = encodeKiln(kilnSpecs(specs));
  const sbytes = encodeSafetensors(specs);
  log(`${label}: generated ${kbytes.length} + ${sbytes.length} bytes in ${(performance.now() - t0).toFixed(0)} ms`);
  const c0 = performance.now();
  const first = readKiln(kiln, kbytes);
  const kilnFirst = performance.now() - c0;
  const kv = first;
  const sv = readSafetensors(sbytes);
  if (kv.size !== specs.length || sv.size !== specs.length) throw new Error('tensor count mismatch');
  for (const [key, v] of kv) {
    const name = typeof key === 'number' ? specs[key].name : key;
    if (sv.get(name).length !== v.length) throw new Error(`length mismatch ${name}`);
  }
  // Let the collector settle after allocating the inputs (2 GiB in the big case).
  await new Promise((r) => setTimeout(r, 300));
  const floor = floorReader(kiln, kbytes);
  if (floor !== null && floor().size !== specs.length) throw new Error('floor: tensor count mismatch');
  const [kilnParseOnly, kilnAll, stParseOnly, stAll, floorAll] = compare([
    () => kiln.parseDirectory(kbytes),
    () => readKiln(kiln, kbytes),
    () => {
      const n = Number(new DataView(sbytes.buffer, 0, 8).getBigUint64(0, true));
      return JSON.parse(new TextDecoder().decode(sbytes.subarray(8, 8 + n)));
    },
    () => readSafetensors(sbytes),
    ...(floor === null ? [] : [floor]),
  ]);
  return {
    label,
    tensors: specs.length,
    fileBytes: { kiln: kbytes.length, safetensors: sbytes.length },
    headerBytes: { kiln: kiln.parseDirectory(kbytes).payloadOffset, safetensors: 8 + Number(new DataView(sbytes.buffer, 0, 8).getBigUint64(0, true)) },
    zeroCopy: { kiln: checkZeroCopy(kv, kbytes), safetensors: checkZeroCopy(sv, sbytes) },
    ms: {
      kilnFirstCall: kilnFirst,
      kilnParse: kilnParseOnly.median,
      kilnParseAndViews: kilnAll.median,
      safetensorsParse: stParseOnly.median,
      safetensorsParseAndViews: stAll.median,
      floor: floorAll?.median ?? null,
    },
    ratio: {
      parseAndViews: kilnAll.median / stAll.median,
      parse: kilnParseOnly.median / stParseOnly.median,
      floor: floorAll ? floorAll.median / stAll.median : null,
    },
    runs: kilnAll.runs,
  };
}

export function formatResults(env, results) {
  const lines = [`${env}`];
  lines.push('case                                  | tensors | file MiB | kiln parse | kiln parse+views | safetensors parse | st parse+views | kiln/st (parse+views) | st/kiln | zero-copy');
  for (const r of results) {
    lines.push(
      `${r.label.padEnd(37)} | ${String(r.tensors).padStart(7)} | ${(r.fileBytes.kiln / 1048576).toFixed(1).padStart(8)} | ` +
        `${r.ms.kilnParse.toFixed(3).padStart(7)} ms | ${r.ms.kilnParseAndViews.toFixed(3).padStart(13)} ms | ` +
        `${r.ms.safetensorsParse.toFixed(3).padStart(14)} ms | ${r.ms.safetensorsParseAndViews.toFixed(3).padStart(11)} ms | ` +
        `${r.ratio.parseAndViews.toFixed(2).padStart(21)}x | ${(1 / r.ratio.parseAndViews).toFixed(2).padStart(6)}x | ${r.zeroCopy.kiln && r.zeroCopy.safetensors ? 'yes' : 'NO'}`,
    );
  }
  for (const r of results) {
    lines.push(
      `${r.label}: ${((r.ms.kilnParseAndViews / r.tensors) * 1e6).toFixed(0)} ns per tensor (safetensors ${((r.ms.safetensorsParseAndViews / r.tensors) * 1e6).toFixed(0)}); ` +
        `first call in this process ${r.ms.kilnFirstCall.toFixed(2)} ms; parse only: kiln/safetensors ${r.ratio.parse.toFixed(2)}x` +
        (r.ms.floor === null
          ? ''
          : `; floor (names, views, Map and the gap bytes read, nothing checked) ${r.ms.floor.toFixed(3)} ms = ${r.ratio.floor.toFixed(2)}x safetensors`),
    );
  }
  return lines.join('\n');
}
