// Layernorm over the last dimension (rows N = B*T), PyTorch semantics: biased variance, eps 1e-5.
//   forward:  out (N, C), mean (N), rstd (N) from inp (N, C), weight (C), bias (C)
//   backward: dinp += , dweight += , dbias += (all three accumulate), deterministic
// The *-vec4.wgsl kernels run when C % 4 == 0.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { colsumChunkRows } from './bias-backward.js';
import { assertNoAliasing, assertSize, grid, scratch, vec4Ok, wgsl } from './util.js';

export interface LayernormForwardArgs {
  out: GpuTensor; // (N, C)
  mean: GpuTensor; // (N)
  rstd: GpuTensor; // (N)
  inp: GpuTensor; // (N, C)
  weight: GpuTensor; // (C)
  bias: GpuTensor; // (C)
  N: number;
  C: number;
  eps?: number;
}

export interface LayernormBackwardArgs {
  dinp: GpuTensor; // (N, C) accumulated into
  dweight: GpuTensor; // (C) accumulated into
  dbias: GpuTensor; // (C) accumulated into
  dout: GpuTensor; // (N, C)
  inp: GpuTensor; // (N, C)
  weight: GpuTensor; // (C)
  mean: GpuTensor; // (N)
  rstd: GpuTensor; // (N)
  N: number;
  C: number;
}

export function layernormForward(rt: Runtime, { out, mean, rstd, inp, weight, bias, N, C, eps = 1e-5 }: LayernormForwardArgs): Dispatch[] {
  const op = 'layernormForward';
  assertSize(op, 'out', out, N * C);
  assertSize(op, 'mean', mean, N);
  assertSize(op, 'rstd', rstd, N);
  assertSize(op, 'inp', inp, N * C);
  assertSize(op, 'weight', weight, C);
  assertSize(op, 'bias', bias, C);
  assertNoAliasing(op, { out, mean, rstd }, { inp, weight, bias });
  if (N === 0 || C === 0) return [];
  const name = vec4Ok(C, out, inp, weight, bias) ? 'layernorm-vec4' : 'layernorm';
  return [
    rt.prepare(
      `layernormForward ${N}x${C}`,
      rt.compile(name, wgsl(name)),
      [out, mean, rstd, inp, weight, bias],
      packParams([N, C, { f32: eps }, 0]),
      grid(rt, N / 64),
    ),
  ];
}

export function layernormBackward(
  rt: Runtime,
  { dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C }: LayernormBackwardArgs,
): Dispatch[] {
  const op = 'layernormBackward';
  assertSize(op, 'dinp', dinp, N * C);
  assertSize(op, 'dweight', dweight, C);
  assertSize(op, 'dbias', dbias, C);
  assertSize(op, 'dout', dout, N * C);
  assertSize(op, 'inp', inp, N * C);
  assertSize(op, 'weight', weight, C);
  assertSize(op, 'mean', mean, N);
  assertSize(op, 'rstd', rstd, N);
  assertNoAliasing(op, { dinp, dweight, dbias }, { dout, inp, weight, mean, rstd });
  if (N === 0 || C === 0) return [];
  const rows = colsumChunkRows(N);
  const R = Math.ceil(N / rows);
  const partial = scratch(rt, 'layernorm.partial', 2 * R * C);
  const finish = rt.compile('colsum-finish', wgsl('colsum-finish'));

  return [
    rt.prepare(
      `layernormBackward.dinp ${N}x${C}`,
      rt.compile('layernorm-backward', wgsl('layernorm-backward')),
      [dinp, dout, inp, weight, mean, rstd],
      packParams([N, C, 0, 0]),
      grid(rt, N / 64),
    ),
    rt.prepare(
      `layernormBackward.partial ${N}x${C}`,
      rt.compile('layernorm-params-backward', wgsl('layernorm-params-backward')),
      [partial, dout, inp, mean, rstd],
      packParams([N, C, rows, R]),
      [Math.ceil(C / 64), R],
    ),
    rt.prepare(`layernormBackward.dweight ${C}`, finish, [dweight, partial], packParams([C, R, 1, 0]), [Math.ceil(C / 64)]),
    rt.prepare(`layernormBackward.dbias ${C}`, finish, [dbias, partial], packParams([C, R, 1, R * C]), [Math.ceil(C / 64)]),
  ];
}
