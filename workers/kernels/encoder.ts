// Token + position embedding, forward and backward, on one device or on one rank of a
// vocab-parallel group (vocab-parallel.ts), which holds token rows [vStart, vStart + Vl):
// the same two kernels, the single device holding every row.
//   forward:  out (B, T, C) = wte[idx[b, t]] + wpe[t]; idx u32 (B, T); wte (V, C); wpe (maxT, C), maxT >= T
//   backward: dwte += scatter of dout by token id, dwpe += dout summed over B. No atomics: pass 1
//   links equal token ids into chains, pass 2 sums each chain in position order (same bits every run).
// wte, wpe, out, dwte, dwpe and dout are compute-precision tensors (one precision; idx stays u32).
// W columns per invocation (source.ts), width 4 when C % 4 == 0, which 16-bit storage needs. The
// backward sums each token's chain (and each position's column over B) in f32 and adds it to the
// gradient once, so a 16-bit dwte row that several positions update is rounded once per call.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, scratch, storageWidth } from './util.js';

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

/** The token rows a table holds: ids vStart .. vStart + Vl - 1 (all of them on one device). */
export interface VocabRange {
  /** first vocabulary id of this rank's rows */
  vStart: number;
  /** rows of this rank (the padded vocabulary / TP size) */
  Vl: number;
}

/** One table's part of the embedding: wte holds rows vStart .. vStart + Vl - 1 of the token table. */
export type EmbeddingForwardArgs = EncoderForwardArgs &
  VocabRange & {
    /** add the position row (exactly one rank of a vocab-parallel group does) */
    addPositions: boolean;
  };

/** dwte (Vl, C) accumulates the rows vStart .. vStart + Vl - 1. */
export type EmbeddingBackwardArgs = Omit<EncoderBackwardArgs, 'V'> & VocabRange;

export function encoderForward(rt: Runtime, { out, idx, wte, wpe, B, T, C }: EncoderForwardArgs): Dispatch[] {
  const Vl = C > 0 ? Math.floor(wte.numel / C) : 0;
  return embeddingForward(rt, 'encoderForward', { out, idx, wte, wpe, B, T, C, vStart: 0, Vl, addPositions: true });
}

export function encoderBackward(rt: Runtime, { dwte, dwpe, dout, idx, B, T, C, V }: EncoderBackwardArgs): Dispatch[] {
  return embeddingBackward(rt, 'encoderBackward', { dwte, dwpe, dout, idx, B, T, C, vStart: 0, Vl: V });
}

/** out = own token rows (0 for ids outside vStart .. vStart + Vl - 1) [+ wpe]. */
export function embeddingForward(rt: Runtime, op: string, a: EmbeddingForwardArgs): Dispatch[] {
  const { out, idx, wte, wpe, B, T, C, vStart, Vl } = a;
  assertSize(op, 'out', out, B * T * C);
  assertSize(op, 'idx', idx, B * T);
  assertSize(op, 'wte', wte, Vl * C);
  assertSize(op, 'wpe', wpe, T * C);
  assertNoAliasing(op, { out }, { idx, wte, wpe });
  const n = B * T * C;
  if (n === 0) return [];
  const p = precisionFor(op, { out, wte, wpe });
  const w = storageWidth(op, p, { name: 'C (d_model)', n: C }, out, wte, wpe);
  return [
    rt.prepare(
      `${op} ${B}x${T}x${C} v${vStart}+${Vl}`,
      kernel(rt, w, 'encoder', 'main', p),
      [out, idx, wte, wpe],
      packParams([B * T, T, C, vStart, Vl, a.addPositions ? 1 : 0, 0, 0]),
      grid(rt, n / w / 256),
    ),
  ];
}

/** dwte (Vl, C) += dout scattered over own tokens; dwpe += dout summed over B (on every rank). */
export function embeddingBackward(rt: Runtime, op: string, a: EmbeddingBackwardArgs): Dispatch[] {
  const { dwte, dwpe, dout, idx, B, T, C, vStart, Vl } = a;
  assertSize(op, 'dwte', dwte, Vl * C);
  assertSize(op, 'dwpe', dwpe, T * C);
  assertSize(op, 'dout', dout, B * T * C);
  assertSize(op, 'idx', idx, B * T);
  assertNoAliasing(op, { dwte, dwpe }, { dout, idx });
  const BT = B * T;
  if (BT * C === 0) return [];
  const p = precisionFor(op, { dwte, dwpe, dout });
  const w = storageWidth(op, p, { name: 'C (d_model)', n: C }, dwte, dwpe, dout);
  const links = scratch(rt, 'encoder.links', 2 * BT);
  return [
    rt.prepare(`encoderBackward.links ${BT}`, kernel(rt, 1, 'encoder-links'), [links, idx], packParams([BT, 0, 0, 0]), grid(rt, BT / 64)),
    rt.prepare(
      `${op} ${B}x${T}x${C} v${vStart}+${Vl}`,
      kernel(rt, w, 'encoder-backward', 'main', p),
      [dwte, dwpe, dout, idx, links],
      packParams([BT, T, C, B, vStart, Vl, 0, 0]),
      grid(rt, (BT * C + T * C) / w / 64),
    ),
  ];
}
