// Progressive loading: a block arriving in chunks (fetch, File.stream()).

import { Check, KilnError, checkWhole, digestTable, headerInfo, layout, limitsOf, manifestError, readHead } from './validate.js';
import { Directory, INTERNAL } from './directory.js';
import { Progress } from './progress.js';
import { createMapped, namesOf } from './gpu.js';

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
 * How consume() reads a byte stream (one that offers a BYOB reader, as fetch
 * bodies do): with `byob` true, the payload is read straight into the final
 * buffer, with no copy in JavaScript. Each BYOB read transfers the whole
 * buffer; that is free where the runtime transfers natively
 * (`ArrayBuffer.prototype.transfer`: Chromium, measured; Node 22 has it too,
 * not measured), but Node 20's web streams make each transfer of a 1 GiB
 * buffer cost a garbage collection (a 1 GiB stream then takes 5-10 s instead
 * of 1), so there a byte stream is read with the default reader and copied
 * once per chunk, as any stream is.
 * Exported for tests and benchmarks only (not part of the package's API).
 */
export const streamReading = {
  byob: typeof ArrayBuffer.prototype.transfer === 'function',
};

// BYOB reads into the final buffer ask for at most this much at a time (a
// source fills what it has; smaller reads keep progress reports frequent).
const BYOB_READ = 4 << 20;
// Before the final buffer exists (the head and the directory prefix), BYOB
// reads go to fresh buffers of this size, kept as chunks are.
const BYOB_FIRST = 65536;
// After the directory, bytes that go to GPU buffers (or past the declared
// length) are read into one reused buffer of at most this size: they are
// copied out (mapped range, validator) before the next read.
const BYOB_SPARE = 1 << 20;

/**
 * Checks a file as it arrives: a plain directory or a model file, told apart
 * by content (a model file's frame and metadata are checked by the core
 * first, as soon as they are in; the block follows them).
 *
 * The core's incremental validator takes the chunks as they come: once the
 * header, descriptors and name heap are in, `directory` holds the tensor
 * table (and a model file's metadata) and `totalBytes` the file length, before any
 * payload has arrived; `onDirectory` is called then. Payload chunks are
 * copied once into a buffer of the block's length; of them, only the few
 * bytes a rule reads (alignment gaps, bool bytes, odd packed tails) also go
 * to the validator. `end()` gives the validator's verdict, which is the
 * verdict parseDirectory gives for the concatenated bytes, and a Directory
 * whose views borrow that buffer.
 *
 * A fault is thrown by the first push after which the verdict is certain (no
 * byte still to come could hold a fault the spec orders first), so a damaged
 * download can be cancelled. A digests or shard record's payloads are
 * hashed as they stream past and compared with its digests (step 9d, the
 * core's Incremental::digests): a mismatch is DIGEST, thrown by the push
 * that holds the tensor's last byte. Pass `verifyDigests: false` to skip
 * the hashing (the payload then mostly stays out of wasm memory). It is the verdict for the
 * block as declared; had the stream also been cut short, a whole-buffer
 * parse would have said EOF instead (pass `totalLength` when the size is
 * known, e.g. File.size or Content-Length, and that case is exact too).
 */
export class DirectoryLoader {
  /**
   * @param {{countCap?: number, byteCap?: number, totalLength?: number, verifyDigests?: boolean,
   *          onDirectory?: (dir: Directory) => void,
   *          onProgress?: (received: number, total: number | null, info: {tensor: string | number | null, source: 'network'}) => void,
   *          gpu?: {device: object, names?: string | number | Array<string | number> | null, usage?: number}}} options
   */
  constructor(options = {}) {
    this._limits = limitsOf(options);
    this._verify = options.verifyDigests !== false;
    this._hint = Number.isFinite(options.totalLength) ? options.totalLength : null;
    this._onDirectory = options.onDirectory ?? null;
    this._progress = new Progress(options.onProgress);
    this._gpu = options.gpu ?? null; // {device, names?, usage?}: payloads into mapped GPUBuffers
    this._prefix = null; // GPU mode: the header and directory bytes the result keeps
    this._targets = null; // the GPU buffers, in file order: {name, off, end, buffer, mapped}
    this._gpuBuffers = null; // name -> GPUBuffer after end()
    this._ti = 0; // first target not wholly before the bytes arriving
    this._spare = null; // the reused BYOB buffer
    this._chunks = [];
    this._received = 0;
    this._head = null; // readHead() once decided
    this._headNeed = 16; // bytes before the head is tried (again)
    this._start = 0; // where the block starts in the file
    this._info = null;
    this._check = null;
    this._buffer = null;
    this._directory = null;
    this._error = null;
    this._done = false;
    this._result = null;
  }

  /** Bytes pushed so far. */
  get receivedBytes() {
    return this._received;
  }

  /** The file length the header declares (the block, after a model file's metadata), once it has arrived (else totalLength or null). */
  get totalBytes() {
    if (this._info !== null && this._info.blockLength >= 0) return this._start + this._info.blockLength;
    return this._hint;
  }

  /**
   * With the `gpu` option, after end(): name (or index, for an unnamed tensor) -> GPUBuffer, unmapped,
   * each tensor checked (byte rules and digest). Null before, and after a fault (the buffers are destroyed).
   */
  get gpuBuffers() {
    return this._gpuBuffers;
  }

  /** The tensor table (a Directory whose payloads are pending) once the directory has arrived, else null. */
  get directory() {
    return this._result ?? this._directory;
  }

  /** Adds the next chunk. Throws a KilnError as soon as the block is known to be invalid. */
  push(chunk) {
    if (this._error !== null) throw this._error;
    if (this._done) throw new Error('kiln: DirectoryLoader.push after end()');
    this._take(toBytes(chunk), false);
  }

  // A chunk of the file: `inPlace` when it is already in the final buffer at
  // its offset (a BYOB read), else copied there (or kept until it exists).
  _take(bytes, inPlace) {
    if (bytes.length === 0) return;
    try {
      const at = this._received;
      this._received += bytes.length;
      if (this._check !== null) {
        if (!inPlace) this._store(bytes, at);
        if (!this._check.pump(bytes, at, this._received)) this._reject();
      } else {
        this._chunks.push(bytes);
        if (this._maybeHead()) this._maybeDirectory();
      }
    } catch (e) {
      this._fail(e);
      throw e;
    }
    this._progress.total = this.totalBytes;
    this._progress.add(bytes.length, () => this._progressInfo());
  }

  // The progress info: the tensor the last byte received belongs to (the gap
  // before a tensor counts as its own), null in the header and directory.
  _progressInfo() {
    const d = this._directory;
    const pos = this._received - 1;
    let tensor = null;
    if (d !== null && d.length > 0 && pos >= d.payloadOffset + this._start) {
      let lo = 0;
      let hi = d.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        const t = d.at(mid);
        if (this._start + t.byteOffset + t.byteLength > pos) hi = mid;
        else lo = mid + 1;
      }
      const t = d.at(lo);
      tensor = t.name ?? t.index;
    }
    return { tensor, source: 'network' };
  }

  /** Ends the stream: the final verdict. Returns the Directory or throws a KilnError. */
  end() {
    if (this._error !== null) throw this._error;
    if (this._result !== null) return this._result;
    this._done = true;
    try {
      if (this._check === null) {
        // The stream ended before the directory was complete: check what came.
        const bytes = concat(this._chunks, this._received);
        this._chunks = [];
        const { table, head } = checkWhole(bytes, this._limits, this._verify);
        // (Never reached by a file that passes: its directory is complete by
        // its end, so in GPU mode the buffers exist; here checkWhole throws.)
        this._result = new Directory(INTERNAL, table, bytes, { metadata: head.metadata, digestsVerified: this._verify && head.digests !== null });
      } else {
        let table;
        try {
          table = this._check.finish();
        } catch (e) {
          throw e;
        }
        this._release();
        // Every payload byte went past the hasher (step 9d) unless verifyDigests: false.
        const digestsVerified = this._verify && this._head.digests !== null;
        if (this._targets !== null) {
          const pending = 'the payloads went to GPU buffers: loader.gpuBuffers';
          this._result = new Directory(INTERNAL, table, this._prefix, { pending, metadata: this._head.metadata, digestsVerified });
          this._unmapAll();
        } else {
          const bytes = this._buffer.subarray(0, Math.min(this._received, this._buffer.length));
          this._result = new Directory(INTERNAL, table, bytes, { metadata: this._head.metadata, digestsVerified });
        }
      }
    } catch (e) {
      this._fail(e);
      throw e;
    }
    this._progress.done(() => this._progressInfo());
    return this._result;
  }

  // GPU mode: the buffers for the selected tensors, created mapped as soon as
  // the directory is in (a tensor above maxBufferSize fails the load here).
  _createTargets(dir) {
    const list = namesOf(dir, this._gpu.names).sort((a, b) => a.byteOffset - b.byteOffset);
    this._targets = [];
    for (const t of list) {
      const name = t.name ?? t.index;
      const off = this._start + t.byteOffset;
      const { buffer, mapped } = createMapped(this._gpu.device, name, t.byteLength, off, this._gpu);
      this._targets.push({ name, off, end: off + t.byteLength, buffer, mapped });
    }
  }

  _unmapAll() {
    for (const g of this._targets) g.buffer.unmap();
    this._gpuBuffers = new Map(this._targets.map((g) => [g.name, g.buffer]));
    for (const g of this._targets) g.mapped = null;
  }

  _destroyAll() {
    if (this._targets === null) return;
    for (const g of this._targets) g.buffer.destroy(); // (a mapped buffer is unmapped by destroy)
    this._targets = null;
    this._gpuBuffers = null;
  }

  /**
   * Reads a ReadableStream of byte chunks to its end (cancelling it on a
   * fault) and returns the Directory. A byte stream (a fetch body) is read
   * straight into the final buffer where the runtime allows (see
   * `streamReading`); any other stream costs one copy per chunk.
   */
  async consume(stream) {
    if (this._error !== null) throw this._error;
    if (this._done) throw new Error('kiln: DirectoryLoader.push after end()');
    let byob = null;
    if (streamReading.byob) {
      try {
        byob = stream.getReader({ mode: 'byob' });
      } catch {
        byob = null; // not a byte stream
      }
    }
    const reader = byob ?? stream.getReader();
    try {
      if (byob !== null) await this._readByob(byob);
      else {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          this.push(value);
        }
      }
    } catch (e) {
      if (this._gpu !== null && this._error === null) this._fail(e); // the GPU buffers go with the stream
      await reader.cancel(e).catch(() => {});
      throw e;
    } finally {
      reader.releaseLock();
    }
    return this.end();
  }

  // BYOB reads: into fresh small buffers until the final buffer exists, then
  // into it at the next offset (each read hands the buffer to the stream
  // and back: `value.buffer` is the buffer from then on), then, for bytes
  // past the declared length, into small buffers again (counted, not kept).
  async _readByob(reader) {
    for (;;) {
      const buf = this._buffer;
      const length = buf?.length ?? 0; // (the read detaches buf)
      const at = this._received;
      const inPlace = at < length;
      const reuse = !inPlace && this._check !== null; // copied out before the next read
      const view = inPlace ? buf.subarray(at, Math.min(length, at + BYOB_READ)) : reuse ? this._spareView() : new Uint8Array(BYOB_FIRST);
      let r;
      try {
        r = await reader.read(view);
      } catch (e) {
        if (inPlace) this._fail(e); // the stream kept the buffer: the loader cannot go on
        throw e;
      }
      const { done, value } = r;
      if (inPlace && value !== undefined) this._buffer = new Uint8Array(value.buffer, 0, length);
      if (reuse && value !== undefined) this._spare = new Uint8Array(value.buffer);
      if (done) break;
      this._take(value, inPlace);
    }
  }

  _spareView() {
    if (this._spare === null) {
      const left = (this.totalBytes ?? Infinity) - this._received;
      this._spare = new Uint8Array(Math.min(BYOB_SPARE, Math.max(BYOB_FIRST, left)));
    }
    return this._spare;
  }

  // The file's length as far as the head check may assume it.
  _total() {
    return this._hint !== null && this._hint >= this._received ? this._hint : Infinity;
  }

  // The frame and metadata of a model file (or none: a plain directory),
  // checked by the core once enough bytes are in; tried again as the
  // metadata asks for more, with at least an eighth more bytes each time
  // (each try checks the metadata from its start: this bounds the tries).
  _maybeHead() {
    if (this._head !== null) return true;
    if (this._received < this._headNeed) return false;
    const joined = concat(this._chunks, this._received);
    this._chunks = [joined];
    const h = readHead(joined, this._total(), this._limits);
    if (h.kind === 'need') {
      this._headNeed = Math.max(h.need, this._received + Math.ceil(this._received / 8));
      return false;
    }
    if (h.kind === 'manifest') throw manifestError();
    this._head = h;
    this._start = h.start;
    return true;
  }

  // Chunks are kept until the directory prefix is complete (its length is in
  // the header): only then is memory reserved for it, so a header that
  // declares a huge directory costs nothing until those bytes really arrive.
  _maybeDirectory() {
    const s = this._start;
    const { HEADER_LEN } = layout();
    if (this._received < s + HEADER_LEN) return;
    if (this._info === null) {
      const head = concat(this._chunks, this._received).subarray(s, s + HEADER_LEN);
      this._info = headerInfo(head, this._limits);
      this._need = s + this._info.prefix;
      this._shortStream(head);
    }
    if (this._received < this._need) return;
    const joined = concat(this._chunks, this._received);
    this._chunks = [];
    const digests = this._verify ? digestTable(this._head, joined) : null;
    const c = (this._check = new Check(this._info, this._limits, this._need, { start: s, digests }));
    if (!c.pump(joined, 0, this._need)) this._reject();
    const table = c.table();
    const pending = 'the payload has not arrived yet: await loader.end()';
    this._directory = new Directory(INTERNAL, table, joined, { pending, metadata: this._head.metadata });
    if (this._gpu !== null) {
      this._prefix = joined.subarray(0, this._need); // the table's bytes; payloads go to the GPU
      this._createTargets(this._directory);
      this._store(joined, 0);
    } else this._allocate(s + this._info.blockLength, joined);
    this._onDirectory?.(this._directory);
    if (!c.pump(joined, 0, this._received)) this._reject();
  }

  // With a length hint shorter than the file the header declares, the
  // verdict is EOF (the spec checks the lengths before the descriptors), or
  // whatever the header itself breaks: known now, before the directory.
  _shortStream(head) {
    const info = this._info;
    const s = this._start;
    const end = s + (info.blockLength >= 0 ? info.blockLength : info.prefix);
    const { HEADER_LEN } = layout();
    if (this._hint === null || info.prefix <= HEADER_LEN || this._received > this._hint || this._hint >= end) return;
    const c = new Check(info, this._limits, 0, { start: s }); // exactly the header's bytes of memory: the core stops after it
    try {
      if (!c.pump(head, s, s + HEADER_LEN)) c.count(this._hint);
      c.finish();
    } finally {
      c.free();
    }
  }

  _allocate(fileLength, joined) {
    const capacity = Math.min(fileLength, this._hint ?? fileLength);
    try {
      this._buffer = new Uint8Array(capacity);
    } catch {
      throw new KilnError(
        'LIMIT',
        this._start + 16,
        'ArrayBufferLimit',
        `the file declares ${fileLength} bytes, more than this runtime can hold in one ArrayBuffer`,
      );
    }
    this._store(joined, 0);
  }

  _store(bytes, at) {
    if (this._targets !== null) {
      this._storeGPU(bytes, at);
      return;
    }
    const room = this._buffer.length - at;
    if (room <= 0) return;
    this._buffer.set(room >= bytes.length ? bytes : bytes.subarray(0, room), at);
  }

  // The parts of file bytes [at, at + bytes.length) that belong to the GPU
  // tensors, into their mapped ranges (chunks arrive in file order).
  _storeGPU(bytes, at) {
    const stop = at + bytes.length;
    const ts = this._targets;
    while (this._ti < ts.length && ts[this._ti].end <= at) this._ti++;
    for (let k = this._ti; k < ts.length && ts[k].off < stop; k++) {
      const g = ts[k];
      const a = Math.max(at, g.off);
      const b = Math.min(stop, g.end);
      if (b > a) g.mapped.set(bytes.subarray(a - at, b - at), a - g.off);
    }
  }

  // The validator met a fault: that is the verdict for the block as declared.
  // With a length hint, the verdict for a stream of that length (EOF first
  // when it is shorter than the block), which needs only the count.
  _reject() {
    const c = this._check;
    let e = null;
    if (this._hint !== null) {
      c.count(Math.max(this._hint, this._received));
      try {
        c.finish();
      } catch (f) {
        e = f;
      }
    }
    throw e ?? c.error();
  }


  _fail(e) {
    this._error = e;
    this._release();
    this._destroyAll();
  }

  _release() {
    this._check?.free();
    this._check = null;
  }
}

