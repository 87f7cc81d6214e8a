// The ZeRO paper's formula for one rank's model states, for Ψ parameters over N data-parallel
// ranks, in the run's precision. fp32: fp32 weights and gradients, AdamW's two fp32 moments
// (4 + 4 + 8 bytes per parameter). bf16/fp16 (mixed precision, the paper's K = 12): 16-bit
// weights and gradients (2 + 2), and the optimizer's fp32 master copy plus both moments
// (4 + 8 = 12): DDP 16Ψ, ZeRO-1 4Ψ + 12Ψ/N, ZeRO-2 2Ψ + 14Ψ/N, ZeRO-3 16Ψ/N. Mixed-precision
// ZeRO-Offload keeps only the 16-bit weights on the device; the master, the moments and the
// 16-bit gradient shard are on the host (predictOffloadHostBytes). The dashboard draws it as the reference line of each
// memory chart and the launch view compares it with each device's limit. Padding of shards to
// whole slots and bucket buffers make the measured bytes a little larger.
// Model parallelism (tp, pp, 3d) follows the tensors instead of Ψ (common/model-layout.ts): a
// rank holds its stage's tensors, the split ones 1/T each, the replicated ones (wpe, layernorms,
// row-parallel biases) whole; 3d's ZeRO-1 keeps the optimizer state of 1/D of the stage's
// slot-aligned flat layout. Padding included (common/padding.ts, the rules the engines lay out
// with: wte's rows to a multiple of T, of 4T at 16 bits; slots of 256 bytes, 128 elements at 16
// bits), those predictions equal the allocator's bytes exactly, and modelStatePadding names the
// padding that changes them.
import type { ModelStateBytes } from './charts/types.js';
import { computeBytes, DEFAULT_PRECISION, type Precision } from './precision.js';
import { type GptConfig, gridCoords, type GridShape, rankTensors } from './model-layout.js';
import { paddedVocab, shardBounds, slotElems, slotElemsAt, vocabAlign } from './padding.js';
import { strategyOf } from './strategies.js';

