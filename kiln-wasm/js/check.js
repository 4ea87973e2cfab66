// Drives the wasm checker (src/lib.rs). The payload never enters wasm
// memory: only the prefix (header, descriptors, name heap, padding) and, per
// probe range, the single byte that can change the verdict.

import { Checker, wasm_memory as memory, plan } from './wasm/kiln_wasm.js';

/** The spec's default count and byte cap. */
export const DEFAULT_CAP = 16777216;

/** A rejected input: the spec's code, the absolute byte offset and the rule that failed. */
export class KilnError extends Error {
  constructor(code, offset, rule, description, inTypeText = false) {
    super(`${code} at byte ${offset}${inTypeText ? ' of the type text' : ''}: ${description}`);
    this.name = 'KilnError';
    /** "FRAME" | "LIMIT" | "EOF" | "TYPE" | "UTF8" | "TRAILING" | "SCHEMA" */
    this.code = code;
    /** Absolute byte offset in the caller's buffer (or the file). */
    this.offset = offset;
    /** The core's rule id, e.g. "NonzeroGap". */
    this.rule = rule;
    /** The rule in one plain sentence. */
    this.description = description;
    /** True when the fault is in the type text given to decodeValue/decodeFrame (offset is a byte of it). */
    this.inTypeText = inTypeText;
  }
}

let checker = null;
let mem = null;

function wasm() {
  if (checker === null) {
    checker = new Checker();
    mem = memory();
  }
  return checker;
}

function errorFrom(c) {
  return new KilnError(c.error_code(), c.error_offset(), c.error_rule(), c.error_description(), c.error_in_type());
}

function cap(v, name) {
  if (v === undefined || v === null) return DEFAULT_CAP;
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
    throw new RangeError(`${name} must be an integer from 0 to 4294967295`);
  }
  return v;
}

/** `bytes` as a Uint8Array over the same memory (ArrayBuffer, SharedArrayBuffer or any view). */
export function asBytes(bytes, fn) {
  if (bytes instanceof Uint8Array) return bytes;
  if (bytes instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && bytes instanceof SharedArrayBuffer)) {
    return new Uint8Array(bytes);
  }
  if (ArrayBuffer.isView(bytes)) return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  throw new TypeError(`${fn} expects a Uint8Array (or another ArrayBuffer view, or an ArrayBuffer)`);
}

export function limitsOf(options = {}) {
  return { countCap: cap(options.countCap, 'countCap'), byteCap: cap(options.byteCap, 'byteCap') };
}

// Position of the byte of [s, e) of `b` that decides a probe, or -1.
// Mirrors kiln_wasm::skeleton::probe_hit.
function probeHit(b, s, e, kind) {
  if (kind === 0) {
    for (let i = s; i < e; i++) if (b[i] !== 0) return i;
  } else if (kind === 1) {
    for (let i = s; i < e; i++) if (b[i] > 1) return i;
  } else if (s < e && (b[s] & 0xf0) !== 0) {
    return s;
  }
  return -1;
}

/** The skeleton plan (nothing reserved): {prefix, length, payloadBase, blockLength, count}; -1 = none. */
export function planOf(head, total) {
  const p = plan(head, total);
  return { prefix: p[0], length: p[1], payloadBase: p[2], blockLength: p[3], count: p[4] };
}

// Table layout (see kiln_wasm::skeleton::table and directory.js).
const META = 8;
const SLOTS = 15;

/**
 * The probe ranges of a directory the core accepted, from its table: the gap
 * before each tensor, each bool payload, each odd packed tail. For an accepted
 * (so canonical) directory these are exactly the payload bytes the core reads.
 */
export function probesOfTable(t) {
  const n = t[0];
  const out = new Uint32Array(6 * n);
  let k = 0;
  let end = t[3];
  for (let i = 0; i < n; i++) {
    const o = META + i * SLOTS;
    const code = t[o] & 0xffff;
    const off = t[o + 1];
    const len = t[o + 2];
    if (off > end) {
      out[k++] = end;
      out[k++] = off;
      out[k++] = 0;
    }
    if (code === 7 && len > 0) {
      out[k++] = off;
      out[k++] = off + len;
      out[k++] = 1;
    } else if ((code === 16 || code === 17 || code === 18) && (t[o + 3] & 1) === 1 && len > 0) {
      out[k++] = off + len - 1;
      out[k++] = off + len;
      out[k++] = 2;
    }
    end = off + len;
  }
  return out.subarray(0, k);
}

// True when a known byte of a probe range decides a verdict.
function anyHit(src, probes) {
  const b = src.bytes;
  const avail = src.avail;
  for (let k = 0; k < probes.length; k += 3) {
    const s = probes[k];
    const e = probes[k + 1];
    const kind = probes[k + 2];
    if (probeHit(b, s, e < avail ? e : avail, kind) >= 0) return true;
    if (e > avail && src.extra) {
      for (const seg of src.extra) {
        const from = Math.max(s, seg.at);
        const to = Math.min(e, seg.at + seg.bytes.length);
        if (from < to && (kind !== 2 || from === s) && probeHit(seg.bytes, from - seg.at, to - seg.at, kind) >= 0) return true;
      }
    }
  }
  return false;
}

