// Range-request loading: the directory of a remote file, then single tensors.

import { Check, HEAD_WINDOW, KilnError, headerInfo, limitsOf, readHead } from './validate.js';
import { Directory, INTERNAL } from './directory.js';

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

// Reads a body of exactly `len` bytes into `out` at `at`.
async function readInto(r, out, at, len, what) {
  const reader = r.body.getReader();
  let got = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (got + value.length > len) throw new Error(`${what}: the body is longer than its Content-Range`);
      out.set(value, at + got);
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
 * Anything but 206 Partial Content (or 416 past the end) is an error, and its
 * body is cancelled: a server that ignores Range would send the whole file.
 */
async function rangeGet(ctx, start, end, out = null, at = 0) {
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
    ctx.requests += 1;
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
      const bytes = out ?? new Uint8Array(len);
      await readInto(r, bytes, at, len, what);
      ctx.bytesFetched += len;
      return { bytes: out ? bytes.subarray(at, at + len) : bytes, total: cr.total };
    }
    if (r.status === 416) {
      const cr = /\/(\d+)$/.exec(r.headers.get('content-range') ?? '');
      await drop(r, ac);
      return { bytes: new Uint8Array(0), total: cr ? Number(cr[1]) : null };
    }
    await drop(r, ac);
    if (r.status === 200) {
      throw new Error(
        `${what}: the server ignored the Range request (HTTP 200 instead of 206 Partial Content); the response was ` +
          'cancelled rather than downloading the whole file. openRemote/loadTensor need a server that honours Range ' +
          'requests; loadDirectory(url) streams a whole file instead',
      );
    }
    throw new Error(`${what}: HTTP ${r.status} ${r.statusText}`);
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
  }

  /** HTTP requests made so far. */
  get requests() {
    return this._ctx.requests;
  }

  /** Bytes fetched so far (response bodies). */
  get bytesFetched() {
    return this._ctx.bytesFetched;
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
    // The core's verdict on the file with every fetched byte in place and the rest zero.
    this._check([...this._known, ...fetched]);
    for (const f of fetched) {
      this._known.push(f);
      this._segments.set(f.index, f.payload);
    }
    return t;
  }

  // One tensor and the gap before it (from the previous tensor's end): from
  // the bytes fetched at open when they hold it, else fetched into a buffer
  // laid out so the payload's address is a multiple of 64 (views in place).
  async _fetch(x) {
    const gapFrom = x.index === 0 ? this.payloadOffset : this.at(x.index - 1).byteOffset + this.at(x.index - 1).byteLength;
    const end = x.byteOffset + x.byteLength;
    if (end <= this._bytes.length) {
      return { index: x.index, at: gapFrom, bytes: this._bytes.subarray(gapFrom, end), payload: this._bytes.subarray(x.byteOffset, end) };
    }
    // Payload offsets are multiples of 64 from the block's start.
    const floor = gapFrom - ((gapFrom - this._start) % 64);
    let buf;
    try {
      buf = new Uint8Array(end - floor);
    } catch {
      throw new RangeError(`kiln: tensor ${JSON.stringify(x.name ?? x.index)} is ${x.byteLength} bytes, more than one ArrayBuffer holds here`);
    }
    const seg = end > gapFrom ? (await rangeGet(this._ctx, gapFrom, end - 1, buf, gapFrom - floor)).bytes : buf.subarray(0, 0);
    if (seg.length !== end - gapFrom) throw new Error(`kiln: ${this.url}: tensor ${x.index} came back short`);
    return { index: x.index, at: gapFrom, bytes: seg, payload: buf.subarray(x.byteOffset - floor, end - floor) };
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

/**
 * Opens a remote Kiln file, a plain directory or a model file (told apart by
 * content), with Range requests: the first `firstRequestBytes` (64 KiB: a
 * model file's frame and metadata, the block's header, and for most files
 * the whole directory), then whatever the metadata or the directory still
 * needs; checks it all with the payload not fetched taken as zeros (see
 * RemoteDirectory). Resolves to a RemoteDirectory (a model file's metadata
 * on `metadata`), or throws a KilnError for an invalid file (an Error for
 * HTTP trouble).
 * @param {string | URL} url
 * @param {{countCap?: number, byteCap?: number, fetch?: typeof fetch, headers?: Record<string,string>, signal?: AbortSignal, firstRequestBytes?: number}} options
 */
export async function openRemote(url, options = {}) {
  const limits = limitsOf(options);
  const first = Math.max(64, Math.floor(options.firstRequestBytes ?? HEAD_WINDOW));
  const ctx = {
    url: String(url),
    fetch: options.fetch ?? ((...args) => globalThis.fetch(...args)),
    headers: options.headers ?? {},
    signal: options.signal,
    requests: 0,
    bytesFetched: 0,
  };
  const got = await rangeGet(ctx, 0, first - 1);
  if (got.total === null) {
    throw new Error(`kiln: ${ctx.url}: the server did not say how long the file is (Content-Range total "*")`);
  }
  const size = got.total;
  let bytes = got.bytes; // the file from byte 0
  // The file's bytes up to `to`: one request for what is missing (more only
  // from a server that answers with less than the range asked for).
  const upTo = async (to) => {
    const end = Math.min(to, size);
    if (end <= bytes.length) return;
    const joined = new Uint8Array(end);
    joined.set(bytes);
    let have = bytes.length;
    while (have < end) {
      const got = await rangeGet(ctx, have, end - 1, joined, have);
      if (got.bytes.length === 0) throw new Error(`kiln: ${ctx.url}: the server sent no bytes from ${have}`);
      have += got.bytes.length;
    }
    bytes = joined;
  };
  // A model file's metadata longer than the first request: the rest of it,
  // and as much again for the header and directory after it.
  let head = readHead(bytes, size, limits);
  while (head.kind === 'need') {
    await upTo(head.need + first);
    head = readHead(bytes, size, limits);
  }
  const start = head.start;
  if (bytes.length < start + 64) await upTo(start + first);
  const info = headerInfo(bytes.subarray(start, start + 64), limits);
  await upTo(start + (info.prefix < 0 ? 64 : info.prefix));
  const c = new Check(info, limits, size, { reuse: true, start });
  let table;
  try {
    const ok = c.pump(bytes, 0, bytes.length) && c.passUnknown(size);
    if (!ok) c.count(size);
    table = c.finish();
  } finally {
    c.free();
  }
  return new RemoteDirectory(INTERNAL, table, bytes, { ctx, size, header: info, limits, start, metadata: head.metadata });
}

/** openRemote(url) then load(name): one tensor of a remote file, fetched with Range requests (at most three for most files). */
export async function loadTensor(url, name, options = {}) {
  const dir = await openRemote(url, options);
  return dir.load(name);
}
