// Range-request loading: the directory of a remote file, then single tensors.

import { DigestCheck } from './wasm/kiln_wasm.js';
import { fullModule } from './modules.js';
import { needAsync } from './ready.js';
import { Check, HEAD_WINDOW, KilnError, checkDigest, feedDigest, descriptorOffset, headerInfo, inShard, layout, limitsOf, readHead } from './validate.js';
import { Progress } from './progress.js';
import { gapStart, loadDirToGPU, namesOf } from './gpu.js';
import { Directory, INTERNAL, LAYOUT_LEN, META, NAME_LEN, SLOTS, copyOffset, extraSlot } from './directory.js';
import { CacheEntryBad, digestKey, fileBase, hex, openRead, openWrite, readRecord, recordBytes, recordKey, sealed, sha256, shardKey, storeOf, unseal } from './cache.js';

function parseContentRange(value) {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value ?? '');
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? null : Number(m[3]) };
}

// Ends a response we will not read: cancels its body and aborts the request,
// so the rest of it is not downloaded.
async function drop(r, ac) {
  try {
    await r.body?.cancel();
  } catch {
    // already closed
  }
  ac.abort();
}

// Streamed reads go through one buffer of at most this size, reused (BYOB
// reads): a 512 MiB tensor then leaves no trail of chunks for the garbage
// collector. 4 MiB: smaller reads cost time per read (a 512 MiB upload in
// Chromium took 8.0 s with 256 KiB, 5.7 s with 1 MiB, 4.4 s with 4 MiB).
const STREAM_CHUNK = 4 * 1024 * 1024;

// Streams a body of exactly `len` bytes: onChunk(chunk, at) for each network
// chunk, `at` counting from 0. `reuse`: the chunk is only valid during the
// call (it is read into one buffer, reused: a byte stream's BYOB reader),
// so onChunk must copy what it keeps.
async function readChunks(r, len, what, onChunk, reuse = false) {
  let byob = null;
  if (reuse) {
    try {
      byob = r.body.getReader({ mode: 'byob' });
    } catch {
      byob = null; // not a byte stream: chunks as the stream makes them
    }
  }
  const reader = byob ?? r.body.getReader();
  let got = 0;
  const size = Math.max(1, Math.min(len, STREAM_CHUNK));
  let buf = byob === null ? null : new ArrayBuffer(size);
  try {
    for (;;) {
      const { done, value } = await (byob === null ? reader.read() : reader.read(new Uint8Array(buf, 0, size)));
      if (done) break;
      if (byob !== null) buf = value.buffer; // the read transferred it
      if (got + value.length > len) throw new Error(`${what}: the body is longer than its Content-Range`);
      const wait = onChunk(value, got); // (a promise: the chunk is in use until it settles)
      if (wait !== undefined) await wait;
      got += value.length;
    }
  } catch (e) {
    await reader.cancel().catch(() => {});
    throw e;
  }
  if (got !== len) throw new Error(`${what}: the body ended after ${got} of ${len} bytes`);
}

/**
 * Bytes [start, end] (inclusive) of the remote file with a Range request,
 * copied into `out` at `at` (a new buffer when `out` is omitted): {bytes, total}.
 * With `onChunk`, nothing is buffered: onChunk(chunk, fileOffset) for each
 * network chunk (valid only during the call: one buffer is reused), and
 * `bytes` is empty (its length is `length`).
 * Anything but 206 Partial Content (or 416 past the end) is an error, and its
 * body is cancelled: a server that ignores Range would send the whole file.
 */
async function rangeGet(ctx, start, end, out = null, at = 0, onChunk = null) {
  const what = `kiln: ${ctx.url}`;
  const ac = new AbortController();
  const outer = ctx.signal;
  const forward = () => ac.abort(outer.reason);
  if (outer) {
    if (outer.aborted) throw outer.reason ?? new Error(`${what}: aborted`);
    outer.addEventListener('abort', forward, { once: true });
  }
  try {
    const r = await ctx.fetch(ctx.url, { headers: { ...ctx.headers, Range: `bytes=${start}-${end}` }, signal: ac.signal });
    ctx.stats.requests += 1;
    if (r.status === 206) {
      const raw = r.headers.get('content-range');
      if (raw === null) {
        await drop(r, ac);
        throw new Error(
          `${what}: the 206 response has no readable Content-Range header; a server on another origin must send ` +
            '"Access-Control-Expose-Headers: Content-Range" for a page to read it',
        );
      }
      const cr = parseContentRange(raw);
      if (cr === null || cr.start !== start || cr.end > end || cr.end < start) {
        await drop(r, ac);
        throw new Error(`${what}: the server answered Content-Range ${raw} for bytes=${start}-${end}`);
      }
      const len = cr.end - cr.start + 1;
      if (onChunk !== null) {
        await readChunks(
          r,
          len,
          what,
          (chunk, got) => {
            ctx.stats.bytesFetched += chunk.length;
            onChunk(chunk, start + got);
          },
          true,
        );
        return { bytes: new Uint8Array(0), length: len, total: cr.total };
      }
      const bytes = out ?? new Uint8Array(len);
      await readChunks(r, len, what, (chunk, got) => bytes.set(chunk, at + got));
      ctx.stats.bytesFetched += len;
      return { bytes: out ? bytes.subarray(at, at + len) : bytes, length: len, total: cr.total };
    }
    if (r.status === 416) {
      const cr = /\/(\d+)$/.exec(r.headers.get('content-range') ?? '');
      await drop(r, ac);
      return { bytes: new Uint8Array(0), length: 0, total: cr ? Number(cr[1]) : null };
    }
    await drop(r, ac);
    if (r.status === 200) {
      throw new Error(
        `${what}: the server ignored the Range request (HTTP 200 instead of 206 Partial Content); the response was ` +
          'cancelled rather than downloading the whole file. openRemote/loadTensor need a server that honours Range ' +
          'requests; loadDirectory(url) streams a whole file instead',
      );
    }
    const e = new Error(`${what}: HTTP ${r.status} ${r.statusText}`);
    e.status = r.status;
    throw e;
  } finally {
    outer?.removeEventListener('abort', forward);
  }
}

