// js/frozen.js walks a value's bytes itself once the core has checked them;
// this holds its values to the core's own decoding (kiln_nostd::frozen::Reader's
// Value, printed by `kiln decode --compact`, kiln-cli/src/decode.rs) on every
// Frozen value of spec/kiln-v2-cases.json and test-support/frozen-fixtures.json:
// the same values, or the same code and offset. The CLI comes from
// CARGO_TARGET_DIR (kiln-wasm/ci.sh builds it; KILN_BIN overrides).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as kiln from '../pkg/index.js';
import { Directory } from '../pkg/directory.js';
import { frozenCheck, limitsOf } from '../pkg/validate.js';
import { ROOT, goldens, hex } from '../test-support/goldens.mjs';

const root = fileURLToPath(ROOT);
const bin = process.env.KILN_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(root, 'target'), 'debug', 'kiln');
const skip = !existsSync(bin) && `no kiln CLI at ${bin} (cargo build -p kiln-cli)`;

const fixtures = JSON.parse(readFileSync(new URL('../test-support/frozen-fixtures.json', import.meta.url), 'utf8')).cases;
const cases = [...goldens().map((c) => ({ ...c, from: 'spec' })), ...fixtures.map((c) => ({ ...c, bytes: hex(c.hex), from: 'fixture' }))];

// The kind codes of the core's type nodes (kiln_wasm::frozen::kind_code) this walk tells apart.
const F32 = 11;
const TENSORS = 14;
const LIST = 15;
const OPT = 16;
const DICT = 17;
const STRUCT = 18;

/** The type's nodes as the core returns them (frozenCheck with the schema), as a tree. */
function typeTree(bytes, typeText, framed) {
  const out = frozenCheck(bytes, typeText, framed, limitsOf({}), true);
  const node = (i) => {
    const o = 1 + 4 * i;
    const t = { kind: out[o], elem: null, fields: [] };
    if (t.kind === LIST || t.kind === OPT || t.kind === DICT) t.elem = node(i + 1);
    if (t.kind === STRUCT) for (let j = i + 1; j < out[o + 3]; j = out[1 + 4 * j + 3]) t.fields.push(node(j));
    return t;
  };
  return node(0);
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const float = (x) => (Number.isNaN(x) ? 'NaN' : x === Infinity ? 'Infinity' : x === -Infinity ? '-Infinity' : x);

/** The JSON `kiln decode` prints for a value frozen.js returned, by the core's type `t` (kiln-cli/src/decode.rs's table). */
function asCliJson(v, t) {
  if (v instanceof Directory) {
    return v.tensors().map((x) => ({
      name: x.name,
      dtype: x.dtype.startsWith('opaque:') ? 'opaque' : x.dtype,
      dtype_code: x.dtypeCode,
      shape: [...x.shape],
      byte_offset: x.byteOffset,
      byte_length: x.byteLength,
      layout: x.layout,
    }));
  }
  if (t.kind === OPT) {
    if (v === null) return null;
    // frozen.js keeps opt<opt<T>>'s "present, inner absent" apart as {value}; the CLI prints the inner value.
    return asCliJson(t.elem.kind === OPT ? v.value : v, t.elem);
  }
  if (typeof v === 'bigint') return v >= -MAX_SAFE && v <= MAX_SAFE ? Number(v) : String(v);
  if (typeof v === 'number') return float(v);
  if (v instanceof Uint8Array && t.kind === LIST) return Array.from(v, (b) => b.toString(16).padStart(2, '0')).join('');
  if (ArrayBuffer.isView(v) || Array.isArray(v)) return Array.from(v, (e) => asCliJson(e, t.elem));
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, e]) => [k, asCliJson(e, t.elem)]));
  if (t.kind === STRUCT) return Object.fromEntries(Object.keys(v).map((k, i) => [k, asCliJson(v[k], t.fields[i])]));
  return v;
}

/** The CLI's JSON with only the tensor fields compared, and f32 numbers rounded to f32 (it prints their shortest form). */
function fromCli(j, t) {
  if (t.kind === OPT) return j === null ? null : fromCli(j, t.elem);
  if (t.kind === TENSORS) {
    return j.map(({ name, dtype, dtype_code, shape, byte_offset, byte_length, layout }) => ({ name, dtype, dtype_code, shape, byte_offset, byte_length, layout }));
  }
  if (typeof j === 'number') return t.kind === F32 ? Math.fround(j) : j;
  if (j === null || typeof j !== 'object') return j;
  if (Array.isArray(j)) return j.map((e) => fromCli(e, t.elem));
  if (t.kind === DICT) return Object.fromEntries(Object.entries(j).map(([k, e]) => [k, fromCli(e, t.elem)]));
  return Object.fromEntries(Object.entries(j).map(([k, e], i) => [k, fromCli(e, t.fields[i])]));
}

test('frozen.js and the core decode every Frozen value of the goldens and the fixtures alike', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-frozen-diff-'));
  try {
    let accepted = 0;
    for (const c of cases) {
      const label = `${c.from} ${c.name} (${c.type}${c.framed ? ', framed' : ''})`;
      const file = join(dir, 'value.bin');
      writeFileSync(file, c.bytes);
      const r = spawnSync(bin, ['decode', '--compact', '--type', c.type, ...(c.framed ? ['--framed'] : []), file], { encoding: 'utf8' });
      let js;
      try {
        js = { value: (c.framed ? kiln.decodeFrame : kiln.decodeValue)(c.bytes, c.type) };
      } catch (e) {
        if (!(e instanceof kiln.KilnError)) throw e;
        js = { error: `${e.code} ${e.offset}` };
      }
      if (r.status === 0) {
        assert.ok('value' in js, `${label}: the core accepts, frozen.js threw ${js.error}`);
        const t = typeTree(c.bytes, c.type, c.framed);
        assert.deepEqual(asCliJson(js.value, t), fromCli(JSON.parse(r.stdout), t), label);
        accepted += 1;
      } else {
        assert.equal(r.status, 1, `${label}: ${r.stderr}`);
        const m = / ([A-Z0-9]+) at byte (\d+):/.exec(r.stderr);
        assert.ok(m, `${label}: ${r.stderr}`);
        assert.equal(js.error, `${m[1]} ${m[2]}`, label);
      }
    }
    assert.ok(accepted >= 30, `${accepted} values compared`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
