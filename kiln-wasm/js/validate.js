// Drives the core's incremental validator (kiln_nostd::Incremental, wrapped
// by src/validator.rs). wasm memory holds the directory prefix, the name
// scratch and a 64 KiB window, never the payload: bytes reach the core
// through the window, and of the payload only those a rule reads (the
// validator says which: next_needed), the rest passed over with skip.

import {
  DigestCheck,
  Head,
  Validator,
  descriptor_offset,
  header_info,
  layout_sizes,
  model_kind,
  payload_base,
  wasm_memory,
} from './wasm/kiln_wasm.js';
import { fullModule } from './modules.js';
import { assertReady, need } from './ready.js';

let sizes = null;

/**
 * The block layout's sizes, the core's (kiln_nostd::wire::layout, through the
 * module), for the offset arithmetic the JavaScript does: {HEADER_LEN,
 * DESCRIPTOR_LEN, ALIGN}. Read on first use, not at import: kiln-wasm/slim
 * instantiates the module later.
 */
export function layout() {
  if (sizes === null) {
    assertReady();
    const [HEADER_LEN, DESCRIPTOR_LEN, ALIGN] = layout_sizes();
    sizes = Object.freeze({ HEADER_LEN, DESCRIPTOR_LEN, ALIGN });
  }
  return sizes;
}

/** Where descriptor `i` starts, from the block's start (kiln_nostd::wire::layout::descriptor_offset). */
export function descriptorOffset(i) {
  assertReady();
  return descriptor_offset(i);
}

/** Where the payload region starts, from the block's start (kiln_nostd::wire::layout::payload_base), -1 on overflow. */
export function payloadBase(tensorCount, nameBytes) {
  assertReady();
  return payload_base(tensorCount, nameBytes);
}

/** The spec's default count and byte cap. */
export const DEFAULT_CAP = 16777216;

// Marks KilnErrors, so that `instanceof KilnError` holds across two copies of
// the package in one process (the ESM and the CommonJS entry, or two bundles).
const BRAND = Symbol.for('kiln-wasm.KilnError');