/**
 * A directory read over HTTP Range requests: the file's first 64 KiB (a
 * model file's frame and metadata, the header, and for most files the whole
 * directory), then the rest of the directory if any. `load(name)` fetches
 * one tensor (and its scale and outer tensors), each with the alignment gap
 * before it, or takes it from the bytes already fetched.
 *
 * What is checked: every verdict is the core's verdict on the whole file
 * with each payload byte never fetched taken as zero. So the header,
 * descriptors, names, padding, canonical offsets, quantization references,
 * the file length (EOF, TRAILING) are checked exactly as parseDirectory
 * would, at openRemote; the payload's byte rules (gap bytes, bool bytes, the
 * high nibble of an odd packed tensor) are checked for the tensors loaded,
 * at load(). Bytes never fetched are never checked: a fault there is what
 * parseDirectory on the whole file would report and this does not.
 */
export class RemoteDirectory extends Directory {
  /** @internal */
  constructor(token, table, prefix, info) {
    if (token !== INTERNAL) throw new TypeError('kiln-wasm: RemoteDirectory cannot be constructed directly: use openRemote(url)');
    super(token, table, prefix, { segments: new Map(), metadata: info.metadata });
    this.url = info.ctx.url;
    /** Size of the remote file in bytes. */
    this.size = info.size;
    this._ctx = info.ctx;
    this._info = info.header;
    this._limits = info.limits;
    this._start = info.start; // where the block starts in the file
    this._known = []; // [{at, bytes}]: fetched ranges (gap + payload), for the check
    this._digestsAt = info.digests ? info.digests.at : -1; // the digest table in `prefix` (digests and shard records)
    this._cacheState = info.ctx.cache; // null, or the cache state shared by a model's files
    this._cacheBase = info.cacheBase ?? null; // key base of a file without digests (URL, length, validator)
    this._validator = info.validator ?? null; // its ETag / Last-Modified at open
    this._prefixSource = info.source ?? 'network'; // where `prefix` came from
    this._ends = null; // payload end -> tensor index, for _readRange's cache lookups
    this._from = new Map(); // tensor index -> where load() took it from ('network' | 'cache')
    this._onProgress = info.onProgress ?? null; // openRemote's onProgress: load's default
  }

  /** HTTP requests made so far. */
  get requests() {
    return this._ctx.stats.requests;
  }

  /** Bytes fetched so far (response bodies). */
  get bytesFetched() {
    return this._ctx.stats.bytesFetched;
  }

  /** False: one file (a sharded model opens as a RemoteModel). */
  get sharded() {
    return false;
  }

  /** True when tensor `nameOrIndex`'s payload has been fetched. */
  isLoaded(nameOrIndex) {
    const t = this._find(nameOrIndex);
    return this._segments.has(t.index);
  }

  /**
   * Fetches one tensor's payload (plus its quantization scales), checks it, and returns the Tensor.
   * With a cache: a tensor found there (checked again) costs no request; one fetched is stored once checked.
   * options: {onProgress?(received, total, {tensor, source})} (default: openRemote's onProgress).
   */
  async load(nameOrIndex, options = {}) {
    const t = this._find(nameOrIndex);
    const q = t.quant;
    const want = [...new Set([t, q?.scale, q?.outer])].filter((x) => x && !this._segments.has(x.index));
    const report = reporter(options.onProgress ?? this._onProgress, this._cacheState);
    if (want.length === 0) {
      new Progress(report, 0).done({ tensor: t.name ?? t.index, source: this._sourceOf(t.index) });
      return t;
    }
    const hits = await Promise.all(want.map((x) => this._fromCache(x)));
    const total = want.reduce((a, x, i) => a + (hits[i]?.bytes.length ?? x.byteOffset + x.byteLength - gapStart(this, x.index)), 0);
    const progress = new Progress(report, total);
    const fetched = await Promise.all(
      want.map((x, i) => {
        if (hits[i] === null) return this._fetch(x, progress);
        progress.add(hits[i].bytes.length, { tensor: x.name ?? x.index, source: 'cache' });
        return hits[i];
      }),
    );
    // Step 9d for the tensors fetched (the file's own digests), in descriptor
    // order: DIGEST comes before the payload rules of steps 10 to 12. (A
    // cache entry was checked when read.)
    if (this._digestsAt >= 0) {
      for (const f of [...fetched].sort((a, b) => a.index - b.index)) {
        if (f.source === 'cache') continue;
        const at = this._digestsAt + 32 * f.index;
        checkDigest(f.payload, this._bytes.subarray(at, at + 32), this.at(f.index).byteOffset);
      }
    }
    // The core's verdict on the file with every fetched byte in place and the rest zero.
    this._check([...this._known, ...fetched]);
    for (const f of fetched) {
      this._known.push(f);
      this._segments.set(f.index, f.payload);
      this._from.set(f.index, f.source === 'prefix' ? this._prefixSource : f.source);
    }
    for (const f of fetched) if (f.source === 'network') await this._commit(this.at(f.index), f);
    progress.done({ tensor: t.name ?? t.index, source: progress.source });
    return t;
  }

  /**
   * Fetches tensors (a name, an index, an array of them, or all when omitted) straight into GPUBuffers
   * created mapped, each network chunk written into the mapped range as it arrives; each tensor's rules
   * and digest are checked before its buffer is unmapped. Resolves to a Map name -> GPUBuffer; on any
   * failure every buffer made is destroyed and it rejects (a KilnError for a fault in the file).
   * options: {usage?, onProgress?(received, total, {tensor, source})}.
   */
  loadToGPU(device, nameOrNames, options = {}) {
    return loadDirToGPU(this, device, nameOrNames, { ...options, onProgress: reporter(options.onProgress ?? this._onProgress, this._cacheState) });
  }

