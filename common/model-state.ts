// The ZeRO paper's formula for one rank's model states, in this engine's precision (fp32
// weights and gradients, AdamW's two fp32 moments: 4 + 4 + 8 bytes per parameter), for Ψ
// parameters over N data-parallel ranks. The dashboard draws it as the reference line of each
// memory chart and the launch view compares it with each device's limit. Padding of shards to
// whole slots and bucket buffers make the measured bytes a little larger.
// Model parallelism (tp, pp, 3d) follows the tensors instead of Ψ (common/model-layout.ts): a
// rank holds its stage's tensors, the split ones 1/T each, the replicated ones (wpe, layernorms,
// row-parallel biases) whole; 3d's ZeRO-1 keeps the moments of 1/D of the stage's slot-aligned
// flat layout. Those predictions equal the allocator's bytes exactly.
import type { ModelStateBytes } from './charts/types.js';
import { type GridShape, type GptShape, rankTensors, shardBounds, slotElems } from './model-layout.js';
import { strategyOf } from './strategies.js';

export interface ModelStateQuery {
  strategy: string;
  world: number;
  /** Ψ: the model's parameter count */
  params: number;
  rank: number;
  /** ZeRO-Offload: master weights, moments and update on the host */
  offloadOptimizer?: boolean;
  /** the model's sizes and vocabulary: tp, pp and 3d need them (their shards follow the tensors) */
  model?: GptShape;
  /** tensor-parallel ranks (tp: default world; 3d) */
  tp?: number;
  /** pipeline stages (pp: default world; 3d) */
  pp?: number;
  /** data-parallel replicas (3d) */
  dp?: number;
}

/** The (dp, tp, pp) grid of a model-parallel strategy, or null for the others. */
export function gridOf(q: Pick<ModelStateQuery, 'strategy' | 'world' | 'tp' | 'pp' | 'dp'>): GridShape | null {
  const s = strategyOf(q.strategy);
  return s?.splitsModel ? s.grid({ world: Math.max(1, q.world), tp: q.tp, pp: q.pp, dp: q.dp }) : null;
}

/** One rank's model states under tp, pp or 3d; null when the grid does not fit the model or the world. */
function modelParallelBytes(q: ModelStateQuery, g: GridShape): ModelStateBytes | null {
  if (!q.model || g.dp * g.tp * g.pp !== q.world || q.rank < 0 || q.rank >= q.world) return null;
  if (q.model.n_layer < g.pp || (4 * q.model.d_model) % g.tp !== 0 || q.model.d_model % g.tp !== 0) return null;
  const tensors = rankTensors(q.model, g, q.rank);
  const elems = tensors.reduce((s, t) => s + t.numel, 0);
  let optimizerElems = elems;
  if (g.dp > 1) {
    // ZeRO-1 across the DP group: AdamW's two moments for this replica's shard of the flat layout
    const bounds = shardBounds(
      tensors.reduce((s, t) => s + slotElems(t.numel), 0),
      g.dp,
    );
    const d = Math.floor(q.rank / g.tp) % g.dp;
    optimizerElems = bounds[d + 1]! - bounds[d]!;
  }
  return { params: 4 * elems, grads: 4 * elems, optimizer: 8 * optimizerElems };
}

/** Predicted device bytes of the rank's weights, gradients and optimizer state; null where no formula applies (tp, pp, 3d without the model's sizes). */
export function predictModelStateBytes(q: ModelStateQuery): ModelStateBytes | null {
  const P = 4 * q.params;
  const N = Math.max(1, q.world);
  const offload = q.offloadOptimizer === true;
  const grid = gridOf(q);
  if (grid) return modelParallelBytes(q, grid);
  switch (q.strategy) {
    case 'single':
    case 'ddp':
      return { params: P, grads: P, optimizer: 2 * P };
    case 'dp':
      // parameter server: the optimizer lives on rank 0 only
      return { params: P, grads: P, optimizer: q.rank === 0 ? 2 * P : 0 };
    case 'zero1':
      return { params: P, grads: P, optimizer: offload ? 0 : (2 * P) / N };
    case 'zero2':
      return { params: P, grads: P / N, optimizer: offload ? 0 : (2 * P) / N };
    case 'zero3':
      return { params: P / N, grads: P / N, optimizer: offload ? 0 : (2 * P) / N };
    default:
      return null;
  }
}

export const modelStateTotal = (b: ModelStateBytes): number => b.params + b.grads + b.optimizer;

/**
 * The vocabulary a finished run trained with, from the parameter count its summary reports (Ψ
 * of the whole model; under tp, rank 0's shard, which gives the vocabulary padded to a multiple
 * of T: all a prediction needs). Null when the count does not fit the sizes.
 */
export function vocabFromParams(model: Omit<GptShape, 'vocab'>, strategy: string, tp: number, params: number): number | null {
  const T = strategy === 'tp' ? Math.max(1, tp) : 1;
  const rest = rankTensors({ ...model, vocab: 0 }, { dp: 1, tp: T, pp: 1 }, 0).reduce((s, t) => s + t.numel, 0);
  const rows = (params - rest) / model.d_model;
  return Number.isInteger(rows) && rows > 0 ? rows * T : null;
}
