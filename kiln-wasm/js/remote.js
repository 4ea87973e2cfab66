// Range-request loading: the directory of a remote file, then single tensors.

import { KilnError, limitsOf, planOf, runCheck, scanProbes } from './check.js';
import { Directory } from './directory.js';

function parseContentRange(value) {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value ?? '');
  if (!m) return null;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? null : Number(m[3]) };
}

// Reads a body up to `want` bytes, then cancels it.
async function readPrefix(response, want) {
  const reader = response.body.getReader();
  const chunks = [];
  let got = 0;
  try {
    while (got < want) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      got += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const out = new Uint8Array(Math.min(got, want));
  let at = 0;
  for (const c of chunks) {
    if (at >= out.length) break;
    const part = c.subarray(0, out.length - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * Bytes [start, end] (inclusive) of `url` with a Range request:
 * {bytes, total}. A server that ignores Range (200) still works: the body
 * is read from the start up to `end` and then cancelled.
 */
async function rangeGet(fetchFn, url, start, end, init) {
  const headers = { ...(init.headers ?? {}), Range: `bytes=${start}-${end}` };
  const r = await fetchFn(url, { ...init, headers });
  if (r.status === 206) {
    const cr = parseContentRange(r.headers.get('content-range'));
    if (cr === null || cr.start !== start) {
      throw new Error(`kiln: ${url}: the server answered Content-Range ${r.headers.get('content-range')} for bytes=${start}-${end}`);
    }
    const bytes = new Uint8Array(await r.arrayBuffer());
    if (bytes.length !== cr.end - cr.start + 1) throw new Error(`kiln: ${url}: short range body`);
    return { bytes, total: cr.total };
  }
  if (r.status === 416) {
    const cr = /\/(\d+)$/.exec(r.headers.get('content-range') ?? '');
    await r.body?.cancel().catch(() => {});
    return { bytes: new Uint8Array(0), total: cr ? Number(cr[1]) : start };
  }
  if (r.status === 200) {
    const len = Number(r.headers.get('content-length'));
    const whole = await readPrefix(r, end + 1);
    const total = Number.isFinite(len) && len > 0 && !r.headers.get('content-encoding') ? len : null;
    return { bytes: whole.subarray(Math.min(start, whole.length)), total: total ?? (whole.length <= end ? whole.length : null) };
  }
  await r.body?.cancel().catch(() => {});
  throw new Error(`kiln: ${url}: HTTP ${r.status} ${r.statusText}`);
}

/**
 * A directory read over HTTP Range requests: the header (64 bytes), then the
 * descriptors and name heap, checked by the core as if the payloads it has
 * not fetched were zero. `load(name)` fetches one tensor (and its scale and
 * outer tensors) and checks the bytes of it the format constrains (bool
 * bytes, an odd packed tail). Payloads of tensors never loaded are never read,
 * so their gaps and element bytes are not checked: use parseDirectory or a
 * DirectoryLoader on the whole file for that.
 */
export class RemoteDirectory extends Directory {
  /** @internal */
  constructor(table, prefix, info) {
    super(table, prefix, { segments: new Map() });
    this.url = info.url;
    /** Size of the remote file in bytes. */
    this.size = info.size;
    /** HTTP requests made so far. */
    this.requests = info.requests;
    /** Bytes fetched so far. */
    this.bytesFetched = info.bytesFetched;
    this._fetch = info.fetchFn;
    this._init = info.init;
    this._limits = info.limits;
    this._probes = info.probes;
    this._prefixLen = info.prefixLen;
  }

  /** True when tensor `nameOrIndex`'s payload has been fetched. */
  isLoaded(nameOrIndex) {
    const t = this._find(nameOrIndex);
    return this._segments.has(t.index);
  }

  /** Fetches one tensor's payload (plus its quantization scales) and returns the Tensor. */
  async load(nameOrIndex) {
    const t = this._find(nameOrIndex);
    const q = t.quant;
    const want = [t, q?.scale, q?.outer].filter((x) => x && !this._segments.has(x.index));
    const fetched = await Promise.all(
      want.map(async (x) => {
        if (x.byteLength === 0) return [x, new Uint8Array(0)];
        const { bytes } = await rangeGet(this._fetch, this.url, x.byteOffset, x.byteOffset + x.byteLength - 1, this._init);
        this.requests += 1;
        this.bytesFetched += bytes.length;
        if (bytes.length !== x.byteLength) throw new Error(`kiln: ${this.url}: tensor ${x.index} came back short`);
        return [x, bytes];
      }),
    );
    // The constrained payload bytes of what arrived: if one breaks a rule,
    // the core says which (with the bytes never fetched taken as zero).
    const bad = fetched.some(([x, bytes]) => scanProbes(this._probes, bytes, x.byteOffset) >= 0);
    if (bad) {
      const extra = fetched.map(([x, bytes]) => ({ at: x.byteOffset, bytes }));
      for (const [i, seg] of this._segments) extra.push({ at: this.at(i).byteOffset, bytes: seg });
      runCheck({ bytes: this._bytes, avail: this._prefixLen, total: this.size, extra }, this._limits);
    }
    for (const [x, bytes] of fetched) this._segments.set(x.index, bytes);
    return t;
  }

  _find(nameOrIndex) {
    const t = typeof nameOrIndex === 'number' ? this.at(nameOrIndex) : this.get(nameOrIndex);
    if (t === undefined) throw new RangeError(`kiln: ${this.url} has no tensor ${JSON.stringify(nameOrIndex)}`);
    return t;
  }
}

/**
 * Opens a remote .kiln file with Range requests: 64 bytes, then the rest of
 * the directory. Resolves to a RemoteDirectory (throws a KilnError for an
 * invalid directory).
 * @param {string | URL} url
 * @param {{countCap?: number, byteCap?: number, fetch?: typeof fetch, headers?: Record<string,string>, signal?: AbortSignal}} options
 */
export async function openRemote(url, options = {}) {
  const limits = limitsOf(options);
  const fetchFn = options.fetch ?? globalThis.fetch;
  const init = { headers: options.headers, signal: options.signal };
  url = String(url);
  const first = await rangeGet(fetchFn, url, 0, 63, init);
  let requests = 1;
  let fetched = first.bytes.length;
  const size = first.total ?? first.bytes.length;
  if (first.total === null && first.bytes.length === 64) {
    throw new Error(`kiln: ${url}: the server did not say how long the file is (Content-Range total)`);
  }
  let prefix = first.bytes;
  const p = planOf(prefix.subarray(0, Math.min(64, prefix.length)), size);
  if (p.prefix > prefix.length) {
    const rest = await rangeGet(fetchFn, url, prefix.length, p.prefix - 1, init);
    requests += 1;
    fetched += rest.bytes.length;
    const joined = new Uint8Array(prefix.length + rest.bytes.length);
    joined.set(prefix);
    joined.set(rest.bytes, prefix.length);
    prefix = joined;
  }
  if (prefix.length < p.prefix) {
    throw new KilnError('EOF', prefix.length, 'RemoteTruncated', 'the server sent fewer bytes than the file length it announced');
  }
  const { table, probes } = runCheck({ bytes: prefix, avail: p.prefix, total: size }, limits);
  return new RemoteDirectory(table, prefix, {
    url,
    size,
    requests,
    bytesFetched: fetched,
    fetchFn,
    init,
    limits,
    probes,
    prefixLen: p.prefix,
  });
}

/** openRemote(url) then load(name): one tensor of a remote file, fetched with Range requests. */
export async function loadTensor(url, name, options = {}) {
  const dir = await openRemote(url, options);
  return dir.load(name);
}
