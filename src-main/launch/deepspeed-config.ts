// DeepSpeed's configuration names, accepted in `--config FILE` beside Shardwise's own
// sections, so a user's ds_config.json mostly carries over:
//   train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x world
//   zero_optimization.stage 0 -> ddp, 1 -> zero1, 2 -> zero2, 3 -> zero3 (stage3_prefetch_bucket_size 0 = no prefetch)
//   zero_optimization.offload_optimizer.device "cpu" -> ZeRO-Offload
//   zero_optimization.reduce_bucket_size (elements, as DeepSpeed counts) -> bucket cap
//   activation_checkpointing.partition_activations / contiguous_memory_optimization -> checkpointing
//   bf16.enabled -> precision bf16; fp16.enabled -> precision fp16, with fp16.loss_scale (0 =
//   dynamic, > 0 = that static scale), initial_scale_power, loss_scale_window, hysteresis,
//   consecutive_hysteresis and min_loss_scale as its loss scaling (a disabled section is ignored,
//   as DeepSpeed does); both enabled is an error
// Keys accepted without effect (IGNORED below: overlap_comm, contiguous_gradients,
// allgather_bucket_size, offload_optimizer's pin_memory/buffer_count/ratio/nvme_path, ...) come
// back as notes, each with why, which the run prints and keeps in its summary.
// Each impossible combination is an error that names the field and says why; a file's errors
// come all at once (one DeepSpeedConfigError listing every one).
import { z } from 'zod';
import {
  DeepSpeedLoggingSchema,
  DeepSpeedOptimizerSchema,
  DeepSpeedSchedulerSchema,
  mapDeepSpeedOptimizer,
  type OptimizerSettings,
  type OptimizerSources,
} from './deepspeed-optimizer.js';
import { strategyAtZeroStage, TABLE } from '../../common/strategies.js';
import type { LossScaleSpec, Precision } from '../../common/precision.js';
import type { JobField } from '../../common/strategies.js';
import type { ParallelSpec } from '../../workers/protocol/train.js';

/** Hugging Face Trainer's "auto": the value is left to Shardwise (mapDeepSpeedAll notes it) */
const orAuto = <T extends z.ZodTypeAny>(t: T, what: string) =>
  z.union([t, z.literal('auto')], { error: `expected ${what}, or "auto" (Hugging Face's placeholder)` });

export const DeepSpeedSchema = z
  .object({
    train_batch_size: orAuto(z.number().int().positive(), 'a positive integer').optional(),
    train_micro_batch_size_per_gpu: orAuto(z.number().int().positive(), 'a positive integer').optional(),
    gradient_accumulation_steps: orAuto(z.number().int().positive(), 'a positive integer').optional(),
    gradient_clipping: orAuto(z.number().nonnegative(), 'a number >= 0').optional(),
    optimizer: DeepSpeedOptimizerSchema.optional(),
    scheduler: DeepSpeedSchedulerSchema.optional(),
    ...DeepSpeedLoggingSchema,
    zero_optimization: z
      .object({
        stage: z.number().int().min(0).max(3).optional(),
        reduce_bucket_size: z.number().positive().optional(),
        allgather_bucket_size: z.number().positive().optional(),
        overlap_comm: z.boolean().optional(),
        contiguous_gradients: z.boolean().optional(),
        stage3_prefetch_bucket_size: z.number().nonnegative().optional(),
        offload_optimizer: z
          .object({ device: z.enum(['none', 'cpu', 'nvme']) })
          .passthrough()
          .optional(),
      })
      .strict()
      .optional(),
    bf16: z.object({ enabled: z.boolean().optional() }).strict().optional(),
    fp16: z
      .object({
        enabled: z.boolean().optional(),
        loss_scale: z.number().nonnegative().optional(),
        initial_scale_power: z.number().int().min(0).max(127).optional(),
        loss_scale_window: z.number().int().positive().optional(),
        hysteresis: z.number().int().positive().optional(),
        consecutive_hysteresis: z.boolean().optional(),
        min_loss_scale: z.number().positive().optional(),
      })
      .strict()
      .optional(),
    activation_checkpointing: z
      .object({
        partition_activations: z.boolean().optional(),
        contiguous_memory_optimization: z.boolean().optional(),
        cpu_checkpointing: z.boolean().optional(),
      })
      .strict()
      .optional(),
  })
  .passthrough();

export type DeepSpeedConfig = z.infer<typeof DeepSpeedSchema>;

