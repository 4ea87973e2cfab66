// Range-request loading: the directory of a remote file, then single tensors.

import { ManifestReader } from './wasm/kiln_wasm.js';
import { Check, HEAD_WINDOW, KilnError, checkDigest, descriptorOffset, headerInfo, inShard, layout, limitsOf, readHead } from './validate.js';
import { Progress } from './progress.js';
import { gapStart, loadDirToGPU, namesOf } from './gpu.js';
import { Directory, INTERNAL, LAYOUT_AT, LAYOUT_LEN, META, NAME_LEN, NONE, SLOTS, copyOffset } from './directory.js';

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
      onChunk(value, got);
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

  /** Fetches one tensor's payload (plus its quantization scales), checks it, and returns the Tensor. */
  async load(nameOrIndex) {
    const t = this._find(nameOrIndex);
    const q = t.quant;
    const want = [...new Set([t, q?.scale, q?.outer])].filter((x) => x && !this._segments.has(x.index));
    if (want.length === 0) return t;
    const fetched = await Promise.all(want.map((x) => this._fetch(x)));
    // Step 9d for the tensors fetched (the file's own digests), in descriptor
    // order: DIGEST comes before the payload rules of steps 10 to 12.
    if (this._digestsAt >= 0) {
      for (const f of [...fetched].sort((a, b) => a.index - b.index)) {
        const at = this._digestsAt + 32 * f.index;
        checkDigest(f.payload, this._bytes.subarray(at, at + 32), this.at(f.index).byteOffset);
      }
    }
    // The core's verdict on the file with every fetched byte in place and the rest zero.
    this._check([...this._known, ...fetched]);
    for (const f of fetched) {
      this._known.push(f);
      this._segments.set(f.index, f.payload);
    }
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
    return loadDirToGPU(this, device, nameOrNames, options);
  }

  // One tensor and the gap before it (from the previous tensor's end): from
  // the bytes fetched at open when they hold it, else fetched into a buffer
  // laid out so the payload's address is a multiple of ALIGN (views in place).
  async _fetch(x) {
    const gapFrom = x.index === 0 ? this.payloadOffset : this.at(x.index - 1).byteOffset + this.at(x.index - 1).byteLength;
    const end = x.byteOffset + x.byteLength;
    if (end <= this._bytes.length) {
      return { index: x.index, at: gapFrom, bytes: this._bytes.subarray(gapFrom, end), payload: this._bytes.subarray(x.byteOffset, end) };
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
    await this._readRange(gapFrom, end, (chunk, off) => buf.set(chunk, off - floor));
    const seg = buf.subarray(gapFrom - floor, end - floor);
    return { index: x.index, at: gapFrom, bytes: seg, payload: buf.subarray(x.byteOffset - floor, end - floor) };
  }

  /**
   * @internal Streams bytes [start, end) of the file: onChunk(chunk, fileOffset)
   * for each network chunk as it arrives (nothing buffered here), resolving
   * when all have arrived. Every payload read goes through it (load,
   * loadToGPU). More than one request only from a server that answers a
   * range with fewer bytes than asked.
   */
  async _readRange(start, end, onChunk) {
    let at = start;
    while (at < end) {
      const got = await rangeGet(this._ctx, at, end - 1, null, 0, (chunk, off) => onChunk(chunk, off));
      if (got.length === 0) throw new Error(`kiln: ${this.url}: the server sent no bytes from ${at} (the file is shorter than its directory says)`);
      at += got.length;
    }
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

// The request context: URL, fetch, headers, signal, and the counters
// (shared by a manifest and its shards).
function context(url, options, stats = { requests: 0, bytesFetched: 0 }) {
  return {
    url: String(url),
    fetch: options.fetch ?? ((...args) => globalThis.fetch(...args)),
    headers: options.headers ?? {},
    signal: options.signal,
    stats,
  };
}

// A remote file's bytes from 0, grown by range requests.
class Fetched {
  constructor(ctx, bytes, size) {
    this.ctx = ctx;
    this.bytes = bytes;
    this.size = size;
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
    }
    this.bytes = joined;
  }
}

// The first `first` bytes of a remote file.
async function fetchFirst(ctx, first) {
  const got = await rangeGet(ctx, 0, first - 1);
  if (got.total === null) {
    throw new Error(`kiln: ${ctx.url}: the server did not say how long the file is (Content-Range total "*")`);
  }
  return new Fetched(ctx, got.bytes, got.total);
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
 * Throws a KilnError for an invalid file (an Error for HTTP trouble).
 * @param {string | URL} url
 * @param {{countCap?: number, byteCap?: number, fetch?: typeof fetch, headers?: Record<string,string>, signal?: AbortSignal, firstRequestBytes?: number}} options
 */
export async function openRemote(url, options = {}) {
  const limits = limitsOf(options);
  const first = Math.max(layout().HEADER_LEN, Math.floor(options.firstRequestBytes ?? HEAD_WINDOW));
  const ctx = context(url, options);
  const f = await fetchFirst(ctx, first);
  const p = await fetchPrefix(f, limits, first);
  if (p.kind === 'manifest') {
    await f.upTo(f.size);
    return openManifest(ctx, f.bytes, limits, first, options);
  }
  const { head, start, info } = p;
  const table = checkWithZeros(f.bytes, info, limits, f.size, start);
  return new RemoteDirectory(INTERNAL, table, f.bytes, {
    ctx,
    size: f.size,
    header: info,
    limits,
    start,
    metadata: head.metadata,
    digests: head.digests,
  });
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

async function openManifest(ctx, bytes, limits, first, options) {
  const reader = new ManifestReader();
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
  return new RemoteModel(INTERNAL, table, bytes, { ctx, reader, limits, first, options, metadata, shards, shardOf });
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

  /** Fetches one tensor (and its quantization scales) from its shard, checks it, and returns the Tensor. */
  async load(nameOrIndex) {
    const t = this._find(nameOrIndex);
    if (this._segments.has(t.index)) return t;
    const k = this._shardOf[t.index];
    const entry = this.shards[k - 1];
    const dir = await this._shard(k);
    const base = this._firstOf[k];
    try {
      await dir.load(t.index - base);
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
    const progress = new Progress(options.onProgress, total);
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
    progress.done({ tensor: null, source: 'network' });
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
      names += t[o + NAME_LEN] + (t[o + LAYOUT_AT] === NONE ? 0 : t[o + LAYOUT_LEN]);
    }
    return 16 + 4 + 24 + 4096 + 44 + 4 + 32 * n + descriptorOffset(n) + names + layout().ALIGN;
  }

  async _openShard(entry) {
    const limits = this._limits;
    const reader = this._reader;
    const ctx = context(entry.url, this._options, this._ctx.stats);
    const first = Math.max(this._first, this._prefixGuess(entry.index));
    let f;
    try {
      f = await fetchFirst(ctx, Math.min(first, Math.max(layout().HEADER_LEN, entry.length)));
    } catch (e) {
      if (e.status === 404 || e.status === 410) {
        reader.shard_missing(entry.index);
        throw readerError(reader);
      }
      throw e;
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
