// A run's job moved to another layout (src-main/launch/relayout.ts): what follows, what is
// recomputed, what is dropped with a note, and what is refused naming the field.
import { describe, expect, it } from 'vitest';
import type { ResumeLayout } from '../../common/api/elastic.js';
import { DEFAULT_LOSS_SCALE } from '../../common/precision.js';
import { FLAG_NAMES } from '../../src-main/cli/train-flags.js';
import { relayoutJob } from '../../src-main/launch/relayout.js';
import { type JobRequest, JobError, resolveJob } from '../../src-main/launch/resolve-job.js';

/** a run's job as a launch resolves it: 2 blocks, 2 heads, global batch 8 */
const run = (req: JobRequest) =>
  resolveJob(
    { steps: 10, batch_size: 8, model: { n_layer: 2, n_head: 2, d_model: 32, block_size: 16 }, ...req },
    { runDir: '/tmp/relayout' },
  );

function refusal(req: JobRequest, layout: ResumeLayout, machineMemory?: number): JobError {
  try {
    relayoutJob(run(req), layout, machineMemory === undefined ? { names: FLAG_NAMES } : { names: FLAG_NAMES, machineMemory });
  } catch (e) {
    if (e instanceof JobError) return e;
    throw e;
  }
  throw new Error('not refused');
}

