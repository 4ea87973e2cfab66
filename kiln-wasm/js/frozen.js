// Frozen values: decodeValue and decodeFrame.
//
// The Rust core validates the whole value first (a copy in wasm memory, in a
// buffer reused from call to call: kiln_wasm::frozen and FrozenChecker). Only when it
// accepts does this module build anything, walking the CALLER's bytes with
// the type's nodes and the tensor tables the core returned. The check has
// proved the bytes well formed (every count fits, every string is UTF-8,
// every bool and opt byte is 0 or 1, every directory is canonical), so the
// walk does no checks of its own. Typed arrays and tensor views are over the
// caller's ArrayBuffer (or host-order copies where a view is impossible);
// nothing returned refers to wasm memory.

import { asBytes, frozenCheck, limitsOf } from './validate.js';
import { BLOCK_LEN, Directory, INTERNAL, START, u64 } from './directory.js';
import { copyElements, isHostLittleEndian } from './elements.js';

// Kind codes (kiln_wasm::frozen::kind_code).
const BOOL = 0;
const I8 = 1;
const I16 = 2;
const I32 = 3;
const I64 = 4;
const U8 = 5;
const U16 = 6;
const U32 = 7;
const U64 = 8;
const INT = 9;
const UINT = 10;
const F32 = 11;
const F64 = 12;
const STR = 13;
const TENSORS = 14;
const LIST = 15;
const OPT = 16;
const DICT = 17;
const STRUCT = 18;

// The typed array of a list of fixed-width numbers, by element kind (bool excluded).
const LIST_CTOR = [
  null,
  Int8Array, // i8
  Int16Array, // i16
  Int32Array, // i32
  BigInt64Array, // i64
  Uint8Array, // u8
  Uint16Array, // u16
  Uint32Array, // u32
  BigUint64Array, // u64
  BigInt64Array, // int (an i64 on the wire)
  BigUint64Array, // uint (a u64 on the wire)
  Float32Array, // f32
  Float64Array, // f64
];

// Parsed types by type text: {kind, elem, names, fields, proto}. Built from
// the core's nodes, so there is no second parser of the type grammar.
const types = new Map();
const MAX_TYPES = 256;

function typeFrom(out, text) {
  const node = (i) => {
    const o = 1 + 4 * i;
    const t = { kind: out[o], elem: null, names: null, fields: null, proto: false };
    if (t.kind === LIST || t.kind === OPT || t.kind === DICT) {
      t.elem = node(i + 1);
    } else if (t.kind === STRUCT) {
      t.names = [];
      t.fields = [];
      for (let j = i + 1; j < out[o + 3]; j = out[1 + 4 * j + 3]) {
        const f = 1 + 4 * j;
        t.names.push(text.slice(out[f + 1], out[f + 1] + out[f + 2]));
        t.fields.push(node(j));
      }
      t.proto = t.names.includes('__proto__');
    }
    return t;
  };
  return node(0);
}

// The walk's state: the caller's bytes, a DataView over them, the cursor,
// the core's description and the position of the next tensor table in it.
let B = null;
let DV = null;
let P = 0;
let T = null;
let TI = 0;

const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

function text(at, n) {
  if (n <= 32) {
    let s = '';
    for (let i = at; i < at + n; i++) {
      const c = B[i];
      if (c > 127) return textSlow(at, n);
      s += String.fromCharCode(c);
    }
    return s;
  }
  return textSlow(at, n);
}

function textSlow(at, n) {
  const bytes = B.subarray(at, at + n);
  // TextDecoder refuses views of a SharedArrayBuffer in some runtimes.
  const shared = typeof SharedArrayBuffer === 'function' && bytes.buffer instanceof SharedArrayBuffer;
  return decoder.decode(shared ? bytes.slice() : bytes);
}

