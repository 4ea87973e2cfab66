// Types of the kiln-wasm package (index.d.cts is the same file for `require`).

/** The spec's error codes. */
export type KilnErrorCode = 'FRAME' | 'LIMIT' | 'EOF' | 'TYPE' | 'UTF8' | 'TRAILING' | 'SCHEMA' | 'DIGEST' | 'SHARD' | 'PATH';

/**
 * A rejected input. `message` is "CODE at byte N: description". Thrown by the package, never built by
 * users. `instanceof KilnError` holds across copies of the package in one process (ESM and CommonJS).
 */
export declare class KilnError extends Error {
  private constructor();
  readonly name: 'KilnError';
  readonly code: KilnErrorCode;
  /**
   * Absolute byte offset, from the start of the caller's buffer (or the remote file). Exact below 2^53,
   * files past 4 GiB included.
   */
  readonly offset: number;
  /** The rule that failed, e.g. "NonzeroGap", "BoolByte", "DirectoryMagic". */
  readonly rule: string;
  /** The rule in one plain sentence. */
  readonly description: string;
  /**
   * True when the fault is in the type text given to decodeValue/decodeFrame (then `offset` is a byte
   * of that text and `message` reads "TYPE at byte N of the type text: ..."); false for faults in the input.
   */
  readonly inTypeText: boolean;
  /** A fault in a shard of a sharded model: the shard's file name (then `offset` is a byte of that file); else undefined. */
  readonly file: string | undefined;
  /** A fault in a shard: its 1-based position in the manifest; else undefined. */
  readonly shard: number | undefined;
}

/** The spec's default cap on tensor_count and name_bytes: 16,777,216. */
export const DEFAULT_CAP: number;

export interface ParseOptions {
  /** Cap on tensor_count, and on list and dict counts of Frozen values (default 16,777,216; at most 4,294,967,295). Above it: LIMIT. */
  countCap?: number;
  /** Cap on name_bytes, and on str and list<u8> lengths of Frozen values (default 16,777,216). Above it: LIMIT. */
  byteCap?: number;
}

/** A Float16Array (where the runtime has one: Chromium 135+, Node 24+), typed structurally. */
export interface Float16ArrayLike extends ArrayLike<number> {
  readonly BYTES_PER_ELEMENT: 2;
  readonly buffer: ArrayBufferLike;
  readonly byteOffset: number;
  readonly byteLength: number;
}

/** What `view()` (and `viewAs`) returns for each closed dtype. */
export interface ViewTypes {
  f64: Float64Array;
  f32: Float32Array;
  /** Float16Array where the runtime has one (Chromium 135+, Node 24+), else the bits as Uint16Array. */
  f16: Float16ArrayLike | Uint16Array;
  /** The bits. */
  bf16: Uint16Array;
  /** The bits. */
  f8e4m3: Uint8Array;
  /** The bits. */
  f8e5m2: Uint8Array;
  /** One byte per element, 0 or 1. */
  bool: Uint8Array;
  i8: Int8Array;
  u8: Uint8Array;
  i16: Int16Array;
  u16: Uint16Array;
  i32: Int32Array;
  u32: Uint32Array;
  i64: BigInt64Array;
  u64: BigUint64Array;
  /** The packed bytes (two elements per byte, low nibble first). */
  i4: Uint8Array;
  /** The packed bytes. */
  u4: Uint8Array;
  /** The packed bytes. */
  e2m1: Uint8Array;
  /** The bits (a power-of-two scale). */
  e8m0: Uint8Array;
}

/** The closed dtypes: those with a defined element type. */
export type ClosedDType = keyof ViewTypes;

/** Every dtype a tensor can have: a closed dtype, or an opaque block layout ("opaque:4096"). */
export type DType = ClosedDType | `opaque:${number}`;

/** What `view()` returns for a tensor of dtype `D` (the bytes, Uint8Array, for an opaque layout). */
export type ViewOf<D extends DType> = D extends ClosedDType ? ViewTypes[D] : Uint8Array;

/** Any view: the union over every dtype. */
export type TensorView = ViewOf<DType>;

export interface Quantization {
  /** 1 (scales) or 2 (scales and an outer f32). */
  scheme: 1 | 2;
  /** The quantized dimension. */
  axis: number;
  /** Elements per scale. */
  groupSize: number;
  /** The block scales. */
  scale: AnyTensor;
  /** The one-element f32 outer scale (scheme 2), else null. */
  outer: AnyTensor | null;
}

