// Achieved TFLOP/s and MFU per rank: each step's from the ranks' FLOPs over the step's time (the
// slowest rank's), the run's as the mean of the steps after the first, MFU only where the
// adapter's peak is known (device class or the machine profile).
import { describe, expect, it } from 'vitest';
import type { MachineProfile } from '../../../common/advisor/profile.js';
import { adapterPeakTflops, formatFlopRate, formatTflops, meanTflops } from '../../../common/advisor/rank-tflops.js';
import { runSummary } from '../../../src-main/runs/run-summary.js';
import { StepAggregator } from '../../../src-main/runs/step-aggregator.js';
import type { RankMessage, TrainJob } from '../../../workers/protocol/train.js';

const step = (step: number, stepMs: number, model: number, hardware: number): Extract<RankMessage, { type: 'step' }> => ({
  type: 'step',
  step,
  loss: 1,
  lr: 1e-3,
  grad_norm: 1,
  tokens: 512,
  step_ms: stepMs,
  tokens_per_s: 0,
  flops: { model, hardware },
  memory: {},
});

describe('achieved TFLOP/s per rank', () => {
  it("divides each rank's FLOPs by the slowest rank's step time; MFU for the rank on an H100 (67 TFLOP/s fp32) only", () => {
    const agg = new StepAggregator(2);
    agg.peaks.set(0, adapterPeakTflops('NVIDIA H100 80GB HBM3', null)!);
    expect(agg.add(0, step(1, 500, 33.5e12, 44e12))).toBeNull();
    const line = agg.add(1, step(1, 1000, 10e12, 10e12))!;
    expect(line.step_ms).toBe(1000);
    expect(line.tflops).toEqual({ 0: { model: 33.5, hardware: 44, mfu: 0.5 }, 1: { model: 10, hardware: 10 } });
    expect(formatTflops(line.tflops!)).toBe('rank 0: 33.5 TFLOP/s (44.0 with recomputation), MFU 50.0%; rank 1: 10.0 TFLOP/s');
  });

  it('writes each rank in the unit its figure fits: 0.000848 TFLOP/s is 848 MFLOP/s, not 0.000848', () => {
    expect(formatTflops({ 0: { model: 0.000848, hardware: 0.00113 }, 1: { model: 0.0123, hardware: 0.0123 } })).toBe(
      'rank 0: 848 MFLOP/s (1130 with recomputation); rank 1: 12.3 GFLOP/s',
    );
    expect(formatFlopRate(1234)).toBe('1.23 PFLOP/s');
    expect(formatFlopRate(2.5e-7)).toBe('250 kFLOP/s');
  });

  it('leaves the step without tflops when a rank did not report its FLOPs (an older rank)', () => {
    const agg = new StepAggregator(2);
    agg.add(0, step(1, 10, 1e9, 1e9));
    const { flops: _, ...old } = step(1, 10, 0, 0);
    expect(agg.add(1, old)!.tflops).toBeUndefined();
  });

  it('the summary keeps the mean of the steps after the first (which compiles the kernels)', () => {
    const steps = [
      { 0: { model: 1, hardware: 1, mfu: 0.1 } },
      { 0: { model: 4, hardware: 5, mfu: 0.4 } },
      { 0: { model: 6, hardware: 7, mfu: 0.6 } },
    ];
    expect(meanTflops(steps)).toEqual({ 0: { model: 5, hardware: 6, mfu: 0.5 } });
    expect(meanTflops(steps.slice(0, 1))).toEqual(steps[0]);
    expect(meanTflops([])).toBeUndefined();
    const job = { model: { n_layer: 2 }, train: {}, parallel: undefined } as unknown as TrainJob;
    const done = new Map([[0, { type: 'done' as const, steps: 3, final_loss: 1, peak_bytes: {}, params: 10 }]]);
    expect(runSummary({ job, runDir: 'r', done, tokensPerS: [1, 2, 3], lastLoss: 1, tflops: steps }).tflops).toEqual({
      0: { model: 5, hardware: 6, mfu: 0.5 },
    });
    expect(runSummary({ job, runDir: 'r', done, tokensPerS: [1], lastLoss: 1 })).not.toHaveProperty('tflops');
  });

  it('knows a peak from the device class, else from the stored profile; none for SwiftShader', () => {
    expect(adapterPeakTflops('NVIDIA GeForce RTX 4090', null)).toBe(82.6);
    expect(adapterPeakTflops('SwiftShader Device (Subzero)', null)).toBeUndefined();
    const profile = {
      machine: { hostname: 'h', id: 'i', measured_at: '2026-01-01T00:00:00Z' },
      adapters: [{ index: 0, name: 'Lab GPU 9000', backend: 'vulkan', peak_tflops: 12, kernels: [], h2d_gbps: 1, d2h_gbps: 1 }],
      links: [],
    } satisfies MachineProfile;
    expect(adapterPeakTflops('Lab GPU 9000', profile)).toBe(12);
  });
});
