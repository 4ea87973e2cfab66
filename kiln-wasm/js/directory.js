// Directory and Tensor: thin objects over the table the core returned
// (src/table.rs) and the caller's own bytes.

import { dtype_names } from './wasm/kiln_wasm.js';
import { canView, elementsOf, isHostLittleEndian, viewCtor } from './elements.js';
import { fullModule } from './modules.js';
import { need } from './ready.js';

// Table layout (src/table.rs): a Uint32Array of META directory-wide slots,
// then SLOTS per tensor, then each tensor's dims as (low, high) word pairs
// and, for a tensor with an opaque layout or quantization, its extra record
// of EXTRA_SLOTS (the row's EXTRA; absent for a plain tensor, whose layout,
// block size and quantization are then none). 64-bit values are (low,
// high) pairs too, so offsets past 4 GiB (a remote file) are exact. Absent
// indexes are 0xFFFFFFFF. Constants, not read from the module, because the
// getters below are hot; TABLE_LAYOUT lists them in the order of
// kiln_wasm::table::LAYOUT, and test/tables.test.mjs holds the two equal.
export const META = 10;
export const SLOTS = 9;
export const TENSORS = 0;
export const START = 1;
export const BLOCK_LEN = 3;
export const PAYLOAD = 5;
export const HEAP_START = 7;
export const HEAP_END = 8;
export const DTYPE_RANK = 0;
export const OFFSET = 1;
export const LENGTH = 3;
export const NAME_AT = 5;
export const NAME_LEN = 6;
export const SHAPE_AT = 7;
export const EXTRA = 8;
export const EXTRA_SLOTS = 7;
export const LAYOUT_AT = 0;
export const LAYOUT_LEN = 1;
export const BLOCK_SIZE = 2;
export const SCHEME_AXIS = 3;
export const GROUP = 4;
export const SCALE = 5;
export const OUTER = 6;
export const NONE = 0xffffffff;
export const TABLE_LAYOUT = Object.freeze([
  META, SLOTS, TENSORS, START, BLOCK_LEN, PAYLOAD, HEAP_START, HEAP_END,
  DTYPE_RANK, OFFSET, LENGTH, NAME_AT, NAME_LEN, SHAPE_AT, EXTRA,
  EXTRA_SLOTS, LAYOUT_AT, LAYOUT_LEN, BLOCK_SIZE, SCHEME_AXIS, GROUP, SCALE, OUTER,
]);
/** The 64-bit value at slots i, i + 1 of table `t`. */
export const u64 = (t, i) => t[i] + t[i + 1] * 4294967296;

/** Slot `k` of the extra record of the tensor whose row is at `o` in table `t`, or `absent` for a plain tensor. */
export function extraSlot(t, o, k, absent) {
  const at = t[o + EXTRA];
  return at === NONE ? absent : t[at + k];
}

let names = null;
function dtypeName(code) {
  names ??= dtype_names();
  return code >= 1 && code <= names.length ? names[code - 1] : `opaque:${code}`;
}

// ignoreBOM: a name may start with U+FEFF; the default would drop it and shift every later name.
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
function decode(bytes) {
  // TextDecoder refuses views of a SharedArrayBuffer in some runtimes.
  const shared = typeof SharedArrayBuffer === 'function' && bytes.buffer instanceof SharedArrayBuffer;
  return decoder.decode(shared ? bytes.slice() : bytes);
}

/**
 * Copies the payload offset of row `from` of table `src` into row `to` of
 * table `dst` (a sharded model's tensor, once its shard's directory is read).
 */
export function copyOffset(dst, to, src, from) {
  const a = META + to * SLOTS + OFFSET;
  const b = META + from * SLOTS + OFFSET;
  dst[a] = src[b];
  dst[a + 1] = src[b + 1];
}

/** Passed by the package's own modules: Directory and Tensor are not built by users. */
export const INTERNAL = Symbol('kiln-wasm internal');

function notConstructible(what, how) {
  return new TypeError(`kiln-wasm: ${what} cannot be constructed directly: ${how}`);
}

/**
 * A checked tensor directory. Tensors borrow the caller's bytes.
 * Build one with parseDirectory, parseModel, a DirectoryLoader, or openRemote.
 */