/**
 * One tensor of a checked directory; `D` is its dtype. Tensors come from a Directory (`get`, `at`,
 * iteration) as `AnyTensor`, a union over the dtypes, so testing `t.dtype === 'f32'` (or `t.is('f32')`)
 * narrows `t.view()` to Float32Array; `t.viewAs('f32')` checks at run time and is typed the same way.
 */
export declare class Tensor<D extends DType = DType> {
  private constructor();
  /** Position in descriptor order. */
  readonly index: number;
  /** The name, or null when the directory's tensors are unnamed. */
  readonly name: string | null;
  readonly dtype: D;
  /** The wire code: 1..19, or 4096..32767 for opaque layouts. */
  readonly dtypeCode: number;
  readonly rank: number;
  /** Dimensions ([] for a scalar); exact below 2^53. */
  readonly shape: readonly number[];
  readonly elementCount: number;
  /** Absolute offset of the payload in the input (or the remote file); exact below 2^53. */
  readonly byteOffset: number;
  readonly byteLength: number;
  /** Layout name of an opaque dtype ("Q4_K"), else null. */
  readonly layout: string | null;
  /** Opaque block size in bytes, 0 otherwise. */
  readonly blockSize: number;
  readonly quant: Quantization | null;
  /** True when view() shares the input's ArrayBuffer; false when it returns a copy (misaligned start, big-endian host). */
  readonly isView: boolean;
  /** The payload's wire bytes, zero-copy over the input's ArrayBuffer. */
  bytes(): Uint8Array;
  /**
   * The natural typed array: Float64Array, Float32Array, Int8Array, Uint8Array, Int16Array, Uint16Array,
   * Int32Array, Uint32Array, BigInt64Array, BigUint64Array. f16: Float16Array where available, else
   * Uint16Array bits; bf16: Uint16Array bits; f8/e8m0/bool: Uint8Array; packed i4/u4/e2m1 and opaque: the bytes.
   */
  view(): ViewOf<D>;
  /** True when the dtype is `dtype`; narrows the tensor (and so `view()`). */
  is<K extends DType>(dtype: K): this is Tensor<K>;
  /** `view()` after checking that the dtype is `dtype` (a TypeError otherwise): `viewAs('f32')` is a Float32Array. */
  viewAs<K extends ClosedDType>(dtype: K): ViewTypes[K];
  /** Element values converted to a new Float32Array (scales are not applied). Throws TypeError for opaque dtypes. */
  toFloat32(): Float32Array;
  toJSON(): object;
}

/** `Tensor<D>` for each member of `D`: a union that narrows on `dtype`. */
export type TensorOf<D extends DType> = D extends DType ? Tensor<D> : never;

/** A tensor of any dtype, as a union that narrows on `dtype` (`if (t.dtype === 'f32') t.view()` is a Float32Array). */
export type AnyTensor = TensorOf<DType>;

/** A checked tensor directory. Built by parseDirectory, parseModel, a DirectoryLoader, loadDirectory or openRemote. */
export declare class Directory implements Iterable<AnyTensor> {
  protected constructor();
  /** Number of tensors. */
  readonly length: number;
  /** Where the block starts in the input: 0 for a plain directory, after the metadata in a model file. */
  readonly byteOffset: number;
  /** Block length in bytes. */
  readonly byteLength: number;
  /** Absolute offset of the payload region. */
  readonly payloadOffset: number;
  /** A model file's metadata (the padding key `kiln.convert.pad` not shown), or null for a plain directory. */
  readonly metadata: Map<string, string> | null;
  /**
   * True when every tensor's payload was hashed and matched its digest as this directory was checked
   * (DirectoryLoader, loadDirectory unless `verifyDigests: false`; parseModel with `verify: true`); false when
   * the digests were not compared and for a file without digests (docs/verification.md).
   */
  readonly digestsVerified: boolean;
  /** The bytes the tensors borrow (the whole input). */
  readonly source: Uint8Array;
  at(index: number): AnyTensor | undefined;
  /** All tensors in descriptor order (the same frozen array on every call). */
  tensors(): readonly AnyTensor[];
  get(name: string): AnyTensor | undefined;
  has(name: string): boolean;
  names(): (string | null)[];
  [Symbol.iterator](): Iterator<AnyTensor>;
  toJSON(): object;
}

