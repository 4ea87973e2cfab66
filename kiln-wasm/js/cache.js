// Persistent caches for openRemote: the backends ('opfs', 'cache-api', or an
// object of the CacheStore shape), the entry keys and formats, and
// cache.usage / cache.delete.
//
// Entries (keys are short ASCII names, valid as OPFS file names and URL paths):
//   r-<sha256(url)>            a file's record: JSON {v, url, length, etag (the validator), kind
//                              ('file' | 'manifest'), prefix (its key), manifest (a manifest's SHA-256)}
//                              (written after its prefix entry: a record always names a whole entry)
//   u-<sha256(url|len|etag)>-p a file's prefix (head and directory) + a SHA-256 trailer
//   u-<...>-<index>            a tensor's segment (gap + payload) of a file without digests + trailer
//   t-<digest>                 a tensor's payload, keyed by its SHA-256 from the file or the manifest
//                              (shared by every URL holding the same weights)
//   s-<sha256(manifest)>-<k>   shard k's prefix, for that manifest + trailer
// Every entry read back is checked (its digest or trailer, then the file's rules) before use.

import { checkDigest } from './validate.js';

const encoder = new TextEncoder();
export const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

function subtle() {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error('kiln: the cache needs crypto.subtle (a secure context: https or localhost)');
  return s;
}

/** SHA-256 of bytes, as a Uint8Array. */
export async function sha256(bytes) {
  return new Uint8Array(await subtle().digest('SHA-256', bytes));
}

/** SHA-256 of a string, as hex. */
export async function hashText(s) {
  return hex(await sha256(encoder.encode(s)));
}

export const digestKey = (digest) => `t-${hex(digest)}`;
export const recordKey = async (url) => `r-${await hashText(String(url))}`;
export const fileBase = async (url, length, etag) => `u-${await hashText(`${url}\n${length}\n${etag}`)}`;
export const shardKey = (manifestHash, k) => `s-${manifestHash}-${k}`;

/** Body + its SHA-256 (32 bytes): an entry that proves itself whole when read back. */
export async function sealed(body) {
  const out = new Uint8Array(body.length + 32);
  out.set(body);
  out.set(await sha256(body), body.length);
  return out;
}

/** The body of a sealed entry, or null when its trailer does not match (a torn or corrupted entry). */
export function unseal(entry) {
  if (!(entry instanceof Uint8Array) || entry.length < 32) return null;
  const body = entry.subarray(0, entry.length - 32);
  try {
    checkDigest(body, entry.subarray(entry.length - 32), 0);
  } catch {
    return null;
  }
  return body;
}

/** A cache entry that failed its check while it streamed (deleted): the caller starts over from the network. */
export class CacheEntryBad extends Error {
  constructor(key) {
    super(`kiln: cache entry ${key} failed its check and was deleted`);
    this.name = 'CacheEntryBad';
  }
}

function memoryStore() {
  const m = new Map();
  return {
    async get(key) {
      const v = m.get(key);
      return v === undefined ? undefined : v.slice();
    },
    async put(key, bytes) {
      m.set(key, Uint8Array.from(bytes));
    },
    async delete(key) {
      m.delete(key);
    },
    async keys() {
      return [...m.keys()];
    },
    async size(key) {
      return m.get(key)?.length;
    },
    async openRead(key) {
      const v = m.get(key);
      return v === undefined ? undefined : { size: v.length, stream: new Blob([v]).stream() };
    },
    async openWrite(key) {
      return collecting((bytes) => m.set(key, bytes));
    },
  };
}

// A writer that copies what it is given and hands the whole value to `put`
// at close (a store with no streaming write: it holds the entry meanwhile).
function collecting(put) {
  const parts = [];
  let n = 0;
  return {
    async write(chunk) {
      parts.push(chunk.slice());
      n += chunk.length;
    },
    async close() {
      const all = new Uint8Array(n);
      let at = 0;
      for (const p of parts) {
        all.set(p, at);
        at += p.length;
      }
      parts.length = 0;
      await put(all);
    },
    async abort() {
      parts.length = 0;
    },
  };
}

/**
 * An entry as a stream: {size, stream} or undefined when absent. Through the
 * store's openRead when it has one (the built-in stores: no whole copy in
 * memory), else its get (one chunk).
 */
