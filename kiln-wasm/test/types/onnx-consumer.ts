// Compiled by test/types.test.mjs with onnxruntime-web's own types linked in: the module satisfies
// createOnnxSession's structural parameter, the result is its InferenceSession, and its SessionOptions pass;
// checkOnnxGraph's result is typed (the checked list, the graph's SHA-256, the files).
import * as ort from 'onnxruntime-web';
import { checkOnnxGraph, createOnnxSession } from 'kiln-wasm';
import type { OnnxGraphCheck } from 'kiln-wasm';

export async function run(options: ort.InferenceSession.SessionOptions): Promise<ort.InferenceSession> {
  const s = await createOnnxSession(ort, '/m.kiln.onnx', { model: '/m.kiln', sessionOptions: { executionProviders: ['wasm'] } });
  const out: ort.InferenceSession.OnnxValueMapType = await s.run({ x: new ort.Tensor('float32', new Float32Array(64), [1, 64]) });
  void out;
  const c: OnnxGraphCheck = await checkOnnxGraph('/m.kiln.onnx', { model: '/m.kiln' });
  const listed: [string, 'kiln' | 'inline'][] = c.checked;
  const sha: string = c.sha256;
  void [listed, sha, c.files[0]?.data.byteLength];
  return createOnnxSession(ort, new Uint8Array(8), { files: [{ path: 'm.kiln', data: new Uint8Array(8) }], sessionOptions: options });
}
