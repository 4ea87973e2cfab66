// WebGPU upload: a tensor's bytes into a GPUBuffer created mapped, and
// loadToGPU on the remote objects, which writes each payload into the mapped
// range as the bytes arrive (checked, digests included, before it unmaps).

import { DigestCheck } from './wasm/kiln_wasm.js';
import { Check, KilnError, digestError, feedDigest, layout } from './validate.js';
import { CacheEntryBad } from './cache.js';
import { Progress } from './progress.js';

// GPUBufferUsage.STORAGE | COPY_SRC | COPY_DST (the constants, so this loads where WebGPU is absent).
export const DEFAULT_USAGE = 0x80 | 0x04 | 0x08;

const padded = (n) => Math.max(4, Math.ceil(n / 4) * 4);

export function createMapped(device, name, byteLength, offset, options) {
  const size = padded(byteLength);
  const max = device?.limits?.maxBufferSize;
  if (typeof max === 'number' && size > max) {
    throw new KilnError(
      'LIMIT',
      offset,
      'MaxBufferSize',
      `tensor ${JSON.stringify(name)} is ${byteLength} bytes (${size} padded to 4), more than this GPU device's maxBufferSize ` +
        `of ${max} bytes; ask for the adapter's limit with adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize } })`,
    );
  }
  const buffer = device.createBuffer({ size, usage: options.usage ?? DEFAULT_USAGE, mappedAtCreation: true, label: String(name) });
  return { buffer, mapped: new Uint8Array(buffer.getMappedRange()) };
}

/**
 * A GPUBuffer holding `tensor`'s wire bytes (a Tensor, or a Uint8Array / ArrayBufferView with options.label):
 * created with mappedAtCreation, size padded up to a multiple of 4 (at least 4; pad bytes zero), label the
 * tensor's name, usage STORAGE | COPY_SRC | COPY_DST unless options.usage. A tensor larger than
 * device.limits.maxBufferSize throws a KilnError (LIMIT, rule MaxBufferSize): no splitting.
 */
export function toGPUBuffer(device, tensor, options = {}) {
  const bytes = ArrayBuffer.isView(tensor) ? new Uint8Array(tensor.buffer, tensor.byteOffset, tensor.byteLength) : tensor.bytes();
  const name = ArrayBuffer.isView(tensor) ? (options.label ?? '') : (tensor.name ?? tensor.index);
  const { buffer, mapped } = createMapped(device, name, bytes.length, ArrayBuffer.isView(tensor) ? 0 : tensor.byteOffset, options);
  mapped.set(bytes);
  buffer.unmap();
  return buffer;
}

// One tensor of a RemoteDirectory into a GPUBuffer, streamed: gap and payload
// bytes go through a Check of the file (prefix, then these bytes, the rest
// zero: the byte rules load() applies) and the payload through an incremental
// SHA-256 in wasm, each chunk written into the mapped range at once. With a
// cache, the tensor's entry is streamed instead of the network, or the bytes
// fetched are written to a new entry as they come, committed only once every
// check passed. A cache entry that fails (its trailer, the digest, a rule) is
// deleted and the tensor fetched again into the same buffer.
async function uploadOne(dir, device, t, options, progress) {
  const name = t.name ?? t.index;
  const { buffer, mapped } = createMapped(device, name, t.byteLength, t.byteOffset, options);
  try {
    try {
      await uploadInto(dir, t, mapped, progress, true);
    } catch (e) {
      if (!(e instanceof RetryFromNetwork)) throw e;
      await uploadInto(dir, t, mapped, progress, false);
    }
  } catch (e) {
    buffer.unmap();
    buffer.destroy();
    throw e;
  }
  buffer.unmap();
  return buffer;
}

// Thrown by uploadInto when what failed came from the cache.
class RetryFromNetwork extends Error {}

async function uploadInto(dir, t, mapped, progress, useCache) {
  const i = t.index;
  const name = t.name ?? i;
  const gapFrom = gapStart(dir, i);
  const off = t.byteOffset;
  const end = off + t.byteLength;
  const check = new Check(dir._info, dir._limits, dir.size, { start: dir._start });
  const digest = dir._digestsAt >= 0 ? new DigestCheck() : null;
  const counted = progress.received;
  let ok = true;
  const take = (chunk, at, source = 'network') => {
    // chunk holds file bytes [at, at + chunk.length).
    if (ok) ok = check.pump(chunk, at, at + chunk.length);
    const a = Math.max(at, off);
    const b = Math.min(at + chunk.length, end);
    if (b > a) {
      const part = chunk.subarray(a - at, b - at);
      mapped.set(part, a - off);
      if (digest !== null) feedDigest(digest, part);
    }
    progress.add(chunk.length, { tensor: name, source });
  };
  let pending = null;
  try {
    const have = dir._bytes.length;
    ok = check.pump(dir._bytes, 0, Math.min(have, gapFrom));
    if (ok && check.fed < gapFrom) ok = check.passUnknown(gapFrom);
    if (gapFrom < have) take(dir._bytes.subarray(gapFrom, Math.min(have, end)), gapFrom, dir._prefixSource);
    if (end > Math.max(have, gapFrom)) pending = await dir._readRange(Math.max(have, gapFrom), end, take, useCache);
    // load()'s order: the digest (step 9d), then the payload rules.
    if (digest !== null) {
      const at = dir._digestsAt + 32 * i;
      if (!digest.check(dir._bytes.subarray(at, at + 32), off)) throw digestError(digest);
    }
    ok = ok && check.passUnknown(dir.size);
    if (!ok) check.count(dir.size);
    check.finish();
  } catch (e) {
    await pending?.discard();
    const again = e instanceof CacheEntryBad || pending?.source === 'cache';
    if (useCache && again) {
      // Not yet final: the bytes counted for this try are counted again.
      if (!progress.final) progress.received = counted;
      throw new RetryFromNetwork();
    }
    throw e;
  } finally {
    check.free();
    digest?.free();
  }
  await pending?.commit?.();
}

export const gapStart = (dir, i) => (i === 0 ? dir.payloadOffset : dir.at(i - 1).byteOffset + dir.at(i - 1).byteLength);

// The tensors `nameOrNames` selects (all when undefined or null), of a
// remote object (its _find) or a plain Directory.
export function namesOf(dir, nameOrNames) {
  const all = nameOrNames === undefined || nameOrNames === null;
  if (typeof dir._find === 'function') return (all ? [...dir.names()] : [nameOrNames].flat()).map((n) => dir._find(n));
  if (all) return [...dir.tensors()];
  return [nameOrNames].flat().map((n) => {
    const t = typeof n === 'number' ? dir.at(n) : dir.get(n);
    if (t === undefined) throw new RangeError(`kiln: the file has no tensor ${JSON.stringify(n)}`);
    return t;
  });
}

/** RemoteDirectory.prototype.loadToGPU. */
export async function loadDirToGPU(dir, device, nameOrNames, options = {}, progress = null) {
  const ts = namesOf(dir, nameOrNames);
  const own = progress === null;
  progress ??= new Progress(options.onProgress, ts.reduce((a, t) => a + t.byteOffset + t.byteLength - gapStart(dir, t.index), 0));
  const out = new Map();
  try {
    for (const t of ts) out.set(t.name ?? t.index, await uploadOne(dir, device, t, options, progress));
  } catch (e) {
    for (const b of out.values()) b.destroy();
    throw e;
  }
  if (own) progress.done({ tensor: null, source: progress.source });
  return out;
}

export { layout };
