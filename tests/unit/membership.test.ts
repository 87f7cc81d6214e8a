// The run view's membership (src-renderer/src/membership.ts) and "Resume in another layout"
// (src-renderer/src/resume-layout.ts), pure: the Membership table's rows, who is present now and
// who left, the segments of a run whose metrics carry none (state.json's elastic), the advisor's
// request for a stopped run, the layout runs.resume receives, and the field a refusal outlines.
import { describe, expect, it } from 'vitest';
import type { LayoutPlan } from '../../common/advisor/types.js';
import { ResumeLayoutSchema, type Segment } from '../../common/api/elastic.js';
import { AdviseRequestSchema } from '../../common/advisor/types.js';
import { membershipRows, presenceOf, runSegments } from '../../src-renderer/src/membership.js';
import { refusedField, resumeAdviseRequest, resumeFieldsOf, resumeLayoutOf } from '../../src-renderer/src/resume-layout.js';

const HERE = 'this machine';
const B = 'b (10.0.0.2:7420)';
const seg = (s: Partial<Segment> & Pick<Segment, 'from_step' | 'reason'>): Segment => ({
  world: 2,
  strategy: 'ddp',
  placement: [HERE, B],
  source: 'init',
  lost_steps: 0,
  ...s,
});
const START = seg({ from_step: 0, reason: 'start', to_step: 12 });
const LOST = seg({
  from_step: 10,
  reason: 'machine-lost',
  world: 1,
  placement: [HERE],
  source: 'memory',
  lost_steps: 2,
  detail: 'agent b stopped answering',
  recovery_ms: 800,
});

describe('the Membership table and who is present now', () => {
  it('one row per segment, the running one marked now', () => {
    const rows = membershipRows([START, LOST], 18, true);
    expect(rows).toEqual([
      {
        index: 1,
        steps: '1–12',
        layout: 'ddp × 2',
        machines: `${HERE} (rank 0), ${B} (rank 1)`,
        reason: 'start',
        detail: '',
        lost: 0,
        recovery: '—',
        current: false,
      },
      {
        index: 2,
        steps: '11–18',
        layout: 'ddp × 1',
        machines: `${HERE} (rank 0)`,
        reason: 'machine-lost',
        detail: 'agent b stopped answering',
        lost: 2,
        recovery: 'state from a replica in memory, back in 800 ms',
        current: true,
      },
    ]);
    expect(membershipRows([START, LOST], 18, false).some((r) => r.current)).toBe(false);
  });

  it('an ordinary run has no table and no presence line', () => {
    expect(membershipRows([START], 12, false)).toEqual([]);
    expect(presenceOf([START])).toBeNull();
    expect(presenceOf([])).toBeNull();
  });

  it('present now: the newest segment; gone: the machines that left, with the last step they trained', () => {
    expect(presenceOf([START, LOST])).toEqual({ present: `${HERE} (rank 0)`, machines: [HERE], gone: [{ machine: B, lastStep: 12 }] });
    const back = seg({ from_step: 20, reason: 'scale-up' });
    expect(presenceOf([START, LOST, back])!.gone).toEqual([]);
  });

  it("a run's segments: its metrics rows, with state.json's and summary.json's elastic block laid over them", () => {
    const elastic = { min: 1, max: 2, max_restarts: 3, restarts: 1, lost_steps: 2, segments: [START, { ...LOST, to_step: 18 }] };
    const detail = { state: { elastic }, summary: null } as never;
    // a row is written as its segment begins; the block knows where it ended
    const row = { ...LOST, recovery_ms: undefined };
    expect(runSegments({ detail, segments: [row] })).toEqual([START, { ...LOST, to_step: 18 }]);
    expect(runSegments({ detail: { state: {}, summary: null } as never, segments: [START, LOST] })).toEqual([START, LOST]);
    const done = { state: {}, summary: { elastic: { ...elastic, segments: [START, { ...LOST, to_step: 20 }] } } } as never;
    expect(runSegments({ detail: done, segments: [START, LOST] })[1]!.to_step).toBe(20);
    expect(runSegments({ detail: null, segments: [] })).toEqual([]);
  });
});

describe('resume in another layout', () => {
  const config = {
    model: { preset: 'tiny', n_layer: 2, n_head: 2, d_model: 64, block_size: 64 },
    train: { steps: 20, batch_size: 8 },
    parallel: { strategy: 'ddp', world: 2 },
  };

  it("asks the advisor for the run's model, global batch and sequence on the devices present now (or a number given)", () => {
    const req = resumeAdviseRequest(config)!;
    expect(req).toEqual({ model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64 }, batch_size: 8, seq_len: 64 });
    expect(AdviseRequestSchema.parse(req)).toEqual(req);
    expect(resumeAdviseRequest({ ...config, precision: 'bf16', train: { batch_size: 8, seq_len: 32 } }, 3)).toMatchObject({
      precision: 'bf16',
      seq_len: 32,
      devices: 3,
    });
    expect(resumeAdviseRequest({ train: { batch_size: 8 } })).toBeNull();
  });

  it("a picked plan's layout is what runs.resume receives (the batch stays the run's)", () => {
    const plan = {
      layout: { strategy: 'zero3', world: 3, micro_batches: 2, offload_optimizer: true },
      fits: true,
      rank_order: 0,
    } as unknown as LayoutPlan;
    const fields = resumeFieldsOf(plan);
    const layout = resumeLayoutOf(fields);
    expect(layout).toEqual({ strategy: 'zero3', world: 3, micro_batches: 2, offload_optimizer: 'cpu' });
    expect(ResumeLayoutSchema.parse(layout)).toEqual(layout);
    const three = resumeLayoutOf({ ...fields, strategy: '3d', world: 8, tp: 2, pp: 2, dp: 2, schedule: '1f1b', offload: false });
    expect(three).toEqual({ strategy: '3d', world: 8, tp: 2, pp: 2, dp: 2, schedule: '1f1b', micro_batches: 2, offload_optimizer: 'none' });
  });

  it('outlines the field a refusal names, whatever its prefix', () => {
    expect(refusedField('layout.world')).toBe('world');
    expect(refusedField('config.tp')).toBe('tp');
    expect(refusedField('micro_batches')).toBe('micro_batches');
    expect(refusedField('layout.offload_optimizer')).toBe('offload');
    expect(refusedField(undefined)).toBeNull();
  });
});
