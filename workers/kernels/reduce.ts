// Deterministic reductions of a whole tensor to one element (fixed order: same bits every run).
//   sum:        out[0] = scale * sum(inp)
//   sumSquares: out[0] (+)= sum(inp^2)   (accumulate to combine several tensors for a grad norm)
// fp32 input is read one element at a time; 16-bit input (bf16, fp16) 4 at a time (source.ts),
// n % 4 == 0. The sums are f32 either way.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, precisionFor, scratch, storageWidth } from './util.js';

export interface SumArgs {
  out: GpuTensor; // (1)
  inp: GpuTensor; // (n)
  n: number;
  scale?: number;
}

export interface SumSquaresArgs {
  out: GpuTensor; // (1)
  inp: GpuTensor; // (n)
  n: number;
  accumulate?: boolean;
}

/** Invocations of pass 1 (each sums a strided slice). Depends only on n. */
export function reducePartials(n: number): number {
  return Math.max(1, Math.min(n, 1024));
}

function reduction(
  rt: Runtime,
  op: string,
  out: GpuTensor,
  inp: GpuTensor,
  n: number,
  square: boolean,
  accumulate: boolean,
  scale: number,
): Dispatch[] {
  assertSize(op, 'out', out, 1);
  assertSize(op, 'inp', inp, n);
  assertNoAliasing(op, { out }, { inp });
  const P = reducePartials(n);
  const partial = scratch(rt, 'reduce.partial', P);
  const p = precisionFor(op, { inp });
  const w = p === 'fp32' ? 1 : storageWidth(op, p, n, inp);
  return [
    rt.prepare(
      `${op}.partial ${n}`,
      kernel(rt, w, 'reduce-partial', 'main', p),
      [partial, inp],
      packParams([n / w, P, square ? 1 : 0, 0]),
      [Math.ceil(P / 64)],
    ),
    rt.prepare(
      `${op}.finish ${n}`,
      kernel(rt, 1, 'reduce-finish'),
      [out, partial],
      packParams([P, accumulate ? 1 : 0, { f32: scale }, 0]),
      [1],
    ),
  ];
}

export function sum(rt: Runtime, { out, inp, n, scale = 1 }: SumArgs): Dispatch[] {
  return reduction(rt, 'sum', out, inp, n, false, false, scale);
}

export function sumSquares(rt: Runtime, { out, inp, n, accumulate = false }: SumSquaresArgs): Dispatch[] {
  return reduction(rt, 'sumSquares', out, inp, n, true, accumulate, 1);
}
