// Runs as the API shows them: list rows, the full inspection, metric and span rows. Mirrors
// the run folder (src-main/runs/run-folder.ts): config.json, state.json, metrics.jsonl,
// spans.jsonl, summary.json, checkpoints/step-NNNNNN.
import { z } from 'zod';
import { RankTflopsSchema } from '../advisor/rank-tflops.js';
import { RunMetaSchema } from './annotations.js';
import { ElasticSummarySchema, SegmentRowSchema } from './elastic.js';
import { RunPredictionSchema } from './prediction.js';

/**
 * starting/running: live; completed; failed (a rank died or reported an error: `error` names
 * the rank and reason); stopped (by a user, resumable); interrupted (the controller went away
 * mid-run, resumable).
 */
export const RUN_STATUSES = ['starting', 'running', 'completed', 'failed', 'stopped', 'interrupted'] as const;
export type RunStatusName = (typeof RUN_STATUSES)[number];

export const RunStateSchema = z.looseObject({
  status: z.enum(RUN_STATUSES),
  created_at: z.string(),
  updated_at: z.string(),
  step: z.number(),
  steps: z.number(),
  error: z.string().optional(),
  /** rank that failed the run, where one did */
  failed_rank: z.number().optional(),
  pid: z.number().optional(),
  /** the machine `pid` runs on */
  host: z.string().optional(),
  /** Ψ, once rank 0 built the model */
  params: z.number().optional(),
  /** the launch config's placement (kept for a resume) */
  placement: z.array(z.object({ machine: z.string(), device: z.string().optional() })).optional(),
  /** once every rank started: where each runs ("this machine" or "NAME (HOST:PORT)" of an agent) and its pid there */
  ranks: z.array(z.object({ rank: z.number(), machine: z.string(), pid: z.number() })).optional(),
  /** an elastic run: its bounds, restarts and membership segments so far (common/api/elastic.ts) */
  elastic: ElasticSummarySchema.optional(),
});
export type RunStateView = z.infer<typeof RunStateSchema>;

/** Whether runs.resume would continue the run (from its folder: status and checkpoints), and if not why. */
const Resumability = {
  resumable: z.boolean(),
  /** e.g. "stopped at step 2 before its first checkpoint"; absent when resumable */
  not_resumable_reason: z.string().optional(),
};

export const RunListItemSchema = z.object({
  id: z.string(),
  dir: z.string(),
  status: z.enum(RUN_STATUSES),
  step: z.number(),
  steps: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
  preset: z.string().nullable(),
  strategy: z.string(),
  world: z.number(),
  final_loss: z.number().nullable(),
  error: z.string().optional(),
  /** fp32, bf16 or fp16 (the config's precision; fp32 where it names none) */
  precision: z.string().optional(),
  /** meta.json: the user's tags and note (runs.annotate) */
  ...RunMetaSchema.partial().shape,
  ...Resumability,
});
export type RunListItem = z.infer<typeof RunListItemSchema>;

const BytesByCategory = z.record(z.string(), z.number());

/** One optimizer step over all ranks (the same line `train --json` prints). */
export const StepRowSchema = z.looseObject({
  type: z.literal('step'),
  step: z.number(),
  loss: z.number(),
  lr: z.number(),
  grad_norm: z.number(),
  tokens_per_s: z.number(),
  step_ms: z.number(),
  /** rank -> achieved model and hardware TFLOP/s, and MFU where the adapter's peak is known */
  tflops: z.record(z.string(), RankTflopsSchema).optional(),
  /** rank -> bytes by category at the end of the step */
  memory: z.record(z.string(), BytesByCategory),
  /** fp16: the loss scale of the step's backward */
  loss_scale: z.number().optional(),
  /** mixed precision: the update was skipped for an overflow, and the count so far */
  skipped: z.boolean().optional(),
  skipped_steps: z.number().optional(),
});
export type StepRow = z.infer<typeof StepRowSchema>;

export const MetricRowSchema = z.discriminatedUnion('type', [
  StepRowSchema,
  z.looseObject({ type: z.literal('eval'), step: z.number(), val_loss: z.number() }),
  z.looseObject({ type: z.literal('checkpoint'), step: z.number(), path: z.string() }),
  SegmentRowSchema,
]);
export type MetricRow = z.infer<typeof MetricRowSchema>;

export const SpanRowSchema = z.looseObject({
  rank: z.number(),
  step: z.number(),
  kind: z.enum(['forward', 'backward', 'optimizer', 'comm']),
  name: z.string(),
  /** ms on the run's one clock */
  start: z.number(),
  end: z.number(),
  micro: z.number().optional(),
  bytes: z.number().optional(),
  labels: z.record(z.string(), z.union([z.string(), z.number()])).optional(),
});
export type SpanRow = z.infer<typeof SpanRowSchema>;

export const RunDetailSchema = z.object({
  id: z.string(),
  dir: z.string(),
  /** the resolved training job (workers/protocol/train.ts TrainJob) */
  config: z.record(z.string(), z.unknown()),
  state: RunStateSchema,
  /** summary.json (the `train --json` summary line) once the run completed */
  summary: z.record(z.string(), z.unknown()).nullable(),
  /** steps of the checkpoints on disk, ascending */
  checkpoints: z.array(z.number()),
  /** process ids of the live rank processes; null when this controller does not run it */
  live: z.object({ pids: z.array(z.number()) }).nullable(),
  /** prediction.json: the advisor's prediction for the run's layout, where the controller made one */
  prediction: RunPredictionSchema.optional(),
  ...Resumability,
});
export type RunDetail = z.infer<typeof RunDetailSchema>;

export const LogRowSchema = z.object({
  time: z.number(),
  level: z.enum(['info', 'error']),
  message: z.string(),
  /** the rank that printed it; absent for the controller's own lines */
  rank: z.number().optional(),
});
export type LogRow = z.infer<typeof LogRowSchema>;
