// The bf16 equivalence bound derived in tests/dist/data-parallel.test.ts, for any model: bit-for-bit
// equality with one device is impossible once a strategy rounds partial results to 16 bits (a
// rank's partial gradients, a tensor-parallel rank's partial products, a stage's share of the tied
// embedding's gradient) where one device rounds the whole sum once: a value differs by up to ~2u
// relative (unit roundoff u = 2^-8), AdamW's normalised update (at most ~lr per element) turns that
// into updates ~2u·lr apart, and over S steps the master weights drift at most S·2u·lr per element,
// against the RMS of the model's initial weights (relative L2; the loss follows to first order).
// A strategy that rounds at k such sums on a gradient's path (tensor parallelism: every f and g
// all-reduce of partial products) moves it by up to ~k·2u to first order (relative errors add):
// the bound takes k (`reductions`, 1 for data parallelism).
import { paramSpecs } from '../../../workers/model/config.js';
import { initialFullParams } from '../../../workers/model/tp-layout.js';

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
