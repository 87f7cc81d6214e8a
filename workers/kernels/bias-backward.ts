// Gradient of a bias broadcast over rows: dbias (N) [+]= column sums of dout (M, N).
// Two passes in a fixed order (row chunks, then the chunks of each column), so the result
// has the same bits on every run.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, precisionFor, scratch, storageWidth } from './util.js';

export interface BiasBackwardArgs {
  dbias: GpuTensor; // (N)
  dout: GpuTensor; // (M, N)
  M: number;
  N: number;
  /** dbias += sums instead of dbias = sums */
  accumulate?: boolean;
}

/** Rows per chunk of the first pass: enough chunks to keep both passes short. */
export function colsumChunkRows(M: number): number {
  return Math.max(16, Math.ceil(M / 64));
}

export function biasBackward(rt: Runtime, { dbias, dout, M, N, accumulate }: BiasBackwardArgs): Dispatch[] {
  const op = 'biasBackward';
  assertSize(op, 'dbias', dbias, N);
  assertSize(op, 'dout', dout, M * N);
  assertNoAliasing(op, { dbias }, { dout });
  if (N === 0) return [];
  const rows = colsumChunkRows(M);
  const R = Math.max(1, Math.ceil(M / rows));
  const partial = scratch(rt, 'colsum.partial', R * N);
  // W columns per invocation (source.ts): width 4 when N % 4 == 0
  const p = precisionFor(op, { dbias, dout });
  const w = storageWidth(op, p, { name: 'N (the bias length)', n: N }, dbias, dout, partial);
  const cols = Math.ceil(N / w / 64);
  return [
    rt.prepare(`biasBackward.partial ${M}x${N}`, kernel(rt, w, 'bias-backward', 'main', p), [partial, dout], packParams([M, N, rows, R]), [
      cols,
      R,
    ]),
    rt.prepare(
      `biasBackward.finish ${N}`,
      kernel(rt, w, 'colsum-finish', 'main', p),
      [dbias, partial],
      packParams([N, R, accumulate ? 1 : 0, 0]),
      [cols],
    ),
  ];
}
