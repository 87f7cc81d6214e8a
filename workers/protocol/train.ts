// The training job a controller hands a rank process, and the messages the rank sends back.
// Both sides validate with these schemas: a job is data (sizes, paths, numbers), never code.
import { z } from 'zod';
import { DEFAULT_LOSS_SCALE, DEFAULT_PRECISION, PRECISIONS, type Precision } from '../../common/precision.js';
import { GradCompressionSchema } from '../../common/grad-compression.js';
import type { GptConfig } from '../../common/model-layout.js';
import { STRATEGY_NAMES } from '../../common/strategies.js';
import { EmulatedReportSchema, EmulateSpecSchema } from './emulate.js';
import { WireNumber } from './wire-number.js';

export const ModelSpecSchema = z
  .object({
    preset: z.string().optional(),
    n_layer: z.number().int().positive(),
    n_head: z.number().int().positive(),
    d_model: z.number().int().positive(),
    block_size: z.number().int().positive(),
  })
  .strict() satisfies z.ZodType<Omit<GptConfig, 'vocab_size'> & { preset?: string }>; // the vocabulary comes from the dataset

export const TrainSpecSchema = z
  .object({
    steps: z.number().int().positive(),
    batch_size: z.number().int().positive(),
    /** sequence length T; defaults to the model's block_size */
    seq_len: z.number().int().positive().optional(),
    lr: z.number().positive(),
    min_lr: z.number().nonnegative(),
    warmup_steps: z.number().int().nonnegative(),
    weight_decay: z.number().nonnegative(),
    beta1: z.number().min(0).lt(1),
    beta2: z.number().min(0).lt(1),
    eps: z.number().positive(),
    grad_clip: z.number().nonnegative(),
    seed: z.number().int().nonnegative(),
    eval_interval: z.number().int().nonnegative(),
    eval_batches: z.number().int().positive(),
    checkpoint_interval: z.number().int().nonnegative(),
    /** also checkpoint when this many minutes passed since the last one (rank 0's clock); 0 = off; absent = 10 */
    checkpoint_minutes: z.number().nonnegative().optional(),
    keep_checkpoints: z.number().int().positive(),
    activation_checkpointing: z.boolean(),
  })
  .strict();

export type { GradCompression } from '../../common/grad-compression.js';

export const ParallelSpecSchema = z
  .object({
    /** a strategy of the table (common/strategies.ts): every one it lists, this build runs */
    strategy: z.enum(STRATEGY_NAMES),
    /** ranks (processes) of the run */
    world: z.number().int().positive().max(64),
    /** gradient accumulation: micro-batches per rank per optimizer step */
    micro_batches: z.number().int().positive(),
    /** DDP bucket cap in MiB (PyTorch's bucket_cap_mb); 0 = one parameter per bucket */
    bucket_cap_mb: z.number().nonnegative(),
    /** cap of the first DDP bucket in MiB */
    first_bucket_mb: z.number().nonnegative(),
    /** ZeRO-Offload (DeepSpeed's offload_optimizer.device): master weights, moments and update on the host */
    offload_optimizer: z.enum(['none', 'cpu']).optional(),
    /** ZeRO-3: gather the next layer's weights while the current one computes (DeepSpeed's stage3 prefetch) */
    prefetch: z.boolean().optional(),
    /** tensor-parallel group size (Megatron's tensor_model_parallel_size); strategy tp: = world */
    tp: z.number().int().positive().max(64).optional(),
    /** DeepSpeed's partition_activations: with TP and activation checkpointing, each TP rank keeps 1/tp of each checkpointed input (default on) */
    partition_activations: z.boolean().optional(),
    /** strategy 3d: data-parallel replicas (world = dp x tp x pp) */
    dp: z.number().int().positive().max(64).optional(),
    /** pipeline stages (strategy pp: equals world) */
    pp: z.number().int().positive().optional(),
    /** pipeline schedule: GPipe (all forwards, then all backwards) or 1F1B (default) */
    schedule: z.enum(['gpipe', '1f1b']).optional(),
    /**
     * pipeline: every micro-batch's forward lasts at least this many ms and its backward at least
     * twice that, on every stage (the stage waits out the rest inside its compute span). Makes
     * stage costs equal and independent of the CPU the rank processes share, for bubble
     * measurements; 0 (default) in real training.
     */
    stage_delay_ms: z.number().nonnegative().optional(),
    /**
     * pipeline: how blocks are split into stages: balanced by parameter count (default), or by
     * forward + backward time measured on rank 0's device before training (torchgpipe's balance_by_time)
     */
    partition: z.enum(['params', 'time']).optional(),
    /** compress the gradients' communication (common/grad-compression.ts): DDP's buckets through a hook, ZeRO-1/2's reduce-scatter in 16 bits; none by default */
    grad_compression: GradCompressionSchema.optional(),
  })
  .strict();
