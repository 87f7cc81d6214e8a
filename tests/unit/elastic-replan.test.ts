// An elastic run's next layout (src-main/launch/elastic/replan.ts): the same strategy at the
// largest world the devices left allow, else the advisor's best layout that fits them, built by
// relayoutJob (its notes kept), never below the run's MIN.
import { describe, expect, it } from 'vitest';
import { advise } from '../../common/advisor/plan.js';
import { DEFAULT_DEVICE_SPEED, DEFAULT_LINK } from '../../common/advisor/time.js';
import { ASSUMED_VOCAB } from '../../common/model-params.js';
import { replan } from '../../src-main/launch/elastic/replan.js';
import { type JobRequest, resolveJob } from '../../src-main/launch/resolve-job.js';

/** a run's job as a launch resolves it: 2 blocks, 2 heads, global batch 12 */
const run = (req: JobRequest) =>
  resolveJob(
    { steps: 10, batch_size: 12, model: { n_layer: 2, n_head: 2, d_model: 32, block_size: 16 }, ...req },
    { runDir: '/tmp/replan' },
  );
const here = (n: number) => Array<string>(n).fill('this machine');

function planned(r: ReturnType<typeof replan>) {
  if ('why' in r) throw new Error(`refused: ${r.why}`);
  return r;
}

describe('replan', () => {
  it('ddp 3 -> 2 machines: ddp x 2, the global batch 12 kept, relayoutJob notes the layout line', () => {
    const r = planned(replan({ job: run({ strategy: 'ddp', world: 3 }), machines: here(2), min: 2 }));
    expect(r.chosen).toBe('kept');
    expect(r.job.parallel).toMatchObject({ strategy: 'ddp', world: 2, micro_batches: 1 });
    expect(r.job.train.batch_size).toBe(12);
    expect(r.notes).toEqual(['layout ddp x3 -> ddp x2']);
  });

  it('zero3 3 -> 2 with 4 micro-batches: zero3 x 2, micro-batches 4 -> 3 (6 rows per replica), said so', () => {
    const r = planned(replan({ job: run({ strategy: 'zero3', world: 3, micro_batches: 4 }), machines: here(2), min: 2 }));
    expect(r.job.parallel).toMatchObject({ strategy: 'zero3', world: 2, micro_batches: 3 });
    expect(r.notes).toEqual([
      'layout zero3 x3 -> zero3 x2',
      'micro_batches 4 does not split the 6 rows each data-parallel replica gets in the new layout; 3 micro-batches of 2 rows instead (the global batch stays 12)',
    ]);
  });

  it('ddp with PowerSGD 3 -> 2: its per-rank error feedback is reset, in the notes', () => {
    const job = run({ strategy: 'ddp', world: 3, grad_compression: { hook: 'powersgd' } });
    const r = planned(replan({ job, machines: here(2), min: 2 }));
    expect(r.job.parallel?.grad_compression?.hook).toBe('powersgd');
    expect(r.notes.some((n) => /PowerSGD's per-rank error feedback and warm-start factors are reset/.test(n))).toBe(true);
  });

  it('pp 2 losing a stage (1 device left, MIN 1): pp cannot run on 1 rank, the advisor picks single, micro-batches kept', () => {
    const r = planned(replan({ job: run({ strategy: 'pp', pp: 2, micro_batches: 4 }), machines: here(1), min: 1 }));
    expect(r.chosen).toBe('advisor');
    expect(r.job.parallel).toMatchObject({ strategy: 'single', world: 1, micro_batches: 4 });
    expect(r.notes).toEqual(['layout pp 2 m4 1f1b -> single']);
  });

  it("3d 1x2x2 losing a rank (3 devices, MIN 2): no 3d grid refills, the advisor's best layout of 2 or 3 ranks that fits", () => {
    const job = run({ strategy: '3d', dp: 1, tp: 2, pp: 2, micro_batches: 2 });
    const r = planned(replan({ job, machines: ['this machine', 'b (10.0.0.2:7341)', 'c (10.0.0.3:7341)'], min: 2 }));
    expect(r.chosen).toBe('advisor');
    expect(r.job.parallel!.world).toBeGreaterThanOrEqual(2);
    expect(r.job.parallel!.world).toBeLessThanOrEqual(3);
    expect(r.job.parallel!.strategy).not.toBe('3d');
    expect(r.job.train.batch_size).toBe(12);
    expect(r.notes[0]).toMatch(/^layout 3d 1x2x2 m2 1f1b -> /);
    // the advisor's own first choice of 2 or 3 ranks that fits, at the run's activation checkpointing (off)
    const m = job.model;
    const ranks = ['this machine', 'b', 'c'].map((machine, i) => ({ label: `d${i}`, machine, speed: DEFAULT_DEVICE_SPEED }));
    const best = advise({
      model: { ...m, vocab_size: ASSUMED_VOCAB },
      batch_size: 12,
      seq_len: 16,
      precision: 'fp32',
      hardware: { source: 'defaults', ranks, local: DEFAULT_LINK, remote: DEFAULT_LINK, notes: [] },
    }).layouts.find((p) => p.fits && p.layout.world >= 2 && !p.layout.activation_checkpointing)!.layout;
    expect(r.job.parallel).toMatchObject({ strategy: best.strategy, world: best.world });
  });

  it('3d 2x1x2 losing a rank keeps 3d with one replica (1x1x2 on 2 of the 3 devices)', () => {
    const r = planned(replan({ job: run({ strategy: '3d', dp: 2, tp: 1, pp: 2, micro_batches: 2 }), machines: here(3), min: 2 }));
    expect(r.chosen).toBe('kept');
    expect(r.job.parallel).toMatchObject({ strategy: '3d', world: 2, dp: 1, tp: 1, pp: 2 });
  });

  it('fewer devices than MIN: refused, saying why', () => {
    const r = replan({ job: run({ strategy: 'ddp', world: 3 }), machines: here(1), min: 2 });
    expect(r).toEqual({ why: '1 device remain, fewer than the minimum of 2' });
  });

  it('no layout of MIN or more ranks takes the batch: refused, each refusal named', () => {
    // batch 12 at MIN 5 of 5 devices: no data-parallel split, 2 blocks are too few for 5 stages, 2 heads for 5 shards
    const r = replan({ job: run({ strategy: 'ddp', world: 6 }), machines: here(5), min: 5 });
    expect('why' in r && r.why).toMatch(/^no layout of 5 to 5 ranks fits \(ddp at 5: batch size 12 is not divisible by world 5/);
  });

  it('a scale-up prefers the run as launched: a pp run that went single returns to pp 2 when the machine is back', () => {
    const pp = run({ strategy: 'pp', pp: 2, micro_batches: 4 });
    const single = planned(replan({ job: pp, machines: here(1), min: 1 })).job;
    const r = planned(replan({ job: single, machines: here(2), min: 2, prefer: [pp.parallel!, single.parallel!] }));
    expect(r.chosen).toBe('kept');
    expect(r.job.parallel).toMatchObject({ strategy: 'pp', world: 2, pp: 2, micro_batches: 4 });
  });
});
