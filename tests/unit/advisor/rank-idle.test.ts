// The pipeline bubble predicted like the run measures it. Two stages sharing one device: the
// device never idles (bubble_ms 0: one stage's idle slots hold the other's work), but each rank
// idles (p - 1)/(m + p - 1) of the step, 1/5 for p 2 and m 4, which is what the run view's
// spans measure (22% on SwiftShader); the comparison's bubble row predicts that, and the
// device's idle time is its own labelled row.
import { describe, expect, it } from 'vitest';
import { layoutName } from '../../../common/advisor/layouts.js';
import { advise, type PlanDevice, type PlanHardware } from '../../../common/advisor/plan.js';
import { DEFAULT_DEVICE_SPEED, DEFAULT_LINK, rankIdleFraction } from '../../../common/advisor/time.js';
import { stepTimeComparison } from '../../../common/charts/advisor-compare.js';

const SMALL = { n_layer: 4, n_head: 4, d_model: 128, block_size: 128, vocab_size: 96 };
const d: PlanDevice = { label: 'GPU 0', machine: 'local', speed: DEFAULT_DEVICE_SPEED };
const hw: PlanHardware = { source: 'measured', ranks: [d, d], local: DEFAULT_LINK, notes: [] };

describe("each rank's pipeline bubble", () => {
  it('(p - 1)/(m + p - 1): 1/5 for 2 stages and 4 micro-batches, 0 without stages', () => {
    expect(rankIdleFraction(2, 4)).toBe(0.2);
    expect(rankIdleFraction(4, 4)).toBe(3 / 7);
    expect(rankIdleFraction(1, 8)).toBe(0);
  });

  it('pp 2 on one shared device: the device never idles, each rank idles a fifth of the step at m 4', () => {
    const r = advise({ model: SMALL, batch_size: 8, seq_len: 128, precision: 'fp32', hardware: hw });
    const pp = r.layouts.filter((l) => l.layout.strategy === 'pp' && l.layout.micro_batches === 4);
    expect(pp.length).toBeGreaterThan(0);
    for (const l of pp) {
      expect(l.time.bubble_ms, layoutName(l.layout)).toBe(0);
      expect(l.time.rank_idle_ms! / l.time.step_ms, layoutName(l.layout)).toBeCloseTo(0.2, 12);
    }
    // a layout without stages has no rank bubble
    expect(r.layouts.find((l) => l.layout.strategy === 'ddp')!.time.rank_idle_ms).toBeUndefined();

    // the run view's rows: the bubble row predicts what a rank's spans measure (22% of a 100 ms step), the device's idle apart
    const plan = pp[0]!;
    const rows = stepTimeComparison(plan, {
      steps: 3,
      step_ms: plan.time.step_ms,
      compute_ms: 0.7 * plan.time.step_ms,
      comm_exposed_ms: 0.08 * plan.time.step_ms,
      bubble_ms: 0.22 * plan.time.step_ms,
      other_ms: 0,
    });
    const bubble = rows.find((x) => x.key === 'bubble_ms')!;
    expect(bubble.label).toBe('pipeline bubble (each rank idle)');
    expect(bubble.error).toBeCloseTo((0.22 - 0.2) / 0.22, 12); // +9%, not +100%
    expect(rows.find((x) => x.key === 'device_idle_ms')).toEqual({
      key: 'device_idle_ms',
      label: 'device idle (stages on one device fill it)',
      predicted: 0,
      measured: null,
      error: null,
    });
  });
});