  // One tensor and the gap before it (from the previous tensor's end): from
  // the bytes fetched at open when they hold it, else fetched into a buffer
  // laid out so the payload's address is a multiple of ALIGN (views in place).
  async _fetch(x, progress = null) {
    const gapFrom = x.index === 0 ? this.payloadOffset : this.at(x.index - 1).byteOffset + this.at(x.index - 1).byteLength;
    const end = x.byteOffset + x.byteLength;
    const tensor = x.name ?? x.index;
    if (end <= this._bytes.length) {
      progress?.add(end - gapFrom, { tensor, source: this._prefixSource });
      return { index: x.index, at: gapFrom, bytes: this._bytes.subarray(gapFrom, end), payload: this._bytes.subarray(x.byteOffset, end), source: 'prefix' };
    }
    // Payload offsets are multiples of ALIGN from the block's start.
    const { ALIGN } = layout();
    const floor = gapFrom - ((gapFrom - this._start) % ALIGN);
    let buf;
    try {
      buf = new Uint8Array(end - floor);
    } catch {
      throw new RangeError(`kiln: tensor ${JSON.stringify(x.name ?? x.index)} is ${x.byteLength} bytes, more than one ArrayBuffer holds here`);
    }
    await this._readNetwork(gapFrom, end, (chunk, off) => {
      buf.set(chunk, off - floor);
      progress?.add(chunk.length, { tensor, source: 'network' });
    });
    const seg = buf.subarray(gapFrom - floor, end - floor);
    return { index: x.index, at: gapFrom, bytes: seg, payload: buf.subarray(x.byteOffset - floor, end - floor), source: 'network' };
  }

  // Where a loaded tensor's bytes came from.
  _sourceOf(i) {
    return this._from.get(i) ?? this._prefixSource;
  }

  // The cache key of tensor x: its digest when the file has digests, else
  // the file's key base (URL, length, validator) and its index; null: not cached.
  _key(x) {
    if (this._cacheState === null) return null;
    if (this._digestsAt >= 0) {
      const at = this._digestsAt + 32 * x.index;
      return digestKey(this._bytes.subarray(at, at + 32));
    }
    return this._cacheBase === null ? null : `${this._cacheBase}-${x.index}`;
  }

  // Tensor x from the cache as a fetched segment (source 'cache'), checked
  // again: its digest (or the entry's trailer, which the bytes stored had
  // to match). A corrupted entry is deleted (the caller fetches it); null
  // when absent. The file's rules then run on it as on fetched bytes.
  async _fromCache(x) {
    const key = this._key(x);
    if (key === null) return null;
    const end = x.byteOffset + x.byteLength;
    if (end <= this._bytes.length) return null; // in the prefix already
    const store = this._cacheState.store;
    let entry;
    try {
      entry = await store.get(key);
    } catch (e) {
      this._cacheState.fail(e);
      return null;
    }
    if (entry === undefined) return null;
    const gapFrom = gapStart(this, x.index);
    const digested = this._digestsAt >= 0;
    // A digest-keyed entry is the payload alone (another file's gap may differ): the gap is then not at hand.
    const from = digested ? x.byteOffset : gapFrom;
    let body = digested ? entry : unseal(entry);
    let seg = null;
    if (body !== null && body.length === end - from) {
      // Laid out as _fetch does: the payload's address a multiple of ALIGN (views in place).
      const { ALIGN } = layout();
      const floor = from - ((from - this._start) % ALIGN);
      let buf = body;
      if (from !== floor || body.byteOffset % ALIGN !== 0) {
        buf = new Uint8Array(end - floor);
        buf.set(body, from - floor);
      }
      const base = buf === body ? 0 : from - floor;
      body = null;
      seg = { index: x.index, at: from, bytes: buf.subarray(base), payload: buf.subarray(base + x.byteOffset - from), source: 'cache' };
      if (digested) {
        try {
          const at = this._digestsAt + 32 * x.index;
          checkDigest(seg.payload, this._bytes.subarray(at, at + 32), x.byteOffset);
        } catch {
          seg = null;
        }
      }
    }
    if (seg === null) await store.delete(key).catch((e) => this._cacheState.fail(e));
    return seg;
  }

  // Stores a fetched segment that passed its checks (a digest-keyed entry:
  // the payload; else gap + payload, sealed). A failed put is reported, not thrown.
  async _commit(x, seg) {
    const key = this._key(x);
    if (key === null) return;
    let bytes;
    if (this._digestsAt >= 0) {
      bytes = seg.bytes.subarray(x.byteOffset - seg.at);
    } else {
      // Only bytes of the version the key names.
      if (this._ctx.validator !== this._validator) return;
      const gapFrom = gapStart(this, x.index);
      if (seg.at === gapFrom) {
        bytes = seg.bytes;
      } else {
        bytes = new Uint8Array(seg.at + seg.bytes.length - gapFrom);
        bytes.set(this._bytes.subarray(gapFrom, seg.at));
        bytes.set(seg.bytes, seg.at - gapFrom);
      }
      bytes = await sealed(bytes);
    }
    await this._cacheState.put(key, bytes);
  }

  // The tensor whose payload ends at `end` and whose gap starts at or before `start`.
  _tensorEndingAt(start, end) {
    if (this._ends === null) {
      this._ends = new Map();
      for (let i = 0; i < this.length; i++) {
        const t = this.at(i);
        const end = t.byteOffset + t.byteLength;
        // An empty tensor's range (its gap) ends where it starts: the tensor before it wins a tie.
        if (t.byteLength > 0 || !this._ends.has(end)) this._ends.set(end, i);
      }
    }
    const i = this._ends.get(end);
    return i !== undefined && gapStart(this, i) <= start ? this.at(i) : null;
  }

  // Bytes [start, end) from the network: see _readRange.
  async _readNetwork(start, end, onChunk) {
    let at = start;
    while (at < end) {
      const got = await rangeGet(this._ctx, at, end - 1, null, 0, (chunk, off) => onChunk(chunk, off, 'network', false));
      if (got.length === 0) throw new Error(`kiln: ${this.url}: the server sent no bytes from ${at} (the file is shorter than its directory says)`);
      at += got.length;
    }
  }

