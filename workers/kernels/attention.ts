// Causal multi-head self-attention on a fused qkv projection, scale 1/sqrt(hs).
//   qkv (B, T, 3C) is laid out per token as [q (C) | k (C) | v (C)]; head h uses columns
//   h*hs .. (h+1)*hs of each block, hs = C / NH.
//   forward:  out (B, T, C), att (B, NH, T, T) softmax probabilities (0 above the diagonal), saved for backward
//   backward: dqkv (B, T, 3C) overwritten, from dout (B, T, C), qkv, att
// The backward keeps the score gradients in a (B, NH, T, T) workspace shared by all layers.
// Width 4 (source.ts: vec4 loads along each head's rows) when hs % 4 == 0, else width 1.
// 16-bit storage (qkv, out, dout, dqkv; att stays f32) needs width 4.
import type { GpuTensor } from '../gpu/allocator.js';
import type { StoragePrecision } from '../gpu/precision.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel, type Width } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, scratch } from './util.js';

export interface AttentionForwardArgs {
  out: GpuTensor; // (B, T, C)
  att: GpuTensor; // (B, NH, T, T)
  qkv: GpuTensor; // (B, T, 3C)
  B: number;
  T: number;
  C: number;
  NH: number;
}

export interface AttentionBackwardArgs {
  dqkv: GpuTensor; // (B, T, 3C) overwritten
  dout: GpuTensor; // (B, T, C)
  qkv: GpuTensor; // (B, T, 3C)
  att: GpuTensor; // (B, NH, T, T)
  B: number;
  T: number;
  C: number;
  NH: number;
}

/** Width 4 reads rows of hs / 4 vec4s: hs % 4 == 0 and 16-byte aligned slices (required for 16-bit storage). */
function headWidth(op: string, p: StoragePrecision, hs: number, ...ts: GpuTensor[]): Width {
  const w = hs % 4 === 0 && ts.every((t) => t.byteOffset % 16 === 0) ? 4 : 1;
  if (p !== 'fp32' && w !== 4)
    throw new Error(
      `${op}: ${p} storage reads heads 4 elements at a time, but the head size ${hs} is not a multiple of 4. ---> HINT: pick n_head so d_model / n_head is a multiple of 4`,
    );
  return w;
}

function headSize(op: string, C: number, NH: number): number {
  if (NH <= 0 || C % NH !== 0) throw new Error(`${op}: C=${C} is not divisible by NH=${NH}; pick n_head dividing d_model`);
  return C / NH;
}

export function attentionForward(rt: Runtime, { out, att, qkv, B, T, C, NH }: AttentionForwardArgs): Dispatch[] {
  const op = 'attentionForward';
  const hs = headSize(op, C, NH);
  assertSize(op, 'out', out, B * T * C);
  assertSize(op, 'att', att, B * NH * T * T);
  assertSize(op, 'qkv', qkv, B * T * 3 * C);
  assertNoAliasing(op, { out, att }, { qkv });
  const rows = B * NH * T;
  if (rows === 0) return [];
  const p = precisionFor(op, { out, qkv });
  return [
    rt.prepare(
      `attentionForward ${B}x${T}x${C}/${NH}`,
      kernel(rt, headWidth(op, p, hs, qkv, out), 'attention', 'main', p),
      [out, att, qkv],
      packParams([B, T, C, NH, hs, { f32: 1 / Math.sqrt(hs) }, 0, 0]),
      grid(rt, rows / 64),
    ),
  ];
}

export function attentionBackward(rt: Runtime, { dqkv, dout, qkv, att, B, T, C, NH }: AttentionBackwardArgs): Dispatch[] {
  const op = 'attentionBackward';
  const hs = headSize(op, C, NH);
  assertSize(op, 'dqkv', dqkv, B * T * 3 * C);
  assertSize(op, 'dout', dout, B * T * C);
  assertSize(op, 'qkv', qkv, B * T * 3 * C);
  assertSize(op, 'att', att, B * NH * T * T);
  assertNoAliasing(op, { dqkv }, { dout, qkv, att });
  const rows = B * NH * T;
  if (rows === 0) return [];
  const dpreatt = scratch(rt, 'attention.dpreatt', B * NH * T * T);
  const p = precisionFor(op, { dqkv, dout, qkv });
  const w = headWidth(op, p, hs, qkv, dout, dqkv);
  return [
    rt.prepare(
      `attentionBackward.scores ${B}x${T}x${C}/${NH}`,
      kernel(rt, w, 'attention-backward-scores', 'main', p),
      [dpreatt, dout, qkv, att],
      packParams([B, T, C, NH, hs, 0, 0, 0]),
      grid(rt, rows / 64),
    ),
    // one invocation per pair of w-column groups of a head row
    rt.prepare(
      `attentionBackward ${B}x${T}x${C}/${NH}`,
      kernel(rt, w, 'attention-backward', 'main', p),
      [dqkv, dpreatt, dout, qkv, att],
      packParams([B, T, C, NH, hs, { f32: 1 / Math.sqrt(hs) }, 0, 0]),
      grid(rt, (rows * Math.ceil(hs / w / 2)) / 64),
    ),
  ];
}