/**
 * Checks a Kiln file, a plain tensor directory or a model file (told apart by content, as `kiln validate`
 * does: every rule, in the spec's order, by the Rust core) and returns its Directory, views over `bytes`'
 * own ArrayBuffer; a model file's metadata is on `metadata`. Throws KilnError. wasm memory receives the
 * directory prefix, a model file's metadata and the few payload bytes a rule reads, never the payload.
 */
export function parseDirectory(bytes: Uint8Array | ArrayBuffer | ArrayBufferView, options?: ParseOptions): Directory;

/** A model file opened by parseModel. */
export interface Model {
  /** The metadata, in key order, without the padding key (`kiln.convert.pad`); empty for a plain directory. */
  readonly metadata: Map<string, string>;
  /** The tensors: views over the input's ArrayBuffer. */
  readonly tensors: Directory;
  /** False when the input was a plain directory (which opens too). */
  readonly isModelFile: boolean;
  /** The record type: 'plain' (no digests), 'digests', 'shard'; null for a plain directory. */
  readonly kind: 'plain' | 'digests' | 'shard' | 'signed' | null;
  /** True for a digests or shard record (one SHA-256 per tensor before the block). */
  readonly hasDigests: boolean;
  /** True when the digests were compared (`verify: true` on a record that has them). */
  readonly verified: boolean;
  /** `verified`, by the name Directory (and the other front ends' flags: `digests_verified`) give it. */
  readonly digestsVerified: boolean;
  /** A shard record's model id (hex SHA-256 of its manifest's tensor table) and 1-based position, else null. */
  readonly shard: { readonly model: string; readonly index: number; readonly count: number } | null;
}

export interface ModelOptions extends ParseOptions {
  /**
   * Compare every tensor's payload with its digest (step 9d; DIGEST at the tensor's first byte). Off by
   * default: parseModel is a view over your buffer and otherwise reads (almost) no payload byte.
   */
  verify?: boolean;
}

/**
 * Checks a model file (spec/model-file.md: the KLN0 frame of `struct{metadata:dict<str,str>,tensors:tensors,}`,
 * string metadata, the tensor directory; what `kiln convert` writes) with the Rust core and returns its
 * metadata and tensors. A plain directory opens too (empty metadata). Throws KilnError.
 */
export function parseModel(bytes: Uint8Array | ArrayBuffer | ArrayBufferView, options?: ModelOptions): Model;

/** True when `bytes` starts like a model file (KLN0 and the plain, digests or shard record's schema hash; a manifest is not one); nothing else is checked. */
export function isModelFile(bytes: Uint8Array | ArrayBuffer | ArrayBufferView): boolean;

/** What `init({ wasm })` accepts: where the .wasm is, its bytes, or the compiled module. */
export type WasmSource = string | URL | Request | Response | BufferSource | WebAssembly.Module;

export interface InitOptions {
  /** The `open` WebAssembly module (kiln-wasm/slim: default `wasm/kiln_wasm_bg.wasm` next to the entry). */
  wasm?: WasmSource | Promise<WasmSource>;
  /** kiln-wasm/slim: instantiate the `frozen` module too (decodeValue, decodeFrame are synchronous and need it first). */
  frozen?: boolean;
  /** kiln-wasm/slim: instantiate the `remote` module now (else openRemote, loadTensor do when they meet a manifest). */
  remote?: boolean;
  /** kiln-wasm/slim: instantiate the `values` module too (Tensor.toFloat32 of any dtype but f32 and dequantize are synchronous and need it first). */
  values?: boolean;
}

/**
 * Instantiates the WebAssembly modules. The default entry (`kiln-wasm`) does that itself (the modules are
 * embedded: `open` on import, `remote` and `frozen` on first use) and `init` resolves at once;
 * `kiln-wasm/slim` needs `await init()` before any other call, `await init({ frozen: true })` before
 * decodeValue or decodeFrame, and `await init({ values: true })` before dequantize or toFloat32 (but of f32).
 */
export function init(options?: InitOptions): Promise<void>;

/** Element x group scale (x outer) as a new Float32Array, as spec section 11.1 defines (each product rounded to f32); scales read row-major with the quantized axis divided by the group size. Throws a TypeError for opaque data or scales. */
export function dequantize(tensor: Tensor<DType>): Float32Array;

