// The package's two WebAssembly modules (README "Modules"), driven by one
// glue (wasm/kiln_wasm.js): `open` (directories, model files, digests; the
// .wasm kiln-wasm/slim fetches) and `full` (open, plus a sharded model's
// manifest reader and the Frozen value checker; embedded once, in
// wasm/kiln_full_inline.js). The default entries instantiate `full`;
// kiln-wasm/slim instantiates `open`, and `full` beside it (through a second
// copy of the glue, wasm/kiln_full.js) when a remote or Frozen call first
// needs it. fullModule() is the glue whose instance has those two parts.
import * as glue from './wasm/kiln_wasm.js';
import { setLoaded, setReady } from './ready.js';

let full = glue;

/** The glue module whose instance has the manifest reader and the Frozen checker. */
export function fullModule() {
  return full;
}

/** kiln-wasm/slim: the second instance's glue, once it is instantiated. */
export function useFull(ns) {
  full = ns;
  setLoaded('remote');
  setLoaded('frozen');
  setLoaded('values');
}

/** The default entries: instantiates the full module from its bytes, synchronously. */
export function startWith(bytes) {
  glue.initSync({ module: bytes });
  setReady();
  setLoaded('remote');
  setLoaded('frozen');
  setLoaded('values');
}

// js/unpack.wat, assembled: build.sh replaces the empty array with its bytes.
const UNPACK = [/* unpack.wat */];

/**
 * The bytes of the embedded module (wasm/kiln_full_inline.js, written by
 * build.sh): character c below 0x7e is byte c, 0x7e then c is byte c + 0x80,
 * 0x7f then c is byte c (0x7e, 0x7f). Decoded by unpack.wat's loop in a
 * memory of its own (the bytes returned are a view of it): a loop in JS runs
 * interpreted, once, at import, where it cost the default entry more than
 * compiling the module did.
 */
export function bytesOf(text) {
  // One page more than the text: a last escape character reads the byte after it.
  const memory = new WebAssembly.Memory({ initial: (text.length >> 16) + 1 });
  const { u } = new WebAssembly.Instance(new WebAssembly.Module(new Uint8Array(UNPACK)), { k: { m: memory } }).exports;
  const { written } = new TextEncoder().encodeInto(text, new Uint8Array(memory.buffer));
  return new Uint8Array(memory.buffer, 0, u(written));
}

/**
 * The string the inline file's source holds (for index.cjs, which reads the
 * file's text: Node's require cannot load an ES module before 20.19). The
 * file is `export const wasm =\n  "…";` with the escapes build.sh writes
 * (`\\`, `\"`, `\n`, `\r`, `\x00`).
 */
export function wasmFromText(source) {
  const body = source.slice(source.indexOf('"') + 1, source.lastIndexOf('"'));
  const plain = { n: '\n', r: '\r', '\\': '\\', '"': '"', x00: '\0' };
  return body.replace(/\\(x00|[\\"nr])/g, (_, c) => plain[c]);
}
