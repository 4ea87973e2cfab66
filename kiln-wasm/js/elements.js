// Typed views and element conversions. No wasm here: conversion tables for
// the narrow floats are built once by kiln_nostd::dequant::mx (through `lut`) and
// handed in by kiln.js.

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

/**
 * Element values as a new Float32Array. `lut(code)` returns the f32 bits of
 * every code of a narrow float (from kiln_nostd::dequant::mx). f64 and the integers
 * round to the nearest f32, ties to even, in one rounding (spec section 11.1).
 */
export function toFloat32(payload, code, count, lut) {
  const n = count;
  const out = new Float32Array(n);
  switch (code) {
    case 1: // f64
    case 2: // f32 (a copy; view() is the zero-copy read)
      out.set(elementsOf(payload, code));
      return out;
    case 3: // f16
    case 4: {
      // bf16
      const bits = elementsOf(payload, code, true);
      const table = lut(code);
      const o = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) o[i] = table[bits[i]];
      return out;
    }
    case 5: // f8e4m3
    case 6: // f8e5m2
    case 19: {
      // e8m0
      const table = lut(code);
      const o = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) o[i] = table[payload[i]];
      return out;
    }
    case 14:
    case 15: {
      const v = elementsOf(payload, code);
      for (let i = 0; i < n; i++) out[i] = bigIntToFloat32(v[i]);
      return out;
    }
    case 16: // i4: sign-extended nibbles, low nibble first
    case 17: // u4
    case 18: {
      // e2m1
      const table = code === 18 ? new Float32Array(lut(18).buffer.slice(0)) : null;
      for (let i = 0; i < n; i++) {
        const byte = payload[i >> 1];
        const nib = i & 1 ? byte >> 4 : byte & 15;
        out[i] = code === 16 ? (nib ^ 8) - 8 : code === 17 ? nib : table[nib];
      }
      return out;
    }
    default:
      if (code >= 7 && code <= 13) {
        out.set(elementsOf(payload, code));
        return out;
      }
      throw new TypeError(`dtype code ${code} is an opaque block layout: Kiln does not interpret it`);
  }
}

/**
 * A 64-bit integer rounded to the nearest f32, ties to even, in one rounding.
 * Number(v) would round to a double first, and that second rounding can
 * land on a tie the exact value is not (2^60 + 2^36 + 1 would go down).
 * Keeping the top 26 bits and folding every bit below them into the lowest
 * (sticky) one leaves a double that rounds to f32 as v does.
 */
export function bigIntToFloat32(v) {
  const neg = v < 0n;
  let m = neg ? -v : v;
  const shift = m.toString(2).length - 26;
  let x;
  if (shift <= 0) {
    x = Number(m);
  } else {
    const s = BigInt(shift);
    const sticky = (m & ((1n << s) - 1n)) === 0n ? 0n : 1n;
    x = Number((m >> s) | sticky) * 2 ** shift;
  }
  return Math.fround(neg ? -x : x);
}
