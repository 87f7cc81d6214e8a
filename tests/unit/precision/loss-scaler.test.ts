// fp16's loss scaler (workers/precision/loss-scaler.ts): DeepSpeed's dynamic scaler, step by step,
// on overflow sequences written out, and its state through a checkpoint's JSON.
import { describe, expect, it } from 'vitest';
import { DEFAULT_LOSS_SCALE, type LossScaleSpec } from '../../../common/precision.js';
import { lossScaleOf, TrainJobSchema } from '../../../workers/protocol/train.js';
import { LossScaler } from '../../../workers/precision/loss-scaler.js';
import { tinyJob } from '../tiny-job.js';

const spec = (over: Partial<LossScaleSpec> = {}): LossScaleSpec => ({ ...DEFAULT_LOSS_SCALE, ...over });

/** feeds a sequence ('.' clean, 'x' overflow) and returns the scale after each step and each verdict */
function run(scaler: LossScaler, steps: string) {
  const scales: number[] = [];
  const verdicts: string[] = [];
  for (const c of steps) {
    verdicts.push(scaler.update(c === 'x') === 'skip' ? 's' : 'a');
    scales.push(scaler.scale);
  }
  return { scales, verdicts: verdicts.join('') };
}

describe('LossScaler (DeepSpeed DynamicLossScaler semantics)', () => {
  it('starts at 2^16 with the defaults and doubles on the 1000th clean step, not before', () => {
    const s = new LossScaler(spec());
    expect(s.scale).toBe(65536);
    for (let i = 0; i < 999; i++) expect(s.update(false)).toBe('apply');
    expect(s.scale).toBe(65536);
    s.update(false);
    expect(s.scale).toBe(131072);
    for (let i = 0; i < 1000; i++) s.update(false);
    expect(s.scale).toBe(262144);
    expect(s.skippedSteps).toBe(0);
  });

  it('hysteresis 2: the first overflow is skipped at the same scale, the second halves it, and each later one halves again until a doubling refills it', () => {
    const s = new LossScaler(spec({ initial_scale_power: 10, loss_scale_window: 3, hysteresis: 2 }));
    const r = run(s, 'xxx...x.x');
    expect(r.scales).toEqual([1024, 512, 256, 256, 256, 512, 512, 512, 256]);
    expect(r.verdicts).toBe('sssaaasas');
    expect(s.skippedSteps).toBe(5);
  });

  it('without consecutive_hysteresis, clean steps do not refill it: overflow, 2 clean, overflow halves', () => {
    const s = new LossScaler(spec({ initial_scale_power: 4, loss_scale_window: 5, hysteresis: 2 }));
    expect(run(s, 'x..x').scales).toEqual([16, 16, 16, 8]);
    expect(s.state()).toEqual({ scale: 8, good_steps: 0, hysteresis_left: 1, skipped_steps: 2 });
  });

  it('with consecutive_hysteresis, only 2 overflows in a row halve the scale', () => {
    const s = new LossScaler(spec({ initial_scale_power: 4, loss_scale_window: 5, hysteresis: 2, consecutive_hysteresis: true }));
    expect(run(s, 'x.x.xx').scales).toEqual([16, 16, 16, 16, 16, 8]);
  });

  it('an overflow restarts the window: window 3, two clean, overflow, then the third clean step after it doubles', () => {
    const s = new LossScaler(spec({ initial_scale_power: 3, loss_scale_window: 3, hysteresis: 1 }));
    expect(run(s, '..x...').scales).toEqual([8, 8, 4, 4, 4, 8]);
  });

  it('never halves below min_loss_scale, and still skips there', () => {
    const s = new LossScaler(spec({ initial_scale_power: 2, hysteresis: 1, min_loss_scale: 2 }));
    const r = run(s, 'xxx');
    expect(r.scales).toEqual([2, 2, 2]);
    expect(r.verdicts).toBe('sss');
  });

  it('a static scale never changes; overflowing steps are skipped all the same', () => {
    const s = new LossScaler(spec({ static_scale: 128, loss_scale_window: 2 }));
    expect(s.dynamic).toBe(false);
    const r = run(s, '....xx..');
    expect(r.scales.every((v) => v === 128)).toBe(true);
    expect(r.verdicts).toBe('aaaassaa');
    expect(s.skippedSteps).toBe(2);
  });

  it('its state survives a checkpoint: a scaler restored from JSON continues exactly like the original', () => {
    const cfg = spec({ initial_scale_power: 8, loss_scale_window: 4, hysteresis: 3 });
    const a = new LossScaler(cfg);
    run(a, 'x..x.');
    const saved = JSON.parse(JSON.stringify(a.state()));
    expect(saved).toEqual({ scale: 256, good_steps: 1, hysteresis_left: 1, skipped_steps: 2 });
    const b = new LossScaler(cfg, saved);
    const tail = '...x..x....x';
    expect(run(b, tail)).toEqual(run(a, tail));
    expect(b.state()).toEqual(a.state());
  });

  it('refuses a damaged state and a window or hysteresis below 1', () => {
    expect(() => new LossScaler(spec(), { scale: -1, good_steps: 0, hysteresis_left: 2, skipped_steps: 0 })).toThrow(/damaged/);
    expect(() => new LossScaler(spec({ loss_scale_window: 0 }))).toThrow(/at least 1/);
  });
});

describe('the job names its precision and loss scaling', () => {
  const job = tinyJob({
    run_dir: '/tmp/r',
    model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 32 },
    data: { dataset: 'builtin:shakespeare' },
    train: { min_lr: 1e-4, weight_decay: 0.1 },
  });

  it('fp16 without loss_scale gets DeepSpeed defaults (2^16, 1000, 2, 1); fp32 and bf16 get none', () => {
    expect(lossScaleOf(TrainJobSchema.parse({ ...job, precision: 'fp16' }))).toEqual({
      initial_scale_power: 16,
      loss_scale_window: 1000,
      hysteresis: 2,
      min_loss_scale: 1,
    });
    expect(lossScaleOf(TrainJobSchema.parse(job))).toBeNull();
    expect(lossScaleOf(TrainJobSchema.parse({ ...job, precision: 'bf16' }))).toBeNull();
  });

  it('the schema refuses an unknown precision and a loss scale field it does not know', () => {
    expect(TrainJobSchema.safeParse({ ...job, precision: 'fp8' }).success).toBe(false);
    const bad = { ...job, precision: 'fp16', loss_scale: { ...DEFAULT_LOSS_SCALE, scale_window: 10 } };
    expect(TrainJobSchema.safeParse(bad).success).toBe(false);
  });
});
