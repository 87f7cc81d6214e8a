// One rank's training step as the sharing measurement runs it (profile-sharing.ts): what k ranks
// on one adapter each do per step, so that their aggregate throughput is measured the way a rank
// really runs, not kernel by kernel. The launches of a step at micro-batch b (profile-kernels.ts
// stepCases at B = b, each case once, in the model's order: forward, the loss and its gradient,
// backward), then the host readback a step waits on before its update (the gradient norm: clipping
// and the fp16 overflow verdict), the optimizer, and the loss read back:
//   recorded launches -> flush -> device works; host waits (Dawn polls every 1 ms)
//   read 1 float (map)  -> host round trip: the adapter idles in this process
//   adamw -> read the loss -> host round trip
// One process leaves the adapter idle while it encodes its launches and during every round trip;
// a second process fills those gaps, which timing one kernel back to back cannot see.
import { FLOP_OPS } from '../../common/advisor/time.js';
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { type KernelShape, prepareCase, stepCases } from './profile-kernels.js';

export interface StepSequence {
  /** the micro-batch the sequence runs */
  b: number;
  /** launches in one step (dispatches) */
  launches: number;
  /** the mean FLOPs of one matmul or attention case: the size the time model interpolates the speedup by */
  flopsPerLaunch: number;
  /** one step: its launches, the norm's readback, the update, the loss's readback */
  round(): Promise<void>;
  free(): void;
}

/**
 * The micro-batches k ranks sharing the adapter run at a batch of B: B/k (each data-parallel rank's
 * share; a k-stage pipeline's k micro-batches) and B/4k (the deepest pipeline the advisor offers,
 * 4p micro-batches), at least 1; the time model interpolates between them by size.
 */
export function stepBatches(B: number, k: number): number[] {
  return [...new Set([Math.max(1, Math.floor(B / k)), Math.max(1, Math.floor(B / (4 * k)))])];
}

/** The step sequence of `shape` at micro-batch b, prepared on rt (its buffers allocated; `free` returns them). */
export function prepareStep(rt: Runtime, shape: KernelShape, b: number): StepSequence {
  const cases = stepCases({ ...shape, B: b });
  const update = cases.filter((c) => c.op === 'adamw');
  const work = cases.filter((c) => c.op !== 'adamw');
  const prepared: { dispatches: Dispatch[]; free(): void }[] = [];
  const scalars: GpuTensor[] = [];
  const free = () => {
    for (const p of prepared) p.free();
    for (const t of scalars) rt.allocator.free(t);
  };
  try {
    for (const c of [...work, ...update]) prepared.push(prepareCase(rt, c));
    const norm = rt.allocator.tensor('profile.step.norm', 'workspace', [1]);
    scalars.push(norm);
    const loss = rt.allocator.tensor('profile.step.loss', 'workspace', [1]);
    scalars.push(loss);
    const fwdBwd = prepared.slice(0, work.length).flatMap((p) => p.dispatches);
    const opt = prepared.slice(work.length).flatMap((p) => p.dispatches);
    const flopCases = cases.filter((c) => FLOP_OPS.has(c.op));
    return {
      b,
      launches: fwdBwd.length + opt.length,
      flopsPerLaunch: flopCases.reduce((s, c) => s + c.flops, 0) / Math.max(1, flopCases.length),
      async round() {
        rt.run(fwdBwd);
        await rt.read(norm, 1);
        rt.run(opt);
        await rt.read(loss, 1);
      },
      free,
    };
  } catch (e) {
    free();
    throw e;
  }
}
