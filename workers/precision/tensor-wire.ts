// A device tensor on the wire at its own precision, for the model-parallel strategies' traffic:
// tensor parallelism's all-reduces and gathers of activations and their gradients, a pipeline's
// boundary activations and gradients, the tied embedding's gradient. A bf16 or fp16 tensor travels
// as its 16-bit bits (half of fp32's bytes; a collective widens them to f32 to sum and rounds the
// sum back, as writing an f32 sum into the tensor would); an fp32 one (cross-entropy statistics,
// every tensor of an fp32 run) as float32. Device and network only: the core passes the tensor.
import { type GpuTensor, precisionOf } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import type { ProcessGroup, ReduceOp, Tensor } from '../comm/index.js';

type Labels = Record<string, string | number>;

/** The format a tensor's values travel as. */
export function wireDtype(t: GpuTensor): 'float32' | 'float16' | 'bfloat16' {
  const p = precisionOf(t);
  return p === 'bf16' ? 'bfloat16' : p === 'fp16' ? 'float16' : 'float32';
}

/** The tensor's values as they travel (its first `numel`): its 16-bit bits, or float32 (a readback). */
export function readForWire(rt: Runtime, t: GpuTensor, numel = t.numel): Promise<Tensor> {
  return precisionOf(t) === 'fp32' ? rt.read(t, numel) : rt.readBits(t, numel);
}

/** An empty host buffer that receives the tensor's values as they travel. */
export function wireBufferFor(t: GpuTensor): Tensor {
  return precisionOf(t) === 'fp32' ? new Float32Array(t.numel) : new Uint16Array(t.numel);
}

/**
 * Reduce `t` over the group in place (device -> host -> collective -> device); `numel`: only its
 * first elements (the rest is padding, zeros on every rank, which stays home).
 */
export async function allReduceTensor(
  rt: Runtime,
  pg: ProcessGroup,
  t: GpuTensor,
  o: { op?: ReduceOp; labels: Labels; numel?: number },
): Promise<void> {
  if (o.numel === 0) return;
  const data = await readForWire(rt, t, o.numel);
  await pg.allReduce(data, { op: o.op ?? 'sum', dtype: wireDtype(t), labels: o.labels }).wait();
  rt.write(t, data);
}

/** `full` = every rank's `own` (equal sizes, the same precision) concatenated in rank order. */
export async function allGatherTensor(rt: Runtime, pg: ProcessGroup, own: GpuTensor, full: GpuTensor, labels: Labels): Promise<void> {
  const mine = await readForWire(rt, own);
  const output = mine instanceof Float32Array ? new Float32Array(mine.length * pg.size) : new Uint16Array(mine.length * pg.size);
  rt.write(full, await pg.allGather(mine, { output, dtype: wireDtype(own), labels }).wait());
}
