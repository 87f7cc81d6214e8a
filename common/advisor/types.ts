// The strategy advisor's request and answer: `shardwise plan`, the API's
// `runs.advise` and the launch view's Advisor panel all speak these. A request names a model
// (a preset or sizes), the batch and sequence length, and the hardware (this machine's devices,
// a placement, or a what-if machine); the answer lists every layout the hardware allows, ranked
// (fitting first, fastest first), each with its predicted memory per rank and category, its
// step time split into compute, exposed communication, pipeline bubble and host copies, and
// why it was chosen or rejected. Memory categories are common/memory-categories.ts's names (`comm` is
// the communication buffers). Pure: zod only.
import { z } from 'zod';
import { LaunchConfigSchema } from '../api/launch-config.js';
import type { GptConfig } from '../model-layout.js';
import { STRATEGY_NAMES } from '../strategies.js';

export const PRECISIONS = ['fp32', 'bf16', 'fp16'] as const;
export type Precision = (typeof PRECISIONS)[number];

const int = (min = 0) => z.number().int().min(min);
const positive = z.number().positive();

/** A model by its sizes (the vocabulary defaults to the dataset's assumed one, common/model-params.ts ASSUMED_VOCAB). */
export const AdviseModelSchema = z.strictObject({
  n_layer: int(1),
  n_head: int(1),
  d_model: int(1),
  block_size: int(1),
  vocab_size: int(1).optional(),
}) satisfies z.ZodType<Omit<GptConfig, 'vocab_size'> & Partial<Pick<GptConfig, 'vocab_size'>>>;
export type AdviseModel = z.infer<typeof AdviseModelSchema>;

/** Hardware the user does not have: N devices of a given memory and peak, or N of a known device class, and their links. */
export const WhatIfSchema = z.union([
  z.strictObject({
    devices: int(1).max(64),
    /** device memory in GiB (2^30 bytes), as device datasheets mean their "GB" */
    memory_gb: positive,
    /** peak dense TFLOP/s at the plan's precision (fp32, or the 16-bit tensor rate for bf16/fp16) */
    tflops: positive,
    link_gbps: positive,
    latency_us: z.number().nonnegative(),
  }),
  z.strictObject({
    device_class: z.string().min(1),
    devices: int(1).max(64),
    link_gbps: positive,
    latency_us: z.number().nonnegative(),
  }),
]);
export type WhatIf = z.infer<typeof WhatIfSchema>;

export const AdviseRequestSchema = z.strictObject({
  /** model preset (tiny, small); `model` instead gives the sizes */
  preset: z.string().min(1).optional(),
  model: AdviseModelSchema.optional(),
  /** global batch (sequences per optimizer step) */
  batch_size: int(1),
  /** tokens per sequence (at most the model's block_size) */
  seq_len: int(1),
  precision: z.enum(PRECISIONS).optional(),
  /** ranks to plan for on this machine's devices (default: one per adapter, at least 2 where the machine has one adapter; layouts with fewer ranks are listed too) */
  devices: int(1).max(64).optional(),
  /** where each rank runs (as LaunchConfig's placement): the plan uses exactly these ranks */
  placement: LaunchConfigSchema.shape.placement,
  what_if: WhatIfSchema.optional(),
});
export type AdviseRequest = z.infer<typeof AdviseRequestSchema>;

/** One layout: the strategy and its knobs (the launch form's names). */
export const LayoutSchema = z.strictObject({
  strategy: z.enum(STRATEGY_NAMES),
  world: int(1),
  tp: int(1).optional(),
  pp: int(1).optional(),
  dp: int(1).optional(),
  micro_batches: int(1),
  schedule: z.enum(['gpipe', '1f1b']).optional(),
  offload_optimizer: z.boolean().optional(),
  activation_checkpointing: z.boolean().optional(),
  precision: z.enum(PRECISIONS).optional(),
});
export type Layout = z.infer<typeof LayoutSchema>;

/** Bytes per memory category (common/memory-categories.ts's names) and their sum. */
export const RankMemorySchema = z.object({
  params: z.number(),
  grads: z.number(),
  optimizer: z.number(),
  activations: z.number(),
  comm: z.number(),
  workspace: z.number(),
  total: z.number(),
});
export type RankMemory = z.infer<typeof RankMemorySchema>;

export const RankPlanSchema = z.object({
  rank: int(),
  /** the device the rank runs on, as the plan names it ("GPU 0", "agent-b GPU 1", "what-if GPU 3") */
  device: z.string(),
  /** that device's memory where known */
  device_memory_bytes: z.number().optional(),
  /** predicted peak bytes on the device */
  memory: RankMemorySchema,
  /** bytes the rank keeps on the host (ZeRO-Offload's fp32 master weights, moments and gradients) */
  host_memory_bytes: z.number(),
});
export type RankPlan = z.infer<typeof RankPlanSchema>;

/**
 * Predicted time of one optimizer step; step_ms = compute + comm_exposed + bubble + host_copy.
 * bubble_ms is the device's idle time (0 where the stages share one adapter: it fills one
 * stage's idle slots with another's work); rank_idle_ms is what a run measures, each rank's idle
 * time in its schedule's window, (p - 1)/(m + p - 1) of the step for p stages and m micro-batches.
 */
export const StepTimeSchema = z.object({
  step_ms: z.number(),
  compute_ms: z.number(),
  comm_exposed_ms: z.number(),
  bubble_ms: z.number(),
  host_copy_ms: z.number(),
  /** pipelined layouts: each rank's idle time in the step (its schedule's bubble), ms */
  rank_idle_ms: z.number().optional(),
});
export type StepTime = z.infer<typeof StepTimeSchema>;

export const LayoutPlanSchema = z.object({
  layout: LayoutSchema,
  /** what the launch form is filled with (and `runs.launch` accepts) */
  launch: LaunchConfigSchema,
  fits: z.boolean(),
  /** why chosen or rejected, in the seeds' terms: "optimizer 12Ψ = 3.1 GB per rank > 2 GB on GPU 1: use ZeRO-2 or offload" */
  reason: z.string(),
  ranks: z.array(RankPlanSchema),
  time: StepTimeSchema,
  tokens_per_s: z.number(),
  /** model FLOP/s over the devices' peak, where the peak is known */
  mfu: z.number().optional(),
  /** 0 = the advisor's first choice */
  rank_order: int(),
});
export type LayoutPlan = z.infer<typeof LayoutPlanSchema>;

export const AdviseResultSchema = z.object({
  /** where the kernel throughputs and link speeds came from */
  profile: z.object({ source: z.enum(['measured', 'defaults', 'what-if']), measured_at: z.string().optional() }),
  /** the model planned for: its sizes, vocabulary and Ψ */
  model: z.object({
    n_layer: z.number(),
    n_head: z.number(),
    d_model: z.number(),
    block_size: z.number(),
    vocab_size: z.number(),
    params: z.number(),
  }),
  /** ranked: fitting first, fastest first */
  layouts: z.array(LayoutPlanSchema),
  notes: z.array(z.string()),
});
export type AdviseResult = z.infer<typeof AdviseResultSchema>;
