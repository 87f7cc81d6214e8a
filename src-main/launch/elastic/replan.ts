// An elastic run's next layout once ranks are gone: the same strategy over the ranks still
// present (a data-parallel one at world = survivors; tp and pp at that many shards or stages;
// 3d fewer data-parallel replicas of its tp x pp grid), the global batch kept, micro-batches
// lowered where the batch no longer splits, checked by the strategy table's own rules. The
// largest world from the survivors down to the run's MIN that passes wins.
import { TABLE } from '../../../common/strategies.js';
import type { ParallelSpec, TrainJob } from '../../../workers/protocol/train.js';

/** the parallel spec of `par`'s strategy at `world` ranks (the table's atWorld), or null when its grid cannot take that many */
function atWorld(par: ParallelSpec, world: number): ParallelSpec | null {
  const knobs = TABLE[par.strategy].atWorld(par, world);
  return knobs && { ...par, ...knobs };
}

/** micro-batch counts to try: the run's own, then fewer, down to 1 */
function microBatches(m: number): number[] {
  const out = [m];
  for (let k = m - 1; k >= 1; k--) out.push(k);
  return out;
}

/** The job at the largest world from `survivors` down to `min` that its strategy accepts, or why none does. */
export function replan(job: TrainJob, survivors: number, min: number): { job: TrainJob } | { why: string } {
  const par = job.parallel;
  if (!par) return { why: 'the run has no parallel layout to re-plan' };
  const strategy = TABLE[par.strategy];
  const refusals: string[] = [];
  for (let world = survivors; world >= min; world--) {
    const spec = atWorld(par, world);
    if (!spec) {
      refusals.push(`${world} ranks do not fill its ${par.tp ?? 1} x ${par.pp ?? 1} tensor x pipeline grid`);
      continue;
    }
    for (const m of microBatches(par.micro_batches)) {
      const parallel = { ...spec, micro_batches: m };
      const candidate: TrainJob = { ...job, parallel };
      const broken = strategy.validate({ ...candidate, parallel });
      if (broken.length === 0) return { job: candidate };
      if (m === par.micro_batches) refusals.push(`${world} ranks: ${broken[0]!.message}`);
    }
  }
  return { why: `no ${par.strategy} layout of ${min} to ${survivors} ranks fits (${refusals.join('; ')})` };
}