export type ParallelSpec = z.infer<typeof ParallelSpecSchema>;

export const DEFAULT_PARALLEL: ParallelSpec = {
  strategy: 'single',
  world: 1,
  micro_batches: 1,
  bucket_cap_mb: 0.25,
  first_bucket_mb: 0.0625,
};

/** fp16's loss scaling (common/precision.ts LossScaleSpec: DeepSpeed's names; defaults in DEFAULT_LOSS_SCALE) */
export const LossScaleSpecSchema = z
  .object({
    initial_scale_power: z.number().int().min(0).max(127),
    loss_scale_window: z.number().int().positive(),
    hysteresis: z.number().int().positive(),
    min_loss_scale: z.number().positive(),
    consecutive_hysteresis: z.boolean().optional(),
    static_scale: z.number().positive().optional(),
  })
  .strict();

export const TrainJobSchema = z
  .object({
    run_dir: z.string().min(1),
    model: ModelSpecSchema,
    data: z.object({ dataset: z.string().min(1) }).strict(),
    train: TrainSpecSchema,
    device: z.object({ adapter: z.string().optional() }).strict(),
    parallel: ParallelSpecSchema.optional(),
    /** weights and gradients on the device in 32 or 16 bits (fp32 master and moments either way); absent = fp32 */
    precision: z.enum(PRECISIONS).optional(),
    /** fp16 only: its loss scaling; absent = DEFAULT_LOSS_SCALE */
    loss_scale: LossScaleSpecSchema.optional(),
    /** checkpoint folder to continue from */
    resume_from: z.string().optional(),
    /** a Hugging Face GPT-2 folder whose weights and vocabulary a new run starts from (AdamW at step 0) */
    init_from: z.string().optional(),
    /** elastic runs: the ranks it may shrink to and grow back to, the restarts it survives (read by the controller; the ranks ignore it) */
    elastic: z
      .object({ min: z.number().int().positive(), max: z.number().int().positive(), max_restarts: z.number().int().nonnegative() })
      .strict()
      .optional(),
    /** elastic runs: where rank 0 keeps the newest whole state after every step (memory-backed, on the controller's machine) */
    replica_dir: z.string().optional(),
    /** spans: false = no compute/comm span per layer and collective (their cost measured apart: npm run bench:telemetry); default on */
    telemetry: z.object({ spans: z.boolean() }).strict().optional(),
    /** benchmarks only: time every layer on an emulated device (workers/protocol/emulate.ts); outputs say "emulated" */
    emulate: EmulateSpecSchema.optional(),
  })
  .strict();

export type TrainSpec = z.infer<typeof TrainSpecSchema>;
export type TrainJob = z.infer<typeof TrainJobSchema>;
export type LossScale = z.infer<typeof LossScaleSpecSchema>;

/** the job's precision, fp32 when it names none */
export const precisionOf = (job: Pick<TrainJob, 'precision'>): Precision => job.precision ?? DEFAULT_PRECISION;

/** the job's loss scaling: its own, else DeepSpeed's defaults; null unless it trains in fp16 */
export const lossScaleOf = (job: Pick<TrainJob, 'precision' | 'loss_scale'>): LossScale | null =>
  precisionOf(job) === 'fp16' ? { ...DEFAULT_LOSS_SCALE, ...job.loss_scale } : null;

const Bytes = z.record(z.string(), z.number());

// The losses and the gradient norm may be non-finite (a diverged run: workers/protocol/divergence.ts);
// the rank encodes such numbers as strings (wire-number.ts), and these fields decode them.