/**
 * Runs the core over the skeleton of an input; returns {table, probes}.
 *
 * src.bytes   Uint8Array whose index i is input byte i (for i < src.avail)
 * src.avail   how many leading input bytes are known
 * src.total   the input length the verdict is for
 * src.extra   optional [{at, bytes}]: more known ranges of the input
 *
 * Payload bytes that are not known are taken as zero: the caller says what
 * that means (a loader's provisional check, a remote directory).
 *
 * Fast path: the core runs once over the prefix and zero pages; when it
 * accepts, the table gives the few payload ranges the core read, and if
 * none of their real bytes differs in a way that matters, the verdict
 * stands. Otherwise (a fault, or a deciding payload byte) the exact path
 * copies the deciding bytes in and runs the core again.
 */
export function runCheck(src, limits) {
  const c = wasm();
  const head = src.bytes.subarray(0, Math.min(64, src.avail, src.total));
  const prefix = begin(c, src, head);
  const table = c.check(limits.countCap, limits.byteCap);
  if (table !== undefined) {
    const probes = probesOfTable(table);
    if (!anyHit(src, probes)) return { table, probes };
  }
  return exactCheck(c, src, head, limits);
}

function begin(c, src, head) {
  const prefix = c.begin(head, src.total);
  if (prefix < 0) throw errorFrom(c);
  if (prefix > src.avail) throw new Error(`kiln: internal: ${prefix} prefix bytes needed, ${src.avail} known`);
  new Uint8Array(mem.buffer, c.arena_ptr(), c.skeleton_len()).set(src.bytes.subarray(0, prefix));
  return prefix;
}

function exactCheck(c, src, head, limits) {
  begin(c, src, head);
  const ptr = c.arena_ptr();
  const len = c.skeleton_len();
  const probes = c.probes(); // reads the prefix; may grow memory, so take the view after
  let view = new Uint8Array(mem.buffer, ptr, len);
  const writes = [];
  const b = src.bytes;
  const avail = src.avail;
  for (let k = 0; k < probes.length; k += 3) {
    const s = probes[k];
    const e = probes[k + 1];
    const kind = probes[k + 2];
    const hit = probeHit(b, s, e < avail ? e : avail, kind);
    if (hit >= 0) {
      view[hit] = b[hit];
      writes.push(hit);
    } else if (e > avail && src.extra) {
      extraHit(src.extra, s, e, kind, view, writes);
    }
  }
  let table;
  try {
    table = c.check(limits.countCap, limits.byteCap);
  } finally {
    if (writes.length > 0) {
      view = new Uint8Array(mem.buffer, ptr, len);
      for (const w of writes) view[w] = 0;
    }
  }
  if (table === undefined) throw errorFrom(c);
  return { table, probes: probesOfTable(table) };
}

// The first deciding byte of probe [s, e) inside the extra known ranges.
function extraHit(extra, s, e, kind, view, writes) {
  const segs = extra.filter((x) => x.at < e && x.at + x.bytes.length > s).sort((a, b) => a.at - b.at);
  for (const seg of segs) {
    const from = Math.max(s, seg.at);
    const to = Math.min(e, seg.at + seg.bytes.length);
    if (kind === 2 && from !== s) continue;
    const rel = probeHit(seg.bytes, from - seg.at, to - seg.at, kind);
    if (rel >= 0) {
      const at = rel + seg.at;
      view[at] = seg.bytes[rel];
      writes.push(at);
      return at;
    }
  }
  return -1;
}

/**
 * Scans probe triples against `b`, which holds input bytes [base, base + b.length);
 * returns the absolute position of the first deciding byte, or -1.
 */
export function scanProbes(probes, b, base = 0) {
  const from = base;
  const to = base + b.length;
  for (let k = 0; k < probes.length; k += 3) {
    const kind = probes[k + 2];
    const s = Math.max(probes[k], from);
    const e = Math.min(probes[k + 1], to);
    if (s >= e || (kind === 2 && s !== probes[k])) continue;
    const hit = probeHit(b, s - base, e - base, kind);
    if (hit >= 0) return hit + base;
  }
  return -1;
}

/**
 * Validates a whole Frozen value with the core (a copy of `bytes` in wasm
 * memory, cleared afterwards) and returns its description (see
 * kiln_wasm::frozen): the type's nodes when `withSchema`, then one tensor
 * table per `tensors` value. Throws KilnError.
 */
export function frozenCheck(bytes, typeText, framed, limits, withSchema) {
  const c = wasm();
  const ptr = c.frozen_begin(typeText, bytes.length);
  if (ptr < 0) throw errorFrom(c);
  if (bytes.length > 0) new Uint8Array(mem.buffer, ptr, bytes.length).set(bytes);
  const out = c.frozen(framed, limits.countCap, limits.byteCap, withSchema);
  if (out === undefined) throw errorFrom(c);
  return out;
}
