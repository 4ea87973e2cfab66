// Compiled by test/types.test.mjs with `tsc --strict` against the packed package, under
// module nodenext (as ESM and as CommonJS) and module preserve / moduleResolution bundler.
// Every `@ts-expect-error` line must be an error: if a regression makes one compile, tsc
// fails with "Unused '@ts-expect-error' directive".
import {
  parseDirectory, parseModel, isModelFile, init, open, KilnError, DirectoryLoader, RemoteDirectory, loadTensor, openRemote,
  dequantize, decodeValue, decodeFrame, Directory, Tensor, createOnnxSession, toGPUBuffer, loadDirectoryToGPU, type GPUDeviceLike, type ProgressInfo, type GPUBufferLike,
  type AnyTensor, type DType, type KilnErrorCode, type RemoteFile, type FrozenValue, type Model, type ViewOf, type TensorView,
} from 'kiln-wasm';

// The caching API, imported on its own.
import * as kilnCache from 'kiln-wasm';

declare const bytes: Uint8Array;

// --- narrowing by dtype -----------------------------------------------------------------
const dir = parseDirectory(bytes, { countCap: 10 });
const t = dir.get('fc1.weight');
if (t !== undefined && t.dtype === 'f32') {
  const v = t.view(); // Float32Array, no cast
  const doubled: number = v[0] * 2;
  const sum: number = v.reduce((a, b) => a + b, 0);
  const f: Float32Array = v;
  void doubled; void sum; void f;
}
if (t?.dtype === 'i64') {
  const big: BigInt64Array = t.view();
  const first: bigint = big[0] + 1n;
  void first;
}
if (t?.dtype === 'bf16') {
  const bits: Uint16Array = t.view();
  void bits;
}
if (t !== undefined && t.is('u8')) {
  const u: Uint8Array = t.view();
  void u;
}
// viewAs checks at run time and is typed by its argument.
const w: Float32Array = dir.get('w')!.viewAs('f32');
const w0: number = w[0] * 2;
const ids: BigUint64Array = dir.get('ids')!.viewAs('u64');
void w0; void ids;
// A switch narrows too.
function total(x: AnyTensor): number {
  switch (x.dtype) {
    case 'f64':
      return x.view().reduce((a, b) => a + b, 0);
    case 'f32':
      return x.view().reduce((a, b) => a + b, 0);
    case 'i64':
      return Number(x.view().reduce((a, b) => a + b, 0n));
    default:
      return x.toFloat32().reduce((a, b) => a + b, 0);
  }
}
void total;
for (const x of dir) {
  const d: DType = x.dtype;
  const any: TensorView = x.view();
  void d; void any;
}
const typed: ViewOf<'f16'> = new Uint16Array(1);
void typed;
const generic: Tensor<'f32'> | undefined = dir.tensors().find((x): x is Tensor<'f32'> => x.is('f32'));
if (generic) { const g: Float32Array = generic.view(); void g; }

// --- the narrowing is real ----------------------------------------------------------------
if (t !== undefined) {
  // @ts-expect-error: before narrowing, view() is a union of every dtype's array
  const notYet: Float32Array = t.view();
  // @ts-expect-error: i64 elements are bigints
  const wrong: Float64Array = t.viewAs('i64');
  // @ts-expect-error: only dtype names
  t.viewAs('f33');
  // @ts-expect-error: opaque layouts have no element type to view as
  t.viewAs('opaque:4096');
  void notYet; void wrong;
}
if (t?.dtype === 'f32') {
  // @ts-expect-error: an f32 tensor is not an i8 tensor
  const i: Int8Array = t.view();
  void i;
}

// --- classes the package builds cannot be constructed ---------------------------------------
// @ts-expect-error: Directory comes from parseDirectory, parseModel, a loader or openRemote
new Directory();
// @ts-expect-error: tensors come from a Directory
new Tensor();
// @ts-expect-error: KilnError is thrown by the package
new KilnError('TYPE', 0, 'Rule', 'description');
// @ts-expect-error: RemoteDirectory comes from openRemote
new RemoteDirectory();
const loader = new DirectoryLoader({ totalLength: 10, onDirectory: (d) => d.tensors().length, onProgress: (a, b) => a + (b ?? 0) });
loader.push(new Uint8Array(10));

// --- model files ---------------------------------------------------------------------------
const m: Model = parseModel(bytes);
const license: string | undefined = m.metadata.get('license');
const tensors: Directory = m.tensors;
const isModel: boolean = m.isModelFile && isModelFile(bytes);
const meta: Map<string, string> | null = dir.metadata;
const hashed: boolean = dir.digestsVerified && m.digestsVerified === m.verified;
void hashed;
const at: number = dir.byteOffset;
void license; void tensors; void isModel; void meta; void at;
// @ts-expect-error: metadata values are strings
const n: number | undefined = m.metadata.get('license');
void n;

