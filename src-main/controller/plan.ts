// runs.plan: what the launch form shows before launching (the resolved job's knobs).
import type { LaunchPlan } from '../../common/api/index.js';
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
