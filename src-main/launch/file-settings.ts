// What one --config file sets: Shardwise's own keys and DeepSpeed's names
// (src-main/launch/deepspeed-config.ts) merged into one value per setting. Two keys of the file
// that set one thing to different values are refused, naming both keys and their values (the
// same value twice is fine): neither silently wins. The resolver then applies the one rule,
// defaults < preset < file < request (src-main/launch/resolve-job.ts).
import type { LossScaleSpec, Precision } from '../../common/precision.js';
import type { FieldError, JobField } from '../../common/strategies.js';
import type { ParallelSpec, TrainSpec } from '../../workers/protocol/train.js';
import type { DeepSpeedMapping } from './deepspeed-config.js';
import { OPTIMIZER_FIELD } from './deepspeed-optimizer.js';
import type { ConfigFile } from './resolve-job.js';

export interface FileSettings {
  strategy?: string;
  precision?: Precision;
  parallel: Partial<ParallelSpec>;
  train: Partial<TrainSpec>;
  loss_scale?: Partial<LossScaleSpec>;
}

/** one key of the file and what it sets; `shown` where the key's own value differs from the setting's (a ZeRO stage) */
interface Source {
  key: string;
  value: unknown;
  shown?: string;
}

/** The file's settings, and a refusal for each setting two of its keys disagree on. */
export function fileSettings(
  file: ConfigFile,
  ds: DeepSpeedMapping,
  fileName: string,
): { settings: FileSettings; conflicts: FieldError[] } {
  const conflicts: FieldError[] = [];
  /** the one value `sources` give `field` (the first key's), or a conflict naming the two that differ */
  function one<T>(field: JobField, what: string, ...sources: Source[]): T | undefined {
    const set = sources.filter((s) => s.value !== undefined);
    const other = set.find((s) => JSON.stringify(s.value) !== JSON.stringify(set[0]!.value));
    if (other) {
      const show = (s: Source) => `${s.key} ${s.shown ?? JSON.stringify(s.value)}`;
      conflicts.push({
        field,
        message: `${fileName}: ${show(set[0]!)} and ${show(other)} both set ${what} to different values; keep one of them`,
      });
    }
    return set[0]?.value as T | undefined;
  }
  const zero = file.zero_optimization;
  const p = file.parallel ?? {};
  const t = file.train ?? {};
  const dsBatchKey =
    typeof file.train_batch_size === 'number'
      ? 'train_batch_size'
      : 'train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel ranks';
  const dsPrecisionKey = file.bf16?.enabled ? 'bf16.enabled' : 'fp16.enabled';
  const stage = zero?.stage;

  /** DeepSpeed's optimizer and scheduler sections against the file's own train.* keys */
  const optimizerSettings = () =>
    Object.fromEntries(
      (['lr', 'beta1', 'beta2', 'eps', 'weight_decay', 'warmup_steps', 'min_lr', 'steps'] as const).map((k) => [
        k,
        one(
          OPTIMIZER_FIELD[k],
          k === 'steps' ? 'the step count (the schedule ends at the last step)' : `train.${k}`,
          { key: `train.${k}`, value: t[k] },
          { key: ds.trainSources?.[k] ?? k, value: ds.train[k] },
        ),
      ]),
    );
  const settings: FileSettings = {
    strategy: one(
      'strategy',
      'the strategy',
      { key: 'strategy', value: file.strategy },
      { key: 'parallel.strategy', value: p.strategy },
      {
        key: 'zero_optimization.stage',
        value: ds.parallel.strategy,
        shown: `${stage} (${ds.parallel.strategy})`,
      },
    ),
    precision: one(
      'precision',
      'the precision',
      { key: 'precision', value: file.precision },
      {
        key: dsPrecisionKey,
        value: ds.precision,
        shown: `true (${ds.precision})`,
      },
    ),
    parallel: {
      ...p,
      micro_batches: one(
        'micro_batches',
        'the micro-batches',
        { key: 'parallel.micro_batches', value: p.micro_batches },
        {
          key: 'gradient_accumulation_steps',
          value: ds.parallel.micro_batches,
        },
      ),
      bucket_cap_mb: one(
        'bucket_cap_mb',
        'the bucket cap',
        { key: 'parallel.bucket_cap_mb', value: p.bucket_cap_mb },
        {
          key: 'zero_optimization.reduce_bucket_size',
          value: ds.parallel.bucket_cap_mb,
          shown: `${zero?.reduce_bucket_size} (${ds.parallel.bucket_cap_mb} MiB of fp32)`,
        },
      ),
      offload_optimizer: one(
        'offload_optimizer',
        'the optimizer offload',
        { key: 'parallel.offload_optimizer', value: p.offload_optimizer },
        {
          key: 'zero_optimization.offload_optimizer.device',
          value: ds.parallel.offload_optimizer,
        },
      ),
      prefetch: one(
        'prefetch',
        'ZeRO-3 prefetch',
        { key: 'parallel.prefetch', value: p.prefetch },
        {
          key: 'zero_optimization.stage3_prefetch_bucket_size',
          value: ds.parallel.prefetch,
          shown: `${zero?.stage3_prefetch_bucket_size} (prefetch ${ds.parallel.prefetch ? 'on' : 'off'})`,
        },
      ),
      partition_activations: one(
        'partition_activations',
        'activation partitioning',
        { key: 'parallel.partition_activations', value: p.partition_activations },
        { key: 'activation_checkpointing.partition_activations', value: ds.parallel.partition_activations },
      ),
    },
    train: {
      ...t,
      batch_size: one(
        'batch_size',
        'the batch size',
        { key: 'train.batch_size', value: t.batch_size },
        {
          key: dsBatchKey,
          value: ds.train.batch_size,
        },
      ),
      grad_clip: one(
        'grad_clip',
        'gradient clipping',
        { key: 'train.grad_clip', value: t.grad_clip },
        {
          key: 'gradient_clipping',
          value: ds.train.grad_clip,
        },
      ),
      activation_checkpointing: one(
        'activation_checkpointing',
        'activation checkpointing',
        { key: 'train.activation_checkpointing', value: t.activation_checkpointing },
        { key: 'activation_checkpointing', value: ds.train.activation_checkpointing, shown: '{...} (a section turns it on)' },
      ),
      ...optimizerSettings(),
    },
    ...(ds.loss_scale ? { loss_scale: ds.loss_scale } : {}),
  };
  // an unset setting stays absent (a spread of `undefined` would override the defaults)
  for (const section of [settings.parallel, settings.train] as Record<string, unknown>[])
    for (const k of Object.keys(section)) if (section[k] === undefined) delete section[k];
  return { settings, conflicts };
}
