// Layernorm over the last dimension (rows N = B*T), PyTorch semantics: biased variance, eps 1e-5.
//   forward:  out (N, C), mean (N), rstd (N) from inp (N, C), weight (C), bias (C)
//   backward: dinp += , dweight += , dbias += (all three accumulate), deterministic
// Width 4 (source.ts) when C % 4 == 0 and the slices are 16-byte aligned, except backward pass 1
// (dinp), which runs at width 1: at width 4 its row sums add in another order (four lane sums,
// then across the lanes), which would change the bits of every training run.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { colsumChunkRows } from './bias-backward.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, scratch, storageWidth } from './util.js';

/** The row length, named in a refused 16-bit launch (util.ts storageWidth). */
const dModel = (C: number) => ({ name: 'C (d_model)', n: C });

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
  const p = precisionFor(op, { out, inp, weight, bias });
  return [
    rt.prepare(
      `layernormForward ${N}x${C}`,
      kernel(rt, storageWidth(op, p, dModel(C), out, inp, weight, bias), 'layernorm', 'main', p),
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
  const p = precisionFor(op, { dinp, dweight, dbias, dout, inp, weight });
  // pass 2 and the finish sum each column in the same order at either width
  const w = storageWidth(op, p, dModel(C), dweight, dbias, dout, inp, partial);
  const cols = Math.ceil(C / w / 64);
  const finish = kernel(rt, w, 'colsum-finish', 'main', p);
  // fp32: pass 1 at width 1 (the header's bits); 16-bit storage is read 4 at a time
  const wDinp = p === 'fp32' ? 1 : storageWidth(op, p, dModel(C), dinp, dout, inp, weight);
  return [
    rt.prepare(
      `layernormBackward.dinp ${N}x${C}`,
      kernel(rt, wDinp, 'layernorm-backward', 'main', p),
      [dinp, dout, inp, weight, mean, rstd],
      packParams([N, C, 0, 0]),
      grid(rt, N / 64),
    ),
    rt.prepare(
      `layernormBackward.partial ${N}x${C}`,
      kernel(rt, w, 'layernorm-params-backward', 'main', p),
      [partial, dout, inp, mean, rstd],
      packParams([N, C, rows, R]),
      [cols, R],
    ),
    rt.prepare(`layernormBackward.dweight ${C}`, finish, [dweight, partial], packParams([C, R, 1, 0]), [cols]),
    rt.prepare(`layernormBackward.dbias ${C}`, finish, [dbias, partial], packParams([C, R, 1, (R * C) / w]), [cols]),
  ];
}
