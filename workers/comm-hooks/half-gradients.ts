// Gradients on the wire in 16 bits (fp16 or bf16): the cast of PyTorch's fp16/bf16_compress_hook
// (DDP, half-compress.ts) and ZeRO's 16-bit gradient reduce-scatter (workers/parallel/zero1.ts,
// zero2.ts). The process group sums 16-bit payloads by widening every hop to float32 and rounding
// the partial sum back to nearest even (workers/comm/host-memory/dtype.ts), so a reduce-scatter of
// N ranks rounds N-1 times; the own block is widened into float32 for the fp32 optimizer shard.
// Gradients that already live in 16 bits (a bf16/fp16 run's) skip the cast and call
// reduceScatterHalf on their bits directly.
import { narrowArray, type ProcessGroup, widenArray } from '../comm/index.js';
import { CompressionCounter, compressionReport } from './hook.js';

export type HalfDType = 'float16' | 'bfloat16';

/**
 * float32 -> 16-bit patterns (round to nearest even), into `out` (allocated when absent or of
 * another length). The comm layer's casts: WebAssembly SIMD, ~10x the JS loop's 8-9 ns an element.
 */
export function narrowGradients(src: Float32Array, dtype: HalfDType, out?: Uint16Array): Uint16Array {
  return narrowArray(src, dtype, out && out.length === src.length ? out : new Uint16Array(src.length));
}

/** 16-bit patterns -> float32 (exact), into `out` (allocated when absent). */
export function widenGradients(bits: Uint16Array, dtype: HalfDType, out: Float32Array = new Float32Array(bits.length)): Float32Array {
  widenArray(bits, dtype, out.length === bits.length ? out : out.subarray(0, bits.length));
  return out;
}

/**
 * Reduce-scatter (sum) of this rank's 16-bit gradients `bits` (`counts[r]` elements to rank r):
 * half the bytes of float32 on the wire; returns this rank's summed block widened to float32.
 */
export async function reduceScatterHalf(
  pg: ProcessGroup,
  bits: Uint16Array,
  o: { dtype: HalfDType; counts: readonly number[]; labels?: Record<string, string | number> },
): Promise<Float32Array> {
  const mine = await pg.reduceScatter(bits, { op: 'sum', dtype: o.dtype, counts: o.counts, labels: o.labels }).wait();
  return widenGradients(mine, o.dtype);
}

/** ZeRO-1/2's gradient reduce-scatter under fp16/bf16 compression (parallel.grad_compression), counting what it sent against float32. */
export class HalfReduceScatter {
  readonly dtype: HalfDType;
  private readonly counter = new CompressionCounter();

  constructor(readonly hook: 'fp16' | 'bf16') {
    this.dtype = hook === 'fp16' ? 'float16' : 'bfloat16';
  }

  /** this rank's float32 gradients `grads`, summed over the group in 16 bits; returns its block (counts[r] elements to rank r) */
  run(pg: ProcessGroup, grads: Float32Array, counts: readonly number[], labels: Record<string, string | number>): Promise<Float32Array> {
    const bits = narrowGradients(grads, this.dtype);
    this.counter.add(grads.length, bits.byteLength);
    return reduceScatterHalf(pg, bits, { dtype: this.dtype, counts, labels: { ...labels, compression: this.hook } });
  }

  /** the run summary's compression figures */
  summary() {
    return { grad_compression: compressionReport(this.hook, this.counter.report()) };
  }
}