function value(t) {
  const p = P;
  switch (t.kind) {
    case BOOL:
      P = p + 1;
      return B[p] === 1;
    case I8:
      P = p + 1;
      return (B[p] << 24) >> 24;
    case U8:
      P = p + 1;
      return B[p];
    case I16:
      P = p + 2;
      return DV.getInt16(p, true);
    case U16:
      P = p + 2;
      return DV.getUint16(p, true);
    case I32:
      P = p + 4;
      return DV.getInt32(p, true);
    case U32:
      P = p + 4;
      return DV.getUint32(p, true);
    case I64:
    case INT:
      P = p + 8;
      return DV.getBigInt64(p, true);
    case U64:
    case UINT:
      P = p + 8;
      return DV.getBigUint64(p, true);
    case F32:
      P = p + 4;
      return DV.getFloat32(p, true);
    case F64:
      P = p + 8;
      return DV.getFloat64(p, true);
    case STR: {
      const n = DV.getUint32(p, true);
      P = p + 4 + n;
      return text(p + 4, n);
    }
    case TENSORS:
      return tensors(p);
    case LIST:
      return list(t.elem, p);
    case OPT: {
      P = p + 1;
      if (B[p] === 0) return null;
      const v = value(t.elem);
      // opt<opt<T>>: "present, inner absent" must differ from "absent".
      return t.elem.kind === OPT ? { value: v } : v;
    }
    case DICT: {
      const n = DV.getUint32(p, true);
      P = p + 4;
      const m = new Map();
      for (let i = 0; i < n; i++) {
        const len = DV.getUint32(P, true);
        const key = text(P + 4, len);
        P += 4 + len;
        m.set(key, value(t.elem));
      }
      return m;
    }
    case STRUCT: {
      const o = {};
      const { names, fields } = t;
      for (let i = 0; i < fields.length; i++) {
        const v = value(fields[i]);
        if (t.proto && names[i] === '__proto__') {
          Object.defineProperty(o, '__proto__', { value: v, enumerable: true, writable: true, configurable: true });
        } else {
          o[names[i]] = v;
        }
      }
      return o;
    }
    default:
      throw new Error(`kiln: internal: unknown kind code ${t.kind}`);
  }
}

function list(e, p) {
  const n = DV.getUint32(p, true);
  const body = p + 4;
  const k = e.kind;
  if (k === BOOL) {
    const a = new Array(n);
    for (let i = 0; i < n; i++) a[i] = B[body + i] === 1;
    P = body + n;
    return a;
  }
  if (k <= F64) {
    const C = LIST_CTOR[k];
    const w = C.BYTES_PER_ELEMENT;
    P = body + n * w;
    if (k === U8) return B.subarray(body, body + n);
    const at = B.byteOffset + body;
    if (w === 1 || (isHostLittleEndian() && at % w === 0)) return new C(B.buffer, at, n);
    return copyElements(B.subarray(body, body + n * w), C, n);
  }
  P = body;
  const a = new Array(n);
  for (let i = 0; i < n; i++) a[i] = value(e);
  return a;
}

function tensors(p) {
  const len = T[TI];
  const table = T.subarray(TI + 1, TI + 1 + len);
  TI += 1 + len;
  if (u64(table, START) !== p) throw new Error('kiln: internal: tensor tables out of step with the value');
  P = p + u64(table, BLOCK_LEN);
  return new Directory(INTERNAL, table, B);
}

function decode(bytes, typeText, options, framed, fn) {
  const input = asBytes(bytes, fn);
  if (typeof typeText !== 'string') throw new TypeError(`${fn} expects the type text as a string, e.g. "struct{id:i64,}"`);
  const limits = limitsOf(options);
  let type = types.get(typeText);
  const out = frozenCheck(input, typeText, framed, limits, type === undefined);
  if (type === undefined) {
    type = typeFrom(out, typeText);
    if (types.size >= MAX_TYPES) types.clear();
    types.set(typeText, type);
  }
  B = input;
  DV = new DataView(input.buffer, input.byteOffset, input.byteLength);
  P = framed ? 16 : 0;
  T = out;
  TI = 1 + 4 * out[0] + 1;
  try {
    return value(type);
  } finally {
    B = DV = T = null;
  }
}

/**
 * Checks `bytes` as exactly one Frozen value of the type `typeText`
 * (canonical type text, e.g. "struct{id:i64,batch:tensors,}") and returns it
 * as plain JavaScript values. Throws KilnError.
 * @param {Uint8Array} bytes
 * @param {string} typeText
 * @param {{countCap?: number, byteCap?: number}} [options]
 */
export function decodeValue(bytes, typeText, options = {}) {
  return decode(bytes, typeText, options, false, 'decodeValue');
}

/**
 * Like decodeValue, for a value behind the 16-byte KLN0 frame: the frame's
 * schema hash must be the hash of `typeText` (SCHEMA otherwise).
 * @param {Uint8Array} bytes
 * @param {string} typeText
 * @param {{countCap?: number, byteCap?: number}} [options]
 */
export function decodeFrame(bytes, typeText, options = {}) {
  return decode(bytes, typeText, options, true, 'decodeFrame');
}
