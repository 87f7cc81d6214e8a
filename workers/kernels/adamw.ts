// AdamW update with PyTorch semantics and torch.nn.utils.clip_grad_norm_ folded in: the clip
// factor is computed on the GPU from gradSumSq[0] (the sum of squares of all gradients, see
// reduce.ts sumSquares), so a step never reads back the norm.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, scratch, widthFor } from './util.js';

export interface AdamwHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** t, counted from 1 */
  step: number;
  /** > 0: clip gradients to this global norm; <= 0: no clipping */
  maxGradNorm: number;
}

export interface AdamwArgs {
  params: GpuTensor; // (n) updated in place
  grads: GpuTensor; // (n) read only
  m: GpuTensor; // (n) first moment, updated in place
  v: GpuTensor; // (n) second moment, updated in place
  n: number;
  /** (1) sum of squares of all gradients, for clipping; optional when maxGradNorm <= 0 */
  gradSumSq?: GpuTensor | null;
}

/** The uniform block for these hyper-parameters (bias corrections computed in float64); nW = n / width. */
export function adamwParams(nW: number, h: AdamwHyper): ArrayBuffer {
  if (!(h.step >= 1)) throw new Error(`adamw: step must count from 1 (got ${h.step})`);
  const bc1 = 1 - Math.pow(h.beta1, h.step);
  const bc2 = 1 - Math.pow(h.beta2, h.step);
  return packParams([
    nW,
    { f32: h.beta1 },
    { f32: h.beta2 },
    { f32: h.eps },
    { f32: 1 - h.lr * h.weightDecay },
    { f32: h.lr / bc1 },
    { f32: Math.sqrt(bc2) },
    { f32: h.maxGradNorm },
  ]);
}

export function adamw(rt: Runtime, { params, grads, m, v, n, gradSumSq }: AdamwArgs): { dispatches: Dispatch[]; set(h: AdamwHyper): void } {
  const op = 'adamw';
  for (const [k, t] of Object.entries({ params, grads, m, v })) assertSize(op, k, t, n);
  const norm = gradSumSq ?? scratch(rt, 'adamw.noNorm', 1);
  assertSize(op, 'gradSumSq', norm, 1);
  assertNoAliasing(op, { params, m, v }, { grads, gradSumSq: norm });
  if (n === 0) return { dispatches: [], set: () => {} };
  const w = widthFor(n, params, grads, m, v);
  const count = n / w;
  const d = rt.prepare(
    `adamw ${n}`,
    kernel(rt, w, 'adamw'),
    [params, grads, m, v, norm],
    adamwParams(count, { lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1, maxGradNorm: 0 }),
    grid(rt, count / 256),
  );
  return {
    dispatches: [d],
    set(h: AdamwHyper) {
      if (h.maxGradNorm > 0 && !gradSumSq)
        throw new Error('adamw: maxGradNorm > 0 needs gradSumSq (the sum of squared gradients); pass it to adamw()');
      d.setParams(adamwParams(count, h));
    },
  };
}