export interface LoaderOptions extends ParseOptions {
  /** Expected stream length (File.size, Content-Length): makes early verdicts exact for short streams too. */
  totalLength?: number;
  /** Called once the directory has arrived, before the payload. Its tensors' payload accessors throw until end(). */
  onDirectory?: (dir: Directory) => void;
  /**
   * At most once per 64 KiB or 50 ms, and a final call with received === total. `info.tensor`: the tensor the
   * last byte received belongs to (its gap included), null in the header and directory.
   */
  onProgress?: ProgressCallback;
  /** The GPU path: the payloads of `names` (all when omitted) into mapped GPUBuffers, see loadDirectoryToGPU. */
  gpu?: { device: GPUDeviceLike; names?: string | number | ReadonlyArray<string | number> | null; usage?: number };
  /** Hash a digests or shard record's payloads as they stream past and compare them with its digests (default true). */
  verifyDigests?: boolean;
}

/**
 * Checks a file (a plain directory or a model file, by content) as it arrives in chunks, with the core's
 * incremental validator: the tensor table (and a model file's metadata) as soon as the directory is in,
 * faults at the first chunk after which the verdict is certain, and at `end()` the verdict
 * parseDirectory gives for all the bytes pushed. The payload is copied once, into the loader's buffer (the
 * views of the result borrow it); wasm memory holds only the directory and a model file's metadata.
 */
export declare class DirectoryLoader {
  constructor(options?: LoaderOptions);
  readonly receivedBytes: number;
  /** The declared file length once the block's header has arrived, else totalLength or null. */
  readonly totalBytes: number | null;
  /** The tensor table once the directory has arrived (payload pending), the result after end(), else null. */
  readonly directory: Directory | null;
  /** Adds a chunk; throws KilnError as soon as the block is known to be invalid. */
  push(chunk: Uint8Array | ArrayBuffer | ArrayBufferView): void;
  /** Final check; returns the Directory (views over the loader's buffer) or throws KilnError. */
  end(): Directory;
  /** With the `gpu` option, after end(): name (index for an unnamed tensor) -> unmapped, checked GPUBuffer; else null. */
  readonly gpuBuffers: Map<string | number, GPUBufferLike> | null;
  /** Pushes every chunk of `stream` (a byte stream straight into the loader's buffer where BYOB reads are cheap), cancelling it on a fault, then end(). */
  consume(stream: ReadableStream<Uint8Array>): Promise<Directory>;
}

/**
 * One front door: opens `source` with the call made for it and resolves to what that call returns. A URL:
 * `openRemote(url, options)` (Range requests, no payload fetched; each `load(name)` checks its tensor's
 * digest). Bytes: `parseModel(bytes, options)` (a view over them; digests compared with `{ verify: true }`).
 * A Response, Blob/File or ReadableStream: `loadDirectory(source, options)` (every byte read, digests
 * compared unless `verifyDigests: false`). Rejects with a KilnError, or a TypeError for another kind of source.
 */
export function open(source: string | URL, options?: RemoteOptions): Promise<RemoteFile>;
export function open(source: Uint8Array | ArrayBuffer | ArrayBufferView, options?: ModelOptions): Promise<Model>;
export function open(
  source: Response | Blob | ReadableStream<Uint8Array>,
  options?: LoaderOptions & { fetch?: typeof fetch; signal?: AbortSignal },
): Promise<Directory>;

/** Loads a URL, Response, Blob/File or byte stream (a plain directory or a model file) through a DirectoryLoader. */
export function loadDirectory(
  source: string | URL | Response | Blob | ReadableStream<Uint8Array>,
  options?: LoaderOptions & { fetch?: typeof fetch; signal?: AbortSignal },
): Promise<Directory>;

/**
 * The stream loader's GPU path: the file streamed and checked as loadDirectory does, the payloads of
 * `nameOrNames` (all when omitted or null) written into GPUBuffers created with mappedAtCreation as they
 * arrive, no buffer of the file's length made. Resolves once the whole file passed (byte rules, digests),
 * the buffers unmapped; on a fault every buffer is destroyed and it rejects.
 */
export function loadDirectoryToGPU<B extends GPUBufferLike>(
  device: GPUDeviceLike<B>,
  source: string | URL | Response | Blob | ReadableStream<Uint8Array>,
  nameOrNames?: string | number | ReadonlyArray<string | number> | null,
  options?: Omit<LoaderOptions, 'gpu'> & { fetch?: typeof fetch; signal?: AbortSignal; usage?: number },
): Promise<Map<string | number, B>>;

