// A static HTTP server on 127.0.0.1 for the range-request tests (Node and
// Chromium): files from memory or from disk (sparse files of many GiB),
// single-range requests, and a count of requests and body bytes sent.
//
//   ?norange   answer 200 with the whole file, ignoring Range (the body is
//              streamed, so a client that cancels stops it)
//   ?noexpose  with cors: no Access-Control-Expose-Headers
//   ?noetag    no ETag header
//   ?lastmodified  a Last-Modified header (a date that moves with the version)
//
// Every response to a file carries an ETag: its size and a version that
// changes whenever a new object is set in `files` for the path, or on
// touch(path) (a file changed in place). A matching If-None-Match is 304.
import { createServer } from 'node:http';
import { createReadStream, fstatSync, openSync, closeSync, truncateSync, writeSync } from 'node:fs';
import { encodeKiln, le } from './encode.mjs';

/**
 * @param {{cors?: boolean, routes?: (req, res) => boolean}} options  cors: answer any origin (and preflights);
 *        routes: a handler tried first (true when it answered)
 * @returns {Promise<{base: string, files: Map, stats: {requests: number, bytes: number, log: Array}, touch(path: string): void, reset(): void, close(): Promise<void>}>}
 */
export async function rangeServer({ cors = false, routes = null } = {}) {
  const files = new Map(); // pathname -> Uint8Array | {path, size}
  const stats = { requests: 0, bytes: 0, log: [] };
  const versions = new WeakMap(); // file object -> version
  let nextVersion = 1;
  const versionOf = (file) => {
    if (!versions.has(file)) versions.set(file, nextVersion++);
    return versions.get(file);
  };
  const sockets = new Set();
  const server = createServer((req, res) => {
    if (routes?.(req, res)) return;
    const url = new URL(req.url, 'http://x');
    const headers = { 'content-type': 'application/octet-stream', 'accept-ranges': 'bytes' };
    if (cors) {
      headers['access-control-allow-origin'] = '*';
      if (!url.searchParams.has('noexpose')) headers['access-control-expose-headers'] = 'Content-Range, Content-Length, ETag';
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { ...headers, 'access-control-allow-headers': 'range', 'access-control-allow-methods': 'GET' }).end();
        return;
      }
    }
    const file = files.get(url.pathname);
    if (file === undefined) {
      res.writeHead(404, headers).end();
      return;
    }
    stats.requests += 1;
    const size = file instanceof Uint8Array ? file.length : file.size;
    const etag = `"${size}-${versionOf(file)}"`;
    if (url.searchParams.has('lastmodified')) headers['last-modified'] = new Date(Date.UTC(2026, 0, 1) + versionOf(file) * 1000).toUTCString();
    if (!url.searchParams.has('noetag')) {
      headers.etag = etag;
      if (req.headers['if-none-match'] === etag) {
        stats.log.push([url.pathname, 304, 0, 0]);
        res.writeHead(304, headers).end();
        return;
      }
    }
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    let start = 0;
    let end = size - 1;
    let status = 200;
    if (m && !url.searchParams.has('norange')) {
      start = Number(m[1]);
      end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
      if (start >= size) {
        stats.log.push([url.pathname, 416, start, 0]);
        res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` }).end();
        return;
      }
      status = 206;
      headers['content-range'] = `bytes ${start}-${end}/${size}`;
    }
    const len = end - start + 1;
    const entry = [url.pathname, status, start, 0];
    stats.log.push(entry);
    headers['content-length'] = len;
    res.writeHead(status, headers);
    const count = (n) => {
      entry[3] += n;
      stats.bytes += n;
    };
    if (file instanceof Uint8Array) {
      count(len);
      res.end(Buffer.from(file.buffer, file.byteOffset + start, len));
      return;
    }
    const body = createReadStream(file.path, { start, end, highWaterMark: 1 << 16 });
    body.on('data', (c) => count(c.length));
    body.pipe(res);
    res.on('close', () => body.destroy());
  });
  // The server never closes an idle keep-alive socket first (Node's default
  // is after 5 s): on a loaded machine fetch could pick such a socket as it
  // closes and fail with "fetch failed". close() ends every socket.
  server.keepAliveTimeout = 10 * 60 * 1000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    files,
    stats,
    /** A new ETag for the file at `path` (as if it changed in place). */
    touch(path) {
      const f = files.get(path);
      if (f !== undefined) versions.set(f, nextVersion++);
    },
    reset() {
      stats.requests = 0;
      stats.bytes = 0;
      stats.log.length = 0;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** The small tensor of a sparse block: 16 f32 values. */
export const SMALL = Float32Array.from({ length: 16 }, (_, i) => i - 7.5);

/**
 * A sparse file holding a valid block of exactly `size` bytes: "small" (f32
 * [16]) and "huge" (u8, the rest), optionally followed by "flags" (bool [3],
 * given bytes) past the huge tensor; `extra` bytes after the block (negative:
 * the file is cut short). With `head` (a model file's frame and metadata,
 * test-support/model.mjs), the block follows it: a model file. Only the
 * heads and the flags are written; the rest is a hole (truncate). Returns
 * {path, size: file size, blockLength, start: the block's offset, flagsAt}.
 */
export function sparseBlock(path, size, { flags = null, extra = 0, head = null } = {}) {
  const start = head ? head.length : 0;
  const small = { name: 'small', dtype: 'f32', shape: [16], data: le(SMALL) };
  const names = flags ? 14 : 9;
  const count = flags ? 3 : 2;
  const base = Math.ceil((64 + count * 128 + names) / 64) * 64;
  // "huge" starts at payload offset 64; its length makes the block `size` long.
  const hugeLen = flags ? Math.floor((size - base - 64 - 64 - flags.length) / 64) * 64 : size - base - 64;
  const specs = [small, { name: 'huge', dtype: 'u8', shape: [hugeLen] }];
  if (flags) specs.push({ name: 'flags', dtype: 'bool', shape: [flags.length] });
  const blockHead = encodeKiln(specs, base + 64);
  const blockLength = flags ? base + 64 + hugeLen + flags.length : size;
  const fd = openSync(path, 'w');
  try {
    if (head) writeSync(fd, head, 0, head.length, 0);
    writeSync(fd, blockHead, 0, blockHead.length, start);
    if (flags) writeSync(fd, flags, 0, flags.length, start + base + 64 + hugeLen);
  } finally {
    closeSync(fd);
  }
  truncateSync(path, start + blockLength + extra);
  const fd2 = openSync(path, 'r');
  const fileSize = fstatSync(fd2).size;
  closeSync(fd2);
  return { path, size: fileSize, blockLength, start, flagsAt: flags ? start + base + 64 + hugeLen : -1 };
}
