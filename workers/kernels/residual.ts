// Residual-stream and gradient arithmetic: out = a + b, dst += src, x *= factor.
// The *-vec4.wgsl kernels run when n % 4 == 0 (a quarter of the storage accesses).
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { assertNoAliasing, assertSize, grid, sameTensor, vec4Ok, wgsl } from './util.js';

export interface AddArgs {
  out: GpuTensor; // (n)
  a: GpuTensor; // (n)
  b: GpuTensor; // (n)
  n: number;
}

export interface AddInPlaceArgs {
  dst: GpuTensor; // (n)
  src: GpuTensor; // (n)
  n: number;
}

export interface ScaleArgs {
  x: GpuTensor; // (n)
  n: number;
  factor: number;
}

/** out = a + b. out may be the same tensor as a or b (then it runs as addInPlace). */
export function add(rt: Runtime, { out, a, b, n }: AddArgs): Dispatch[] {
  assertSize('add', 'out', out, n);
  assertSize('add', 'a', a, n);
  assertSize('add', 'b', b, n);
  if (sameTensor(out, a) && !sameTensor(out, b)) return addInPlace(rt, { dst: out, src: b, n });
  if (sameTensor(out, b) && !sameTensor(out, a)) return addInPlace(rt, { dst: out, src: a, n });
  if (sameTensor(out, a)) return scale(rt, { x: out, n, factor: 2 });
  assertNoAliasing('add', { out }, { a, b });
  if (n === 0) return [];
  if (vec4Ok(n, out, a, b))
    return [
      rt.prepare(`add ${n}`, rt.compile('add-vec4', wgsl('add-vec4')), [out, a, b], packParams([n / 4, 0, 0, 0]), grid(rt, n / 4 / 256)),
    ];
  return [rt.prepare(`add ${n}`, rt.compile('add', wgsl('add')), [out, a, b], packParams([n, 0, 0, 0]), grid(rt, n / 256))];
}

/** dst += src */
export function addInPlace(rt: Runtime, { dst, src, n }: AddInPlaceArgs): Dispatch[] {
  assertSize('addInPlace', 'dst', dst, n);
  assertSize('addInPlace', 'src', src, n);
  assertNoAliasing('addInPlace', { dst }, { src });
  if (n === 0) return [];
  if (vec4Ok(n, dst, src))
    return [
      rt.prepare(
        `addInPlace ${n}`,
        rt.compile('add-inplace-vec4', wgsl('add-inplace-vec4')),
        [dst, src],
        packParams([n / 4, 0, 0, 0]),
        grid(rt, n / 4 / 256),
      ),
    ];
  return [
    rt.prepare(`addInPlace ${n}`, rt.compile('add-inplace', wgsl('add-inplace')), [dst, src], packParams([n, 0, 0, 0]), grid(rt, n / 256)),
  ];
}

/** x *= factor, in place. */
export function scale(rt: Runtime, { x, n, factor }: ScaleArgs): Dispatch[] {
  assertSize('scale', 'x', x, n);
  if (n === 0) return [];
  if (vec4Ok(n, x))
    return [
      rt.prepare(
        `scale ${n}`,
        rt.compile('scale-vec4', wgsl('scale-vec4')),
        [x],
        packParams([n / 4, { f32: factor }, 0, 0]),
        grid(rt, n / 4 / 256),
      ),
    ];
  return [rt.prepare(`scale ${n}`, rt.compile('scale', wgsl('scale')), [x], packParams([n, { f32: factor }, 0, 0]), grid(rt, n / 256))];
}