export const RankMessageSchema = z.discriminatedUnion('type', [
  /** rank 0 hosts the rendezvous store on this loopback port */
  z.object({ type: z.literal('store'), port: z.number().int().positive() }),
  z.object({
    type: z.literal('ready'),
    rank: z.number().optional(),
    adapter: z.object({ description: z.string(), vendor: z.string(), isSoftware: z.boolean(), backend: z.string() }).passthrough(),
    vocab_size: z.number(),
    params: z.number(),
    start_step: z.number(),
    memory: Bytes,
  }),
  z.object({
    type: z.literal('step'),
    rank: z.number().optional(),
    step: z.number(),
    loss: WireNumber,
    lr: z.number(),
    grad_norm: WireNumber,
    tokens: z.number(),
    step_ms: z.number(),
    tokens_per_s: z.number(),
    /** FLOPs this rank did in the step (common/advisor/flops.ts): model (no recomputation) and hardware (as computed) */
    flops: z.object({ model: z.number(), hardware: z.number() }).optional(),
    memory: Bytes,
    /** fp16: the loss scale this step's backward ran with */
    loss_scale: z.number().optional(),
    /** mixed precision: true when the gradients overflowed (inf/NaN on any rank) and every rank skipped the update */
    skipped: z.boolean().optional(),
    /** mixed precision: steps skipped so far in this run, this one included */
    skipped_steps: z.number().int().nonnegative().optional(),
  }),
  z.object({ type: z.literal('eval'), step: z.number(), val_loss: WireNumber }),
  /** one step's spans of a rank: compute per layer and micro-batch, and every collective */
  z.object({
    type: z.literal('spans'),
    rank: z.number(),
    step: z.number(),
    spans: z
      .array(
        z.object({
          kind: z.enum(['forward', 'backward', 'optimizer', 'comm']),
          name: z.string(),
          start: z.number(),
          end: z.number(),
          micro: z.number().optional(),
          /** pipeline stage of the rank that recorded the span */
          stage: z.number().optional(),
          bytes: z.number().optional(),
          labels: z.record(z.string(), z.union([z.string(), z.number()])).optional(),
        }),
      )
      .max(100_000),
  }),
  z.object({ type: z.literal('checkpoint'), step: z.number(), path: z.string() }),
  /** elastic runs: rank 0's newest whole state after `step`, a checkpoint folder under the job's replica_dir */
  z.object({ type: z.literal('replica'), step: z.number(), path: z.string() }),
  /** the rank was asked to stop (SIGTERM): it finished this step, wrote its checkpoint and exits 0 without 'done' */
  z.object({
    type: z.literal('stopped'),
    rank: z.number().optional(),
    step: z.number(),
    /** this rank received the SIGTERM itself (the others stopped with it, by agreement) */
    requested: z.boolean(),
  }),
  z.object({
    type: z.literal('done'),
    rank: z.number().optional(),
    steps: z.number(),
    final_loss: WireNumber,
    peak_bytes: Bytes,
    params: z.number(),
    /** fp16: the loss scale at the end of the run */
    loss_scale: z.number().optional(),
    /** mixed precision: steps whose update was skipped for an overflow */
    skipped_steps: z.number().int().nonnegative().optional(),
    /** payload bytes this rank sent per step, averaged over the steps */
    bytes_moved_per_step: z.number().optional(),
    /** the part of bytes_moved_per_step that went through shared-memory rings (ranks on one machine) */
    shm_bytes_per_step: z.number().optional(),
    /** share of gradient-communication time hidden under backward compute, in percent */
    overlap_pct: z.number().optional(),
    buckets: z.number().optional(),
    /** gradient compression (parallel.grad_compression; DDP's hook, ZeRO-1/2's 16-bit reduce-scatter): what it sent against float32 */
    grad_compression: z
      .object({
        hook: z.string(),
        /** float32 payload bytes over the bytes the hook all-reduced, whole run */
        compression_ratio: z.number(),
        uncompressed_bytes: z.number(),
        compressed_bytes: z.number(),
        /** PowerSGD: L2 norm of this rank's error-feedback memory at the end */
        error_feedback_norm: z.number().optional(),
        /** PowerSGD: where its math ran */
        math: z.enum(['device', 'host']).optional(),
      })
      .optional(),
    /** pipeline: payload bytes of boundary activations and their gradients this stage sent per step */
    p2p_bytes_per_step: z.number().optional(),
    /** pipeline: payload bytes of the tied-wte gradient all-reduce (first and last stage) per step */
    embedding_allreduce_bytes_per_step: z.number().optional(),
    /** the run timed an emulated device (benchmarks): which, and how far its times held */
    emulated: EmulatedReportSchema.optional(),
    /** pipeline: this rank's stage, its blocks [from, to), activation slots and parameter count */
    stage: z
      .object({
        index: z.number(),
        from: z.number(),
        to: z.number(),
        slots: z.number(),
        params: z.number(),
        /** how the stages were split; with 'time', the stage's measured forward + backward ms per micro-batch */
        partition: z.enum(['params', 'time']).optional(),
        profiled_ms: z.number().optional(),
      })
      .optional(),
  }),
  z.object({ type: z.literal('error'), rank: z.number().optional(), message: z.string(), kind: z.string().optional() }),
]);

export type RankMessage = z.infer<typeof RankMessageSchema>;

/**
 * How long a stopped run's ranks get to finish their step and write its checkpoint before they
 * are killed (a stuck or SIGSTOPped rank): the controller's, and an agent's, grace after SIGTERM.
 */
export const STOP_GRACE_MS = 60_000;

/** train.checkpoint_minutes when a job leaves it out: a checkpoint at least every 10 minutes */
export const DEFAULT_CHECKPOINT_MINUTES = 10;
