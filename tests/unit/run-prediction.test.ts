// The controller's prediction for a run it launches (src-main/controller/run-prediction.ts): the
// runs.advise request a resolved job makes, and the plan of the job's own layout picked out of
// the advisor's list whatever the spelling (defaults filled in); a layout the list lacks, or a
// refused request, gives the reason instead. And the launch form's side (advisor-form.ts): the
// request the form makes and the fields a picked layout fills.
import { describe, expect, it } from 'vitest';
import type { AdviseResult, LayoutPlan } from '../../common/advisor/types.js';
import { LaunchPlanSchema, RunPredictionSchema } from '../../common/api/index.js';
import { adviseRequestOfJob, layoutOfJob, planOfJob, predictRun } from '../../src-main/controller/run-prediction.js';
import { resolveJob, type JobRequest } from '../../src-main/launch/resolve-job.js';
import { adviseRequestOf, type AdvisorFormFields, formPatchOf } from '../../src-renderer/src/advisor-form.js';

const job = (req: JobRequest) => resolveJob(req, { runDir: '/tmp/run' });
const memory = { params: 1, grads: 1, optimizer: 2, activations: 3, comm: 0, workspace: 0, total: 7 };
const planOf = (layout: LayoutPlan['layout'], rank_order: number): LayoutPlan => ({
  layout,
  launch: { strategy: layout.strategy, world: layout.world },
  fits: true,
  reason: `layout ${rank_order}`,
  ranks: Array.from({ length: layout.world }, (_, rank) => ({ rank, device: 'GPU 0', memory, host_memory_bytes: 0 })),
  time: { step_ms: 10 + rank_order, compute_ms: 10, comm_exposed_ms: rank_order, bubble_ms: 0, host_copy_ms: 0 },
  tokens_per_s: 100,
  rank_order,
});
const result: AdviseResult = {
  profile: { source: 'defaults' },
  model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 96, params: 105_920 },
  layouts: [
    planOf({ strategy: 'ddp', world: 2, micro_batches: 1, activation_checkpointing: false }, 0),
    planOf({ strategy: 'zero2', world: 2, micro_batches: 1, offload_optimizer: true, activation_checkpointing: false }, 1),
    planOf({ strategy: 'pp', world: 2, pp: 2, micro_batches: 4, schedule: '1f1b', activation_checkpointing: true }, 2),
    planOf({ strategy: 'tp', world: 2, tp: 2, micro_batches: 1, activation_checkpointing: false }, 3),
  ],
  notes: ['no machine profile is stored'],
};

describe('run prediction (controller)', () => {
  it("asks for the job's model (with its built-in dataset's vocabulary), batch, block-long sequences and world (or its placement)", () => {
    expect(adviseRequestOfJob(job({ preset: 'tiny', strategy: 'ddp', world: 2, batch_size: 8 }))).toEqual({
      preset: 'tiny',
      model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 27 }, // builtin:grammar
      batch_size: 8,
      seq_len: 64,
      devices: 2,
    });
    const placement = [{ machine: 'local' }, { machine: 'local', device: '0' }];
    const r = adviseRequestOfJob(job({ strategy: 'ddp', world: 2, seq_len: 32 }), placement);
    expect(r.placement).toEqual(placement);
    expect(r.devices).toBeUndefined();
    expect(r.seq_len).toBe(32);
    expect(adviseRequestOfJob({ ...job({}), precision: 'bf16' }).precision).toBe('bf16');
  });

  it("finds the job's layout whatever the spelling: tp's group from the world, pp's default 1F1B, offload and checkpointing", () => {
    expect(planOfJob(result, job({ strategy: 'ddp', world: 2 }))?.rank_order).toBe(0);
    expect(planOfJob(result, job({ strategy: 'zero2', world: 2, offload_optimizer: 'cpu' }))?.rank_order).toBe(1);
    expect(planOfJob(result, job({ strategy: 'zero2', world: 2 }))).toBeNull();
    expect(planOfJob(result, job({ strategy: 'pp', pp: 2, micro_batches: 4, activation_checkpointing: true }))?.rank_order).toBe(2);
    expect(planOfJob(result, job({ strategy: 'pp', pp: 2, micro_batches: 4 }))).toBeNull(); // without checkpointing
    expect(
      planOfJob(result, job({ strategy: 'pp', pp: 2, micro_batches: 4, schedule: 'gpipe', activation_checkpointing: true })),
    ).toBeNull();
    expect(planOfJob(result, job({ strategy: 'tp', tp: 2 }))?.rank_order).toBe(3);
    expect(layoutOfJob(job({ strategy: 'tp', tp: 2 }))).toMatchObject({ strategy: 'tp', world: 2, tp: 2, micro_batches: 1 });
  });

  it('keeps the plan with the request, the profile source and the notes; else says why', async () => {
    const j = job({ strategy: 'ddp', world: 2, batch_size: 8 });
    const now = new Date('2026-12-01T12:00:00Z');
    const ok = await predictRun(j, undefined, () => Promise.resolve(result), now);
    expect('prediction' in ok && RunPredictionSchema.parse(ok.prediction)).toMatchObject({
      predicted_at: '2026-12-01T12:00:00.000Z',
      request: { batch_size: 8, devices: 2 },
      profile: { source: 'defaults' },
      plan: { rank_order: 0 },
      notes: ['no machine profile is stored'],
    });
    const missing = await predictRun(job({ strategy: 'zero3', world: 2 }), undefined, () => Promise.resolve(result));
    expect(missing).toEqual({ why: expect.stringMatching(/does not list its layout/) });
    const refused = await predictRun(j, undefined, () => Promise.reject(new Error('batch_size 8 does not split over 3 ranks')));
    expect(refused).toEqual({ why: expect.stringMatching(/refused its request \(batch_size 8 does not split over 3 ranks\)/) });
  });
});