export class DeepSpeedConfigError extends Error {
  override name = 'DeepSpeedConfigError';
  /** the request field the error is about, where one is (else the config file as a whole) */
  constructor(
    message: string,
    readonly field: JobField = 'config',
  ) {
    super(message);
  }
}

/** Every problem of one file: the message lists them one a line; `errors` keeps each with its field. */
export class DeepSpeedConfigErrors extends DeepSpeedConfigError {
  override name = 'DeepSpeedConfigErrors';
  constructor(readonly errors: DeepSpeedConfigError[]) {
    super(errors.map((e) => e.message).join('\n'), errors[0]!.field);
  }
}

export interface DeepSpeedMapping {
  parallel: Partial<ParallelSpec>;
  train: { batch_size?: number; grad_clip?: number; activation_checkpointing?: boolean } & OptimizerSettings;
  /** the key each optimizer or scheduler setting came from ("scheduler.params.warmup_num_steps"), for conflict messages */
  trainSources?: OptimizerSources;
  precision?: Precision;
  loss_scale?: Partial<LossScaleSpec>;
  /** keys accepted without effect, each with why ("zero_optimization.overlap_comm false ignored: ...") */
  notes: string[];
}

/** Why a key this build accepts changes nothing: its behaviour is fixed here. */
const IGNORED: Record<string, string> = {
  'zero_optimization.overlap_comm': 'this build always overlaps gradient communication with backward',
  'zero_optimization.contiguous_gradients': 'gradients are always kept in one contiguous buffer',
  'zero_optimization.allgather_bucket_size': 'weights are gathered whole per layer, not in buckets of a set size',
  'activation_checkpointing.contiguous_memory_optimization':
    'checkpointed activations are kept per layer (the section turns checkpointing on)',
  'activation_checkpointing.cpu_checkpointing': 'checkpointed activations stay on the device',
};
/** offload_optimizer's keys besides device: the host optimizer uses ordinary host memory, the whole shard */
const OFFLOAD_IGNORED =
  'ZeRO-Offload here keeps the whole optimizer shard in ordinary host memory (no pinned buffers, partial ratio or NVMe)';

function ignoredNotes(ds: DeepSpeedConfig): string[] {
  const notes: string[] = [];
  const note = (key: string, value: unknown, why: string) => notes.push(`${key} ${JSON.stringify(value)} ignored: ${why}`);
  const zero = ds.zero_optimization;
  const ac = ds.activation_checkpointing;
  for (const [key, why] of Object.entries(IGNORED)) {
    const [section, name] = key.split('.') as [string, string];
    const value = (section === 'zero_optimization' ? zero : ac)?.[name as never];
    // cpu_checkpointing true is refused, not ignored
    if (value !== undefined && !(name === 'cpu_checkpointing' && value === true)) note(key, value, why);
  }
  for (const [k, v] of Object.entries(zero?.offload_optimizer ?? {}))
    if (k !== 'device') note(`zero_optimization.offload_optimizer.${k}`, v, OFFLOAD_IGNORED);
  return notes;
}

/** Maps the DeepSpeed fields present in `ds` (world from the CLI or config) onto Shardwise's; every problem at once. */
export function mapDeepSpeed(ds: DeepSpeedConfig, world: number | undefined): DeepSpeedMapping {
  const { errors, ...out } = mapDeepSpeedAll(ds, world);
  if (errors.length === 1) throw errors[0];
  if (errors.length) throw new DeepSpeedConfigErrors(errors);
  return out;
}

