// runs.plan: what the launch form shows before launching (the resolved job's knobs).
import { ApiError, type LaunchConfig, type LaunchPlan } from '../../common/api/index.js';
import { AVAILABLE_STRATEGIES, type TrainJob } from '../../workers/protocol/train.js';
import { PRESETS } from '../../workers/protocol/presets.js';

export function planOf(job: TrainJob): LaunchPlan {
  const p = job.parallel;
  const strategy = p?.strategy ?? 'single';
  const world = p?.world ?? 1;
  const piped = strategy === 'pp' || strategy === '3d';
  return {
    strategy,
    world,
    micro_batches: p?.micro_batches ?? 1,
    // the grid as the trainers read it: tp's group is the world, pp's stages are the world
    tp: strategy === 'tp' ? (p?.tp ?? world) : strategy === '3d' ? (p?.tp ?? 1) : 1,
    pp: strategy === 'pp' ? (p?.pp ?? world) : strategy === '3d' ? (p?.pp ?? 1) : 1,
    dp: strategy === '3d' ? (p?.dp ?? 1) : 1,
    ...(piped ? { schedule: p?.schedule ?? '1f1b' } : {}),
    activation_checkpointing: job.train.activation_checkpointing,
    offload_optimizer: p?.offload_optimizer ?? 'none',
    model: job.model,
    steps: job.train.steps,
    batch_size: job.train.batch_size,
    lr: job.train.lr,
    dataset: job.data.dataset,
    strategies: [...AVAILABLE_STRATEGIES],
    presets: Object.keys(PRESETS),
  };
}

/** A placement names one machine per rank: as many entries as the job has ranks. */
export function checkPlacement(config: LaunchConfig, plan: LaunchPlan): LaunchPlan {
  const n = config.placement?.length;
  if (n !== undefined && n !== plan.world) {
    throw new ApiError('ValidationError', `runs.plan params: config: placement has ${n} entries for ${plan.world} ranks; give one machine per rank (rank order), or leave it out to run every rank here`);
  }
  return plan;
}