export interface RemoteOptions extends ParseOptions {
  /** The fetch to use (default: globalThis.fetch). */
  fetch?: typeof fetch;
  /** Extra request headers (the Range header is set by the package). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * Bytes asked for by the first request (default 65,536, at least 64): a model file's frame and metadata,
   * the block's header and, for most files, the whole directory, so that opening takes one request.
   */
  firstRequestBytes?: number;
  /**
   * Keep the file's prefix and each tensor loaded, and reuse them on the next open: a reload costs one request
   * of one byte (Range: bytes=0-0: ETag and length say whether the file changed). See README "Caching".
   */
  cache?: CacheOption;
  /** Progress of openRemote (the header and directory bytes); also load's and loadToGPU's default. */
  onProgress?: ProgressCallback;
}

/** Where a progress report's bytes came from. */
export type ProgressSource = 'network' | 'cache';

/** The third argument of a progress callback. */
export interface ProgressInfo {
  /** The tensor the bytes belong to (its name, or index when unnamed); null for the header and directory, and for loadToGPU's final call. */
  tensor: string | number | null;
  /** 'cache' when the bytes came from the cache (the final call: when every byte did). */
  source: ProgressSource;
  /** Set once a cache read or write failed during this call (e.g. a QuotaExceededError DOMException); loading went on from the network. */
  cacheError?: unknown;
}

/**
 * A progress callback: at most one call per 64 KiB received or 50 ms, and always a final call with
 * received === total.
 */
export type ProgressCallback = (received: number, total: number | null, info: ProgressInfo) => void;

/**
 * A cache for openRemote: keys are short ASCII strings (`[a-z0-9-]`); values the bytes to keep. `put` must
 * be atomic (a `get` returns the whole value or undefined), and may throw (a full quota): the load then
 * goes on from the network. Every value read back is checked before use, so a store may also lose or
 * damage values. `size`, when present, lets cache.usage avoid reading values.
 */
export interface CacheStore {
  get(key: string): Promise<Uint8Array | undefined>;
  put(key: string, bytes: Uint8Array): Promise<void>;
  delete(key: string): Promise<void>;
  keys(): Promise<string[]>;
  size?(key: string): Promise<number | undefined>;
  /**
   * Optional: an entry as a stream (loadToGPU reads through it, holding one chunk at a time); without it, get()
   * reads the entry whole.
   */
  openRead?(key: string): Promise<{ size: number; stream: ReadableStream<Uint8Array> } | undefined>;
  /**
   * Optional: a writer for an entry of `size` bytes, committed whole at close() (never visible before), dropped by
   * abort(); `write` is awaited before the chunk's buffer is reused. Without it, the chunks are collected for one put().
   */
  openWrite?(key: string, size: number): Promise<{ write(chunk: Uint8Array): Promise<void>; close(): Promise<void>; abort(): Promise<void> }>;
}

/** openRemote's `cache`: the Origin Private File System, the Cache Storage API, or your own store. */
export type CacheOption = 'opfs' | 'cache-api' | CacheStore;

/** Persistent caches for openRemote. See README "Caching". */
export declare const cache: {
  /** Bytes and entries `cache` (default 'opfs') holds: every kiln-wasm entry in it. */
  usage(cache?: CacheOption): Promise<{ bytes: number; entries: number }>;
  /**
   * Removes a model's entries (its record, prefix, a manifest's shard prefixes, its tensors, including those
   * keyed by its digests that another model shares) from `cache` (default 'opfs'); `url` is the file's or the
   * manifest's. Resolves to the number of entries removed.
   */
  delete(url: string | URL, cache?: CacheOption): Promise<number>;
  /** A CacheStore in memory (a Map): for tests, or reopening within one page. */
  memory(): CacheStore;
};

export interface LoadOptions {
  /** Progress of this load (default: openRemote's onProgress). */
  onProgress?: ProgressCallback;
}

/**
 * A directory read with HTTP Range requests; payloads are fetched per tensor. Every verdict is the core's
 * verdict on the whole file with the payload bytes not fetched taken as zero: the header, descriptors,
 * names, padding, canonical offsets, quantization references and the file length are checked exactly as
 * parseDirectory would (at openRemote); the byte rules of the payload (gap bytes, bool bytes, odd packed
 * tails) only for the tensors loaded, each fetched with the alignment gap before it (at load).
 */
