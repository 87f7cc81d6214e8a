// A run's live stream (`runs.subscribe`). The first event of every subscription is a
// `snapshot`; a subscriber that falls behind loses the queued events and gets one `snapshot`
// in their place (resync: refetch runs.metrics / runs.spans for what it missed).
import { z } from 'zod';
import { SegmentRowSchema } from './elastic.js';
import { MetricRowSchema, RunStateSchema, SpanRowSchema, StepRowSchema } from './runs.js';

export const RunSnapshotSchema = z.object({
  state: RunStateSchema,
  /** the latest steps (at most 200), oldest first */
  recent_steps: z.array(StepRowSchema),
  /** events this subscriber missed since its last snapshot (0 on the first) */
  dropped: z.number(),
});

export const RunEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('snapshot'), snapshot: RunSnapshotSchema }),
  z.object({ type: z.literal('state'), state: RunStateSchema }),
  /** one optimizer step over all ranks */
  z.object({ type: z.literal('step'), row: StepRowSchema }),
  z.object({ type: z.literal('eval'), row: MetricRowSchema }),
  z.object({ type: z.literal('checkpoint'), step: z.number(), path: z.string() }),
  /** a membership segment began (metrics.jsonl's segment row): a lost rank or machine, a scale-up, a resume */
  z.object({ type: z.literal('segment'), row: SegmentRowSchema }),
  /** one rank's memory sample: bytes by category at the end of `step` (0: after setup) */
  z.object({ type: z.literal('memory'), rank: z.number(), step: z.number(), time: z.number(), bytes: z.record(z.string(), z.number()) }),
  /** one rank's spans of one step */
  z.object({ type: z.literal('spans'), rank: z.number(), step: z.number(), spans: z.array(SpanRowSchema) }),
  z.object({
    type: z.literal('log'),
    level: z.enum(['info', 'error']),
    time: z.number(),
    message: z.string(),
    rank: z.number().optional(),
  }),
  /** the run ended as completed: its summary.json */
  z.object({ type: z.literal('summary'), summary: z.record(z.string(), z.unknown()) }),
]);
export type RunEvent = z.infer<typeof RunEventSchema>;
export type RunSnapshot = z.infer<typeof RunSnapshotSchema>;