export class Directory {
  /** @internal */
  constructor(token, table, bytes, state = {}) {
    if (token !== INTERNAL) {
      throw notConstructible('Directory', 'use parseDirectory(bytes), parseModel(bytes), a DirectoryLoader, loadDirectory(url) or openRemote(url)');
    }
    this._t = table;
    this._bytes = bytes; // input byte i at index i (at least the prefix)
    this._n = table[TENSORS];
    this._segments = state.segments ?? null; // Map<index, Uint8Array> for remote directories
    this._pending = state.pending ?? null; // message when payloads have not arrived
    this._metadata = state.metadata ?? null; // a model file's metadata (Map), else null
    this._digestsVerified = state.digestsVerified === true; // step 9d held for every tensor
    this._heap = null; // the decoded heap when it is all ASCII, else false
    this._cache = new Array(this._n);
    this._list = null;
    this._map = null;
  }

  /** Number of tensors. */
  get length() {
    return this._n;
  }

  /** A model file's metadata (a Map without the padding key), or null for a plain directory. */
  get metadata() {
    return this._metadata;
  }

  /**
   * True when every tensor's payload was hashed and matched its digest as
   * this directory was checked (a DirectoryLoader or loadDirectory, unless
   * `verifyDigests: false`; parseModel with `{ verify: true }`); false when
   * the digests were not compared, and for a file without digests
   * (docs/verification.md: which call compares them).
   */
  get digestsVerified() {
    return this._digestsVerified;
  }

  /** Absolute offset of the block in the input (0 for a plain directory; after the metadata in a model file). */
  get byteOffset() {
    return u64(this._t, START);
  }

  /** Length of the block in bytes (header, descriptors, name heap, padding, payloads). */
  get byteLength() {
    return u64(this._t, BLOCK_LEN);
  }

  /** Absolute offset of the payload region. */
  get payloadOffset() {
    return u64(this._t, PAYLOAD);
  }

  /** The bytes the tensors borrow (the caller's input for parseDirectory). */
  get source() {
    return this._bytes;
  }

  /** Tensor `index` in descriptor order. */
  at(index) {
    if (!Number.isInteger(index) || index < 0 || index >= this._n) return undefined;
    return (this._cache[index] ??= new Tensor(INTERNAL, this, index));
  }

  /** All tensors in descriptor order (the same array on every call). */
  tensors() {
    if (this._list === null) {
      const list = new Array(this._n);
      const cache = this._cache;
      for (let i = 0; i < this._n; i++) list[i] = cache[i] ??= new Tensor(INTERNAL, this, i);
      this._list = Object.freeze(list);
    }
    return this._list;
  }

  /** The tensor named `name`, or undefined. */
  get(name) {
    if (this._map === null) {
      this._map = new Map();
      for (let i = 0; i < this._n; i++) {
        const n = this._name(i);
        if (n !== null) this._map.set(n, i);
      }
    }
    const i = this._map.get(name);
    return i === undefined ? undefined : this.at(i);
  }

  /** True when a tensor is named `name`. */
  has(name) {
    return this.get(name) !== undefined;
  }

  /** Tensor names in descriptor order (null for unnamed tensors). */
  names() {
    const out = new Array(this._n);
    for (let i = 0; i < this._n; i++) out[i] = this._name(i);
    return out;
  }

  [Symbol.iterator]() {
    return this.tensors()[Symbol.iterator]();
  }

  toJSON() {
    const out = { byteOffset: this.byteOffset, byteLength: this.byteLength, tensors: this.tensors().map((t) => t.toJSON()) };
    if (this._metadata !== null) out.metadata = Object.fromEntries(this._metadata);
    return out;
  }

  _row(i) {
    return META + i * SLOTS;
  }

  // Names are byte ranges of the heap. An all-ASCII heap is decoded once and
  // sliced; otherwise each name is decoded on its own.
  _text(at, len) {
    if (at === NONE) return null;
    const t = this._t;
    if (this._heap === null) {
      // The core checked the heap's UTF-8: it is all ASCII exactly when its
      // text has one UTF-16 unit per byte (any other character takes more bytes).
      const heap = this._bytes.subarray(t[HEAP_START], t[HEAP_END]);
      const all = decode(heap);
      this._heap = all.length === heap.length ? all : false;
    }
    if (this._heap !== false) return this._heap.slice(at, at + len);
    const from = t[HEAP_START] + at;
    return decode(this._bytes.subarray(from, from + len));
  }

  _name(i) {
    const o = this._row(i);
    return this._text(this._t[o + NAME_AT], this._t[o + NAME_LEN]);
  }

  _payload(i) {
    const o = this._row(i);
    if (this._segments !== null) {
      const seg = this._segments.get(i);
      if (seg === undefined) {
        throw new Error(`kiln: tensor ${JSON.stringify(this._name(i) ?? i)} is not loaded yet: await remote.load(...) first`);
      }
      return seg;
    }
    if (this._pending !== null) throw new Error(`kiln: ${this._pending}`);
    const at = u64(this._t, o + OFFSET);
    return this._bytes.subarray(at, at + u64(this._t, o + LENGTH));
  }
}