  /**
   * @internal Streams bytes [start, end) of the file: onChunk(chunk, fileOffset, source)
   * for each chunk as it arrives (valid during the call; a promise returned is
   * awaited before the next), nothing buffered here (loadToGPU reads through
   * it). More than one request only from a server that answers a range with
   * fewer bytes than asked.
   * With a cache, for a range that ends a tensor's payload, returns what the
   * caller settles once its own checks ran (null without one):
   *   {source: 'cache', discard()}: the tensor's entry was streamed (a
   *     digest-keyed entry's gap as zeros); a sealed entry's trailer was
   *     checked (a mismatch deletes it and throws CacheEntryBad before this
   *     returns); the digest and the file's rules are the caller's, and
   *     discard() deletes the entry when they fail.
   *   {source: 'network', commit(), discard()}: the bytes fetched were written
   *     to a new entry as they came; commit() once they passed the tensor's
   *     digest and the file's rules, discard() otherwise.
   * `useCache` false: the cache is not read (a retry after a bad entry).
   */
  async _readRange(start, end, onChunk, useCache = true) {
    const x = this._cacheState === null ? null : this._tensorEndingAt(start, end);
    const key = x === null ? null : this._key(x);
    if (key === null) {
      await this._readNetwork(start, end, onChunk);
      return null;
    }
    const digested = this._digestsAt >= 0;
    // Where the entry's body starts: the payload (a digest-keyed entry), or the gap before it.
    const from = digested ? x.byteOffset : gapStart(this, x.index);
    const store = this._cacheState.store;
    if (useCache) {
      const hit = await this._streamEntry(key, from, start, end, digested, onChunk);
      if (hit) return { source: 'cache', discard: () => store.delete(key).catch((e) => this._cacheState.fail(e)) };
    }
    let w = null;
    try {
      w = await openWrite(store, key, end - from + (digested ? 0 : 32));
    } catch (e) {
      this._cacheState.fail(e);
    }
    const hash = digested || w === null ? null : new DigestCheck(); // a sealed entry's trailer
    const put = async (bytes) => {
      if (w === null) return;
      if (hash !== null) feedDigest(hash, bytes);
      try {
        await w.write(bytes);
      } catch (e) {
        this._cacheState.fail(e);
        w = null;
      }
    };
    try {
      // Of the entry's body, the part the prefix holds (start is then the prefix's end).
      if (from < start) await put(this._bytes.subarray(from, start));
      await this._readNetwork(start, end, (chunk, off, source) => {
        onChunk(chunk, off, source);
        if (w === null || off + chunk.length <= from) return undefined;
        return put(chunk.subarray(Math.max(0, from - off)));
      });
    } catch (e) {
      hash?.free();
      await w?.abort();
      throw e;
    }
    const trailer = hash?.finish();
    hash?.free();
    const validator = this._ctx.validator;
    return {
      source: 'network',
      commit: async () => {
        if (w === null) return;
        // Only bytes of the version the key names.
        if (!digested && validator !== this._validator) return void (await w.abort());
        try {
          if (trailer !== undefined) await w.write(trailer);
          await w.close();
        } catch (e) {
          this._cacheState.fail(e);
        }
      },
      discard: async () => {
        await w?.abort();
      },
    };
  }

  // Streams tensor x's cache entry `key` (body from `from`) as bytes [start,
  // end) of the file; false when absent or of the wrong size (nothing
  // streamed). A sealed entry's trailer is checked as its body streams past:
  // a mismatch deletes the entry and throws CacheEntryBad (its bytes went to
  // onChunk: the caller starts over from the network).
  async _streamEntry(key, from, start, end, digested, onChunk) {
    const store = this._cacheState.store;
    let r;
    try {
      r = await openRead(store, key);
    } catch (e) {
      this._cacheState.fail(e);
      return false;
    }
    if (r === undefined) return false;
    const body = end - from;
    if (r.size !== body + (digested ? 0 : 32)) {
      await r.stream.cancel().catch(() => {});
      await store.delete(key).catch((e) => this._cacheState.fail(e));
      return false;
    }
    // A digest-keyed entry holds no gap: the gap bytes not in the prefix are zeros.
    if (start < from) onChunk(new Uint8Array(from - start), start, 'cache');
    const hash = digested ? null : new DigestCheck();
    const trailer = new Uint8Array(32);
    const reader = r.stream.getReader();
    let at = 0; // bytes of the entry read
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (at + value.length > r.size) throw new CacheEntryBad(key);
        const n = Math.max(0, Math.min(value.length, body - at)); // body bytes in this chunk
        const part = value.subarray(0, n);
        if (hash !== null) feedDigest(hash, part);
        const a = Math.max(at, start - from);
        if (a < at + n) onChunk(part.subarray(a - at), from + a, 'cache');
        const t0 = Math.max(at, body); // trailer bytes in this chunk
        const t1 = Math.min(at + value.length, body + 32);
        if (t1 > t0) trailer.set(value.subarray(t0 - at, t1 - at), t0 - body);
        at += value.length;
      }
      if (at !== r.size) throw new CacheEntryBad(key);
      if (hash !== null && !hash.check(trailer, 0)) throw new CacheEntryBad(key);
    } catch (e) {
      await reader.cancel().catch(() => {});
      if (e instanceof CacheEntryBad) await store.delete(key).catch((f) => this._cacheState.fail(f));
      else this._cacheState.fail(e);
      throw e instanceof CacheEntryBad ? e : new CacheEntryBad(key);
    } finally {
      hash?.free();
    }
    return true;
  }

  // The check of the file with the bytes at hand (the first bytes and the
  // fetched `segments`), the rest taken as zero.
  _check(segments) {
    const sorted = [...segments].sort((a, b) => a.at - b.at);
    const c = new Check(this._info, this._limits, this.size, { reuse: true, start: this._start });
    try {
      let ok = c.pump(this._bytes, 0, this._bytes.length);
      for (const s of sorted) {
        if (!ok) break;
        ok = c.passUnknown(s.at) && c.pump(s.bytes, s.at, s.at + s.bytes.length);
      }
      ok = ok && c.passUnknown(this.size);
      if (!ok) c.count(this.size);
      c.finish();
    } finally {
      c.free();
    }
  }

  _find(nameOrIndex) {
    const t = typeof nameOrIndex === 'number' ? this.at(nameOrIndex) : this.get(nameOrIndex);
    if (t === undefined) throw new RangeError(`kiln: ${this.url} has no tensor ${JSON.stringify(nameOrIndex)}`);
    return t;
  }
}

// What says which version of a file a response holds: its ETag, else its
// Last-Modified (null: neither can be read; across origins the server must
// expose them).
function validatorOf(r) {
  const etag = r.headers?.get('etag');
  if (etag) return `etag ${etag}`;
  const lm = r.headers?.get('last-modified');
  return lm ? `date ${lm}` : null;
}

// Stores whose failure console.warn reported already (once per store, not per open).
const warned = new WeakSet();

