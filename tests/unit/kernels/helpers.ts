// Shared by the kernel tests: seeded random data (tests/unit/rng.ts), upload/readback, and the error measure.
import type { Arena, GpuTensor } from '../../../workers/gpu/allocator.js';
import { Allocator } from '../../../workers/gpu/allocator.js';
import type { StoragePrecision } from '../../../workers/gpu/precision.js';
import type { Dispatch, Runtime } from '../../../workers/gpu/runtime.js';

export { rng } from '../rng.js';

export const f64 = (a: Float32Array) => Float64Array.from(a);

/**
 * Tensors for one test, all slices of one arena buffer (as the model allocates them), so the
 * tests also prove kernels never bind one range twice.
 */
export class Bench {
  readonly arena: Arena;
  constructor(
    readonly rt: Runtime,
    shapes: (readonly number[])[],
  ) {
    this.arena = rt.allocator.arena('test', 'workspace', Allocator.arenaBytesFor(shapes));
  }
  /** A slice holding data (or n zeros); a bf16/fp16 slice stores data rounded to its format (the arena is sized for fp32, so 16-bit fits). */
  tensor(name: string, data: Float32Array | Uint32Array | number, precision: StoragePrecision = 'fp32'): GpuTensor {
    const n = typeof data === 'number' ? data : data.length;
    const t = this.arena.alloc(name, [n], precision);
    if (typeof data === 'number') this.rt.write(t, new Float32Array(Math.max(0, n)));
    else if (n > 0) this.rt.write(t, data);
    return t;
  }
  async run(d: Dispatch[]) {
    this.rt.run(d);
    await this.rt.sync();
  }
  read(t: GpuTensor) {
    return this.rt.read(t);
  }
  dispose() {
    this.rt.allocator.destroyArena(this.arena);
  }
}

/** Float32 elements of each shape, for sizing a Bench arena. */
export const sizes = (...ns: number[]) => ns.map((n) => [Math.max(1, n)]);

/**
 * max over i of |gpu_i - ref_i| / max(|ref_i|, floor), floor = floorFrac * max_j |ref_j| (and
 * at least 1e-30). The floor keeps elements that cancel to ~0 from dominating: float32 sums of
 * K terms carry an absolute error proportional to the terms' size, not the result's.
 */
export function relErr(gpu: ArrayLike<number>, ref: ArrayLike<number>, floorFrac = 1e-3): number {
  if (gpu.length < ref.length) throw new Error(`gpu result has ${gpu.length} elements, reference ${ref.length}`);
  let mx = 0;
  for (let i = 0; i < ref.length; i++) mx = Math.max(mx, Math.abs(ref[i]));
  const floor = Math.max(floorFrac * mx, 1e-30);
  let e = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(gpu[i] - ref[i]);
    if (!(d <= e * Math.max(Math.abs(ref[i]), floor)))
      e = Math.max(e, Number.isFinite(d) ? d / Math.max(Math.abs(ref[i]), floor) : Infinity);
  }
  return e;
}

/** Bits of a float32 array, for determinism checks. */
export const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
