// Typed views of wire bytes. No wasm here, and no value conversion: values
// as f32 (toFloat32, dequantize in directory.js) are the core's.

let hostLittleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Test hook: pretend the host is big-endian (every multi-byte view becomes a swapped copy). */
export function __setHostLittleEndian(value) {
  const old = hostLittleEndian;
  hostLittleEndian = value;
  return old;
}

export function isHostLittleEndian() {
  return hostLittleEndian;
}

const Float16 = typeof globalThis.Float16Array === 'function' ? globalThis.Float16Array : null;

// Typed-array constructor per dtype code 1..19 (index = code): the public
// view types (index.d.ts's ViewTypes); test/tables.test.mjs holds them to the
// core's names and widths.
const CTOR = [
  null,
  Float64Array, // 1 f64
  Float32Array, // 2 f32
  Float16 ?? Uint16Array, // 3 f16: Float16Array where the runtime has it, else bits
  Uint16Array, // 4 bf16 (bits)
  Uint8Array, // 5 f8e4m3 (bits)
  Uint8Array, // 6 f8e5m2 (bits)
  Uint8Array, // 7 bool
  Int8Array, // 8 i8
  Uint8Array, // 9 u8
  Int16Array, // 10 i16
  Uint16Array, // 11 u16
  Int32Array, // 12 i32
  Uint32Array, // 13 u32
  BigInt64Array, // 14 i64
  BigUint64Array, // 15 u64
  Uint8Array, // 16 i4 (packed bytes)
  Uint8Array, // 17 u4 (packed bytes)
  Uint8Array, // 18 e2m1 (packed bytes)
  Uint8Array, // 19 e8m0 (bits)
];

/** Dtype codes 1..VIEW_CODES have a view type: the core's closed set (test/tables.test.mjs holds it). */
export const VIEW_CODES = CTOR.length - 1;

/** The typed-array constructor `view()` returns for a dtype code (Uint8Array for opaque codes). */
export function viewCtor(code) {
  return CTOR[code] ?? Uint8Array;
}

/** Bytes per element of the view (1 for packed and opaque dtypes). */
export function viewWidth(code) {
  return viewCtor(code).BYTES_PER_ELEMENT;
}

/** True when `payload` (wire bytes) can be viewed in place as dtype `code`. */
export function canView(payload, code) {
  const w = viewWidth(code);
  return w === 1 || (hostLittleEndian && payload.byteOffset % w === 0);
}

/**
 * The natural typed array of `payload` (a Uint8Array of wire bytes): a view
 * over the same ArrayBuffer when `canView`, else a host-order copy.
 * `bits` asks for Uint16Array bits instead of Float16Array for f16.
 */
export function elementsOf(payload, code, bits = false) {
  const C = bits && code === 3 ? Uint16Array : viewCtor(code);
  const w = C.BYTES_PER_ELEMENT;
  if (w === 1) {
    return C === Uint8Array ? payload : new C(payload.buffer, payload.byteOffset, payload.byteLength);
  }
  const n = payload.byteLength / w;
  if (canView(payload, code)) return new C(payload.buffer, payload.byteOffset, n);
  return copyElements(payload, C, n);
}

/** A host-order copy of `n` little-endian elements of `C` from `payload`. Bit-exact (NaN payloads kept). */
export function copyElements(payload, C, n) {
  const out = new C(n);
  const w = C.BYTES_PER_ELEMENT;
  if (hostLittleEndian) {
    new Uint8Array(out.buffer).set(payload.subarray(0, n * w));
    return out;
  }
  // Big-endian host: read each element little-endian as an integer of the
  // same width, so floats keep every bit.
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  if (w === 2) {
    const o = new Uint16Array(out.buffer);
    for (let i = 0; i < n; i++) o[i] = dv.getUint16(2 * i, true);
  } else if (w === 4) {
    const o = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) o[i] = dv.getUint32(4 * i, true);
  } else {
    const o = new BigUint64Array(out.buffer);
    for (let i = 0; i < n; i++) o[i] = dv.getBigUint64(8 * i, true);
  }
  return out;
}