// The cache of openRemote's `cache` option (null without one): its store,
// and put/fail, which report a failed write (a full quota) instead of
// throwing: once with console.warn, and on later progress calls as cacheError.
function cacheState(cache) {
  if (cache === undefined || cache === null || cache === false) return null;
  const store = storeOf(cache);
  if (!globalThis.crypto?.subtle) {
    // Keys and entry checks are SHA-256 (crypto.subtle: secure contexts only).
    console.warn('kiln: the cache needs crypto.subtle (https or localhost); loading from the network');
    return null;
  }
  const state = {
    store,
    error: null,
    errors: 0,
    fail(e) {
      if (!warned.has(store)) console.warn(`kiln: the cache failed (${e?.name ?? 'Error'}: ${e?.message ?? e}); loading goes on from the network`);
      warned.add(store);
      state.error = e;
      state.errors += 1;
    },
    async put(key, bytes) {
      try {
        await state.store.put(key, bytes);
      } catch (e) {
        state.fail(e);
        return false;
      }
      return true;
    },
  };
  return state;
}

// A progress callback with `cacheError` in its info once the cache failed
// during this call (null for no callback).
function reporter(cb, cache) {
  if (typeof cb !== 'function') return null;
  if (cache === null) return cb;
  const before = cache.errors;
  return (received, total, info) => cb(received, total, cache.errors > before ? { ...info, cacheError: cache.error } : info);
}

// The request context: URL, fetch, headers, signal, the counters and the
// cache (shared by a manifest and its shards), and the validator of the
// last response.
function context(url, options, stats = { requests: 0, bytesFetched: 0 }, cache = undefined) {
  const fetch = options.fetch ?? ((...args) => globalThis.fetch(...args));
  const ctx = {
    url: String(url),
    fetch: async (u, init) => {
      // The change check goes to the server (a browser's HTTP cache revalidates, never answers alone).
      const r = await fetch(u, ctx.revalidate ? { ...init, cache: 'no-cache' } : init);
      ctx.validator = validatorOf(r);
      return r;
    },
    headers: options.headers ?? {},
    signal: options.signal,
    stats,
    cache: cache === undefined ? cacheState(options.cache) : cache,
    validator: null,
    revalidate: false,
  };
  return ctx;
}

// A remote file's bytes from 0, grown by range requests.
class Fetched {
  constructor(ctx, bytes, size, progress = null) {
    this.ctx = ctx;
    this.bytes = bytes;
    this.size = size;
    this.progress = progress;
  }

  // The file's bytes up to `to`: one request for what is missing (more only
  // from a server that answers with less than the range asked for).
  async upTo(to) {
    const end = Math.min(to, this.size);
    if (end <= this.bytes.length) return;
    const joined = new Uint8Array(end);
    joined.set(this.bytes);
    let have = this.bytes.length;
    while (have < end) {
      const got = await rangeGet(this.ctx, have, end - 1, joined, have);
      if (got.bytes.length === 0) throw new Error(`kiln: ${this.ctx.url}: the server sent no bytes from ${have}`);
      have += got.bytes.length;
      this.progress?.add(got.bytes.length, { tensor: null, source: 'network' });
    }
    this.bytes = joined;
  }
}

// The first `first` bytes of a remote file.
async function fetchFirst(ctx, first, progress = null) {
  const got = await rangeGet(ctx, 0, first - 1);
  if (got.total === null) {
    throw new Error(`kiln: ${ctx.url}: the server did not say how long the file is (Content-Range total "*")`);
  }
  progress?.add(got.bytes.length, { tensor: null, source: 'network' });
  return new Fetched(ctx, got.bytes, got.total, progress);
}

// A model file's head (frame, fields before the block) and the block's
// directory prefix, fetched as the head check asks (`first` more bytes each
// time the head needs more). `strict` false: a rejected head stops the
// fetching and returns null (the caller gets the core's verdict another way).
async function fetchPrefix(f, limits, first, strict = true) {
  let head;
  for (;;) {
    try {
      head = readHead(f.bytes, f.size, limits);
    } catch (e) {
      if (strict) throw e;
      return null;
    }
    if (head.kind !== 'need') break;
    await f.upTo(head.need + first);
  }
  if (head.kind !== 'model' && head.kind !== 'plain') return strict ? head : null;
  const start = head.start;
  const { HEADER_LEN } = layout();
  if (f.bytes.length < start + HEADER_LEN) await f.upTo(start + first);
  const info = headerInfo(f.bytes.subarray(start, start + HEADER_LEN), limits);
  await f.upTo(start + (info.prefix < 0 ? HEADER_LEN : info.prefix));
  return { head, start, info };
}

// The core's verdict on a block with every payload byte not at hand taken as zero.
function checkWithZeros(bytes, info, limits, size, start) {
  const c = new Check(info, limits, size, { reuse: true, start });
  try {
    const ok = c.pump(bytes, 0, bytes.length) && c.passUnknown(size);
    if (!ok) c.count(size);
    return c.finish();
  } finally {
    c.free();
  }
}

/**
 * Opens a remote Kiln file with Range requests: a plain directory or a model
 * file (told apart by content), or a sharded model's manifest.
 *
 * One file: the first `firstRequestBytes` (64 KiB: a model file's frame and
 * fields, the block's header, and for most files the whole directory), then
 * whatever the head or the directory still needs; checks it all with the
 * payload not fetched taken as zeros (see RemoteDirectory). Resolves to a
 * RemoteDirectory (a model file's metadata on `metadata`).
 *
 * A manifest (spec/model-file.md): the whole manifest, in one request (two
 * when it is longer than the first request), checked by the core (M1 to M5)
 * before any shard is opened. Resolves to a RemoteModel: every tensor of the
 * model is listed from the manifest alone; a shard is opened (its directory
 * prefix fetched and held against the manifest) the first time one of its
 * tensors is loaded.
 *
 * With `cache` ('opfs', 'cache-api' or a CacheStore, see cache.js): a file
 * opened before costs one request of one byte (Range: bytes=0-0) whose ETag
 * (else Last-Modified) and length say whether it changed; unchanged, its
 * prefix comes from the cache (checked again), else the entries of the old
 * version are dropped and it is fetched. `onProgress(received, total,
 * {tensor: null, source})` reports the prefix's bytes, and is load()'s and
 * loadToGPU()'s default.
 *
 * Throws a KilnError for an invalid file (an Error for HTTP trouble).
 * @param {string | URL} url
 * @param {{countCap?: number, byteCap?: number, fetch?: typeof fetch, headers?: Record<string,string>, signal?: AbortSignal, firstRequestBytes?: number, cache?: 'opfs' | 'cache-api' | object, onProgress?: Function}} options
 */
