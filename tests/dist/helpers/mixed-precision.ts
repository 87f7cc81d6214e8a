// Mixed precision's checks shared by the strategy test files: the bf16 equivalence bound, the length
// of the bf16 equivalence runs, and the forced fp16 overflow.
//
// Why a bound and not bit-for-bit equality with one device: each rank rounds its partial gradients
// (the gradient of its share of the batch) to 16 bits before the sum, and the sum is rounded again,
// where one device rounds the whole batch's gradient once; likewise a tensor-parallel rank's partial
// products and a pipeline stage's share of the tied embedding's gradient. Rounding does not
// distribute over addition, so the 16-bit values differ in their last bits, and so do the runs.
//
// The bound: a value rounded twice differs by up to ~2u relative (unit roundoff u = 2^-8 for bf16).
// AdamW's normalised update (at most ~lr per element) turns that into updates ~2u·lr apart, and over
// S steps the master weights drift at most S·2u·lr per element, against the RMS of the model's
// initial weights (tiny's 0.0574: N(0, 0.02) matrices, N(0, 0.01) residual projections, layernorm
// gains of 1): S·2u·lr / RMS relative L2 of the final weights; the loss follows the weights to first
// order. A strategy that rounds at k such sums on a gradient's path (tensor parallelism: every f and
// g all-reduce of partial products) moves it by up to ~k·2u to first order (relative errors add):
// the bound takes k (`reductions`: 1 for data parallelism and a pipeline's tied embedding).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { paramSpecs } from '../../../workers/model/config.js';
import { initialFullParams } from '../../../workers/model/tp-layout.js';
import { jsonLines } from '../../cli/helpers.js';

/** S of every strategy's bf16 equivalence run against the single-device bf16 run (20 steps) */
export const BF16_STEPS = 20;

export interface ModelSizes {
  n_layer: number;
  n_head: number;
  d_model: number;
  block_size: number;
  vocab_size: number;
}

/** RMS of the single-device initial weights of a model at a seed (tiny on builtin:grammar: 0.0574) */
export function rmsInitialWeights(model: ModelSizes, seed: number): number {
  const init = initialFullParams(model, seed);
  let sq = 0;
  let n = 0;
  for (const s of paramSpecs(model))
    for (const x of init.get(s.name)!) {
      sq += x * x;
      n++;
    }
  return Math.sqrt(sq / n);
}

/** S·k·2u·lr / RMS(initial weights): the relative bound of losses and final weights after `steps` bf16 steps, k = `reductions` */
export function mixedTolerance(steps: number, lr: number, model: ModelSizes, seed: number, reductions = 1): number {
  return (steps * reductions * 2 * 2 ** -8 * lr) / rmsInitialWeights(model, seed);
}

/**
 * k of a tensor-parallel model: the all-reduces of partial products on a gradient's path, each
 * rounded to bf16 on every rank before the sum and again after: in forward the embedding's g and
 * two g per block, in backward the head's f and two f per block.
 */
export const tensorParallelReductions = (nLayer: number): number => 2 * (1 + 2 * nLayer);

/** fp16's forced overflow: a starting loss scale that overflows tiny's scaled gradients for its first steps (measured: 2^20, 2^19, 2^18; 2^17 trains) */
export const FP16_OVERFLOW_POWER = 20;
/** the overflow run's length: the skipped steps and some that train after them */
export const FP16_OVERFLOW_STEPS = 6;

/**
 * An fp16 run started at a loss scale of 2^FP16_OVERFLOW_POWER (hysteresis 1): its first steps
 * overflow. The overflow check is global (every rank's inf reaches one all-reduced norm), so all
 * `ranks` skip the same steps; each skip halves the scale, and the later steps train.
 */
export function expectOverflowSkips(run: { dir: string; losses: number[]; summary: Record<string, unknown> }, ranks: number) {
  const steps = jsonLines(readFileSync(path.join(run.dir, 'metrics.jsonl'), 'utf8')).filter((m) => m.type === 'step');
  expect(steps).toHaveLength(FP16_OVERFLOW_STEPS);
  expect(steps[0]!.loss_scale).toBe(2 ** FP16_OVERFLOW_POWER);
  steps.forEach((m, i) => {
    if (i > 0) expect(m.loss_scale, `step ${i + 1}`).toBe((steps[i - 1]!.loss_scale as number) / (steps[i - 1]!.skipped ? 2 : 1));
  });
  const skipped = steps.filter((m) => m.skipped === true).length;
  expect(skipped, 'steps skipped for an overflow').toBeGreaterThan(0);
  expect(skipped, 'steps skipped for an overflow').toBeLessThan(FP16_OVERFLOW_STEPS);
  expect(run.summary.skipped_steps_by_rank).toEqual(Object.fromEntries(Array.from({ length: ranks }, (_, r) => [String(r), skipped])));
  expect(run.losses.at(-1)!, 'the last loss, against the first').toBeLessThan(run.losses[0]!);
}
