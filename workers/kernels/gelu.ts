// GELU with the tanh approximation, exactly PyTorch's GELU(approximate='tanh').
//   forward:  out (n) = gelu(inp (n))
//   backward: dinp (n) = dout * gelu'(inp)   (overwrites dinp; dinp may be the same tensor as dout)
// The *-vec4.wgsl kernels run when n % 4 == 0 (a quarter of the storage accesses).
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { assertNoAliasing, assertSize, grid, sameTensor, vec4Ok, wgsl } from './util.js';

export interface GeluForwardArgs {
  out: GpuTensor; // (n)
  inp: GpuTensor; // (n)
  n: number;
}

export interface GeluBackwardArgs {
  dinp: GpuTensor; // (n) overwritten
  inp: GpuTensor; // (n)
  dout: GpuTensor; // (n)
  n: number;
}

export function geluForward(rt: Runtime, { out, inp, n }: GeluForwardArgs): Dispatch[] {
  assertSize('geluForward', 'out', out, n);
  assertSize('geluForward', 'inp', inp, n);
  assertNoAliasing('geluForward', { out }, { inp });
  if (n === 0) return [];
  if (vec4Ok(n, out, inp))
    return [
      rt.prepare(
        `geluForward ${n}`,
        rt.compile('gelu-vec4', wgsl('gelu-vec4')),
        [out, inp],
        packParams([n / 4, 0, 0, 0]),
        grid(rt, n / 4 / 256),
      ),
    ];
  return [rt.prepare(`geluForward ${n}`, rt.compile('gelu', wgsl('gelu')), [out, inp], packParams([n, 0, 0, 0]), grid(rt, n / 256))];
}

export function geluBackward(rt: Runtime, { dinp, inp, dout, n }: GeluBackwardArgs): Dispatch[] {
  assertSize('geluBackward', 'dinp', dinp, n);
  assertSize('geluBackward', 'inp', inp, n);
  assertSize('geluBackward', 'dout', dout, n);
  if (n === 0) return [];
  if (sameTensor(dinp, dout)) {
    assertNoAliasing('geluBackward', { dinp }, { inp });
    if (vec4Ok(n, dinp, inp)) {
      return [
        rt.prepare(
          `geluBackward.inplace ${n}`,
          rt.compile('gelu-backward-inplace-vec4', wgsl('gelu-backward-inplace-vec4')),
          [dinp, inp],
          packParams([n / 4, 0, 0, 0]),
          grid(rt, n / 4 / 256),
        ),
      ];
    }
    return [
      rt.prepare(
        `geluBackward.inplace ${n}`,
        rt.compile('gelu-backward-inplace', wgsl('gelu-backward-inplace')),
        [dinp, inp],
        packParams([n, 0, 0, 0]),
        grid(rt, n / 256),
      ),
    ];
  }
  assertNoAliasing('geluBackward', { dinp }, { inp, dout });
  if (vec4Ok(n, dinp, inp, dout)) {
    return [
      rt.prepare(
        `geluBackward ${n}`,
        rt.compile('gelu-backward-vec4', wgsl('gelu-backward-vec4')),
        [dinp, inp, dout],
        packParams([n / 4, 0, 0, 0]),
        grid(rt, n / 4 / 256),
      ),
    ];
  }
  return [
    rt.prepare(
      `geluBackward ${n}`,
      rt.compile('gelu-backward', wgsl('gelu-backward')),
      [dinp, inp, dout],
      packParams([n, 0, 0, 0]),
      grid(rt, n / 256),
    ),
  ];
}
