// What a client asks the controller to launch: the knobs of `shardwise train`, as data. The
// controller resolves it exactly as the CLI resolves its flags (defaults <- preset <- model
// sizes <- these fields) and validates the full job with the rank protocol's schema, so a
// field here that is missing means "the CLI's default".
import { GradCompressionSchema } from '../grad-compression.js';
import { z } from 'zod';
import { PRECISIONS } from '../precision.js';

/** A run's id is its folder's name inside the runs root: no separators, no '..'. */
export const RUN_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$/;
export const RunIdSchema = z
  .string()
  .regex(RUN_ID_RE, 'a run id is a run folder name: letters, digits, ".", "_" or "-", at most 120 characters');

const int = (min = 0) => z.number().int().min(min);

export const LaunchConfigSchema = z.strictObject({
  /** run folder name; default: "<time>-<preset>-<strategy>-<random>" */
  name: RunIdSchema.optional(),
  /** model preset (tiny, small); the sizes below override it */
  preset: z.string().min(1).optional(),
  model: z
    .strictObject({
      n_layer: int(1).optional(),
      n_head: int(1).optional(),
      d_model: int(1).optional(),
      block_size: int(1).optional(),
    })
    .optional(),
  /** builtin:grammar, builtin:arith, or a text file on the controller's machine */
  dataset: z.string().min(1).optional(),
  /** single, dp, ddp, zero1, zero2, zero3 (the controller names the ones this build runs) */
  strategy: z.string().min(1).optional(),
  world: int(1).max(64).optional(),
  /** tensor-parallel ranks (strategy tp or 3d) */
  tp: int(1).max(64).optional(),
  /** pipeline stages (strategy pp or 3d) */
  pp: int(1).max(64).optional(),
  /** data-parallel replicas (strategy 3d) */
  dp: int(1).max(64).optional(),
  /** pipeline schedule (strategy pp or 3d) */
  schedule: z.enum(['gpipe', '1f1b']).optional(),
  /** how blocks are split into pipeline stages (strategy pp): by parameter count or by measured time */
  partition: z.enum(['params', 'time']).optional(),
  /** false: ranks record and send no spans (timelines and overlap stay empty; not for pp or 3d) */
  spans: z.boolean().optional(),
  /**
   * Where each rank runs, rank order: this machine ("local") or a paired agent (its HOST:PORT),
   * optionally on one of that machine's WebGPU adapters (index or name). Default: every rank
   * here, on `device`. `shardwise train --placement local,HOST:PORT@ADAPTER` is the same list.
   */
  placement: z
    .array(z.strictObject({ machine: z.string().min(1), device: z.string().min(1).optional() }))
    .min(1)
    .max(64)
    .optional(),
  micro_batches: int(1).optional(),
  bucket_cap_mb: z.number().nonnegative().optional(),
  offload_optimizer: z.enum(['none', 'cpu']).optional(),
  prefetch: z.boolean().optional(),
  /** weights and gradients in 32 or 16 bits on the device (default fp32); bf16/fp16 keep an fp32 master copy */
  precision: z.enum(PRECISIONS).optional(),
  /** fp16 only: loss scaling with DeepSpeed's names (defaults 16, 1000, 2, 1; static_scale > 0 = a fixed scale) */
  loss_scale: z
    .strictObject({
      initial_scale_power: int().max(127).optional(),
      loss_scale_window: int(1).optional(),
      hysteresis: int(1).optional(),
      min_loss_scale: z.number().positive().optional(),
      consecutive_hysteresis: z.boolean().optional(),
      static_scale: z.number().positive().optional(),
    })
    .optional(),
  /** ddp: a communication hook for the gradient buckets (fp16, bf16, PowerSGD); zero1/zero2: fp16 or bf16 reduce-scatter (common/grad-compression.ts) */
  grad_compression: GradCompressionSchema.optional(),
  steps: int(1).optional(),
  batch_size: int(1).optional(),
  seq_len: int(1).optional(),
  lr: z.number().positive().optional(),
  min_lr: z.number().nonnegative().optional(),
  warmup_steps: int().optional(),
  weight_decay: z.number().nonnegative().optional(),
  grad_clip: z.number().nonnegative().optional(),
  seed: int().optional(),
  eval_interval: int().optional(),
  eval_batches: int(1).optional(),
  checkpoint_interval: int().optional(),
  keep_checkpoints: int(1).optional(),
  /** also checkpoint when this many minutes passed since the last checkpoint (0 = only by steps); default 10 */
  checkpoint_minutes: z.number().nonnegative().optional(),
  activation_checkpointing: z.boolean().optional(),
  /** WebGPU adapter index or name */
  device: z.string().min(1).optional(),
  /** survive lost ranks and machines: shrink to `min` ranks, grow back to `max`, at most `max_restarts` changes (common/api/elastic.ts) */
  elastic: z
    .strictObject({
      min: int(1).max(64),
      max: int(1).max(64),
      max_restarts: int().max(1000).optional(),
    })
    .refine((e) => e.min <= e.max, { message: 'elastic.min must be at most elastic.max (MIN:MAX ranks)' })
    .optional(),
});
export type LaunchConfig = z.infer<typeof LaunchConfigSchema>;