describe('relayoutJob', () => {
  it('keeps everything but the layout: model, data, optimizer, steps, seed, the checkpoint it resumes from; the argument is not changed', () => {
    const job = { ...run({ strategy: 'pp', pp: 2, micro_batches: 4, lr: 2e-3, seed: 9 }), resume_from: '/r/checkpoints/step-000002' };
    const before = structuredClone(job);
    const { job: out, notes } = relayoutJob(job, { strategy: 'single' });
    expect(job).toEqual(before);
    expect(out.parallel).toEqual({ strategy: 'single', world: 1, micro_batches: 4, bucket_cap_mb: 0.25, first_bucket_mb: 0.0625 });
    expect({ ...out, parallel: undefined }).toEqual({ ...job, parallel: undefined, precision: 'fp32' });
    expect(notes).toEqual(['layout pp 2 m4 1f1b -> single']);
  });

  it('the world follows the new knobs (tp, pp, 3d) or stays (the replicas); a 3d run keeps its axes where the new strategy takes them', () => {
    const three = run({ strategy: '3d', dp: 2, tp: 2, pp: 2, micro_batches: 2 });
    expect(relayoutJob(three, { strategy: 'tp' }).job.parallel).toMatchObject({ strategy: 'tp', world: 2, tp: 2 });
    expect(relayoutJob(three, { strategy: 'pp' }).job.parallel).toMatchObject({ strategy: 'pp', world: 2, pp: 2, schedule: '1f1b' });
    expect(relayoutJob(three, { strategy: 'zero3', world: 4 }).job.parallel).toMatchObject({ strategy: 'zero3', world: 4 });
    expect(relayoutJob(run({ strategy: 'ddp', world: 2 }), { strategy: 'zero1' }).job.parallel).toMatchObject({ world: 2 });
    // an offload of 'none' is named as no offload
    const off = run({ strategy: 'zero2', world: 2, offload_optimizer: 'cpu' });
    expect(relayoutJob(off, { strategy: 'zero1', offload_optimizer: 'none' }).notes).toEqual(['layout zero2+offload x2 -> zero1 x2']);
    expect(relayoutJob(run({ strategy: 'tp', tp: 2 }), { world: 1 }).job.parallel).toMatchObject({ strategy: 'tp', world: 1, tp: 1 });
    expect(relayoutJob(run({}), { strategy: '3d', dp: 2, tp: 2, pp: 2 }).job.parallel).toMatchObject({ world: 8, dp: 2, tp: 2, pp: 2 });
  });

  it('keeps the global batch; micro-batches stay while they split each replica rows, else the largest count that does, said so', () => {
    const { job, notes } = relayoutJob(run({ micro_batches: 8 }), { strategy: 'ddp', world: 2 });
    expect([job.train.batch_size, job.parallel!.micro_batches]).toEqual([8, 4]);
    expect(notes).toEqual([
      'layout single -> ddp x2',
      'micro_batches 8 does not split the 4 rows each data-parallel replica gets in the new layout; 4 micro-batches of 1 row instead (the global batch stays 8)',
    ]);
    const given = relayoutJob(run({ micro_batches: 8 }), { strategy: 'ddp', world: 2, micro_batches: 2 }, { names: FLAG_NAMES });
    expect(given.job.parallel!.micro_batches).toBe(2);
    const bigger = relayoutJob(run({}), { batch_size: 16 }, { names: FLAG_NAMES });
    expect([bigger.job.train.batch_size, bigger.notes]).toEqual([
      16,
      ['the global batch changes from 8 to 16 rows per step (--batch-size)'],
    ]);
  });

  it('fp32 <-> bf16/fp16 keep the fp32 master; moving to fp16 starts a fresh loss scaler, leaving it drops it', () => {
    const to16 = relayoutJob(run({ strategy: 'ddp', world: 2 }), { precision: 'fp16' });
    expect([to16.job.precision, to16.job.loss_scale]).toEqual(['fp16', { ...DEFAULT_LOSS_SCALE }]);
    expect(to16.notes).toEqual([
      "precision fp32 -> fp16: the checkpoint's fp32 master weights and AdamW moments continue as they are",
      'fp16: a fresh dynamic loss scaler starts at 2^16 (the fp32 run had none)',
    ]);
    const from16 = relayoutJob(run({ precision: 'fp16' }), { precision: 'bf16' });
    expect([from16.job.precision, from16.job.loss_scale]).toEqual(['bf16', undefined]);
    expect(from16.notes).toEqual([
      "precision fp16 -> bf16: the checkpoint's fp32 master weights and AdamW moments continue as they are",
      'the fp16 loss scaler is dropped: bf16 trains without loss scaling',
    ]);
    const kept = { initial_scale_power: 8, loss_scale_window: 10, hysteresis: 1, min_loss_scale: 1 };
    expect(relayoutJob(run({ precision: 'fp16', loss_scale: kept }), { strategy: 'zero2', world: 2 }).job.loss_scale).toEqual(kept);
  });

  it("PowerSGD's per-rank state cannot follow another layout: reset with a note; a hook the new layout does not take is dropped with one", () => {
    const psgd = run({ strategy: 'ddp', world: 2, grad_compression: { hook: 'powersgd' } });
    expect(relayoutJob(psgd, { world: 4 }).notes).toEqual([
      'layout ddp x2 -> ddp x4',
      "PowerSGD's per-rank error feedback and warm-start factors are reset: they belong to ddp x2's ranks and buckets, not ddp x4's",
    ]);
    expect(relayoutJob(psgd, { strategy: 'zero3' }, { names: FLAG_NAMES }).notes).toEqual([
      'layout ddp x2 -> zero3 x2',
      '--grad-compression powersgd is dropped: --strategy zero3 does not take it',
      "PowerSGD's per-rank error feedback and warm-start factors are dropped with the hook",
    ]);
    // the same layout: the state follows, nothing to say
    expect(relayoutJob(psgd, { strategy: 'ddp', world: 2 }).notes).toEqual([]);
    const half = relayoutJob(run({ strategy: 'ddp', world: 2, grad_compression: { hook: 'fp16' } }), { precision: 'bf16' });
    expect(half.job.parallel!.grad_compression).toBeUndefined();
    expect(half.notes).toContain("grad_compression fp16 is dropped: a bf16 run's gradients are 16-bit already");
  });

  it('refuses what the layout cannot be, naming the field and why', () => {
    const grid = refusal({}, { strategy: '3d', dp: 2, tp: 2, pp: 2, world: 4 });
    expect([grid.field, grid.message]).toEqual([
      'world',
      '--dp x --tp x --pp = 2 x 2 x 2 = 8 must equal --world (4): every rank is one cell of the grid; change --dp/--tp/--pp or --world',
    ]);
    expect(refusal({}, { strategy: 'tp', tp: 4 }).field).toBe('tp');
    expect(refusal({}, { strategy: 'pp', pp: 3 }).field).toBe('pp');
    expect(refusal({}, { strategy: 'ddp', world: 3 }).field).toBe('world');
    expect(refusal({}, { strategy: 'bogus' }).message).toMatch(/^unknown strategy "bogus"; choose one of single, dp, ddp/);
    const hook = refusal({ strategy: 'ddp', world: 2 }, { precision: 'bf16', grad_compression: { hook: 'fp16' } });
    expect(hook.field).toBe('grad_compression');
    // a machine too small for the model's states in this layout
    const memory = refusal({ strategy: 'zero3', world: 2 }, { strategy: 'ddp' }, 100_000);
    expect(memory.field).toBe('strategy');
    expect(memory.message).toMatch(/^model states need .* per rank \(16Ψ with Ψ = [\d,]+ parameters .* N = 2, fp32\) but this machine has/);
  });
});