export declare class RemoteDirectory extends Directory {
  private constructor();
  readonly url: string;
  /** Size of the remote file (may exceed 4 GiB). */
  readonly size: number;
  /** HTTP requests made so far. */
  readonly requests: number;
  /** Bytes fetched so far (response bodies). */
  readonly bytesFetched: number;
  /** False: one file. */
  readonly sharded: false;
  isLoaded(nameOrIndex: string | number): boolean;
  /**
   * Fetches one tensor's payload (and its scale/outer tensors) with the gap before it, checks it (its digest too,
   * for a record with digests), returns it. With a cache: taken from it when there (checked again), else stored once checked.
   */
  load(nameOrIndex: string | number, options?: LoadOptions): Promise<AnyTensor>;
  /** WebGPU: tensors (all when omitted) streamed into mapped GPUBuffers, checked before unmapping. See README "WebGPU". */
  loadToGPU<B extends GPUBufferLike>(device: GPUDeviceLike<B>, nameOrNames?: string | number | ReadonlyArray<string | number> | null, options?: LoadToGPUOptions): Promise<Map<string | number, B>>;
}

/**
 * Opens a remote file, a plain directory or a model file (by content), with Range requests: the first
 * 64 KiB (`firstRequestBytes`), then whatever a longer metadata or directory still needs (for most files
 * nothing more); throws KilnError for a bad file. HTTP trouble is an Error: a status other than 206 (a
 * server that ignores Range answers 200: its body is cancelled, not downloaded), or a 206 whose
 * Content-Range cannot be read (a cross-origin server must send `Access-Control-Expose-Headers: Content-Range`).
 */
export function openRemote(url: string | URL, options?: RemoteOptions): Promise<RemoteFile>;

/** What openRemote opens: one file, or a sharded model through its manifest (`sharded` tells them apart). */
export type RemoteFile = RemoteDirectory | RemoteModel;

/** A shard file of a sharded model. */
export interface ShardInfo {
  /** 1-based position in the manifest. */
  readonly index: number;
  /** Its file name (a plain name in the manifest's folder). */
  readonly name: string;
  /** Its length in bytes, from the manifest. */
  readonly length: number;
  /** `new URL(name, manifestUrl)`: same origin, same folder. */
  readonly url: string;
}

/**
 * A sharded model read with HTTP Range requests (openRemote on a manifest): every tensor listed from the
 * manifest alone (checked by the core, M1 to M5); a shard's directory prefix is fetched and held against the
 * manifest (length, model id, position, count, tensors, digests, prefix digest) the first time one of its
 * tensors is loaded, and each loaded tensor's digest is checked. A fault in a shard is a KilnError whose
 * `file` names the shard. A tensor's `byteOffset` is its offset in its shard's file (-1 until that shard is
 * opened).
 */
export declare class RemoteModel extends Directory {
  private constructor();
  /** The manifest's URL. */
  readonly url: string;
  /** The manifest's size in bytes. */
  readonly size: number;
  readonly shards: readonly ShardInfo[];
  /** HTTP requests made so far (manifest and shards). */
  readonly requests: number;
  /** Bytes fetched so far (response bodies). */
  readonly bytesFetched: number;
  readonly sharded: true;
  /** The shard that holds a tensor. */
  shardOf(nameOrIndex: string | number): ShardInfo;
  isLoaded(nameOrIndex: string | number): boolean;
  /** Opens the tensor's shard if needed, fetches the tensor (and its scale/outer tensors) or takes it from the cache, checks it, returns it. */
  load(nameOrIndex: string | number, options?: LoadOptions): Promise<AnyTensor>;
  /** WebGPU: as RemoteDirectory.loadToGPU, each tensor from its shard. */
  loadToGPU<B extends GPUBufferLike>(device: GPUDeviceLike<B>, nameOrNames?: string | number | ReadonlyArray<string | number> | null, options?: LoadToGPUOptions): Promise<Map<string | number, B>>;
}

/**
 * One tensor of a remote file: openRemote, then that payload with the gap before it. At most three requests
 * when the metadata and the directory fit in the first 64 KiB and the next request, two for most files, none
 * for the tensor when the first request already holds it.
 */
export function loadTensor(url: string | URL, name: string, options?: RemoteOptions): Promise<AnyTensor>;

/**
 * The part of onnxruntime-web's module that createOnnxSession calls (typed structurally: the package does not
 * depend on onnxruntime-web's types). `import * as ort from 'onnxruntime-web'` satisfies it; `S` is its
 * InferenceSession.
 */