export async function openRemote(url, options = {}) {
  const limits = limitsOf(options);
  const first = Math.max(layout().HEADER_LEN, Math.floor(options.firstRequestBytes ?? HEAD_WINDOW));
  const ctx = context(url, options);
  const progress = new Progress(reporter(options.onProgress, ctx.cache), null);
  const cached = ctx.cache === null ? null : await cachedPrefix(ctx, progress);
  if (cached !== null) {
    try {
      return await openFrom(ctx, cached.f, limits, first, options, 'cache', cached.rec.etag, progress);
    } catch {
      // Refused now (other limits, or an entry the trailer missed): the file's own verdict decides.
      await forget(ctx.cache, cached.rk, cached.rec);
      progress.received = 0;
    }
  }
  const f = await fetchFirst(ctx, first, progress);
  return openFrom(ctx, f, limits, first, options, 'network', ctx.validator, progress);
}

// The directory (or model) from a file's first bytes `f`, fetched or cached
// (`source`); `validator`: the version they are of. Once checked, a fetched
// prefix is stored, then its record.
async function openFrom(ctx, f, limits, first, options, source, validator, progress) {
  const p = await fetchPrefix(f, limits, first);
  let dir;
  let manifestHash;
  if (p.kind === 'manifest') {
    await f.upTo(f.size);
    manifestHash = ctx.cache === null ? undefined : hex(await sha256(f.bytes));
    dir = await openManifest(ctx, f.bytes, limits, first, options, manifestHash);
  } else {
    const { head, start, info } = p;
    const table = checkWithZeros(f.bytes, info, limits, f.size, start);
    const keyed = ctx.cache !== null && !head.digests && validator !== null;
    dir = new RemoteDirectory(INTERNAL, table, f.bytes, {
      ctx,
      size: f.size,
      header: info,
      limits,
      start,
      metadata: head.metadata,
      digests: head.digests,
      cacheBase: keyed ? await fileBase(ctx.url, f.size, validator) : null,
      validator,
      source,
      onProgress: options.onProgress,
    });
  }
  // Stored only when every response was of the version the first one named.
  if (source === 'network' && ctx.cache !== null && validator !== null && ctx.validator === validator) {
    const prefix = `${await fileBase(ctx.url, f.size, validator)}-p`;
    if (await ctx.cache.put(prefix, await sealed(f.bytes))) {
      const rec = { url: ctx.url, length: f.size, etag: validator, kind: p.kind === 'manifest' ? 'manifest' : 'file', prefix };
      if (manifestHash !== undefined) rec.manifest = manifestHash;
      await ctx.cache.put(await recordKey(ctx.url), recordBytes(rec));
    }
  }
  progress.done({ tensor: null, source });
  return dir;
}

// A file's cached first bytes, when its record says the remote file is the
// same version: one request of one byte for its validator and length.
async function cachedPrefix(ctx, progress) {
  const { store } = ctx.cache;
  const rk = await recordKey(ctx.url);
  let rec;
  try {
    rec = await readRecord(store, rk);
  } catch (e) {
    ctx.cache.fail(e);
    return null;
  }
  if (rec === null) return null;
  ctx.revalidate = true;
  let probe;
  try {
    probe = await rangeGet(ctx, 0, 0);
  } finally {
    ctx.revalidate = false;
  }
  if (ctx.validator === null || ctx.validator !== rec.etag || probe.total !== rec.length) {
    await forget(ctx.cache, rk, rec); // changed on the server
    return null;
  }
  let body = null;
  try {
    const entry = await store.get(rec.prefix);
    body = entry === undefined ? null : unseal(entry);
  } catch (e) {
    ctx.cache.fail(e);
  }
  if (body === null) {
    // A torn or corrupted prefix: it goes (the tensors' entries check themselves).
    await store.delete(rec.prefix).catch((e) => ctx.cache.fail(e));
    return null;
  }
  progress.add(body.length, { tensor: null, source: 'cache' });
  return { f: new Fetched(ctx, body, rec.length, progress), rec, rk };
}

// Drops a file's record and the entries of that version (its prefix, its
// URL-keyed tensors, a manifest's shard prefixes). Digest-keyed tensors stay:
// they hold the bytes their digest names, whatever file they came from.
async function forget(cache, rk, rec) {
  try {
    await cache.store.delete(rk);
    const base = rec.prefix.replace(/p$/, '');
    const shards = rec.manifest ? `s-${rec.manifest}-` : null;
    for (const k of await cache.store.keys()) {
      if (k.startsWith(base) || (shards !== null && k.startsWith(shards))) await cache.store.delete(k);
    }
  } catch (e) {
    cache.fail(e);
  }
}

/**
 * cache.delete(url, cache?): removes a model's entries from a cache (default
 * 'opfs'): its record, its prefix (a manifest's shard prefixes too), the
 * tensors kept under its URL and those keyed by its digests (weights another
 * model shares with it included: that one fetches them again). `url` is the
 * file's, or a sharded model's manifest's. Resolves to the number of entries removed.
 * @param {string | URL} url
 * @param {'opfs' | 'cache-api' | object} [cache]
 */
export async function deleteCached(url, cache = 'opfs') {
  const store = storeOf(cache);
  const rk = await recordKey(String(url));
  const rec = await readRecord(store, rk);
  const doomed = new Set([rk]);
  const all = await store.keys();
  if (rec !== null) {
    doomed.add(rec.prefix);
    const entry = await store.get(rec.prefix);
    const body = entry === undefined ? null : unseal(entry);
    if (body !== null && rec.kind === 'manifest') await needAsync('remote');
    if (body !== null) for (const d of digestsIn(body, rec)) doomed.add(digestKey(d));
    const base = rec.prefix.replace(/p$/, '');
    const shards = rec.manifest ? `s-${rec.manifest}-` : null;
    for (const k of all) if (k.startsWith(base) || (shards !== null && k.startsWith(shards))) doomed.add(k);
  }
  const present = new Set(all);
  let n = 0;
  for (const k of doomed) {
    if (!present.has(k)) continue;
    await store.delete(k);
    n += 1;
  }
  return n;
}