export async function openRead(store, key) {
  if (typeof store.openRead === 'function') return store.openRead(key);
  const v = await store.get(key);
  return v === undefined ? undefined : { size: v.length, stream: new Blob([v]).stream() };
}

/**
 * A writer for an entry of `size` bytes: write(chunk) (awaited before the chunk's buffer is
 * reused), close() to commit it whole, abort() to drop it. Through the
 * store's openWrite when it has one, else chunks are collected for one put.
 */
export async function openWrite(store, key, size) {
  if (typeof store.openWrite === 'function') return store.openWrite(key, size);
  return collecting((bytes) => store.put(key, bytes));
}

/**
 * A cache held in memory (a Map): the CacheStore shape, for tests and for a
 * page that reopens a model within one session.
 * @returns {import('./index.d.ts').CacheStore}
 */
export function memory() {
  return memoryStore();
}

const notFound = (e) => e?.name === 'NotFoundError' || e?.name === 'TypeMismatchError';

function opfsStore(folder = 'kiln-wasm-cache') {
  let dirP = null;
  const dir = () => {
    if (typeof navigator === 'undefined' || typeof navigator.storage?.getDirectory !== 'function') {
      throw new Error("kiln: cache 'opfs' needs the Origin Private File System (navigator.storage.getDirectory)");
    }
    dirP ??= navigator.storage.getDirectory().then((root) => root.getDirectoryHandle(folder, { create: true }));
    return dirP;
  };
  const file = async (key) => {
    try {
      return await (await (await dir()).getFileHandle(key)).getFile();
    } catch (e) {
      if (notFound(e)) return undefined;
      throw e;
    }
  };
  return {
    async get(key) {
      const f = await file(key);
      return f === undefined ? undefined : new Uint8Array(await f.arrayBuffer());
    },
    // Written under a temporary name, then renamed: a reader never sees a
    // half-written entry (nor an empty one). Without move(), written in
    // place: createWritable's swap file is committed whole on close.
    async put(key, bytes) {
      const d = await dir();
      const renames = typeof globalThis.FileSystemFileHandle?.prototype?.move === 'function';
      const tmp = renames ? `tmp-${Math.random().toString(36).slice(2)}` : key;
      const h = await d.getFileHandle(tmp, { create: true });
      try {
        const w = await h.createWritable();
        try {
          await w.write(bytes);
          await w.close();
        } catch (e) {
          await w.abort().catch(() => {});
          throw e;
        }
        if (renames) await h.move(key);
      } catch (e) {
        await d.removeEntry(tmp).catch(() => {});
        throw e;
      }
    },
    async delete(key) {
      try {
        await (await dir()).removeEntry(key);
      } catch (e) {
        if (!notFound(e)) throw e;
      }
    },
    async keys() {
      const out = [];
      for await (const k of (await dir()).keys()) if (!k.startsWith('tmp-')) out.push(k);
      return out;
    },
    async size(key) {
      return (await file(key))?.size;
    },
    async openRead(key) {
      const f = await file(key);
      return f === undefined ? undefined : { size: f.size, stream: f.stream() };
    },
    // As put, chunk by chunk: under a temporary name, renamed at close.
    async openWrite(key) {
      const d = await dir();
      const renames = typeof globalThis.FileSystemFileHandle?.prototype?.move === 'function';
      const tmp = renames ? `tmp-${Math.random().toString(36).slice(2)}` : key;
      const h = await d.getFileHandle(tmp, { create: true });
      let w;
      try {
        w = await h.createWritable();
      } catch (e) {
        await d.removeEntry(tmp).catch(() => {});
        throw e;
      }
      const drop = async () => {
        await w.abort().catch(() => {});
        if (renames) await d.removeEntry(tmp).catch(() => {});
      };
      return {
        async write(chunk) {
          try {
            await w.write(chunk);
          } catch (e) {
            await drop();
            throw e;
          }
        },
        async close() {
          try {
            await w.close();
            if (renames) await h.move(key);
          } catch (e) {
            await d.removeEntry(tmp).catch(() => {});
            throw e;
          }
        },
        abort: drop,
      };
    },
  };
}

