// A step's spans message (workers/protocol/train.ts): the engine's compute spans on the device
// clock, then the process group's communication spans of the step.
import type { CommSpan } from '../comm/index.js';
import type { RankMessage } from '../protocol/train.js';

export type SpansMessage = Extract<RankMessage, { type: 'spans' }>;
type Span = SpansMessage['spans'][number];

/** The compute spans, then the communication spans (tagged with `stage` when the rank runs a pipeline stage). */
export function spansMessage(rank: number, step: number, compute: Span[], comm: readonly CommSpan[], stage?: number): SpansMessage {
  const where = stage === undefined ? {} : { stage };
  const commSpans = comm.map((x) => ({
    kind: 'comm' as const,
    name: x.op,
    start: x.start,
    end: x.end,
    bytes: x.bytes,
    ...where,
    ...(x.labels ? { labels: x.labels } : {}),
  }));
  return { type: 'spans', rank, step, spans: [...compute, ...commSpans] };
}