describe('Advisor panel and the launch form', () => {
  const form: AdvisorFormFields = {
    preset: 'tiny',
    customSizes: false,
    n_layer: 4,
    n_head: 4,
    d_model: 128,
    block_size: 32,
    strategy: 'single',
    world: 2,
    tp: 2,
    pp: 2,
    dp: 2,
    schedule: '1f1b',
    micro_batches: 1,
    offload: false,
    activation_checkpointing: false,
    batch_size: '',
  };
  const plan = LaunchPlanSchema.parse({
    strategy: 'single',
    world: 1,
    micro_batches: 1,
    tp: 1,
    pp: 1,
    dp: 1,
    activation_checkpointing: false,
    offload_optimizer: 'none',
    model: { preset: 'tiny', n_layer: 2, n_head: 2, d_model: 64, block_size: 64 },
    steps: 20,
    batch_size: 8,
    lr: 0.001,
    dataset: 'builtin:grammar',
    strategies: [],
    presets: ['tiny'],
  });

  it("asks with the preset and the controller's batch and block, or the sizes and the form's batch; for the form's ranks", () => {
    expect(adviseRequestOf(form, null, 2)).toBeNull();
    expect(adviseRequestOf(form, plan, 2)).toEqual({ preset: 'tiny', batch_size: 8, seq_len: 64, devices: 2 });
    expect(adviseRequestOf({ ...form, customSizes: true, batch_size: 16 }, plan, 4)).toEqual({
      model: { n_layer: 4, n_head: 4, d_model: 128, block_size: 32 },
      batch_size: 16,
      seq_len: 32,
      devices: 4,
    });
    expect(adviseRequestOf({ ...form, precision: 'bf16' }, plan, 2)).toMatchObject({ precision: 'bf16' });
    expect(adviseRequestOf({ ...form, precision: 'fp32' }, plan, 2)).not.toHaveProperty('precision');
    const placement = [{ machine: 'local' }, { machine: '10.0.0.2:7000', device: '1' }];
    expect(adviseRequestOf(form, plan, 2, placement)).toEqual({ preset: 'tiny', batch_size: 8, seq_len: 64, placement });
  });

  it("a picked layout's launch fills the strategy, its knobs, micro-batches, offload and checkpointing", () => {
    expect(
      formPatchOf({
        preset: 'tiny',
        model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64 },
        strategy: '3d',
        world: 8,
        dp: 2,
        tp: 2,
        pp: 2,
        schedule: 'gpipe',
        micro_batches: 4,
        batch_size: 8,
        seq_len: 64,
        activation_checkpointing: true,
      }),
    ).toEqual({
      preset: 'tiny',
      customSizes: false,
      strategy: '3d',
      world: 8,
      dp: 2,
      tp: 2,
      pp: 2,
      schedule: 'gpipe',
      micro_batches: 4,
      offload: false,
      activation_checkpointing: true,
      batch_size: 8,
    });
    expect(formPatchOf({ strategy: 'zero1', world: 2, offload_optimizer: 'cpu' })).toMatchObject({
      strategy: 'zero1',
      world: 2,
      offload: true,
      micro_batches: 1,
    });
    expect(formPatchOf({ strategy: 'tp', world: 4 })).toMatchObject({ tp: 4 });
    expect(formPatchOf({ strategy: 'ddp', world: 2, precision: 'fp16' })).toMatchObject({ precision: 'fp16' });
    expect(formPatchOf({ model: { n_layer: 4, n_head: 4, d_model: 128, block_size: 32 }, strategy: 'ddp', world: 2 })).toMatchObject({
      customSizes: true,
      n_layer: 4,
      block_size: 32,
    });
  });
});