// --- errors, loaders, remote files, init ------------------------------------------------------
try {
  parseDirectory(new Uint8Array(1));
} catch (e) {
  if (e instanceof KilnError) {
    const c: KilnErrorCode = e.code;
    const o: number = e.offset;
    const r: string = e.rule;
    const inText: boolean = e.inTypeText;
    void c; void o; void r; void inText;
  }
}
async function remote(): Promise<number> {
  await init();
  await init({ wasm: new URL('https://example.com/kiln_wasm_bg.wasm') });
  await init({ wasm: fetch('/kiln_wasm_bg.wasm') });
  await init({ wasm: new Uint8Array(8) });
  await init({ wasm: await WebAssembly.compile(new Uint8Array(8)) });
  await init({ frozen: true, remote: true });
  // open(source): each kind of source types as the call it makes.
  const viaUrl: RemoteFile = await open('https://h/m.kiln', { firstRequestBytes: 4096 });
  const viaBytes: Model = await open(new Uint8Array(8), { verify: true });
  const viaBlob: Directory = await open(new Blob([]), { verifyDigests: false });
  const viaStream: Directory = await open(new Response(null).body!);
  // @ts-expect-error: a number is no source
  void open(42);
  void viaUrl; void viaBytes; void viaBlob; void viaStream;
  const x = await loadTensor('https://h/m.kiln', 'w', { firstRequestBytes: 4096 });
  const r: RemoteFile = await openRemote('https://h/m.kiln');
  // @ts-expect-error: a RemoteFile may be one file, which has no shards
  void r.shards;
  if (r.sharded) { const n: number = r.shards.length; void n; } else { const one: RemoteDirectory = r; void one; }
  const l = await r.load(0);
  const meta2 = r.metadata?.get('source');
  if (x.dtype === 'f32') { const f: Float32Array = x.view(); void f; }
  return l.byteLength + r.size + r.requests + (meta2?.length ?? 0);
}
void remote;

// --- Caching and progress ----------------------------------------------------------------------
async function cached(): Promise<number> {
  const { cache } = kilnCache;
  const store: kilnCache.CacheStore = cache.memory();
  const seen: kilnCache.ProgressInfo[] = [];
  const r = await openRemote('https://h/m.kiln', { cache: 'opfs', onProgress: (n, total, info) => seen.push(info) });
  await r.load('w', { onProgress: (n, total, info) => (info.source === 'cache' ? n : info.cacheError) });
  await openRemote('https://h/m.kiln', { cache: store });
  await openRemote('https://h/m.kiln', { cache: 'cache-api' });
  const own: kilnCache.CacheStore = { get: async () => undefined, put: async () => {}, delete: async () => {}, keys: async () => [] };
  const u: { bytes: number; entries: number } = await cache.usage(own);
  const n: number = await cache.delete('https://h/m.kiln', 'cache-api');
  // @ts-expect-error the backends are 'opfs', 'cache-api' or a CacheStore
  await openRemote('https://h/m.kiln', { cache: 'disk' });
  // @ts-expect-error a progress source is 'network' or 'cache'
  const bad: kilnCache.ProgressInfo = { tensor: null, source: 'disk' };
  void bad;
  return u.bytes + n + seen.length;
}
void cached;
const deq: Float32Array = t ? dequantize(t) : new Float32Array(0);
void deq;

// --- Frozen values -------------------------------------------------------------------------------
const fv: FrozenValue = decodeValue(new Uint8Array(8), 'i64', { countCap: 4 });
const rec = decodeValue<{ id: bigint; batch: Directory; xs: Float32Array }>(new Uint8Array(0), 'struct{id:i64,batch:tensors,xs:list<f32>,}');
const idPlusOne: bigint = rec.id + 1n;
const firstX: number = rec.xs[0];
const framed = decodeFrame(new ArrayBuffer(16), 'struct{}');
if (framed instanceof Map) for (const [k] of framed) { const key: string = k; void key; }
void fv; void idPlusOne; void firstX; void rec.batch.length;

// --- WebGPU (structural: no @webgpu/types needed) ---------------------------------------
interface MyBuffer extends GPUBufferLike { readonly label: string }
declare const gpuDevice: GPUDeviceLike<MyBuffer>;
const gb: MyBuffer = toGPUBuffer(gpuDevice, bytes, { usage: 0x80, label: 'raw' });
const gsize: number = gb.size;
async function gpuLoad(r: RemoteDirectory) {
  const m: Map<string | number, MyBuffer> = await r.loadToGPU(gpuDevice, ['a', 'b'], { onProgress: (n, total, i) => i.source });
  return m;
}
async function gpuStream(url: string) {
  const m: Map<string | number, MyBuffer> = await loadDirectoryToGPU(gpuDevice, url, null, { onProgress: (n, t, i: ProgressInfo) => i.tensor });
  const l = new DirectoryLoader({ gpu: { device: gpuDevice, names: ['a'] }, onProgress: (n, t) => n });
  l.end();
  const g: Map<string | number, GPUBufferLike> | null = l.gpuBuffers;
  return [m, g];
}
void gpuStream;
// @ts-expect-error a device needs createBuffer and limits
toGPUBuffer({}, bytes);

// --- ONNX (onnxruntime-web's module typed structurally: its types are not installed here) --------
interface FakeSession { run(feeds: object): Promise<object>; readonly inputNames: readonly string[] }
declare const ort: { InferenceSession: { create(model: Uint8Array, options?: { executionProviders?: string[] }): Promise<FakeSession> } };
async function onnx(): Promise<number> {
  const s = await createOnnxSession(ort, '/m.kiln.onnx', { model: '/m.kiln', sessionOptions: { executionProviders: ['wasm'] } });
  const names: readonly string[] = s.inputNames;
  await createOnnxSession(ort, new Uint8Array(8), { model: new Uint8Array(8), countCap: 16 });
  await createOnnxSession(ort, new Uint8Array(8), { files: [{ path: 'm-00001-of-00002.kiln', data: '/m-00001-of-00002.kiln' }], requireDigests: true });
  // @ts-expect-error the runtime is onnxruntime-web's module, not a session factory function
  await createOnnxSession(ort.InferenceSession.create, new Uint8Array(8), { model: '/m.kiln' });
  return names.length;
}
void onnx;
