// A TrainJob for tests that build one by hand instead of resolving a config: the smallest GPT, one
// step of two rows, nanoGPT's AdamW betas, no weight decay, nothing evaluated or checkpointed.
// A test overrides what it is about: `train` merges field by field, every other key replaces.
import type { TrainJob } from '../../workers/protocol/train.js';

export type TinyJobOverrides = Partial<Omit<TrainJob, 'train'>> & { train?: Partial<TrainJob['train']> };

export function tinyJob(o: TinyJobOverrides = {}): TrainJob {
  const { train, ...rest } = o;
  return {
    run_dir: '/tmp/shardwise-tiny-job',
    model: { n_layer: 1, n_head: 1, d_model: 8, block_size: 4 },
    data: { dataset: 'builtin:tiny' },
    train: {
      steps: 1,
      batch_size: 2,
      lr: 1e-3,
      min_lr: 0,
      warmup_steps: 0,
      weight_decay: 0,
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-8,
      grad_clip: 1,
      seed: 1,
      eval_interval: 0,
      eval_batches: 1,
      checkpoint_interval: 0,
      keep_checkpoints: 1,
      activation_checkpointing: false,
      ...train,
    },
    device: {},
    ...rest,
  };
}
