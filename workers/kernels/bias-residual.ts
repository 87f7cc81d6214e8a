// The output of a row-parallel linear after its all-reduce: out = res + (sum + bias), the bias
// added once (not once per rank) and the residual stream joined in the same pass.
// out, res, sum and bias are compute-precision tensors (one precision); W elements per
// invocation (source.ts), width 4 when C % 4 == 0, which 16-bit storage needs.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, storageWidth } from './util.js';

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
  const p = precisionFor(op, { out, res, sum, bias });
  const w = storageWidth(op, p, { name: 'C (d_model)', n: C }, out, res, sum, bias);
  return [
    rt.prepare(
      `biasResidual ${N}x${C}`,
      kernel(rt, w, 'bias-residual', 'main', p),
      [out, res, sum, bias],
      packParams([n / w, C / w, 0, 0]),
      grid(rt, n / w / 256),
    ),
  ];
}