export interface OnnxRuntimeLike<S> {
  InferenceSession: {
    create(model: Uint8Array, options?: any): Promise<S>;
  };
}

/** A Kiln file handed to the runtime as ONNX external data: the name the graph gives it, and its URL or bytes. */
export interface OnnxKilnFile {
  path: string;
  data: string | URL | Uint8Array | ArrayBuffer;
}

export interface OnnxCheckOptions extends ParseOptions {
  /**
   * The Kiln model the graph names (metadata_props `kiln.model`): one model file (a URL, fetched whole and checked
   * as it streams in, or its bytes) or a sharded model's manifest (a URL: the manifest read with Range requests, as
   * openRemote does, then every shard fetched whole from beside it and held against the manifest).
   */
  model?: string | URL | Uint8Array | ArrayBuffer | ArrayBufferView;
  /** The model's name; when given, it must be the graph's `kiln.model`. */
  modelPath?: string;
  /**
   * Instead of `model`: the Kiln model under the name the graph gives it (`kiln.model`; a manifest as a URL or
   * bytes) and, for a sharded model, every shard under its name.
   */
  files?: OnnxKilnFile[];
  /** Refuse Kiln files without digests (default true). */
  requireDigests?: boolean;
  /** The fetch to use for URLs (default: globalThis.fetch). */
  fetch?: (url: string, init?: RequestInit) => Promise<Response>;
  /** Extra request headers. */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface OnnxSessionOptions extends OnnxCheckOptions {
  /** Passed to `InferenceSession.create` (execution providers, ...); the Kiln files are added to its `externalData`. */
  sessionOptions?: object;
}

/** What checkOnnxGraph accepted. */
export interface OnnxGraphCheck {
  /** The graph's bytes (fetched, for a URL). */
  graph: Uint8Array;
  /** The Kiln model the graph names (metadata_props `kiln.model`). */
  model: string;
  /** SHA-256 of the graph's bytes, 64 lowercase hex digits: what the Kiln model records. */
  sha256: string;
  /**
   * Every initializer of the graph, the main graph's in order, then for each node in order each attribute's `g`
   * then `graphs`, each subgraph pre-order: `'kiln'` for external data checked against its Kiln tensor,
   * `'inline'` for one held in the graph (read as data by a node while the graph is resolved, or of a type Kiln
   * cannot hold).
   */
  checked: [name: string, how: 'kiln' | 'inline'][];
  /** The checked bytes of each Kiln file the graph reads, named as the graph names it (onnxruntime's `externalData`). */
  files: { path: string; data: Uint8Array }[];
}

/**
 * Checks a graph written by `kiln convert model.onnx -o model.kiln --onnx-graph model.kiln.onnx` against its Kiln
 * model as createOnnxSession does, without a runtime: initializers in the graph only what a node reads as data
 * while the graph is resolved (a shape, axes, scales, ...) or of a type Kiln cannot hold (others refused by name), external data only on the initializers of the main graph and its
 * subgraphs (docs/onnx.md; the same verdicts as Python's kiln.onnx.check_graph); the Kiln
 * model the graph names (metadata_props `kiln.model`) checked whole, digests included, its metadata's
 * `kiln.convert.onnx_graph_sha256` the SHA-256 of the graph's bytes; every external initializer the Kiln tensor of
 * its name (offset, length, ONNX type and shape). Rejects with the Kiln file's KilnError or an Error naming what
 * is refused (`initializer` set where one initializer is at fault).
 */
export function checkOnnxGraph(graph: string | URL | Uint8Array | ArrayBuffer | ArrayBufferView, options: OnnxCheckOptions): Promise<OnnxGraphCheck>;

/**
 * An onnxruntime-web InferenceSession for a graph written by `kiln convert model.onnx -o model.kiln --onnx-graph
 * model.kiln.onnx`, once it has passed checkOnnxGraph's checks: initializers in the graph only as the conversion
 * leaves them, the Kiln model the graph names checked whole (every rule and every SHA-256 digest) and recording the
 * graph's SHA-256, every external initializer the Kiln tensor of its name. Then `ort.InferenceSession.create(
 * graphBytes, { ...sessionOptions, externalData })` is called with one entry per Kiln file the graph reads, named
 * as the graph names it, its data the checked bytes. A Kiln file that fails rejects with its KilnError (a shard's
 * names the shard in `file`), a graph refused or not matching the files with an Error; the runtime is then never
 * called. `ort` is the caller's onnxruntime-web module (an optional peer dependency); the result is its
 * `InferenceSession`.
 */
export function createOnnxSession<S = unknown>(
  ort: OnnxRuntimeLike<S>,
  graph: string | URL | Uint8Array | ArrayBuffer | ArrayBufferView,
  options?: OnnxSessionOptions,
): Promise<S>;

/**
 * A decoded Frozen value:
 * struct -> plain object (fields in declaration order); dict<str,V> -> Map (keys in wire order);
 * list<T> -> array, except lists of fixed-width numbers -> typed arrays (list<u8> Uint8Array, list<i8> Int8Array,
 * i16/u16/i32/u32/f32/f64 their typed arrays, i64/int BigInt64Array, u64/uint BigUint64Array; views over the
 * input's ArrayBuffer when aligned on a little-endian host, else copies) and list<bool> -> boolean[];
 * opt<T> -> null or the value (opt<opt<T>> present -> { value: inner }); str -> string; bool -> boolean;
 * i8..i32, u8..u32, f32, f64 -> number; i64, u64, int, uint -> bigint; tensors -> Directory.
 */
export type FrozenValue =
  | boolean
  | number
  | bigint
  | string
  | null
  | Directory
  | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array
  | Float32Array | Float64Array | BigInt64Array | BigUint64Array
  | FrozenValue[]
  | Map<string, FrozenValue>
  | { value: FrozenValue }
  | { [field: string]: FrozenValue };

/**
 * Checks `bytes` as exactly one Frozen value of `typeText` (canonical type text such as
 * "struct{id:i64,batch:tensors,}") with the Rust core, then returns it as plain JavaScript values
 * (see FrozenValue). Typed arrays and tensor views share `bytes`' ArrayBuffer where possible; nothing
 * refers to wasm memory. Throws KilnError (for a bad type text, with `inTypeText` true).
 * `T` only annotates the result; it is not checked against `typeText`.
 */
export function decodeValue<T = FrozenValue>(
  bytes: Uint8Array | ArrayBuffer | ArrayBufferView,
  typeText: string,
  options?: ParseOptions,
): T;

/**
 * decodeValue for a value behind the 16-byte KLN0 frame. The frame's schema hash must equal the hash of
 * `typeText` (SCHEMA at byte 8 otherwise); a bad magic, profile, flags or reserved byte is FRAME, fewer than
 * 16 bytes EOF.
 */
export function decodeFrame<T = FrozenValue>(
  bytes: Uint8Array | ArrayBuffer | ArrayBufferView,
  typeText: string,
  options?: ParseOptions,
): T;

/** The package version. */
export function version(): string;

// --- WebGPU upload ---------------------------------------------------------------------------
// Minimal structural types: they compile with and without @webgpu/types (a real GPUDevice fits).

/** The part of a GPUBuffer the package uses. */
export interface GPUBufferLike {
  readonly size: number;
  getMappedRange(offset?: number, size?: number): ArrayBuffer;
  unmap(): void;
  destroy(): void;
}

/** The part of a GPUDevice the package uses. */
export interface GPUDeviceLike<B extends GPUBufferLike = GPUBufferLike> {
  readonly limits: { readonly maxBufferSize: number };
  createBuffer(descriptor: { size: number; usage: number; mappedAtCreation?: boolean; label?: string }): B;
}

export interface ToGPUBufferOptions {
  /** GPUBufferUsage flags (default STORAGE | COPY_SRC | COPY_DST). */
  usage?: number;
  /** The buffer's label when `tensor` is a byte view (a Tensor's label is its name). */
  label?: string;
}

export interface LoadToGPUOptions {
  /** GPUBufferUsage flags (default STORAGE | COPY_SRC | COPY_DST). */
  usage?: number;
  onProgress?: ProgressCallback;
}

/**
 * A GPUBuffer holding the tensor's wire bytes, created mapped, size padded up to a multiple of 4 (at least 4,
 * pad bytes zero). Above device.limits.maxBufferSize: KilnError LIMIT (rule MaxBufferSize).
 */
export function toGPUBuffer<B extends GPUBufferLike>(device: GPUDeviceLike<B>, tensor: Tensor | ArrayBufferView, options?: ToGPUBufferOptions): B;