// The tensor digests a cached prefix (a file's or a manifest) lists.
function digestsIn(body, rec) {
  const limits = limitsOf({});
  const out = [];
  if (rec.kind === 'manifest') {
    const reader = new (fullModule().ManifestReader)();
    try {
      if (reader.parse(body, limits.countCap, limits.byteCap)) {
        const n = reader.shard_of().length;
        for (let i = 0; i < n; i++) {
          const d = reader.digest(i);
          if (d !== undefined) out.push(d);
        }
      }
    } finally {
      reader.free();
    }
    return out;
  }
  let head;
  try {
    head = readHead(body, rec.length, limits);
  } catch {
    return out;
  }
  const d = head.digests;
  if (!d || d.at + d.length > body.length) return out;
  for (let at = d.at; at + 32 <= d.at + d.length; at += 32) out.push(body.subarray(at, at + 32));
  return out;
}

/** openRemote(url) then load(name): one tensor of a remote file or sharded model, fetched with Range requests (at most three for most files). */
export async function loadTensor(url, name, options = {}) {
  const dir = await openRemote(url, options);
  return dir.load(name);
}

const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

// The URL of shard `name` beside the manifest: the name as one path segment
// of the manifest's folder, nothing else (same origin, same folder, no query).
function shardUrl(name, manifestUrl) {
  let u;
  try {
    u = new URL(encodeURIComponent(name), manifestUrl);
  } catch {
    return null;
  }
  const base = new URL(manifestUrl);
  const dir = (p) => p.slice(0, p.lastIndexOf('/') + 1);
  const last = u.pathname.slice(u.pathname.lastIndexOf('/') + 1);
  let decoded;
  try {
    decoded = decodeURIComponent(last);
  } catch {
    return null;
  }
  if (u.origin !== base.origin || dir(u.pathname) !== dir(base.pathname) || u.search !== '' || u.hash !== '' || decoded !== name) {
    return null;
  }
  return u.href;
}

function readerError(r) {
  return new KilnError(r.error_code(), r.error_offset(), r.error_rule(), r.error_description());
}

async function openManifest(ctx, bytes, limits, first, options, manifestHash) {
  await needAsync('remote');
  const reader = new (fullModule().ManifestReader)();
  if (!reader.parse(bytes, limits.countCap, limits.byteCap)) {
    const e = readerError(reader);
    reader.free();
    throw e;
  }
  const text = (at, len) => decoder.decode(bytes.subarray(at, at + len));
  const m = reader.metadata();
  const metadata = new Map();
  for (let i = 0; i < m.length; i += 4) metadata.set(text(m[i], m[i + 1]), text(m[i + 2], m[i + 3]));
  const raw = reader.shards();
  const shards = [];
  for (let i = 0; i < raw.length; i += 3) {
    const index = i / 3 + 1;
    const name = text(raw[i], raw[i + 1]);
    const url = shardUrl(name, ctx.url);
    if (url === null) {
      reader.refuse_name(index);
      const e = readerError(reader);
      reader.free();
      throw inShard(e, name, index);
    }
    shards.push(Object.freeze({ index, name, length: raw[i + 2], url }));
  }
  const table = reader.table();
  const shardOf = reader.shard_of();
  return new RemoteModel(INTERNAL, table, bytes, { ctx, reader, limits, first, options, metadata, shards, shardOf, manifestHash });
}

/**
 * A sharded model read over HTTP Range requests (openRemote on a manifest).
 * Its tensors (names, dtypes, shapes, quantization) come from the manifest;
 * `load(name)` opens the tensor's shard the first time one of its tensors is
 * loaded (one range request for the shard's directory prefix, held against
 * the manifest by the core: length, model id, position and count, tensors,
 * digests, prefix digest), then fetches the tensor (with its scale and outer
 * tensors) and checks its digest and the shard's payload rules on the bytes
 * fetched. An error in a shard is a KilnError whose `file` is the shard's
 * name (and `shard` its position); its offset is a byte of that file.
 */
export class RemoteModel extends Directory {
  /** @internal */
  constructor(token, table, manifest, info) {
    if (token !== INTERNAL) throw new TypeError('kiln-wasm: RemoteModel cannot be constructed directly: use openRemote(url)');
    super(token, table, manifest, { segments: new Map(), metadata: info.metadata });
    /** The manifest's URL. */
    this.url = info.ctx.url;
    /** Size of the manifest in bytes. */
    this.size = manifest.length;
    /** The shard files: [{index, name, length, url}] in manifest order. */
    this.shards = Object.freeze(info.shards);
    this._ctx = info.ctx;
    this._reader = info.reader;
    this._limits = info.limits;
    this._first = info.first;
    this._options = info.options;
    this._shardOf = info.shardOf;
    // The first tensor index of each shard (the table is grouped by shard).
    this._firstOf = new Array(this.shards.length + 1).fill(-1);
    for (let i = this._shardOf.length - 1; i >= 0; i--) this._firstOf[this._shardOf[i]] = i;
    this._open = new Map(); // shard index -> Promise<RemoteDirectory>
    this._manifestHash = info.manifestHash; // SHA-256 of the manifest (hex), with a cache: its shard prefixes' key
  }

  /** HTTP requests made so far (the manifest's and the shards'). */
  get requests() {
    return this._ctx.stats.requests;
  }

  /** Bytes fetched so far (response bodies). */
  get bytesFetched() {
    return this._ctx.stats.bytesFetched;
  }

  /** True: a manifest and its shards. */
  get sharded() {
    return true;
  }

  /** The shard ({index, name, length, url}) that holds tensor `nameOrIndex`. */
  shardOf(nameOrIndex) {
    return this.shards[this._shardOf[this._find(nameOrIndex).index] - 1];
  }

  /** True when tensor `nameOrIndex`'s payload has been fetched. */
  isLoaded(nameOrIndex) {
    return this._segments.has(this._find(nameOrIndex).index);
  }

  /**
   * Fetches one tensor (and its quantization scales) from its shard (or the cache), checks it, and returns the Tensor.
   * options: {onProgress?(received, total, {tensor, source})} (default: openRemote's onProgress).
   */
  async load(nameOrIndex, options = {}) {
    const t = this._find(nameOrIndex);
    const onProgress = options.onProgress ?? this._options.onProgress;
    const k = this._shardOf[t.index];
    const base = this._firstOf[k];
    if (this._segments.has(t.index)) {
      const source = (await this._shard(k))._sourceOf(t.index - base);
      new Progress(reporter(onProgress, this._ctx.cache), 0).done({ tensor: t.name ?? t.index, source });
      return t;
    }
    const entry = this.shards[k - 1];
    const dir = await this._shard(k);
    try {
      await dir.load(t.index - base, { onProgress });
    } catch (e) {
      throw inShard(e, entry.name, k);
    }
    for (const [i, seg] of dir._segments) this._segments.set(base + i, seg);
    return t;
  }

