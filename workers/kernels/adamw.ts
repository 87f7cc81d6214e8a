// AdamW update with PyTorch semantics and torch.nn.utils.clip_grad_norm_ folded in: the clip
// factor is computed on the GPU from gradSumSq[0] (the sum of squares of all gradients, see
// reduce.ts sumSquares), so a step never reads back the norm. Mixed precision: the gradients may
// be 16-bit (bf16, fp16) and loss-scaled (gradScale; the update divides it out, clipping uses the
// unscaled norm), and with skipNonFinite an inf/NaN sum of squares skips the whole update (the
// overflow check of dynamic loss scaling: the caller reads gradSumSq to learn the step was skipped).
// The weights, m and v are fp32 (the master copy and the moments).
import { type GpuTensor, precisionOf } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, scratch, storageWidth } from './util.js';

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
  /** the loss scale the gradients carry (fp16 dynamic loss scaling; a power of 2); default 1 */
  gradScale?: number;
}

export interface AdamwArgs {
  params: GpuTensor; // (n) updated in place
  grads: GpuTensor; // (n) read only
  m: GpuTensor; // (n) first moment, updated in place
  v: GpuTensor; // (n) second moment, updated in place
  n: number;
  /** (1) sum of squares of all gradients, for clipping; optional when maxGradNorm <= 0 */
  gradSumSq?: GpuTensor | null;
  /** skip the update when gradSumSq[0] is inf or NaN (needs gradSumSq) */
  skipNonFinite?: boolean;
}

/** The uniform block for these hyper-parameters (bias corrections computed in float64); nW = n / width. */
export function adamwParams(nW: number, h: AdamwHyper, skipNonFinite = false): ArrayBuffer {
  if (!(h.step >= 1)) throw new Error(`adamw: step must count from 1 (got ${h.step})`);
  const bc1 = 1 - Math.pow(h.beta1, h.step);
  const bc2 = 1 - Math.pow(h.beta2, h.step);
  const scale = h.gradScale ?? 1;
  if (!(scale > 0) || !Number.isFinite(scale)) throw new Error(`adamw: gradScale must be a positive finite number (got ${scale})`);
  return packParams([
    nW,
    { f32: h.beta1 },
    { f32: h.beta2 },
    { f32: h.eps },
    { f32: 1 - h.lr * h.weightDecay },
    { f32: h.lr / bc1 },
    { f32: Math.sqrt(bc2) },
    { f32: h.maxGradNorm },
    { f32: 1 / scale },
    skipNonFinite ? 1 : 0,
    0,
    0,
  ]);
}

export function adamw(
  rt: Runtime,
  { params, grads, m, v, n, gradSumSq, skipNonFinite = false }: AdamwArgs,
): { dispatches: Dispatch[]; set(h: AdamwHyper): void } {
  const op = 'adamw';
  for (const [k, t] of Object.entries({ params, grads, m, v })) assertSize(op, k, t, n);
  for (const [k, t] of Object.entries({ params, m, v }))
    if (precisionOf(t) !== 'fp32')
      throw new Error(
        `adamw: ${k} (${t.name}) is ${precisionOf(t)}; the optimizer updates fp32 master weights and moments (cast the 16-bit copy from them)`,
      );
  if (skipNonFinite && !gradSumSq)
    throw new Error('adamw: skipNonFinite needs gradSumSq (the sum of squared gradients); pass it to adamw()');
  const norm = gradSumSq ?? scratch(rt, 'adamw.noNorm', 1);
  assertSize(op, 'gradSumSq', norm, 1);
  assertNoAliasing(op, { params, m, v }, { grads, gradSumSq: norm });
  if (n === 0) return { dispatches: [], set: () => {} };
  const p = precisionFor(op, { grads });
  const w = storageWidth(op, p, n, params, grads, m, v);
  const count = n / w;
  const d = rt.prepare(
    `adamw ${n}${p === 'fp32' ? '' : ` ${p} grads`}`,
    kernel(rt, w, 'adamw', 'main', p),
    [params, grads, m, v, norm],
    adamwParams(count, { lr: 0, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1, maxGradNorm: 0 }, skipNonFinite),
    grid(rt, count / 256),
  );
  return {
    dispatches: [d],
    set(h: AdamwHyper) {
      if (h.maxGradNorm > 0 && !gradSumSq)
        throw new Error('adamw: maxGradNorm > 0 needs gradSumSq (the sum of squared gradients); pass it to adamw()');
      d.setParams(adamwParams(count, h, skipNonFinite));
    },
  };
}