/** mapDeepSpeed, its refusals returned beside what did map (the resolver reports them with the file's other problems). */
export function mapDeepSpeedAll(file: DeepSpeedConfig, world: number | undefined): DeepSpeedMapping & { errors: DeepSpeedConfigError[] } {
  const { ds, notes } = withoutAuto(file);
  const out: DeepSpeedMapping = { parallel: {}, train: {}, notes: [...notes, ...ignoredNotes(ds)] };
  const errors: DeepSpeedConfigError[] = [];
  const refuse = (message: string, field?: JobField) => errors.push(new DeepSpeedConfigError(message, field));
  const opt = mapDeepSpeedOptimizer(ds, refuse);
  Object.assign(out.train, opt.train);
  out.trainSources = opt.sources;
  out.notes.push(...opt.notes);
  const zero = ds.zero_optimization;
  if (zero?.stage !== undefined) out.parallel.strategy = strategyAtZeroStage(zero.stage);
  const device = zero?.offload_optimizer?.device;
  if (device === 'nvme') refuse('zero_optimization.offload_optimizer.device "nvme" is not supported; use "cpu" or "none"');
  const takes = (knob: 'offload_optimizer' | 'prefetch') =>
    out.parallel.strategy !== undefined && TABLE[out.parallel.strategy].knobs.has(knob);
  if (device === 'cpu') {
    if (!takes('offload_optimizer')) {
      if (zero?.stage === 3)
        refuse('zero_optimization.offload_optimizer.device "cpu" is available with stages 1 and 2 in this build, not yet with stage 3');
      else
        refuse(
          'zero_optimization.offload_optimizer.device "cpu" needs zero_optimization.stage 1 or higher: ZeRO-Offload moves the partitioned optimizer to the host',
        );
    } else out.parallel.offload_optimizer = 'cpu';
  }
  if (zero?.reduce_bucket_size !== undefined) out.parallel.bucket_cap_mb = (zero.reduce_bucket_size * 4) / 2 ** 20; // elements of fp32
  if (zero?.stage3_prefetch_bucket_size !== undefined) {
    if (!takes('prefetch')) refuse('zero_optimization.stage3_prefetch_bucket_size applies to zero_optimization.stage 3');
    else out.parallel.prefetch = zero.stage3_prefetch_bucket_size > 0;
  }
  if (ds.gradient_accumulation_steps !== undefined) out.parallel.micro_batches = ds.gradient_accumulation_steps;
  const ga = ds.gradient_accumulation_steps ?? 1;
  const w = world ?? 1;
  if (ds.train_batch_size !== undefined) {
    out.train.batch_size = ds.train_batch_size;
    if (ds.train_micro_batch_size_per_gpu !== undefined && ds.train_micro_batch_size_per_gpu * ga * w !== ds.train_batch_size) {
      refuse(
        `train_batch_size ${ds.train_batch_size} must equal train_micro_batch_size_per_gpu ${ds.train_micro_batch_size_per_gpu} x gradient_accumulation_steps ${ga} x world ${w} = ${ds.train_micro_batch_size_per_gpu * ga * w}`,
      );
    }
  } else if (ds.train_micro_batch_size_per_gpu !== undefined) {
    out.train.batch_size = ds.train_micro_batch_size_per_gpu * ga * w;
  }
  if (ds.gradient_clipping !== undefined) out.train.grad_clip = ds.gradient_clipping;
  const ac = ds.activation_checkpointing;
  if (ac?.cpu_checkpointing)
    refuse('activation_checkpointing.cpu_checkpointing is not supported: checkpointed activations stay on the device');
  // each tensor-parallel rank keeps 1/tp of every checkpointed input (the CLI refuses it without --strategy tp)
  if (ac?.partition_activations !== undefined) out.parallel.partition_activations = ac.partition_activations;
  if (ac) out.train.activation_checkpointing = true;
  mapPrecision(ds, out, refuse);
  return { ...out, errors };
}

type Numbers<T> = { [K in keyof T]: Exclude<T[K], 'auto'> };

/** The top-level keys Hugging Face's Trainer may leave as "auto", dropped with a note (Shardwise's own value applies). */
function withoutAuto(file: DeepSpeedConfig): { ds: Numbers<DeepSpeedConfig>; notes: string[] } {
  const ds = { ...file } as Record<string, unknown>;
  const notes: string[] = [];
  for (const k of ['train_batch_size', 'train_micro_batch_size_per_gpu', 'gradient_accumulation_steps', 'gradient_clipping'])
    if (ds[k] === 'auto') {
      delete ds[k];
      notes.push(`${k} "auto" ignored: it is Hugging Face Trainer's placeholder; Shardwise's own value applies`);
    }
  return { ds: ds as Numbers<DeepSpeedConfig>, notes };
}

function mapPrecision(ds: DeepSpeedConfig, out: DeepSpeedMapping, refuse: (message: string, field?: JobField) => void): void {
  const bf16 = ds.bf16?.enabled === true;
  const fp16 = ds.fp16?.enabled === true;
  if (bf16 && fp16) refuse('bf16.enabled and fp16.enabled are both true; enable one of them (bf16 needs no loss scaling)', 'precision');
  else if (bf16) out.precision = 'bf16';
  else if (fp16) out.precision = 'fp16';
  // the section's scaling applies whenever the run resolves to fp16 (--precision fp16 with enabled unset, too)
  if (!ds.fp16) return;
  const { enabled: _, loss_scale, ...dynamic } = ds.fp16;
  out.loss_scale = { ...dynamic, ...(loss_scale !== undefined && loss_scale > 0 ? { static_scale: loss_scale } : {}) };
}
