// The output of a row-parallel linear after its all-reduce: out = res + (sum + bias), the bias
// added once (not once per rank) and the residual stream joined in the same pass.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid } from './util.js';

export interface BiasResidualArgs {
  out: GpuTensor; // (N, C)
  res: GpuTensor; // (N, C)
  sum: GpuTensor; // (N, C)
  bias: GpuTensor; // (C)
  N: number;
  C: number;
}

export function biasResidual(rt: Runtime, { out, res, sum, bias, N, C }: BiasResidualArgs): Dispatch[] {
  const op = 'biasResidual';
  assertSize(op, 'out', out, N * C);
  assertSize(op, 'res', res, N * C);
  assertSize(op, 'sum', sum, N * C);
  assertSize(op, 'bias', bias, C);
  assertNoAliasing(op, { out }, { res, sum, bias });
  const n = N * C;
  if (n === 0) return [];
  return [
    rt.prepare(
      `biasResidual ${N}x${C}`,
      kernel(rt, 1, 'bias-residual'),
      [out, res, sum, bias],
      packParams([n, C, 0, 0]),
      grid(rt, n / 256),
    ),
  ];
}
