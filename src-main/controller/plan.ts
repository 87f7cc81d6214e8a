// runs.plan: what the launch form shows before launching (the resolved job's knobs).
import type { LaunchPlan } from '../../common/api/index.js';
import { STRATEGY_NAMES, TABLE } from '../../common/strategies.js';
import { DEFAULT_PARALLEL, type ParallelSpec, precisionOf, type TrainJob } from '../../workers/protocol/train.js';
import { PRESETS } from '../../workers/protocol/presets.js';

export function planOf(job: TrainJob): LaunchPlan {
  const p: ParallelSpec = job.parallel ?? DEFAULT_PARALLEL;
  const s = TABLE[p.strategy];
  // the grid as the trainers read it: tp's group is the world, pp's stages are the world
  const grid = s.grid(p);
  return {
    strategy: p.strategy,
    world: p.world,
    micro_batches: p.micro_batches,
    ...grid,
    ...(s.pipelined ? { schedule: p.schedule ?? '1f1b' } : {}),
    activation_checkpointing: job.train.activation_checkpointing,
    offload_optimizer: p.offload_optimizer ?? 'none',
    precision: precisionOf(job),
    model: job.model,
    steps: job.train.steps,
    batch_size: job.train.batch_size,
    seq_len: job.train.seq_len ?? job.model.block_size,
    checkpoint_interval: job.train.checkpoint_interval,
    lr: job.train.lr,
    dataset: job.data.dataset,
    strategies: [...STRATEGY_NAMES],
    presets: Object.keys(PRESETS),
  };
}