/** A rejected input: the spec's code, the absolute byte offset and the rule that failed. */
export class KilnError extends Error {
  static [Symbol.hasInstance](value) {
    if (this !== KilnError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return value !== null && typeof value === 'object' && value[BRAND] === true;
  }

  constructor(code, offset, rule, description, inTypeText = false) {
    super(`${code} at byte ${offset}${inTypeText ? ' of the type text' : ''}: ${description || rule || code}`);
    Object.defineProperty(this, BRAND, { value: true });
    this.name = 'KilnError';
    /** "FRAME" | "LIMIT" | "EOF" | "TYPE" | "UTF8" | "TRAILING" | "SCHEMA" | "DIGEST" | "SHARD" | "PATH" */
    this.code = code;
    /** Absolute byte offset in the caller's buffer (or the file). */
    this.offset = offset;
    /** The core's rule id, e.g. "NonzeroGap". */
    this.rule = rule;
    /** The rule in one plain sentence. */
    this.description = description;
    /** True when the fault is in the type text given to decodeValue/decodeFrame (offset is a byte of it). */
    this.inTypeText = inTypeText;
    /** For a fault in a shard of a sharded model: the shard's file name (offset is a byte of that file), else undefined. */
    this.file = undefined;
    /** For a fault in a shard: its 1-based position in the manifest, else undefined. */
    this.shard = undefined;
  }
}

/**
 * Marks `e` (a KilnError) as a fault in shard `index` of a sharded model,
 * file `file`: the message names the file. Other errors get the file in
 * their message too. Returns `e`.
 */
export function inShard(e, file, index) {
  if (e instanceof KilnError) {
    if (e.file !== undefined) return e;
    e.file = file;
    e.shard = index;
  }
  if (e instanceof Error && !e.message.startsWith(`${file}: `)) e.message = `${file}: ${e.message}`;
  return e;
}

const RECORD_KINDS = ['plain', 'digests', 'shard', null, 'signed'];

/** The KilnError a reader of one model file gives for a sharded model's manifest: the core's SCHEMA at 8. */
export function manifestError() {
  const e = new KilnError(
    'SCHEMA',
    8,
    'SchemaHash',
    "a sharded model's manifest, not a model file: its tensors are in its shard files (open it with openRemote(url) or loadTensor(url, name))",
  );
  Object.defineProperty(e, MANIFEST, { value: true });
  return e;
}

/** Marks the KilnError of manifestError (createOnnxSession opens the manifest then). */
export const MANIFEST = Symbol('kiln-wasm manifest');

// A validator kept between synchronous checks, with its memory.
let spare = null;
const SPARE_MAX = 4 << 20;

let mem = null;
function memory() {
  mem ??= wasm_memory();
  return mem;
}

function errorFrom(c, inTypeText = false) {
  return new KilnError(c.error_code(), c.error_offset(), c.error_rule(), c.error_description(), inTypeText);
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

/**
 * What the first bytes (up to the header's end) of a block say: {prefix,
 * blockLength, payloadBase, count}, -1 where unknown. `prefix` is the memory
 * the validator needs: the directory prefix (header, descriptors, name heap,
 * padding), the header's length for a header the core rejects at once, -1
 * with fewer bytes than a header.
 */
export function headerInfo(head, limits) {
  assertReady();
  const h = header_info(head.subarray(0, layout().HEADER_LEN), limits.countCap, limits.byteCap);
  return { prefix: h[0], blockLength: h[1], payloadBase: h[2], count: h[3] };
}

const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
function text(bytes) {
  // TextDecoder refuses views of a SharedArrayBuffer in some runtimes.
  const shared = typeof SharedArrayBuffer === 'function' && bytes.buffer instanceof SharedArrayBuffer;
  return decoder.decode(shared ? bytes.slice() : bytes);
}

let head = null;

/**
 * What the first bytes of a file say (kiln_wasm::model: the core's frame and
 * field checks; nothing is parsed here). `src` holds the file from byte 0,
 * `total` is the file's length (Infinity when not known yet). Returns
 * {kind: 'plain', start: 0, metadata: null}, {kind: 'model', start, metadata,
 * padding, record, digests, shard} (the block starts at `start`; metadata a
 * Map without the padding key; record 'plain' | 'digests' | 'shard' | 'signed'; digests
 * {at, length} of the digest table, or null; shard {modelAt, index, count} or
 * null), {kind: 'manifest'} (a sharded model's manifest: nothing checked
 * yet), or {kind: 'need', need} (at least that many bytes from the start).
 * Throws the KilnError of a rejected frame or field.
 */
export function readHead(src, total, limits) {
  assertReady();
  const plain = { kind: 'plain', start: 0, metadata: null, padding: 0, record: null, digests: null, shard: null };
  // Most files are decided by their first 16 bytes: only a model file's fields go to wasm memory.
  if (src.length >= 16) {
    const k = model_kind(src.subarray(0, 16));
    if (k < 0) return plain;
    if (k === 3) return { kind: 'manifest' };
  }
  head ??= new Head();
  const r = head.check(src, total, limits.countCap, limits.byteCap);
  switch (r[0]) {
    case 0:
      return plain;
    case 1: {
      const e = head.entries();
      const metadata = new Map();
      for (let i = 0; i < e.length; i += 4) {
        metadata.set(text(src.subarray(e[i], e[i] + e[i + 1])), text(src.subarray(e[i + 2], e[i + 2] + e[i + 3])));
      }
      const d = head.digests();
      const s = head.shard();
      return {
        kind: 'model',
        start: r[1],
        metadata,
        padding: head.padding(),
        record: RECORD_KINDS[head.kind()],
        digests: d[0] < 0 ? null : { at: d[0], length: d[1] },
        shard: s.length === 0 ? null : { modelAt: s[0], index: s[1], count: s[2] },
      };
    }
    case 2:
      return { kind: 'need', need: r[1] };
    case 3:
      return { kind: 'manifest' };
    default:
      throw errorFrom(head);
  }
}

let digestCheck = null;

/**
 * Step 9d for one tensor whose payload bytes are at hand (a ranged load
 * reads them anyway): the core hashes `bytes` (copied through a 64 KiB
 * window) and compares the result with `expected` (its 32-byte digest);
 * throws DIGEST (PayloadDigest) at `offset`, the tensor's first payload byte.
 */
export function checkDigest(bytes, expected, offset) {
  assertReady();
  digestCheck ??= new DigestCheck();
  feedDigest(digestCheck, bytes);
  if (!digestCheck.check(expected, offset)) throw errorFrom(digestCheck);
}

/**
 * SHA-256 of `bytes` (32 bytes), by the core's hasher: the digests' own code,
 * and unlike crypto.subtle it needs no secure context (an http page).
 */
export function sha256Of(bytes) {
  assertReady();
  digestCheck ??= new DigestCheck();
  feedDigest(digestCheck, bytes);
  return digestCheck.finish();
}

/** Adds `bytes` to a DigestCheck's running SHA-256 (through its window in wasm memory). */
export function feedDigest(c, bytes) {
  const ptr = c.window_ptr();
  const wlen = c.window_len();
  for (let at = 0; at < bytes.length; at += wlen) {
    const n = Math.min(wlen, bytes.length - at);
    new Uint8Array(memory().buffer, ptr, n).set(bytes.subarray(at, at + n));
    c.update(n);
  }
}

/** A DigestCheck's verdict as a KilnError (DIGEST), after check() returned false. */
export const digestError = (c) => errorFrom(c);

/** The first bytes a head check looks at in a buffer or a first request: typical metadata fits. */
export const HEAD_WINDOW = 65536;

/** readHead on an input held whole: a window of its first bytes, grown as the metadata asks. */
export function readHeadWhole(input, limits) {
  let n = Math.min(input.length, HEAD_WINDOW);
  for (;;) {
    const h = readHead(input.subarray(0, n), input.length, limits);
    if (h.kind !== 'need') return h;
    n = Math.min(input.length, Math.max(h.need, 2 * n));
  }
}

/**
 * One standalone block checked by the core, in order, from its first byte.
 * The block starts at `start` in the file (after a model file's metadata; 0
 * for a plain directory); every offset taken and reported here is absolute
 * in the file, and the verdict is the core's for the file (a model file's
 * block is its last part: TRAILING after it). Every method that returns
 * false has met a rejection: `count(total)` then `finish()` gives the
 * verdict for a file of `total` bytes (the core reports EOF first when the
 * file is shorter than the block).
 */
export class Check {
  /**
   * @param info    headerInfo() of the block's first bytes
   * @param limits  limitsOf()
   * @param known   how many bytes of the file there are at least (the prefix
   *                memory is only reserved when they can hold it; a shorter
   *                file is EOF anyway)
   */
  constructor(info, limits, known, { reuse = false, start = 0, digests = null } = {}) {
    assertReady();
    const { HEADER_LEN, ALIGN } = layout();
    const want = info.prefix < 0 ? HEADER_LEN : info.prefix;
    const mem = want <= known - start ? want : HEADER_LEN;
    this.align = ALIGN;
    this.start = start;
    this.prefixEnd = start + want;
    // A check that runs to its end synchronously may borrow the spare validator
    // (its memory reused from call to call, up to SPARE_MAX).
    this.reused = reuse && mem <= SPARE_MAX;
    if (this.reused && spare !== null) {
      this.v = spare;
      spare = null;
      this.v.reset(mem, info.count, limits.countCap, limits.byteCap);
    } else {
      this.v = new Validator(mem, info.count, limits.countCap, limits.byteCap);
    }
    if (start !== 0) this.v.place_at(start);
    // Step 9d as the bytes go past (the core's Incremental::digests): every
    // payload byte of the canonical run is then needed, and copied in.
    if (digests !== null && !this.v.set_digests(digests)) {
      this.v.free();
      this.v = null;
      throw new KilnError('LIMIT', 0, 'WasmMemory', 'wasm memory cannot hold the digest table');
    }
    this.ptr = this.v.window_ptr();
    this.wlen = this.v.window_len();
    this.win = null;
    this.win32 = null;
    // Payload bytes taken by JavaScript alone: they lie before the next byte
    // a rule reads (`next`, a file offset), so no wasm call is made for them
    // until one is needed (`sync`). Never past the block's end, where bytes
    // are a fault the core must see at once.
    this.lag = 0;
    this.next = -1;
    this.blockEnd = info.blockLength >= 0 ? start + info.blockLength : -1;
    // With a digest table every payload byte is needed: no plan.
    this.planned = digests === null;
  }

  // Hands the bytes JavaScript took alone to the validator (they are not
  // needed, so skip takes them all).
  sync() {
    if (this.lag > 0) {
      const n = this.lag;
      this.lag = 0;
      this.next = -1;
      this.v.skip(n);
    }
  }

  // The window as 32-bit words (when its address is 4-aligned, as the allocator gives it).
  window32() {
    if (this.win32 === null || this.win32.length === 0) {
      this.win32 = new Uint32Array(memory().buffer, this.ptr, this.wlen >>> 2);
    }
    return this.win32;
  }

  window() {
    // A grown wasm memory detaches the old buffer, and the view's length drops to 0.
    if (this.win === null || this.win.length === 0) this.win = new Uint8Array(memory().buffer, this.ptr, this.wlen);
    return this.win;
  }

  /** File bytes taken so far (the block's start plus the block bytes taken). */
  get fed() {
    return this.start + this.v.fed() + this.lag;
  }

  /**
   * Takes file bytes up to `to` from `src`, a Uint8Array whose index 0 is
   * file byte `base`. Copies into wasm memory the prefix, then only the
   * payload bytes a rule reads: the validator passes over everything up to
   * the next byte it reads (skip), then gets a piece up to the next ALIGN
   * (64-byte) boundary of the block (where a gap ends), growing while the bytes stay
   * needed (a bool tensor). Payload bytes no rule reads are never read, and
   * a span of them that ends before the next needed byte costs no wasm call.
   */
  pump(src, base, to) {
    if (this.lag > 0 || this.next >= 0) {
      const fed = this.fed;
      if (to <= this.next) {
        if (to > fed) this.lag += to - fed;
        return true;
      }
      this.sync();
    }
    const v = this.v;
    const s = this.start;
    const align = this.align;
    let fed = s + v.fed();
    while (fed < to && fed < this.prefixEnd) {
      const n = Math.min(this.prefixEnd, to, fed + this.wlen) - fed;
      this.window().set(src.subarray(fed - base, fed - base + n));
      if (v.feed(n, 0) < 0) return false;
      fed += n;
    }
    if (fed >= to) return true;
    if (this.planned) {
      const r = this.pumpRuns(src, base, to);
      if (r < 0) return false;
      fed = s + r;
      if (fed >= to) {
        this.remember();
        return true;
      }
    }
    let k = v.skip(to - fed);
    let run = 0;
    for (;;) {
      if (k < 0) return false;
      if (k > 0) run = 0;
      fed += k;
      if (fed >= to) {
        this.remember();
        return true;
      }
      // The byte at `fed` is needed. A gap ends at the next ALIGN
      // boundary; past it the next needed bytes are often close (many small
      // tensors), so one call takes a whole window: one copy instead of a
      // call per gap. Past the window the validator skips again.
      let n = run === 0 ? align - ((fed - s) % align) : this.wlen;
      if (n > to - fed) n = to - fed;
      run = n;
      const at = fed - base;
      const w = this.window();
      if (n <= align) {
        for (let i = 0; i < n; i++) w[i] = src[at + i];
      } else {
        w.set(src.subarray(at, at + n));
      }
      fed += n;
      k = v.feed(n, to - fed);
    }
  }

  // The payload bytes rules read, up to file offset `to`, taken a plan at a
  // time: the core lists the next runs of needed bytes (gaps, bool
  // tensors, odd packed tensors' last bytes) that fit the window, they are
  // copied in one after another, and one call takes them all (passing over
  // what lies between). Many small tensors cost a call per window, not two
  // per tensor. Returns the block bytes taken (-1 on a rejection); the
  // caller goes on byte by byte from there (a run past `to`, a run longer
  // than the window, a digest table: no plan).
  pumpRuns(src, base, to) {
    const v = this.v;
    const s = this.start;
    const src32 = (this.ptr & 3) === 0 ? words(src) : null;
    for (;;) {
      const n = v.plan(to - s);
      if (n === 0) return v.fed();
      const buf = memory().buffer;
      const runs = new Float64Array(buf, v.plan_ptr(), 2 * n);
      const w = this.window();
      const w32 = src32 === null ? null : this.window32();
      let j = 0;
      for (let i = 0; i < 2 * n; i += 2) {
        const at = runs[i] + s - base;
        const len = runs[i + 1];
        if (len > 64) {
          w.set(src.subarray(at, at + len), j);
        } else if (src32 !== null && ((at | len | j) & 3) === 0) {
          // Whole 32-bit words where the source and the window agree (most
          // gaps: they end at a 64-byte boundary): the whole check 0.86x the time.
          const a = at >>> 2;
          const b = j >>> 2;
          for (let k = 0; k < len >>> 2; k++) w32[b + k] = src32[a + k];
        } else {
          for (let k = 0; k < len; k++) w[j + k] = src[at + k];
        }
        j += len;
      }
      const k = v.feed_runs(n);
      if (k < 0) return -1;
      if (k < n) return v.fed();
    }
  }

  // Where the next needed byte is, for the pumps to come (a file offset,
  // capped at the block's end; -1: unknown, ask the validator each time).
  remember() {
    if (this.blockEnd < 0) return;
    const n = this.v.next_needed();
    this.next = Math.min(this.start + n, this.blockEnd);
  }

  /** Advances to file offset `to` without the bytes: what a rule reads is taken as zero. */
  passUnknown(to) {
    this.sync();
    return this.v.pass_unknown(to - this.start) >= 0;
  }

  /** After a rejection: counts the file up to `to` (only the length matters then). */
  count(to) {
    this.sync();
    const left = to - this.fed;
    if (left > 0) this.v.skip(left);
  }

  // A copy of the table the validator holds (`n` u32s), out of wasm memory.
  copyTable(n) {
    return new Uint32Array(memory().buffer, this.v.table_ptr(), n).slice();
  }

  /** The tensor table once the directory prefix is in and valid, else undefined. */
  table() {
    this.sync();
    const n = this.v.table();
    return n < 0 ? undefined : this.copyTable(n);
  }

  /** The error the validator holds. */
  error() {
    return errorFrom(this.v);
  }

  /** The verdict on everything taken: the table, or throws the KilnError. Ends the check. */
  finish() {
    this.sync();
    const n = this.v.finish();
    if (n < 0) throw errorFrom(this.v);
    return this.copyTable(n);
  }

  /** Releases the validator (to the spare slot, or its wasm memory). */
  free() {
    if (this.v === null) return;
    if (this.reused && spare === null) spare = this.v;
    else this.v.free();
    this.v = null;
  }
}

// `src` as 32-bit words, when it starts at a 4-byte boundary of its buffer
// and is shorter than 2 GiB (offsets then fit the engines' small integers).
function words(src) {
  if ((src.byteOffset & 3) !== 0 || src.length >= 2147483648) return null;
  return new Uint32Array(src.buffer, src.byteOffset, src.length >>> 2);
}

/** The digest table of a model file whose head is `h` (readHead), from `bytes` (the file from byte 0), or null. */
export function digestTable(h, bytes) {
  return h.digests ? bytes.subarray(h.digests.at, h.digests.at + h.digests.length) : null;
}

/**
 * Checks a whole file held in memory, a plain directory or a model file (by
 * content, as kiln_nostd::model::parse_any): {table, head} (head from
 * readHead), or throws a KilnError. With `verify`, a digests or shard
 * record's payloads are hashed and compared with its digests too (step 9d,
 * the core's verdict: kiln_nostd::model::Model::parse_verified).
 */
export function checkWhole(input, limits, verify = false) {
  const h = readHeadWhole(input, limits);
  if (h.kind === 'manifest') throw manifestError();
  const total = input.length;
  const digests = verify ? digestTable(h, input) : null;
  const c = new Check(headerInfo(input.subarray(h.start), limits), limits, total, { reuse: digests === null, start: h.start, digests });
  try {
    if (!c.pump(input, 0, total)) c.count(total);
    return { table: c.finish(), head: h };
  } finally {
    c.free();
  }
}

let frozen = null;

/**
 * Validates a whole Frozen value with the core (a copy of `bytes` in wasm
 * memory, in a buffer reused from call to call) and returns its description
 * (see kiln_wasm::frozen): the type's nodes when `withSchema`, then one
 * tensor table per `tensors` value. Throws KilnError.
 */
export function frozenCheck(bytes, typeText, framed, limits, withSchema) {
  need('frozen');
  const full = fullModule();
  frozen ??= new full.FrozenChecker();
  const c = frozen;
  const ptr = c.begin(typeText, bytes.length);
  if (ptr < 0) throw errorFrom(c, c.error_in_type());
  // The memory of the instance the checker lives in (kiln-wasm/slim: the full
  // module's, beside `open`), read after begin: it may have grown.
  if (bytes.length > 0) new Uint8Array(full.wasm_memory().buffer, ptr, bytes.length).set(bytes);
  const out = c.check(framed, limits.countCap, limits.byteCap, withSchema);
  if (out === undefined) throw errorFrom(c, c.error_in_type());
  return out;
}