/**
 * Loads and checks a file (a plain directory or a model file) with progress:
 * `source` is a URL (fetched), a Response, a Blob/File, or a ReadableStream of
 * bytes. A model file's metadata is on the result's `metadata`.
 */
export async function loadDirectory(source, options = {}) {
  const { stream, totalLength } = await streamOf(source, options, 'loadDirectory');
  const loader = new DirectoryLoader({ ...options, totalLength });
  return loader.consume(stream);
}

/**
 * The stream loader's GPU path: loads and checks a file as loadDirectory does, with the payloads of the
 * tensors `nameOrNames` (all when omitted or null) written into GPUBuffers created with mappedAtCreation
 * as the bytes arrive; no buffer of the file's length is made. After the whole file passed (byte rules
 * and digests), the buffers are unmapped and returned, a Map of name -> GPUBuffer; on any fault all are
 * destroyed and the promise rejects. `options.onDirectory` receives the tensor table.
 */
export async function loadDirectoryToGPU(device, source, nameOrNames, options = {}) {
  const { stream, totalLength } = await streamOf(source, options, 'loadDirectoryToGPU');
  const gpu = { device, names: nameOrNames ?? null, usage: options.usage };
  const loader = new DirectoryLoader({ ...options, totalLength, gpu });
  await loader.consume(stream);
  return loader.gpuBuffers;
}

async function streamOf(source, options, what) {
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
    throw new TypeError(`${what} expects a URL, Response, Blob or ReadableStream`);
  }
  return { stream, totalLength };
}
