// Sharded models for the tests and the benchmark, written by the core's
// write_sharded (kiln-wasm/examples/write_sharded.rs, run through cargo:
// built once, then reused from CARGO_TARGET_DIR).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from './goldens.mjs';

/**
 * Writes `NAME.kiln` and its shards into a new temporary folder: `tensors`
 * f32 tensors `t.{i}` of `bytes` bytes over `shards` shards (values from
 * `seed`), plus `q` (quantized, with `q.scale` and `q.outer`), `mask`
 * (bool), `scalar` (rank 0) and `empty` in shard 1; metadata `author`, `seed`
 * and the [key, value] pairs of `metadata`. Returns {dir, manifest,
 * files: Map(name -> Uint8Array)} (the manifest's name is `${name}.kiln`).
 */
export function writeSharded({ name = 'm', shards = 3, tensors = 30, bytes = 64, seed = 1, dir = null, metadata = [] } = {}) {
  dir ??= mkdtempSync(join(tmpdir(), 'kiln-sharded-'));
  execFileSync(
    'cargo',
    ['run', '--quiet', '-p', 'kiln-wasm', '--example', 'write_sharded', '--', dir, name, String(shards), String(tensors), String(bytes), String(seed), ...metadata.map(([k, v]) => `${k}=${v}`)],
    { cwd: fileURLToPath(ROOT), stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const files = new Map();
  for (const f of readdirSync(dir)) {
    if (f === `${name}.kiln` || f.startsWith(`${name}-`)) {
      const b = readFileSync(join(dir, f));
      files.set(f, new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length)));
    }
  }
  return { dir, manifest: `${name}.kiln`, files };
}
