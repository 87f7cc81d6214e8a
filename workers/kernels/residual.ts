// Residual-stream and gradient accumulation: dst (n) += src (n).
// Width 4 (source.ts) when n % 4 == 0 and the slices are 16-byte aligned.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, storageWidth } from './util.js';

export interface AddInPlaceArgs {
  dst: GpuTensor; // (n)
  src: GpuTensor; // (n)
  n: number;
}

/** dst += src */
export function addInPlace(rt: Runtime, { dst, src, n }: AddInPlaceArgs): Dispatch[] {
  assertSize('addInPlace', 'dst', dst, n);
  assertSize('addInPlace', 'src', src, n);
  assertNoAliasing('addInPlace', { dst }, { src });
  if (n === 0) return [];
  const p = precisionFor('addInPlace', { dst, src });
  const w = storageWidth('addInPlace', p, n, dst, src);
  return [
    rt.prepare(`addInPlace ${n}`, kernel(rt, w, 'add-inplace', 'main', p), [dst, src], packParams([n / w, 0, 0, 0]), grid(rt, n / w / 256)),
  ];
}