export interface ModelStateQuery {
  strategy: string;
  world: number;
  /** Ψ: the model's parameter count */
  params: number;
  rank: number;
  /** ZeRO-Offload: master weights, moments and update on the host */
  offloadOptimizer?: boolean;
  /** the run's precision (default fp32) */
  precision?: Precision;
  /** the model's sizes and vocabulary: tp, pp and 3d need them (their shards follow the tensors) */
  model?: Omit<GptConfig, 'n_head'>;
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

/** The elements a rank of a model-parallel grid holds and updates; null when the grid does not fit the model or the world. */
function modelParallelElems(q: ModelStateQuery, g: GridShape): { elems: number; optimizerElems: number; holdsWte: boolean } | null {
  if (!q.model || g.dp * g.tp * g.pp !== q.world || q.rank < 0 || q.rank >= q.world) return null;
  if (q.model.n_layer < g.pp || (4 * q.model.d_model) % g.tp !== 0 || q.model.d_model % g.tp !== 0) return null;
  const precision = q.precision ?? DEFAULT_PRECISION;
  const tensors = rankTensors(q.model, g, q.rank, precision);
  const elems = tensors.reduce((s, t) => s + t.numel, 0);
  const holdsWte = tensors.some((t) => t.tensor.kind === 'vocab');
  if (g.dp === 1) return { elems, optimizerElems: elems, holdsWte };
  // ZeRO-1 across the DP group: the optimizer's state for this replica's shard of the flat layout,
  // whose tensors each take whole slots and whose shards start on one (zero1.ts)
  const flat = tensors.reduce((s, t) => s + slotElems(t.numel, precision), 0);
  const bounds = shardBounds(flat, g.dp, slotElemsAt(precision));
  const d = gridCoords(g, q.rank).dp;
  return { elems, optimizerElems: bounds[d + 1]! - bounds[d]!, holdsWte };
}

/** One rank's model states under tp, pp or 3d; null when the grid does not fit the model or the world. */
function modelParallelBytes(q: ModelStateQuery, g: GridShape): ModelStateBytes | null {
  const e = modelParallelElems(q, g);
  if (!e) return null;
  const c = computeBytes(q.precision ?? DEFAULT_PRECISION);
  return { params: c * e.elems, grads: c * e.elems, optimizer: optimizerBytesPerParam(q) * e.optimizerElems };
}

/**
 * The padding a model-parallel prediction of this rank counts, where it changes the number, in
 * words for the formula's line: ["vocab 27 padded to 32 (a multiple of 4T)", "ZeRO-1 shard in
 * 128-element slots"]; empty where none does or no formula applies (the data-parallel family
 * counts Ψ as the run reports it).
 */
export function modelStatePadding(q: ModelStateQuery): string[] {
  const g = gridOf(q);
  const e = g && modelParallelElems(q, g);
  if (!g || !e || !q.model) return [];
  const precision = q.precision ?? DEFAULT_PRECISION;
  const parts: string[] = [];
  const align = vocabAlign(precision);
  const Vp = paddedVocab(q.model.vocab_size, g.tp, align);
  if (e.holdsWte && Vp !== q.model.vocab_size) {
    const multiple = g.tp === 1 ? String(align) : align === 1 ? 'T' : `${align}T`;
    parts.push(`vocab ${q.model.vocab_size} padded to ${Vp} (a multiple of ${multiple})`);
  }
  if (g.dp > 1 && e.optimizerElems * g.dp !== e.elems) parts.push(`ZeRO-1 shard in ${slotElemsAt(precision)}-element slots`);
  return parts;
}

/** the optimizer's bytes per parameter it updates: AdamW's two fp32 moments, plus the fp32 master copy in mixed precision */
const optimizerBytesPerParam = (q: Pick<ModelStateQuery, 'precision'>): number => ((q.precision ?? DEFAULT_PRECISION) === 'fp32' ? 8 : 12);

/** Predicted device bytes of the rank's weights, gradients and optimizer state; null where no formula applies (tp, pp, 3d without the model's sizes). */
export function predictModelStateBytes(q: ModelStateQuery): ModelStateBytes | null {
  const mixed = (q.precision ?? DEFAULT_PRECISION) !== 'fp32';
  const W = computeBytes(q.precision ?? DEFAULT_PRECISION) * q.params; // the device's weights, and as many gradient bytes
  const K = optimizerBytesPerParam(q) * q.params;
  const N = Math.max(1, q.world);
  const offload = q.offloadOptimizer === true;
  const grid = gridOf(q);
  if (grid) return modelParallelBytes(q, grid);
  const s = strategyOf(q.strategy);
  if (!s) return null;
  // the ZeRO stage says what is split over the N ranks: 1 the optimizer, 2 the gradients too, 3 the weights too
  const z = s.zeroStage;
  if (z === 0) return { params: W, grads: W, optimizer: s.optimizerRanks === 'every' || q.rank === 0 ? K : 0 };
  if (offload && mixed && z < 3) return { params: W, grads: 0, optimizer: 0 };
  return { params: z === 3 ? W / N : W, grads: z >= 2 ? W / N : W, optimizer: offload ? 0 : K / N };
}

/**
 * Mixed-precision ZeRO-Offload's host side of one rank (ZeRO-Offload's split): the fp32 master
 * shard (params), the 16-bit gradient shard (grads) and the two fp32 moments (optimizer), each
 * 1/N of the model; null where it does not apply (no offload, fp32, or a strategy without it).
 */
export function predictOffloadHostBytes(q: ModelStateQuery): ModelStateBytes | null {
  const precision = q.precision ?? DEFAULT_PRECISION;
  if (!q.offloadOptimizer || precision === 'fp32' || !strategyOf(q.strategy)?.knobs.has('offload_optimizer')) return null;
  const N = Math.max(1, q.world);
  return { params: (4 * q.params) / N, grads: (computeBytes(precision) * q.params) / N, optimizer: (8 * q.params) / N };
}

export const modelStateTotal = (b: ModelStateBytes): number => b.params + b.grads + b.optimizer;

/**
 * The vocabulary a finished run trained with, from the parameter count its summary reports (Ψ
 * of the whole model; under tp, rank 0's shard, which gives the vocabulary padded to a multiple
 * of T, of 4T at 16 bits: all a prediction needs, padding it again changes nothing). Null when
 * the count does not fit the sizes.
 */
export function vocabFromParams(
  model: Pick<GptConfig, 'n_layer' | 'd_model' | 'block_size'>,
  strategy: string,
  tp: number,
  params: number,
): number | null {
  // the whole-depth engine reports its rank's shard: a tensor-parallel strategy that is not pipelined
  const s = strategyOf(strategy);
  const T = s?.tensorParallel && !s.pipelined ? Math.max(1, tp) : 1;
  const rest = rankTensors({ ...model, vocab_size: 0 }, { dp: 1, tp: T, pp: 1 }, 0).reduce((s, t) => s + t.numel, 0);
  const rows = (params - rest) / model.d_model;
  return Number.isInteger(rows) && rows > 0 ? rows * T : null;
}
