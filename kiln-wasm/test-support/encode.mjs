// A small canonical Kiln v2 directory writer for tests and benchmarks
// (the Rust writer is kiln_nostd::Writer; this one lets JS build inputs).

const align64 = (v) => Math.ceil(v / 64) * 64;

export const CODES = {
  f64: 1, f32: 2, f16: 3, bf16: 4, f8e4m3: 5, f8e5m2: 6, bool: 7, i8: 8, u8: 9, i16: 10, u16: 11,
  i32: 12, u32: 13, i64: 14, u64: 15, i4: 16, u4: 17, e2m1: 18, e8m0: 19,
};
const WIDTH = { 1: 8, 2: 4, 3: 2, 4: 2, 5: 1, 6: 1, 7: 1, 8: 1, 9: 1, 10: 2, 11: 2, 12: 4, 13: 4, 14: 8, 15: 8, 19: 1 };

/** Payload length of a non-opaque tensor. */
export function byteLengthOf(code, shape) {
  const n = shape.reduce((a, b) => a * b, 1);
  if (code === 16 || code === 17 || code === 18) return Math.ceil(n / 2);
  return n * WIDTH[code];
}

/**
 * specs: [{name?, dtype: code or name, shape, data?: Uint8Array, byteLength?, layout?, blockSize?,
 *          quant?: {scheme, axis, groupSize, scale, outer?}}]
 * Payloads without data stay zero (cheap for huge synthetic files).
 * `upto`: write only the block's first `upto` bytes (the head of a block too
 * big for memory, e.g. for a sparse file); data past it is left out.
 */
export function encodeKiln(specs, upto = Infinity) {
  const enc = new TextEncoder();
  const count = specs.length;
  const ts = specs.map((s) => {
    const code = typeof s.dtype === 'string' ? CODES[s.dtype] : s.dtype;
    const len = s.data ? s.data.length : (s.byteLength ?? byteLengthOf(code, s.shape));
    return { ...s, code, len, nameBytes: s.name != null ? enc.encode(s.name) : null, layoutBytes: s.layout != null ? enc.encode(s.layout) : null };
  });
  let heap = 0;
  for (const t of ts) if (t.nameBytes) { t.nameOff = heap; heap += t.nameBytes.length; }
  for (const t of ts) if (t.layoutBytes) { t.layoutOff = heap; heap += t.layoutBytes.length; }
  const dirBytes = count * 128 + heap;
  const base = align64(64 + dirBytes);
  let end = 0;
  for (const t of ts) { t.off = align64(end); end = t.off + t.len; }
  const payload = count ? end : 0;
  const out = new Uint8Array(Math.min(base + payload, upto));
  const dv = new DataView(out.buffer);
  out.set([0x4b, 0x4c, 0x4e, 0x54, 2, 2 | (ts.some((t) => t.nameBytes) ? 1 : 0)], 0);
  dv.setUint32(8, count, true);
  dv.setUint32(12, heap, true);
  dv.setBigUint64(16, BigInt(payload), true);
  dv.setBigUint64(24, BigInt(dirBytes), true);
  ts.forEach((t, i) => {
    const d = 64 + i * 128;
    dv.setUint16(d, t.code, true);
    out[d + 2] = t.shape.length;
    dv.setUint16(d + 4, t.nameBytes ? t.nameOff : 0xffff, true);
    dv.setUint16(d + 6, t.nameBytes ? t.nameBytes.length : 0, true);
    dv.setUint16(d + 8, t.layoutBytes ? t.layoutOff : 0xffff, true);
    dv.setUint16(d + 10, t.layoutBytes ? t.layoutBytes.length : 0, true);
    dv.setUint32(d + 12, t.blockSize ?? 0, true);
    const q = t.quant;
    dv.setUint16(d + 16, q ? q.scheme : 0, true);
    dv.setUint16(d + 18, q ? q.axis : 0xffff, true);
    dv.setUint32(d + 20, q ? q.groupSize : 0, true);
    dv.setUint32(d + 24, q ? q.scale : 0xffffffff, true);
    dv.setUint32(d + 28, q && q.outer !== undefined ? q.outer : 0xffffffff, true);
    dv.setBigUint64(d + 32, BigInt(t.off), true);
    dv.setBigUint64(d + 40, BigInt(t.len), true);
    t.shape.forEach((s, k) => dv.setBigUint64(d + 48 + 8 * k, BigInt(s), true));
    if (t.nameBytes) out.set(t.nameBytes, 64 + count * 128 + t.nameOff);
    if (t.layoutBytes) out.set(t.layoutBytes, 64 + count * 128 + t.layoutOff);
    if (t.data && base + t.off + t.data.length <= out.length) out.set(t.data, base + t.off);
  });
  return out;
}

/** Wire bytes of a typed array (little-endian hosts). */
export const le = (typed) => new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength).slice();
