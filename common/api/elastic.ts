// What a run's layout and membership may change to, as data the CLI, the API, the run folder and
// the dashboard share: the layout a resume may pick (a subset of LaunchConfig: the same names,
// the same meaning), an elastic run's bounds, and the membership segments it went through.
// A segment is a stretch of steps trained by one set of ranks in one layout; a run that was
// never restarted has one (or none recorded, for a run that was not elastic).
import { z } from 'zod';
import { LaunchConfigSchema } from './launch-config.js';

/**
 * The layout fields a resume may change (`train --resume RUN --strategy zero3 --world 2`,
 * runs.resume's `layout`): every field absent keeps the run's own. The global batch
 * (batch_size) stays; micro-batches are recomputed for the new layout unless given.
 */
export const ResumeLayoutSchema = LaunchConfigSchema.pick({
  strategy: true,
  world: true,
  dp: true,
  tp: true,
  pp: true,
  schedule: true,
  micro_batches: true,
  precision: true,
  offload_optimizer: true,
  placement: true,
  grad_compression: true,
  batch_size: true,
});
export type ResumeLayout = z.infer<typeof ResumeLayoutSchema>;

/** `--elastic MIN:MAX` and `--max-restarts N`: ranks the run may shrink to and grow back to, and how many membership changes it survives. */
export const ElasticConfigSchema = LaunchConfigSchema.shape.elastic.unwrap();
export type ElasticConfig = z.infer<typeof ElasticConfigSchema>;

export const DEFAULT_MAX_RESTARTS = 3;

/** Why a segment began. */
export const SEGMENT_REASONS = ['start', 'rank-lost', 'machine-lost', 'scale-up', 'resume'] as const;
export type SegmentReason = (typeof SEGMENT_REASONS)[number];

/** Where a restarted segment's state came from: a replica in the controller's memory, or a checkpoint on disk. */
export const SEGMENT_SOURCES = ['memory', 'disk', 'init'] as const;

/**
 * Where a restart's time went, as the controller sees it, in order; their sum is about
 * recovery_ms. A rank reads the state it continues from as it starts: rank 0's read is in
 * launch_ms (it opens the rendezvous after), the others' in join_ms.
 */
export const RecoverySchema = z.object({
  /** the loss noticed -> every rank of the lost segment ended (the survivors stopped) */
  settle_ms: z.number(),
  /** choosing the new layout (replan.ts: the strategy kept, or the advisor's) */
  replan_ms: z.number(),
  /** the state put in place (the replica written into the run folder as a checkpoint, the folder rewound), the new segment recorded */
  state_ms: z.number(),
  /** the ranks launched -> every rank process started (here and on the agents; rank 0 read the state, opened the rendezvous) */
  launch_ms: z.number(),
  /** -> rank 0 ready: the other ranks read the state, joined the world, every rank loaded its part */
  join_ms: z.number(),
  /** -> the segment's first step recorded */
  first_step_ms: z.number(),
});
export type Recovery = z.infer<typeof RecoverySchema>;

export const SegmentSchema = z.object({
  /** the segment's first trained step is from_step + 1: it continued from the state after from_step */
  from_step: z.number().int().min(0),
  /** its last recorded step (absent while it runs) */
  to_step: z.number().int().min(0).optional(),
  world: z.number().int().min(1),
  strategy: z.string(),
  /** dp × tp × pp where the strategy has a grid */
  grid: z.object({ dp: z.number(), tp: z.number(), pp: z.number() }).optional(),
  /** where each rank ran, rank order ("this machine" or "NAME (HOST:PORT)") */
  placement: z.array(z.string()),
  reason: z.enum(SEGMENT_REASONS),
  /** what changed, in words: "rank 2 on this machine was killed (SIGKILL)", "agent b (10.0.0.2:7420) came back" */
  detail: z.string().optional(),
  source: z.enum(SEGMENT_SOURCES),
  /** steps trained before the change and trained again in this segment */
  lost_steps: z.number().int().min(0),
  /** ms from the loss being noticed to this segment's first step (absent for the first segment) */
  recovery_ms: z.number().optional(),
  /** recovery_ms phase by phase (absent for the first segment) */
  recovery: RecoverySchema.optional(),
  /** what the re-plan changed or reset, one line each (relayoutJob's notes: the layout line first) */
  notes: z.array(z.string()).optional(),
});
export type Segment = z.infer<typeof SegmentSchema>;

/** summary.json's and state.json's `elastic`, and the report's. */
export const ElasticSummarySchema = z.object({
  min: z.number().int(),
  max: z.number().int(),
  max_restarts: z.number().int(),
  restarts: z.number().int().min(0),
  lost_steps: z.number().int().min(0),
  segments: z.array(SegmentSchema),
});
export type ElasticSummary = z.infer<typeof ElasticSummarySchema>;

/** metrics.jsonl's line where a segment begins (at its from_step), so charts band by segment while the run goes on. */
export const SegmentRowSchema = z.looseObject({ type: z.literal('segment'), step: z.number(), segment: SegmentSchema });
export type SegmentRow = z.infer<typeof SegmentRowSchema>;
