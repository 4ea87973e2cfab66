// The example MLP on WebGPU: one compute pass, one invocation per sample,
// over storage buffers holding the file's f32 weights. Logits are read back
// and the argmax taken here; the CPU path (mlp.js) gives the same digits.

// Upload one tensor's bytes into a STORAGE | COPY_DST buffer (same signature
// as the package's toGPUBuffer(device, tensor, options?)).
export function toGPUBuffer(device, tensor, options = {}) {
  const view = tensor.view();
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  const size = Math.max(4, Math.ceil(bytes.byteLength / 4) * 4);
  const buffer = device.createBuffer({
    size,
    usage: options.usage ?? GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    label: options.label ?? tensor.name,
  });
  if (bytes.byteLength % 4 === 0) device.queue.writeBuffer(buffer, 0, bytes);
  else {
    const padded = new Uint8Array(size);
    padded.set(bytes);
    device.queue.writeBuffer(buffer, 0, padded);
  }
  return buffer;
}

const SHADER = /* wgsl */ `
struct Dims { inputs: u32, hidden: u32, classes: u32, samples: u32 };
@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> w1: array<f32>;
@group(0) @binding(2) var<storage, read> b1: array<f32>;
@group(0) @binding(3) var<storage, read> w2: array<f32>;
@group(0) @binding(4) var<storage, read> b2: array<f32>;
@group(0) @binding(5) var<storage, read> xs: array<f32>;
@group(0) @binding(6) var<storage, read_write> logits: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let s = id.x;
  if (s >= dims.samples) { return; }
  var h: array<f32, 256>;
  for (var j = 0u; j < dims.hidden; j++) {
    var acc = b1[j];
    for (var i = 0u; i < dims.inputs; i++) { acc += w1[j * dims.inputs + i] * xs[s * dims.inputs + i]; }
    h[j] = max(acc, 0.0);
  }
  for (var k = 0u; k < dims.classes; k++) {
    var acc = b2[k];
    for (var j = 0u; j < dims.hidden; j++) { acc += w2[k * dims.hidden + j] * h[j]; }
    logits[s * dims.classes + k] = acc;
  }
}`;

// A device, or null when WebGPU or an adapter is missing.
export async function gpuDevice() {
  if (typeof navigator === 'undefined' || !navigator.gpu) return null;
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return null;
    const device = await adapter.requestDevice();
    let name = '';
    try {
      const info = adapter.info ?? (await adapter.requestAdapterInfo?.());
      name = [info?.vendor, info?.architecture, info?.description].filter(Boolean).join(' ');
    } catch {}
    return { device, name };
  } catch {
    return null;
  }
}

// Digits (argmax of the logits) for every sample of samples.x, computed on the GPU.
export async function predictAllGPU(device, dir, upload = toGPUBuffer) {
  const w1 = dir.get('fc1.weight');
  const hidden = w1.shape[0];
  const inputs = w1.shape[1];
  const classes = dir.get('fc2.bias').elementCount;
  const xs = dir.get('samples.x');
  const samples = Math.min(xs.shape[0], dir.get('samples.y').elementCount);
  if (hidden > 256) throw new Error(`hidden width ${hidden} is over the shader's 256`);
  const buffers = ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias', 'samples.x'].map((n) => upload(device, dir.get(n)));
  const dims = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(dims, 0, new Uint32Array([inputs, hidden, classes, samples]));
  const outSize = samples * classes * 4;
  const out = device.createBuffer({ size: outSize, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const read = device.createBuffer({ size: outSize, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const pipeline = device.createComputePipeline({
    layout: 'auto',
    compute: { module: device.createShaderModule({ code: SHADER }), entryPoint: 'main' },
  });
  const bind = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [dims, ...buffers, out].map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bind);
  pass.dispatchWorkgroups(Math.ceil(samples / 64));
  pass.end();
  enc.copyBufferToBuffer(out, 0, read, 0, outSize);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const logits = new Float32Array(read.getMappedRange().slice(0));
  read.unmap();
  for (const b of [...buffers, dims, out, read]) b.destroy();
  const digits = [];
  for (let s = 0; s < samples; s++) {
    let best = 0;
    for (let k = 1; k < classes; k++) if (logits[s * classes + k] > logits[s * classes + best]) best = k;
    digits.push(best);
  }
  return digits;
}
