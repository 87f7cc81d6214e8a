// A LaunchConfig (the API's run request) as `shardwise train`'s flags, so a run launched from
// the dashboard resolves exactly like the same run from the command line (one resolver:
// resolveTrainFlags in src-main/cli/train.ts). Model sizes go in as the config file's model
// section, as a --config FILE would give them.
import type { LaunchConfig } from '../../common/api/index.js';
import type { ConfigFile, TrainFlags } from '../cli/train.js';

const FLAG_OF: Partial<Record<keyof LaunchConfig, string>> = {
  preset: 'preset',
  dataset: 'dataset',
  strategy: 'strategy',
  world: 'world',
  tp: 'tp',
  pp: 'pp',
  dp: 'dp',
  schedule: 'schedule',
  partition: 'partition',
  micro_batches: 'micro-batches',
  bucket_cap_mb: 'bucket-cap-mb',
  offload_optimizer: 'offload-optimizer',
  steps: 'steps',
  batch_size: 'batch-size',
  seq_len: 'seq-len',
  lr: 'lr',
  min_lr: 'min-lr',
  warmup_steps: 'warmup-steps',
  weight_decay: 'weight-decay',
  grad_clip: 'grad-clip',
  seed: 'seed',
  eval_interval: 'eval-interval',
  eval_batches: 'eval-batches',
  checkpoint_interval: 'checkpoint-interval',
  keep_checkpoints: 'keep-checkpoints',
  device: 'device',
};

export function launchFlags(c: LaunchConfig, runDir: string): { flags: TrainFlags; file: ConfigFile | undefined } {
  const flags: TrainFlags = { out: runDir };
  for (const [key, flag] of Object.entries(FLAG_OF)) {
    const v = c[key as keyof LaunchConfig];
    if (v !== undefined) flags[flag] = String(v);
  }
  if (c.prefetch !== undefined) flags.prefetch = c.prefetch ? 'on' : 'off';
  if (c.activation_checkpointing) flags['activation-checkpointing'] = true;
  const model = c.model && Object.values(c.model).some((x) => x !== undefined) ? c.model : undefined;
  const file: ConfigFile = { ...(model ? { model } : {}), ...(c.spans !== undefined ? { telemetry: { spans: c.spans } } : {}) };
  return { flags, file: Object.keys(file).length > 0 ? file : undefined };
}

/** The CLI's messages name flags (--micro-batches); the API's fields are micro_batches. */
export function flagsToFields(message: string): string {
  return message.replace(/--([a-z][a-z-]*)/g, (_, f: string) => f.replace(/-/g, '_'));
}
