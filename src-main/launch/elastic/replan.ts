// An elastic run's next layout once its ranks changed (some lost, or lost machines back): over
// the devices present, the global batch kept, never below the run's MIN. First the preferred
// strategies (the segment's own; for a scale-up the run's as launched, then the segment's) at
// the largest world from the devices present down to MIN that their rules accept: tp and pp at
// that many shards or stages, 3d fewer data-parallel replicas of its tp x pp grid, the others at
// world = devices. Where none does (pp losing a stage's machine leaves 1 rank; a 3d grid that no
// longer fills), the advisor's best-ranked layout that fits the devices left (single at world 1,
// ddp or ZeRO at the ranks left...). Every candidate goes through relayoutJob, the resume-in-
// another-layout path: the same checks, and its notes (micro-batches changed, PowerSGD reset,
// the layout line) come back for the segment and the summary. Pure: the caller says which
// machines the ranks are on.
import { advise } from '../../../common/advisor/plan.js';
import { DEFAULT_DEVICE_SPEED, DEFAULT_LINK } from '../../../common/advisor/time.js';
import type { Layout } from '../../../common/advisor/types.js';
import type { ResumeLayout } from '../../../common/api/elastic.js';
import { ASSUMED_VOCAB } from '../../../common/model-params.js';
import { TABLE } from '../../../common/strategies.js';
import { precisionOf, type ParallelSpec, type TrainJob } from '../../../workers/protocol/train.js';
import { relayoutJob } from '../relayout.js';
import { JobError } from '../resolve-job.js';

export interface ReplanInput {
  /** the segment's job: the layout that lost (or regains) ranks; the new job is relayoutJob's of it */
  job: TrainJob;
  /** the machine of every device present, rank order (the survivors', plus those back for a scale-up) */
  machines: string[];
  /** the run's MIN: no layout of fewer ranks */
  min: number;
  /** layouts to keep, tried first, in order (default: the job's own) */
  prefer?: ParallelSpec[];
  /** bytes of memory of the ranks' machine for relayoutJob's check (null: ranks on agents, unknown) */
  machineMemory?: number | null;
}

export type Replan =
  | {
      job: TrainJob;
      /** relayoutJob's notes: the layout line first, then what changed or was reset */
      notes: string[];
      /** which rule chose it: the preferred strategy kept, or the advisor's choice */
      chosen: 'kept' | 'advisor';
    }
  | { why: string };

/** `par`'s layout at `world` ranks, as relayoutJob takes it, or why its grid cannot take that many */
function keptAt(par: ParallelSpec, world: number): ResumeLayout | string {
  const s = TABLE[par.strategy];
  const layout: ResumeLayout = { strategy: par.strategy, world };
  // a 3d run keeps its tp x pp cell and drops data-parallel replicas; tp and pp follow the world
  if (s.knobs.has('dp')) {
    const cell = (par.tp ?? 1) * (par.pp ?? 1);
    if (world % cell !== 0) return `${world} ranks do not fill its ${par.tp ?? 1} x ${par.pp ?? 1} tensor x pipeline grid`;
    return { ...layout, dp: world / cell, tp: par.tp, pp: par.pp };
  }
  return layout;
}

/** an advisor's layout as relayoutJob takes it; a data-parallel one keeps the run's micro-batches where they split (relayoutJob decides) */
function advisedLayout(l: Layout): ResumeLayout {
  const s = TABLE[l.strategy];
  return {
    strategy: l.strategy,
    world: l.world,
    ...(s.knobs.has('dp') && l.dp !== undefined ? { dp: l.dp } : {}),
    ...(s.knobs.has('tp') && l.tp !== undefined ? { tp: l.tp } : {}),
    ...(s.knobs.has('pp') && l.pp !== undefined ? { pp: l.pp } : {}),
    ...(s.pipelined ? { micro_batches: l.micro_batches, ...(l.schedule ? { schedule: l.schedule } : {}) } : {}),
    ...(s.knobs.has('offload_optimizer') ? { offload_optimizer: l.offload_optimizer ? 'cpu' : 'none' } : {}),
  };
}

/** the advisor's layouts of `min` to `devices` ranks that fit, best first, at the run's activation checkpointing */
function advisorLayouts(job: TrainJob, machines: string[], min: number): Layout[] {
  const m = job.model;
  const ranks = machines.map((machine, i) => ({ label: `${machine} rank ${i}`, machine, speed: DEFAULT_DEVICE_SPEED }));
  const result = advise({
    model: { n_layer: m.n_layer, n_head: m.n_head, d_model: m.d_model, block_size: m.block_size, vocab_size: ASSUMED_VOCAB },
    batch_size: job.train.batch_size,
    seq_len: job.train.seq_len ?? m.block_size,
    precision: precisionOf(job),
    hardware: { source: 'defaults', ranks, local: DEFAULT_LINK, remote: DEFAULT_LINK, notes: [] },
  });
  const ckpt = job.train.activation_checkpointing;
  return result.layouts
    .filter((p) => p.fits && p.layout.world >= min && (p.layout.activation_checkpointing ?? false) === ckpt)
    .map((p) => p.layout);
}

const refusal = (e: unknown) => (e instanceof JobError ? e.errors[0]!.message : (e as Error).message);

/** The job over `machines` (at most that many ranks, at least `min`), or why no layout fits. */
export function replan(input: ReplanInput): Replan {
  const { job, machines, min } = input;
  const par = job.parallel;
  if (!par) return { why: 'the run has no parallel layout to re-plan' };
  const devices = machines.length;
  if (devices < min) return { why: `${devices} device${devices === 1 ? '' : 's'} remain, fewer than the minimum of ${min}` };
  const opts = input.machineMemory !== undefined ? { machineMemory: input.machineMemory } : {};
  const attempt = (layout: ResumeLayout) => {
    try {
      return relayoutJob(job, layout, opts);
    } catch (e) {
      return refusal(e);
    }
  };
  const refusals: string[] = [];
  for (const kept of input.prefer ?? [par]) {
    for (let world = devices; world >= min; world--) {
      const layout = keptAt(kept, world);
      const r = typeof layout === 'string' ? layout : attempt(layout);
      if (typeof r !== 'string') return { ...r, chosen: 'kept' };
      refusals.push(`${kept.strategy} at ${world}: ${r}`);
    }
  }
  for (const l of advisorLayouts(job, machines, min)) {
    const r = attempt(advisedLayout(l));
    if (typeof r !== 'string') return { ...r, chosen: 'advisor' };
    refusals.push(`the advisor's ${l.strategy} at ${l.world}: ${r}`);
  }
  return { why: `no layout of ${min} to ${devices} ranks fits (${refusals.join('; ')})` };
}
