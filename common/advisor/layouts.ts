// Every layout a number of ranks allows for a model and batch: single; dp, ddp, zero1/2/3 over
// the ranks (zero1 and zero2 also with ZeRO-Offload); tp T; pp P with a few micro-batch counts
// and both schedules; 3d D x T x P over every factorisation with two stages at least; each with
// and without activation checkpointing. A layout is kept only where the strategy table's own
// validate (common/strategies.ts) accepts it: whole heads per TP rank, a block per stage, the
// batch splitting into whole micro-batches. Worlds from 1 to the ranks given.
import type { GptConfig } from '../model-layout.js';
import { type JobShape, STRATEGY_NAMES, type StrategyName, TABLE } from '../strategies.js';
import type { Layout } from './types.js';

export type LayoutModel = Pick<GptConfig, 'n_layer' | 'n_head' | 'd_model'>;

/** The job validate reads for a layout. */
export function jobShapeOf(model: LayoutModel, batchSize: number, l: Layout): JobShape {
  return {
    model,
    train: { batch_size: batchSize },
    parallel: {
      strategy: l.strategy,
      world: l.world,
      micro_batches: l.micro_batches,
      tp: l.tp,
      pp: l.pp,
      dp: l.dp,
      schedule: l.schedule,
      offload_optimizer: l.offload_optimizer ? 'cpu' : undefined,
    },
  };
}

/** The table's objections to a layout (none: the ranks can run it). */
export const layoutErrors = (model: LayoutModel, batchSize: number, l: Layout) =>
  TABLE[l.strategy].validate(jobShapeOf(model, batchSize, l));

/** Micro-batch counts a pipeline of p stages is offered: p, 2p and 4p (fewer leave most of a step in the bubble). */
const pipelineMicroBatches = (p: number) => [p, 2 * p, 4 * p];

/** The layouts of one strategy over w ranks, by the knobs the table gives it. */
function layoutsOf(strategy: StrategyName, w: number): Layout[] {
  const s = TABLE[strategy];
  if (s.oneRank) return w === 1 ? [{ strategy, world: 1, micro_batches: 1 }] : [];
  if (w === 1) return [];
  const schedules = ['gpipe', '1f1b'] as const;
  // the replicas over w ranks; tp T = w; pp P = w at a few micro-batch counts and both schedules
  if (s.knobs.has('world')) return [{ strategy, world: w, micro_batches: 1 }];
  if (!s.knobs.has('dp') && s.knobs.has('tp')) return [{ strategy, world: w, tp: w, micro_batches: 1 }];
  if (!s.knobs.has('dp'))
    return pipelineMicroBatches(w).flatMap((M) => schedules.map((schedule) => ({ strategy, world: w, pp: w, micro_batches: M, schedule })));
  // a D x T x P grid: every factorisation with two stages at least, other than a plain pipeline
  const out: Layout[] = [];
  for (let dp = 1; dp <= w; dp++) {
    for (let tp = 1; dp * tp <= w; tp++) {
      const pp = w / (dp * tp);
      if (!Number.isInteger(pp) || pp < 2 || (dp === 1 && tp === 1)) continue;
      for (const M of pipelineMicroBatches(pp).slice(0, 2))
        for (const schedule of schedules) out.push({ strategy, world: w, dp, tp, pp, micro_batches: M, schedule });
    }
  }
  return out;
}

function layoutsOfWorld(w: number): Layout[] {
  const all = STRATEGY_NAMES.flatMap((n) => layoutsOf(n, w));
  const replicas = (l: Layout) => TABLE[l.strategy].knobs.has('world');
  // ZeRO-Offload's layouts right after the replicas (the order the advisor's ties keep)
  const offloaded = all.filter((l) => TABLE[l.strategy].knobs.has('offload_optimizer')).map((l) => ({ ...l, offload_optimizer: true }));
  return [...all.filter(replicas), ...offloaded, ...all.filter((l) => !replicas(l))];
}

/** Every layout of 1..ranks ranks that the table accepts, with and without activation checkpointing. */
export function enumerateLayouts(model: LayoutModel, batchSize: number, ranks: number): Layout[] {
  const out: Layout[] = [];
  for (let w = 1; w <= ranks; w++) {
    for (const l of layoutsOfWorld(w)) {
      if (layoutErrors(model, batchSize, l).length > 0) continue;
      out.push({ ...l, activation_checkpointing: false }, { ...l, activation_checkpointing: true });
    }
  }
  return out;
}

/** The strategy families a world of w ranks offers, as the notes name them, told apart by the table's shape of each. */
export const DATA_PARALLEL_FAMILY = 'dp, ddp and ZeRO';
const shape = (l: Layout) => TABLE[l.strategy];
const FAMILIES: { name: string; has: (l: Layout) => boolean }[] = [
  { name: DATA_PARALLEL_FAMILY, has: (l) => l.world > 1 && !shape(l).splitsModel },
  { name: 'tp', has: (l) => shape(l).splitsModel && !shape(l).pipelined },
  { name: 'pp', has: (l) => shape(l).pipelined && !shape(l).knobs.has('dp') },
  { name: '3d', has: (l) => shape(l).pipelined && shape(l).knobs.has('dp') },
];

/**
 * The strategy families with no layout of exactly w ranks, each with the table's first objection
 * ("dp, ddp and ZeRO: batch size 6 is not divisible by world 4 x micro-batches 1; ..."). A family
 * the world size cannot form at all (3d at a prime world) is left out: there is nothing to refuse.
 */
export function familiesMissingAt(model: LayoutModel, batchSize: number, w: number): { family: string; why: string }[] {
  if (w < 2) return [];
  const candidates = layoutsOfWorld(w);
  const out: { family: string; why: string }[] = [];
  for (const f of FAMILIES) {
    const mine = candidates.filter(f.has);
    if (mine.length === 0) continue;
    const errors = mine.map((l) => layoutErrors(model, batchSize, l));
    if (errors.some((e) => e.length === 0)) continue;
    out.push({ family: f.name, why: errors[0]![0]!.message });
  }
  return out;
}

/** A layout's short name: "zero2+offload x4", "pp 2 x m4 1f1b", "3d 2x2x2 m2 gpipe", "+ckpt" with checkpointing. */
export function layoutName(l: Layout): string {
  const name = TABLE[l.strategy].label(l, 'short')!;
  return l.activation_checkpointing ? `${name} +ckpt` : name;
}
