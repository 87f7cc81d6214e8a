// "Trains the same numbers as one device": the check every strategy's equivalence test makes
// against the single-device run of the same seed and global batch.
import { expect } from 'vitest';

export interface TrainedRun {
  losses: number[];
  /** final weights by parameter name, in the single-device shapes */
  weights: Map<string, Float32Array>;
  gradNorms?: number[];
}

const worstRelative = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i]!) / Math.abs(b[i]!)));

/**
 * Loss per step within 1e-5 relative (and the gradient norm, where `gradNorms`: it decides
 * clipping), final weights within 1e-5 relative L2 over the whole model. The key slice of each
 * c_attn bias is left out: its exact gradient is zero (softmax ignores a constant added to every
 * score of a row), so it holds only float noise, which AdamW's normalisation turns into +-lr
 * steps in any two runs that sum in different orders. Element-wise maxima are not used for the
 * same reason: an element whose gradient is ~0 moves by noise.
 */
export function expectSameTraining(
  run: TrainedRun,
  ref: TrainedRun,
  label: string,
  /** tolerance: the bound of losses and weights (default 1e-5, fp32's reduction-order noise; mixed precision states its own) */
  o: { steps?: number; gradNorms?: boolean; tolerance?: number } = {},
) {
  const tol = o.tolerance ?? 1e-5;
  expect(run.losses).toHaveLength(o.steps ?? ref.losses.length);
  expect(worstRelative(run.losses, ref.losses), `${label}: worst relative loss difference over ${ref.losses.length} steps`).toBeLessThan(
    tol,
  );
  if (o.gradNorms)
    expect(worstRelative(run.gradNorms!, ref.gradNorms!), `${label}: worst relative gradient-norm difference`).toBeLessThan(1e-5);
  let num = 0;
  let den = 0;
  for (const [name, w] of ref.weights) {
    const x = run.weights.get(name);
    expect(x?.length, `${label}: ${name} saved in the single-device shape`).toBe(w.length);
    const keyBias = name.endsWith('attn.c_attn.bias');
    const C = w.length / 3;
    for (let i = 0; i < w.length; i++) {
      if (keyBias && i >= C && i < 2 * C) continue;
      num += (x![i]! - w[i]!) ** 2;
      den += w[i]! ** 2;
    }
  }
  expect(Math.sqrt(num / den), `${label}: relative L2 distance of the final weights`).toBeLessThan(tol);
}
