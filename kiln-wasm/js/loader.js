// Progressive loading: a block arriving in chunks (fetch, File.stream()).

import { KilnError, limitsOf, planOf, runCheck } from './check.js';
import { Directory } from './directory.js';

const PROBE_GAP = 0;

function toBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new TypeError('DirectoryLoader.push expects a Uint8Array, another ArrayBuffer view, or an ArrayBuffer');
}

function concat(chunks, total) {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * Checks a standalone block as it arrives.
 *
 * Once the header, descriptors and name heap are in, `directory` holds the
 * tensor table (metadata only) and `totalBytes` the block length, before any
 * payload has arrived; `onDirectory` is called then. Payload chunks are copied
 * once into a buffer of the block's length, and the few payload bytes the
 * format constrains (alignment gaps, bool bytes, odd packed tails) are checked
 * as they arrive. `end()` runs the core over the whole block and returns a
 * Directory whose views borrow that buffer: the same verdict parseDirectory
 * gives for the concatenated bytes.
 *
 * A fault found early (in the directory, or a nonzero gap byte) is thrown at
 * once, so a damaged download can be cancelled. It is the verdict for the
 * block as declared; had the stream also been cut short, a whole-buffer parse
 * would have said EOF instead (pass `totalLength` when the size is known, e.g.
 * File.size or Content-Length, and that case is exact too).
 */
export class DirectoryLoader {
  /**
   * @param {{countCap?: number, byteCap?: number, totalLength?: number,
   *          onDirectory?: (dir: Directory) => void,
   *          onProgress?: (received: number, total: number | null) => void}} options
   */
  constructor(options = {}) {
    this._limits = limitsOf(options);
    this._hint = Number.isFinite(options.totalLength) ? options.totalLength : null;
    this._onDirectory = options.onDirectory ?? null;
    this._onProgress = options.onProgress ?? null;
    this._chunks = [];
    this._received = 0;
    this._plan = null;
    this._need = 64;
    this._buffer = null;
    this._stored = 0;
    this._probes = null;
    this._pk = 0;
    this._directory = null;
    this._error = null;
    this._done = false;
    this._result = null;
  }

  /** Bytes pushed so far. */
  get receivedBytes() {
    return this._received;
  }

  /** The block length the header declares, once 64 bytes have arrived (else null). */
  get totalBytes() {
    if (this._plan !== null && this._plan.blockLength >= 0) return this._plan.blockLength;
    return this._hint;
  }

  /** The tensor table (a Directory whose payloads are pending) once the directory has arrived, else null. */
  get directory() {
    return this._result ?? this._directory;
  }

  /** Adds the next chunk. Throws a KilnError as soon as the block is known to be invalid. */
  push(chunk) {
    if (this._error !== null) throw this._error;
    if (this._done) throw new Error('kiln: DirectoryLoader.push after end()');
    const bytes = toBytes(chunk);
    if (bytes.length === 0) return;
    try {
      if (this._buffer !== null) {
        this._store(bytes, this._received);
        this._received += bytes.length;
        this._scan();
      } else {
        this._chunks.push(bytes);
        this._received += bytes.length;
        this._maybeDirectory();
      }
    } catch (e) {
      this._error = e;
      throw e;
    }
    this._onProgress?.(this._received, this.totalBytes);
  }

  /** Ends the stream: the final check. Returns the Directory or throws a KilnError. */
  end() {
    if (this._error !== null) throw this._error;
    if (this._result !== null) return this._result;
    this._done = true;
    try {
      if (this._buffer === null) {
        const bytes = concat(this._chunks, this._received);
        this._chunks = [];
        const { table } = runCheck({ bytes, avail: bytes.length, total: bytes.length }, this._limits);
        this._result = new Directory(table, bytes);
      } else {
        const avail = Math.min(this._received, this._buffer.length);
        const bytes = this._buffer.subarray(0, avail);
        const { table } = runCheck({ bytes, avail, total: this._received }, this._limits);
        this._result = new Directory(table, bytes);
      }
    } catch (e) {
      this._error = e;
      throw e;
    }
    return this._result;
  }

  /** Reads a ReadableStream of byte chunks to its end (cancelling it on a fault) and returns the Directory. */
  async consume(stream) {
    const reader = stream.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.push(value);
      }
    } catch (e) {
      await reader.cancel(e).catch(() => {});
      throw e;
    } finally {
      reader.releaseLock();
    }
    return this.end();
  }

  // The header is in: plan; the directory is in: provisional check.
  _maybeDirectory() {
    if (this._received < 64) return;
    if (this._plan === null) {
      const head = concat(this._chunks, this._received).subarray(0, 64);
      this._plan = planOf(head, this._hint ?? Number.MAX_SAFE_INTEGER);
      // A header fault, or a directory size that cannot be, needs nothing more.
      this._need = this._plan.payloadBase >= 0 ? this._plan.payloadBase : 64;
    }
    if (this._received < this._need) return;
    const joined = concat(this._chunks, this._received);
    this._chunks = [joined];
    const declared = this._plan.blockLength >= 0 ? this._plan.blockLength : this._received;
    const total = Math.max(this._received, this._hint ?? declared);
    const { table, probes } = runCheck({ bytes: joined, avail: this._received, total }, this._limits);
    this._directory = new Directory(table, joined, { pending: 'the payload has not arrived yet: await loader.end()' });
    this._probes = probes;
    this._allocate(table[2], joined);
    this._onDirectory?.(this._directory);
    this._scan();
  }

  _allocate(blockLength, joined) {
    const capacity = Math.min(blockLength, this._hint ?? blockLength);
    try {
      this._buffer = new Uint8Array(capacity);
    } catch {
      throw new KilnError(
        'LIMIT',
        16,
        'ArrayBufferLimit',
        `the block declares ${blockLength} bytes, more than this runtime can hold in one ArrayBuffer`,
      );
    }
    this._chunks = [];
    this._store(joined, 0);
  }

  _store(bytes, at) {
    const room = this._buffer.length - at;
    if (room <= 0) return;
    this._buffer.set(room >= bytes.length ? bytes : bytes.subarray(0, room), at);
    this._stored = Math.min(this._buffer.length, at + bytes.length);
  }

  // Checks the probes whose bytes have all arrived. A nonzero gap byte is
  // final (gaps come in descriptor order and step 10 precedes step 11), so
  // the core is asked at once for the exact report; bool and packed faults
  // wait for end(), because a later gap fault would be reported first.
  _scan() {
    const p = this._probes;
    const b = this._buffer;
    while (this._pk < p.length && p[this._pk + 1] <= this._stored) {
      const s = p[this._pk];
      const e = p[this._pk + 1];
      const kind = p[this._pk + 2];
      this._pk += 3;
      if (kind !== PROBE_GAP) continue;
      for (let i = s; i < e; i++) {
        if (b[i] !== 0) {
          const total = Math.max(this._received, this._hint ?? this._buffer.length);
          runCheck({ bytes: b, avail: this._stored, total }, this._limits);
          return;
        }
      }
    }
  }
}

/**
 * Loads and checks a block with progress: `source` is a URL (fetched), a
 * Response, a Blob/File, or a ReadableStream of bytes.
 */
export async function loadDirectory(source, options = {}) {
  let stream;
  let totalLength = options.totalLength;
  if (typeof source === 'string' || source instanceof URL) {
    const fetchFn = options.fetch ?? globalThis.fetch;
    source = await fetchFn(source, { signal: options.signal });
  }
  if (typeof Response === 'function' && source instanceof Response) {
    if (!source.ok) throw new Error(`kiln: HTTP ${source.status} ${source.statusText}`);
    const len = Number(source.headers.get('content-length'));
    if (totalLength === undefined && !source.headers.get('content-encoding') && Number.isFinite(len) && len > 0) {
      totalLength = len;
    }
    stream = source.body;
  } else if (typeof Blob === 'function' && source instanceof Blob) {
    totalLength ??= source.size;
    stream = source.stream();
  } else if (source && typeof source.getReader === 'function') {
    stream = source;
  } else {
    throw new TypeError('loadDirectory expects a URL, Response, Blob or ReadableStream');
  }
  const loader = new DirectoryLoader({ ...options, totalLength });
  return loader.consume(stream);
}
