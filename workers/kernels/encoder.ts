// Token + position embedding, forward and backward.
//   forward:  out (B, T, C) = wte[idx[b, t]] + wpe[t]; idx u32 (B, T); wte (V, C); wpe (maxT, C), maxT >= T
//   backward: dwte += scatter of dout by token id, dwpe += dout summed over B. No atomics: pass 1
//   links equal token ids into chains, pass 2 sums each chain in position order (same bits every run).
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, scratch } from './util.js';

export interface EncoderForwardArgs {
  out: GpuTensor; // (B, T, C)
  idx: GpuTensor; // u32 (B, T)
  wte: GpuTensor; // (V, C)
  wpe: GpuTensor; // (maxT, C)
  B: number;
  T: number;
  C: number;
}

export interface EncoderBackwardArgs {
  dwte: GpuTensor; // (V, C), accumulated into
  dwpe: GpuTensor; // (maxT, C), accumulated into
  dout: GpuTensor; // (B, T, C)
  idx: GpuTensor; // u32 (B, T)
  B: number;
  T: number;
  C: number;
  V: number;
}

export function encoderForward(rt: Runtime, { out, idx, wte, wpe, B, T, C }: EncoderForwardArgs): Dispatch[] {
  const op = 'encoderForward';
  assertSize(op, 'out', out, B * T * C);
  assertSize(op, 'idx', idx, B * T);
  assertSize(op, 'wpe', wpe, T * C);
  assertNoAliasing(op, { out }, { idx, wte, wpe });
  const n = B * T * C;
  if (n === 0) return [];
  return [
    rt.prepare(
      `encoderForward ${B}x${T}x${C}`,
      kernel(rt, 1, 'encoder'),
      [out, idx, wte, wpe],
      packParams([B * T, T, C, 0]),
      grid(rt, n / 256),
    ),
  ];
}

export function encoderBackward(rt: Runtime, { dwte, dwpe, dout, idx, B, T, C, V }: EncoderBackwardArgs): Dispatch[] {
  const op = 'encoderBackward';
  assertSize(op, 'dwte', dwte, V * C);
  assertSize(op, 'dwpe', dwpe, T * C);
  assertSize(op, 'dout', dout, B * T * C);
  assertSize(op, 'idx', idx, B * T);
  assertNoAliasing(op, { dwte, dwpe }, { dout, idx });
  const BT = B * T;
  if (BT * C === 0) return [];
  const links = scratch(rt, 'encoder.links', 2 * BT);
  return [
    rt.prepare(`encoderBackward.links ${BT}`, kernel(rt, 1, 'encoder-links'), [links, idx], packParams([BT, 0, 0, 0]), grid(rt, BT / 64)),
    rt.prepare(
      `encoderBackward ${B}x${T}x${C}`,
      kernel(rt, 1, 'encoder-backward'),
      [dwte, dwpe, dout, idx, links],
      packParams([BT, T, C, B]),
      grid(rt, (BT * C + T * C) / 64),
    ),
  ];
}
