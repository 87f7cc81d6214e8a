// Precision cast: out (n) = inp (n), fp32 in, out at its own storage precision (bf16 or fp16:
// rounded to nearest even; fp32: a copy). Mixed precision derives the 16-bit compute copy of the
// weights from the fp32 master with it after every optimizer step.
import { type GpuTensor, precisionOf } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, storageWidth } from './util.js';

export interface CastArgs {
  out: GpuTensor; // (n) bf16, fp16 or fp32
  inp: GpuTensor; // (n) fp32
  n: number;
}

export function cast(rt: Runtime, { out, inp, n }: CastArgs): Dispatch[] {
  const op = 'cast';
  assertSize(op, 'out', out, n);
  assertSize(op, 'inp', inp, n);
  if (precisionOf(inp) !== 'fp32') throw new Error(`cast: inp (${inp.name}) is ${precisionOf(inp)}; cast reads fp32 (the master weights)`);
  assertNoAliasing(op, { out }, { inp });
  if (n === 0) return [];
  const p = precisionOf(out);
  const w = storageWidth(op, p, n, out, inp);
  return [
    rt.prepare(`cast ${n} fp32->${p}`, kernel(rt, w, 'cast', 'main', p), [out, inp], packParams([n / w, 0, 0, 0]), grid(rt, n / w / 256)),
  ];
}
