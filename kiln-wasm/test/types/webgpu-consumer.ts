// Compiled by test/types.test.mjs with @webgpu/types loaded: the package's
// structural GPU types accept the real GPUDevice and give back GPUBuffer.
import { toGPUBuffer, loadDirectoryToGPU, openRemote, DirectoryLoader } from 'kiln-wasm';

declare const device: GPUDevice;
declare const bytes: Uint8Array;

async function upload(): Promise<GPUBuffer[]> {
  const one: GPUBuffer = toGPUBuffer(device, bytes, { usage: GPUBufferUsage.STORAGE, label: 'x' });
  const remote = await openRemote('/m.kiln');
  const fromRemote: Map<string | number, GPUBuffer> = await remote.loadToGPU(device, ['a'], { usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const fromStream: Map<string | number, GPUBuffer> = await loadDirectoryToGPU(device, '/m.kiln');
  const loader = new DirectoryLoader({ gpu: { device } });
  void loader;
  return [one, ...fromRemote.values(), ...fromStream.values()];
}
void upload;