  /** As RemoteDirectory.loadToGPU, each tensor from its shard (a fault in a shard names the shard). */
  async loadToGPU(device, nameOrNames, options = {}) {
    const ts = namesOf(this, nameOrNames);
    const jobs = [];
    for (const t of ts) {
      const k = this._shardOf[t.index];
      const dir = await this._shard(k);
      jobs.push({ t, k, dir, local: t.index - this._firstOf[k] });
    }
    const total = jobs.reduce((a, j) => a + j.t.byteOffset + j.t.byteLength - gapStart(j.dir, j.local), 0);
    const progress = new Progress(reporter(options.onProgress ?? this._options.onProgress, this._ctx.cache), total);
    const out = new Map();
    try {
      for (const j of jobs) {
        let got;
        try {
          got = await loadDirToGPU(j.dir, device, [j.local], options, progress);
        } catch (e) {
          throw inShard(e, this.shards[j.k - 1].name, j.k);
        }
        for (const b of got.values()) out.set(j.t.name ?? j.t.index, b);
      }
    } catch (e) {
      for (const b of out.values()) b.destroy();
      throw e;
    }
    progress.done({ tensor: null, source: progress.source });
    return out;
  }

  // Shard k, opened once: its directory prefix, checked against the manifest.
  _shard(k) {
    let p = this._open.get(k);
    if (p === undefined) {
      const entry = this.shards[k - 1];
      p = this._openShard(entry).catch((e) => {
        throw inShard(e, entry.name, k);
      });
      this._open.set(k, p);
    }
    return p;
  }

  // About how long shard k's prefix is (frame, a padding key of 4 KiB,
  // shard field, digests, header, descriptors, names, padding), from the
  // manifest: its first request usually holds the whole prefix.
  _prefixGuess(k) {
    const t = this._t;
    let n = 0;
    let names = 0;
    for (let i = this._firstOf[k]; i < this._shardOf.length && this._shardOf[i] === k; i++) {
      const o = META + i * SLOTS;
      n += 1;
      names += t[o + NAME_LEN] + extraSlot(t, o, LAYOUT_LEN, 0);
    }
    return 16 + 4 + 24 + 4096 + 44 + 4 + 32 * n + descriptorOffset(n) + names + layout().ALIGN;
  }

  // Shard `entry` from the cache (its prefix held against the manifest again;
  // no request: the manifest binds it by digest) or fetched, then stored.
  async _openShard(entry) {
    const ctx = context(entry.url, this._options, this._ctx.stats, this._ctx.cache);
    const key = ctx.cache === null ? null : shardKey(this._manifestHash, entry.index);
    if (key !== null) {
      let body = null;
      try {
        const e = await ctx.cache.store.get(key);
        body = e === undefined ? null : unseal(e);
        if (e !== undefined && body === null) await ctx.cache.store.delete(key);
      } catch (e) {
        ctx.cache.fail(e);
      }
      if (body !== null) {
        try {
          return await this._shardFrom(entry, ctx, new Fetched(ctx, body, entry.length), 'cache');
        } catch {
          await ctx.cache.store.delete(key).catch((e) => ctx.cache.fail(e));
        }
      }
    }
    const dir = await this._shardFrom(entry, ctx, null, 'network');
    if (key !== null) await ctx.cache.put(key, await sealed(dir._bytes));
    return dir;
  }

  async _shardFrom(entry, ctx, cached, source) {
    const limits = this._limits;
    const reader = this._reader;
    const first = Math.max(this._first, this._prefixGuess(entry.index));
    let f = cached;
    if (f === null) {
      try {
        f = await fetchFirst(ctx, Math.min(first, Math.max(layout().HEADER_LEN, entry.length)));
      } catch (e) {
        if (e.status === 404 || e.status === 410) {
          reader.shard_missing(entry.index);
          throw readerError(reader);
        }
        throw e;
      }
    }
    // The prefix, unless the length is already wrong (the core says so first).
    const p = f.size === entry.length ? await fetchPrefix(f, limits, first, false) : null;
    const table = reader.check_shard(entry.index, f.bytes, f.size, limits.countCap, limits.byteCap);
    if (table === undefined) throw readerError(reader);
    // (The core accepted the shard's head, so the head check did too.)
    if (p === null) throw new Error(`kiln: ${entry.url}: the shard's head was rejected here but not by the core`);
    const { head, start, info } = p;
    // Steps 10 to 12 of the shard with its payload taken as zeros (placement, trailing bytes).
    checkWithZeros(f.bytes, info, limits, f.size, start);
    const base = this._firstOf[entry.index];
    const n = table[0];
    for (let i = 0; i < n; i++) copyOffset(this._t, base + i, table, i);
    return new RemoteDirectory(INTERNAL, table, f.bytes, {
      ctx,
      size: f.size,
      header: info,
      limits,
      start,
      metadata: head.metadata,
      digests: head.digests,
      source,
      onProgress: this._options.onProgress,
    });
  }

  _find(nameOrIndex) {
    const t = typeof nameOrIndex === 'number' ? this.at(nameOrIndex) : this.get(nameOrIndex);
    if (t === undefined) throw new RangeError(`kiln: ${this.url} has no tensor ${JSON.stringify(nameOrIndex)}`);
    return t;
  }
}

/**
 * A shard fetched whole (`bytes`, from its first byte; `payloadOffset` where
 * its payload region starts) held against manifest `m` (a RemoteModel) by the
 * core, as a shard's first load is: its length, model id, position and count,
 * tensors, digests and prefix digest. Throws the core's KilnError.
 * (For createOnnxSession; not part of the package's API.)
 */
export function shardCheck(m, entry, bytes, payloadOffset) {
  const { countCap, byteCap } = m._limits;
  const prefix = bytes.subarray(0, Math.min(bytes.length, payloadOffset));
  if (m._reader.check_shard(entry.index, prefix, bytes.length, countCap, byteCap) === undefined) throw readerError(m._reader);
}