/** One tensor of a checked directory. */
export class Tensor {
  /** @internal */
  constructor(token, dir, index) {
    if (token !== INTERNAL) throw notConstructible('Tensor', 'get tensors from a Directory (dir.get(name), dir.at(i), iteration)');
    this._d = dir;
    this._i = index;
    this._o = META + index * SLOTS;
    this._shape = null;
  }

  /** Position in descriptor order. */
  get index() {
    return this._i;
  }

  /** The name, or null for an unnamed tensor. */
  get name() {
    return this._d._name(this._i);
  }

  /** The wire dtype code (1..19, or 4096..32767 for opaque layouts). */
  get dtypeCode() {
    return this._d._t[this._o + DTYPE_RANK] & 0xffff;
  }

  /** "f32", "bf16", "e2m1", ..., or "opaque:4096". */
  get dtype() {
    return dtypeName(this.dtypeCode);
  }

  get rank() {
    return this._d._t[this._o + DTYPE_RANK] >>> 16;
  }

  /** Dimensions as numbers ([] for a scalar). Exact below 2^53. */
  get shape() {
    if (this._shape === null) {
      const t = this._d._t;
      const s = new Array(this.rank);
      const at = t[this._o + SHAPE_AT];
      for (let k = 0; k < s.length; k++) s[k] = u64(t, at + 2 * k);
      this._shape = Object.freeze(s);
    }
    return this._shape;
  }

  /** Number of elements (1 for a scalar): the product of the dims (the core checked it fits 64 bits). Exact below 2^53. */
  get elementCount() {
    const t = this._d._t;
    const at = t[this._o + SHAPE_AT];
    const rank = t[this._o + DTYPE_RANK] >>> 16;
    let n = 1;
    for (let k = 0; k < rank; k++) n *= u64(t, at + 2 * k);
    return n;
  }

  /**
   * Absolute offset of the payload in the input (exact below 2^53). A tensor
   * of a sharded model (openRemote on a manifest): the offset in its shard's
   * file, -1 until that shard's directory has been read (its first load).
   */
  get byteOffset() {
    const t = this._d._t;
    if (t[this._o + OFFSET] === NONE && t[this._o + OFFSET + 1] === NONE) return -1;
    return u64(t, this._o + OFFSET);
  }

  get byteLength() {
    return u64(this._d._t, this._o + LENGTH);
  }

  /** The layout name of an opaque dtype (e.g. "Q4_K"), else null. */
  get layout() {
    const t = this._d._t;
    return this._d._text(extraSlot(t, this._o, LAYOUT_AT, NONE), extraSlot(t, this._o, LAYOUT_LEN, 0));
  }

  /** Opaque block size in bytes (0 for other dtypes). */
  get blockSize() {
    return extraSlot(this._d._t, this._o, BLOCK_SIZE, 0);
  }

  /** {scheme, axis, groupSize, scale, outer} for scheme 1 or 2, else null. Kiln does not apply scales. */
  get quant() {
    const t = this._d._t;
    const e = t[this._o + EXTRA];
    if (e === NONE) return null;
    const sa = t[e + SCHEME_AXIS];
    const scheme = sa & 0xffff;
    if (scheme === 0) return null;
    const outer = t[e + OUTER];
    return {
      scheme,
      axis: sa >>> 16,
      groupSize: t[e + GROUP],
      scale: this._d.at(t[e + SCALE]),
      outer: outer === NONE ? null : this._d.at(outer),
    };
  }

  /** True when view() shares the input's ArrayBuffer; false when it must return a copy (misaligned start, big-endian host). */
  get isView() {
    return canView(this._d._payload(this._i), this.dtypeCode);
  }

  /** The payload's wire bytes: a zero-copy Uint8Array over the input. */
  bytes() {
    return this._d._payload(this._i);
  }

  /**
   * The elements as their natural typed array: a view over the input's
   * ArrayBuffer when isView, else a host-order copy. f16 gives a Float16Array
   * where the runtime has one, else Uint16Array bits; bf16 Uint16Array bits;
   * f8, e8m0, bool and u8 Uint8Array; packed i4/u4/e2m1 and opaque layouts
   * their bytes.
   */
  view() {
    const d = this._d;
    const code = d._t[this._o + DTYPE_RANK] & 0xffff;
    if (d._segments === null && d._pending === null) {
      // Fast path (no intermediate subarray): a view in place when aligned on a little-endian host.
      const C = viewCtor(code);
      const w = C.BYTES_PER_ELEMENT;
      const at = d._bytes.byteOffset + u64(d._t, this._o + OFFSET);
      if (w === 1 || (isHostLittleEndian() && at % w === 0)) return new C(d._bytes.buffer, at, u64(d._t, this._o + LENGTH) / w);
    }
    return elementsOf(d._payload(this._i), code);
  }

