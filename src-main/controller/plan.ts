// runs.plan: what the launch form shows before launching (the resolved job's knobs).
import type { LaunchPlan } from '../../common/api/index.js';
import { AVAILABLE_STRATEGIES, type TrainJob } from '../../workers/protocol/train.js';
import { PRESETS } from '../../workers/protocol/presets.js';

export function planOf(job: TrainJob): LaunchPlan {
  const p = job.parallel;
  return {
    strategy: p?.strategy ?? 'single',
    world: p?.world ?? 1,
    micro_batches: p?.micro_batches ?? 1,
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
