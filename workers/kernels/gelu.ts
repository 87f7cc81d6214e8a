// GELU with the tanh approximation, exactly PyTorch's GELU(approximate='tanh').
//   forward:  out (n) = gelu(inp (n))
//   backward: dinp (n) = dout * gelu'(inp), in place: dinp is the tensor holding dout (the
//             model's MLP overwrites its gradient buffer)
// Width 4 (source.ts) when n % 4 == 0 and the slices are 16-byte aligned (always, for 16-bit storage).
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, sameTensor, storageWidth } from './util.js';

export interface GeluForwardArgs {
  out: GpuTensor; // (n)
  inp: GpuTensor; // (n)
  n: number;
}

export interface GeluBackwardArgs {
  dinp: GpuTensor; // (n) overwritten; the same tensor as dout
  inp: GpuTensor; // (n)
  dout: GpuTensor; // (n)
  n: number;
}

export function geluForward(rt: Runtime, { out, inp, n }: GeluForwardArgs): Dispatch[] {
  assertSize('geluForward', 'out', out, n);
  assertSize('geluForward', 'inp', inp, n);
  assertNoAliasing('geluForward', { out }, { inp });
  if (n === 0) return [];
  const p = precisionFor('geluForward', { out, inp });
  const w = storageWidth('geluForward', p, n, out, inp);
  return [
    rt.prepare(`geluForward ${n}`, kernel(rt, w, 'gelu', 'main', p), [out, inp], packParams([n / w, 0, 0, 0]), grid(rt, n / w / 256)),
  ];
}

export function geluBackward(rt: Runtime, { dinp, inp, dout, n }: GeluBackwardArgs): Dispatch[] {
  assertSize('geluBackward', 'dinp', dinp, n);
  assertSize('geluBackward', 'inp', inp, n);
  assertSize('geluBackward', 'dout', dout, n);
  if (!sameTensor(dinp, dout)) {
    throw new Error(
      `geluBackward: dinp (${dinp.name}) and dout (${dout.name}) are different tensors; the kernel runs in place. ---> HINT: pass dout as dinp (it is overwritten with dinp)`,
    );
  }
  assertNoAliasing('geluBackward', { dinp }, { inp });
  if (n === 0) return [];
  const p = precisionFor('geluBackward', { dinp, inp });
  const w = storageWidth('geluBackward', p, n, dinp, inp);
  return [
    rt.prepare(
      `geluBackward.inplace ${n}`,
      kernel(rt, w, 'gelu-backward', 'main', p),
      [dinp, inp],
      packParams([n / w, 0, 0, 0]),
      grid(rt, n / w / 256),
    ),
  ];
}