function cacheApiStore(name = 'kiln-wasm') {
  const open = () => {
    if (typeof caches === 'undefined') throw new Error("kiln: cache 'cache-api' needs the Cache Storage API (globalThis.caches)");
    return caches.open(name);
  };
  const BASE = 'https://kiln-wasm.invalid/';
  const req = (key) => new Request(BASE + key);
  return {
    async get(key) {
      const r = await (await open()).match(req(key));
      return r === undefined ? undefined : new Uint8Array(await r.arrayBuffer());
    },
    async put(key, bytes) {
      const headers = { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) };
      await (await open()).put(req(key), new Response(bytes, { headers }));
    },
    async delete(key) {
      await (await open()).delete(req(key));
    },
    async keys() {
      return (await (await open()).keys()).map((r) => r.url.slice(BASE.length));
    },
    async size(key) {
      const r = await (await open()).match(req(key));
      if (r === undefined) return undefined;
      const n = Number(r.headers.get('content-length'));
      return Number.isFinite(n) && r.headers.has('content-length') ? n : (await r.arrayBuffer()).byteLength;
    },
    async openRead(key) {
      const r = await (await open()).match(req(key));
      if (r === undefined) return undefined;
      const n = Number(r.headers.get('content-length'));
      if (!r.headers.has('content-length') || !Number.isFinite(n)) {
        const v = new Uint8Array(await r.arrayBuffer());
        return { size: v.length, stream: new Blob([v]).stream() };
      }
      return { size: n, stream: r.body };
    },
    // A Response whose body is written as it comes: Cache.put stores it only
    // once the body is complete (an aborted body stores nothing). Chunks are
    // copied (the stream holds them until put reads them) and the writer
    // waits for room (the stream's backpressure), so little is held.
    async openWrite(key, size) {
      const ts = new TransformStream({}, { highWaterMark: 4 }, { highWaterMark: 4 });
      const w = ts.writable.getWriter();
      const headers = { 'content-type': 'application/octet-stream', 'content-length': String(size) };
      const put = (await open()).put(req(key), new Response(ts.readable, { headers }));
      put.catch(() => {}); // reported by close()
      return {
        async write(chunk) {
          await w.ready;
          w.write(chunk.slice()).catch(() => {});
        },
        async close() {
          await w.close();
          await put;
        },
        async abort() {
          await w.abort().catch(() => {});
          await put.catch(() => {});
        },
      };
    },
  };
}

const stores = new Map();

/** The store for a `cache` option: 'opfs', 'cache-api' (one instance each), or a CacheStore object. */
export function storeOf(cache) {
  if (cache === 'opfs' || cache === 'cache-api') {
    let s = stores.get(cache);
    if (s === undefined) {
      s = cache === 'opfs' ? opfsStore() : cacheApiStore();
      stores.set(cache, s);
    }
    return s;
  }
  if (cache !== null && typeof cache === 'object' && ['get', 'put', 'delete', 'keys'].every((k) => typeof cache[k] === 'function')) {
    return cache;
  }
  throw new TypeError("kiln: `cache` must be 'opfs', 'cache-api' or an object with get, put, delete and keys");
}

/** A record read back: the parsed JSON, or null (absent or not a record). */
export async function readRecord(store, key) {
  const raw = await store.get(key);
  if (raw === undefined) return null;
  try {
    const r = JSON.parse(new TextDecoder().decode(raw));
    if (r?.v === 1 && typeof r.length === 'number' && typeof r.etag === 'string' && typeof r.prefix === 'string') return r;
  } catch {
    // not JSON: a torn or foreign entry
  }
  await store.delete(key).catch(() => {});
  return null;
}

export const recordBytes = (r) => encoder.encode(JSON.stringify({ v: 1, ...r }));

/**
 * Bytes and entries a cache holds (every kiln-wasm entry of it).
 * @param {'opfs' | 'cache-api' | object} [cache] default 'opfs'
 * @returns {Promise<{bytes: number, entries: number}>}
 */
export async function usage(cache = 'opfs') {
  const s = storeOf(cache);
  let bytes = 0;
  let entries = 0;
  for (const k of await s.keys()) {
    const n = typeof s.size === 'function' ? await s.size(k) : (await s.get(k))?.length;
    if (n === undefined) continue;
    bytes += n;
    entries += 1;
  }
  return { bytes, entries };
}
