// The advisor's prediction for a run the controller launches, kept in its folder
// (prediction.json, common/api/prediction.ts) so the run view and the report can set what the
// run measures beside it. The controller asks runs.advise for the run's model, batch, sequence
// length and ranks (its placement, else its world on this machine's devices) and keeps the plan
// of the run's own layout. A layout the advisor does not list (a micro-batch count it does not
// offer, say) gets no prediction: the run's log says so, the run is not held up.
import type { AdviseRequest, AdviseResult, Layout, LayoutPlan } from '../../common/advisor/types.js';
import type { LaunchConfig, RunPrediction } from '../../common/api/index.js';
import { strategyOf } from '../../common/strategies.js';
import { BUILTIN_VOCAB } from '../../workers/protocol/builtin-vocab.js';
import type { TrainJob } from '../../workers/protocol/train.js';

/** runs.advise's request for the job's model, batch and ranks. */
export function adviseRequestOfJob(job: TrainJob, placement?: LaunchConfig['placement']): AdviseRequest {
  const { preset, n_layer, n_head, d_model, block_size } = job.model;
  // a built-in dataset's vocabulary is known before the ranks read it; a text file's is not (the advisor assumes one)
  const vocab_size = BUILTIN_VOCAB[job.data.dataset];
  return {
    ...(preset !== undefined ? { preset } : {}),
    model: { n_layer, n_head, d_model, block_size, ...(vocab_size !== undefined ? { vocab_size } : {}) },
    batch_size: job.train.batch_size,
    seq_len: job.train.seq_len ?? block_size,
    ...(job.precision !== undefined && job.precision !== 'fp32' ? { precision: job.precision } : {}),
    ...(placement ? { placement } : { devices: job.parallel?.world ?? 1 }),
  };
}

/** A layout with every default spelled out, so two spellings of one layout compare equal. */
function normal(l: Layout) {
  const s = strategyOf(l.strategy);
  const has = (k: 'tp' | 'pp' | 'dp' | 'schedule') => s?.knobs.has(k) ?? false;
  return {
    strategy: l.strategy,
    world: l.world,
    tp: has('tp') ? (l.tp ?? l.world) : 1,
    pp: has('pp') ? (l.pp ?? l.world) : 1,
    dp: has('dp') ? (l.dp ?? 1) : 1,
    micro_batches: l.micro_batches,
    schedule: has('schedule') ? (l.schedule ?? '1f1b') : null,
    offload_optimizer: l.offload_optimizer === true,
    activation_checkpointing: l.activation_checkpointing === true,
  };
}

/** The job's layout in the advisor's terms. */
export function layoutOfJob(job: TrainJob): Layout {
  const p = job.parallel;
  return {
    strategy: p?.strategy ?? 'single',
    world: p?.world ?? 1,
    micro_batches: p?.micro_batches ?? 1,
    ...(p?.tp !== undefined ? { tp: p.tp } : {}),
    ...(p?.pp !== undefined ? { pp: p.pp } : {}),
    ...(p?.dp !== undefined ? { dp: p.dp } : {}),
    ...(p?.schedule !== undefined ? { schedule: p.schedule } : {}),
    offload_optimizer: p?.offload_optimizer === 'cpu',
    activation_checkpointing: job.train.activation_checkpointing,
  };
}

/** The advisor's plan of this job's layout, null when it does not list it. */
export function planOfJob(result: AdviseResult, job: TrainJob): LayoutPlan | null {
  const want = JSON.stringify(normal(layoutOfJob(job)));
  return result.layouts.find((l) => JSON.stringify(normal(l.layout)) === want) ?? null;
}

/** The prediction for a job, or why there is none (for the run's log). */
export async function predictRun(
  job: TrainJob,
  placement: LaunchConfig['placement'],
  advise: (r: AdviseRequest) => Promise<AdviseResult>,
  now = new Date(),
): Promise<{ prediction: RunPrediction } | { why: string }> {
  const request = adviseRequestOfJob(job, placement);
  let result: AdviseResult;
  try {
    result = await advise(request);
  } catch (e) {
    return { why: `no prediction for this run: the advisor refused its request (${(e as Error).message})` };
  }
  const plan = planOfJob(result, job);
  if (!plan) return { why: 'no prediction for this run: the advisor does not list its layout (pick one of the Advisor panel to compare)' };
  return { prediction: { predicted_at: now.toISOString(), request, profile: result.profile, plan, notes: result.notes } };
}