  /** True when the dtype is `dtype` (in TypeScript, narrows the tensor so view() has that dtype's type). */
  is(dtype) {
    return this.dtype === dtype;
  }

  /**
   * view(), after checking that the dtype is `dtype`: throws a TypeError
   * otherwise. `viewAs('f32')` is a Float32Array, `viewAs('i64')` a
   * BigInt64Array, and so on (typed accordingly in TypeScript).
   */
  viewAs(dtype) {
    const actual = this.dtype;
    if (actual !== dtype) {
      throw new TypeError(`kiln-wasm: tensor ${JSON.stringify(this.name ?? this.index)} is ${actual}, not ${dtype}`);
    }
    return this.view();
  }

  /**
   * The element values as a new Float32Array (conversion only: scales are
   * not applied), as spec/kiln-v2.md section 11.1 converts them: f64 and the
   * 32- and 64-bit integers rounded to the nearest f32 (ties to even), every
   * other dtype exact. An opaque tensor throws a TypeError.
   */
  toFloat32() {
    const code = this.dtypeCode;
    const payload = this._d._payload(this._i);
    // f32 is its own value: a copy (view() is the zero-copy read).
    if (code === 2) return new Float32Array(elementsOf(payload, code));
    return valuesOf(payload, code, this.shape, this.elementCount, null);
  }

  toJSON() {
    const q = this.quant;
    return {
      index: this.index,
      name: this.name,
      dtype: this.dtype,
      shape: [...this.shape],
      byteOffset: this.byteOffset,
      byteLength: this.byteLength,
      layout: this.layout,
      blockSize: this.blockSize,
      quant: q && { scheme: q.scheme, axis: q.axis, groupSize: q.groupSize, scale: q.scale.index, outer: q.outer?.index ?? null },
    };
  }
}

/**
 * The values of `payload` (a tensor's wire bytes) of dtype `code`, `shape`
 * and `count` elements, quantization `q` (Tensor.quant) applied, as a new
 * Float32Array: the core's kiln_nostd::dequant::Dequantizer (src/values.rs,
 * in the full module), the one implementation of spec section 11.1. The
 * payload is in JS memory: it goes through the module's 64 KiB window, and
 * the values come back a window at a time (wasm memory does not grow with
 * the tensor). Throws the core's TypeError for an opaque dtype or opaque scales.
 */
function valuesOf(payload, code, shape, count, q) {
  need('values');
  const full = fullModule();
  const v = new full.Values(code, shape);
  try {
    if (q !== null) {
      // The outer scale is one f32 (the parser checked): its value, read as it is.
      const outer = q.outer === null ? undefined : q.outer.toFloat32()[0];
      v.quantized(q.scale.dtypeCode, q.scale.bytes(), q.axis, q.groupSize, outer);
    }
    const out = new Float32Array(count);
    const ptr = v.window_ptr();
    const wlen = v.window_len();
    let pos = 0;
    // The memory's buffer read after the calls that allocate (it may have grown).
    const memory = full.wasm_memory();
    for (let at = 0; at < payload.length && pos < count; at += wlen) {
      const n = Math.min(wlen, payload.length - at);
      new Uint8Array(memory.buffer, ptr, n).set(payload.subarray(at, at + n));
      const k = v.run(at, n);
      out.set(new Float32Array(memory.buffer, v.out_ptr(), k), pos);
      pos += k;
    }
    return out;
  } finally {
    v.free();
  }
}

/**
 * A tensor's values as a new Float32Array, its quantization applied as
 * spec/kiln-v2.md section 11.1 defines: element x scale of its group, and
 * for scheme 2 that product rounded to f32 and then x the outer scale. The
 * scale tensor is read row-major over the data shape with the quantized
 * axis divided (rounded up) by the group size. An unquantized tensor is
 * only converted; an opaque tensor or opaque scales throw a TypeError.
 * Kiln itself stores the metadata and never applies it.
 *
 * The core computes the values (kiln_nostd::dequant, through the module):
 * test/dequant.test.mjs holds them to spec/dequant-cases.json.
 */
export function dequantize(tensor) {
  const q = tensor.quant;
  if (q === null) return tensor.toFloat32();
  return valuesOf(tensor.bytes(), tensor.dtypeCode, tensor.shape, tensor.elementCount, q);
}
