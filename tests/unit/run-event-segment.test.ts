// A run's live stream carries membership segments as they begin (the same row metrics.jsonl
// gets), so the run view bands its charts while the run goes on; a malformed one is refused.
import { describe, expect, it } from 'vitest';
import { RunEventSchema } from '../../common/api/index.js';

const segment = {
  from_step: 10,
  world: 1,
  strategy: 'ddp',
  placement: ['this machine'],
  reason: 'rank-lost',
  detail: 'rank 1 on this machine was killed (SIGKILL)',
  source: 'memory',
  lost_steps: 1,
};

describe('the segment event', () => {
  it('carries the segment row', () => {
    const e = RunEventSchema.parse({ type: 'segment', row: { type: 'segment', step: 10, segment } });
    expect(e).toEqual({ type: 'segment', row: { type: 'segment', step: 10, segment } });
  });
  it('refuses a reason the contract does not name', () => {
    expect(
      RunEventSchema.safeParse({ type: 'segment', row: { type: 'segment', step: 10, segment: { ...segment, reason: 'oops' } } }).success,
    ).toBe(false);
  });
});
