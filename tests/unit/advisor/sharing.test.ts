import { describe, expect, it } from 'vitest';
import { layoutName } from '../../../common/advisor/layouts.js';
import { advise, type PlanDevice, type PlanHardware } from '../../../common/advisor/plan.js';
import { AdapterProfileSchema, type MachineProfile, MachineProfileSchema, STEP_SHARE_OP } from '../../../common/advisor/profile.js';
import {
  DEFAULT_DEVICE_SPEED,
  DEFAULT_LINK,
  type DeviceSpeed,
  microBatchScale,
  type ShareSample,
  shareSpeedup,
  stepShareSpeedup,
} from '../../../common/advisor/time.js';
import type { DevicesView } from '../../../common/api/index.js';
import { adviseRequest } from '../../../src-main/controller/advise.js';
import { stepBatches } from '../../../workers/cli/profile-step.js';

// Ranks that share one device: the time model gives them its throughput times the aggregate
// speedup `shardwise profile` measured for that many processes on it (time.ts shareSpeedup).
// Measured on SwiftShader (2 cores), two processes did 0.71-0.85x of one's step time on small's
// kernels: more than one process's throughput. Absent, the old rule (they split it) holds exactly.
const SMALL = { n_layer: 4, n_head: 4, d_model: 128, block_size: 128, vocab_size: 96 };

/** k = 2 at tiny's and small's largest matmul and one memory-bound size, all at `x` */
const sharedAt = (x: number): DeviceSpeed['shared'] => [
  { k: 2, op: 'matmul', flops: 1.7e7, bytes: 0, speedup: x },
  { k: 2, op: 'matmul', flops: 1.3e8, bytes: 0, speedup: x },
  { k: 2, op: 'gelu', flops: 0, bytes: 1e6, speedup: x },
];

/** both ranks on one device (the same object) with these speeds */
function oneDevice(speed: DeviceSpeed): PlanHardware {
  const d: PlanDevice = { label: 'GPU 0', machine: 'local', speed };
  return { source: 'measured', ranks: [d, d], local: DEFAULT_LINK, notes: [] };
}
const planSmall = (hw: PlanHardware) => advise({ model: SMALL, batch_size: 8, seq_len: 128, precision: 'fp32', hardware: hw });
const row = (r: ReturnType<typeof planSmall>, name: string) => r.layouts.find((l) => layoutName(l.layout) === name)!;

describe('ranks sharing one device', () => {
  it('a measured speedup of 1.4 ranks zero1 x2 and ddp x2 ahead of single; 0.8 behind it; compute scales by 1/speedup', () => {
    const base = planSmall(oneDevice(DEFAULT_DEVICE_SPEED));
    const faster = planSmall(oneDevice({ ...DEFAULT_DEVICE_SPEED, shared: sharedAt(1.4) }));
    const slower = planSmall(oneDevice({ ...DEFAULT_DEVICE_SPEED, shared: sharedAt(0.8) }));
    for (const name of ['zero1 x2', 'ddp x2']) {
      expect(row(faster, name).rank_order, name).toBeLessThan(row(faster, 'single').rank_order);
      expect(row(slower, name).rank_order, name).toBeGreaterThan(row(slower, 'single').rank_order);
      // the device's busy time, both ranks' launches, over the aggregate speedup
      expect(row(faster, name).time.compute_ms / (row(base, name).time.compute_ms / 1.4)).toBeCloseTo(1, 9);
      expect(row(slower, name).time.compute_ms / (row(base, name).time.compute_ms / 0.8)).toBeCloseTo(1, 9);
    }
    // one rank alone on the device: no one to share with
    expect(row(faster, 'single').time).toEqual(row(base, 'single').time);
    expect(faster.notes).toContain(
      "ranks that share GPU 0 get its throughput times the aggregate speedup 'shardwise profile' measured for 2 processes on it at their kernels' sizes (x1.40 over the sizes it timed; more ranks than that: the largest measured)",
    );
    expect(base.notes.some((n) => n.startsWith('ranks that share GPU 0 split its throughput'))).toBe(true);
  });

  it('none measured, or ranks on devices of their own: the same plan as without the figures, exactly', () => {
    const base = planSmall(oneDevice(DEFAULT_DEVICE_SPEED));
    expect(planSmall(oneDevice({ ...DEFAULT_DEVICE_SPEED, shared: [] })).layouts).toEqual(base.layouts);
    const apart = (speed: DeviceSpeed): PlanHardware => ({
      ...oneDevice(speed),
      ranks: [0, 1].map((i) => ({ label: `GPU ${i}`, machine: 'local', speed })),
    });
    expect(planSmall(apart({ ...DEFAULT_DEVICE_SPEED, shared: sharedAt(1.4) })).layouts).toEqual(
      planSmall(apart(DEFAULT_DEVICE_SPEED)).layouts,
    );
  });

  it('the speedup at a size: log-log between measured sizes, the nearest beyond; its kind`s where the op was not measured; the largest k up to the ranks', () => {
    const d: DeviceSpeed = {
      ...DEFAULT_DEVICE_SPEED,
      shared: [
        { k: 2, op: 'matmul', flops: 1e6, bytes: 0, speedup: 2 },
        { k: 2, op: 'matmul', flops: 1e8, bytes: 0, speedup: 0.5 },
        { k: 4, op: 'matmul', flops: 1e6, bytes: 0, speedup: 3 },
      ],
    };
    expect(shareSpeedup(d, 'matmul', 1e7, 0, 2)).toBeCloseTo(1, 12);
    expect(shareSpeedup(d, 'matmul', 1e3, 0, 2)).toBe(2);
    expect(shareSpeedup(d, 'matmul', 1e9, 0, 2)).toBe(0.5);
    expect(shareSpeedup(d, 'attention', 1e7, 0, 2)).toBeCloseTo(1, 12);
    expect(shareSpeedup(d, 'matmul', 1e9, 0, 3)).toBe(0.5);
    expect(shareSpeedup(d, 'matmul', 1e9, 0, 8)).toBe(3);
    // a memory-bound op with no memory-bound sample, a rank alone, a device never measured: 1
    expect(shareSpeedup(d, 'layernorm', 0, 1e6, 2)).toBe(1);
    expect(shareSpeedup(d, 'matmul', 1e7, 0, 1)).toBe(1);
    expect(shareSpeedup(DEFAULT_DEVICE_SPEED, 'matmul', 1e7, 0, 2)).toBe(1);
  });
});

describe('the stored profile`s sharing figures', () => {
  const adapter = {
    index: 0,
    name: 'SwiftShader Device (Subzero)',
    backend: 'vulkan',
    kernels: DEFAULT_DEVICE_SPEED.kernels.map((k) => ({ ...k, shape: 'default' })),
    h2d_gbps: 2,
    d2h_gbps: 2,
    launch_ms: DEFAULT_DEVICE_SPEED.launch_ms!,
    sync_ms: DEFAULT_DEVICE_SPEED.sync_ms!,
  };
  const profile = (shared?: number): MachineProfile => ({
    machine: { hostname: 'vm', id: 'x', measured_at: '2026-12-01T20:00:00.000Z' },
    adapters: [
      {
        ...adapter,
        ...(shared !== undefined ? { shared: sharedAt(shared)!.map((x) => ({ ...x, shape: `${x.op} ${x.flops || x.bytes}` })) } : {}),
      },
    ],
    links: [{ kind: 'shm', gbps: 0.8, latency_us: 100 }],
  });

  it('round-trip through the schema; a profile from before them still parses; a speedup of 0 is refused', () => {
    const p = profile(1.3);
    expect(MachineProfileSchema.parse(JSON.parse(JSON.stringify(p)))).toEqual(p);
    expect(MachineProfileSchema.parse(profile()).adapters[0]!.shared).toBeUndefined();
    expect(AdapterProfileSchema.safeParse({ ...p.adapters[0], shared: [{ ...p.adapters[0]!.shared![0], speedup: 0 }] }).success).toBe(
      false,
    );
  });

  it('reach the plan through the controller: two ranks on the one adapter at x1.4 put zero1 x2 ahead of single', async () => {
    const view = {
      adapters: [{ index: 0, description: 'SwiftShader Device (Subzero)', systemGpu: null }],
      system: { controllers: [] },
    } as unknown as DevicesView;
    const ask = (p: MachineProfile) =>
      adviseRequest(
        { preset: 'small', batch_size: 8, seq_len: 128, devices: 2 },
        { devices: () => Promise.resolve(view), profile: () => Promise.resolve(p) },
      );
    const without = await ask(profile());
    const withSharing = await ask(profile(1.4));
    expect(row(without, 'zero1 x2').rank_order).toBeGreaterThan(row(without, 'single').rank_order);
    expect(row(withSharing, 'zero1 x2').rank_order).toBeLessThan(row(withSharing, 'single').rank_order);
    expect(withSharing.notes.some((n) => n.includes('x1.40 over the sizes it timed'))).toBe(true);
  });
});

// The figures a rank really gets: k processes each running a whole training step (its launches,
// the norm's and the loss's readbacks, the update; workers/cli/profile-step.ts) at the
// micro-batches layouts run, against one alone. `shardwise profile --preset tiny` here
// (SwiftShader, 2 cores, 03:23 UTC, load average 14 from other work): two processes at tiny's
// B=4 x0.86 (one alone 63.7 ms, each of two at once 149.0 ms), at B=1 x1.55 (37.5 / 48.3 ms);
// its size, the mean FLOPs of the step's 11 matmul and attention cases: 5.86 and 1.46 MFLOP.
const TINY = { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 96 };
const MEASURED = { b4: { flops: 5_858_024.7, speedup: 0.8555 }, b1: { flops: 1_464_506.2, speedup: 1.554 } };
const step = (flops: number, speedup: number, k = 2): ShareSample => ({ k, op: STEP_SHARE_OP, flops, bytes: 0, speedup });
const planTiny = (hw: PlanHardware) => advise({ model: TINY, batch_size: 8, seq_len: 64, precision: 'fp32', hardware: hw });

describe('ranks sharing one device, by whole steps', () => {
  it('the micro-batches measured: B/k (each data-parallel rank, a k-stage pipeline of k) and B/4k (the deepest pipeline offered), at least 1', () => {
    expect(stepBatches(8, 2)).toEqual([4, 1]);
    expect(stepBatches(8, 4)).toEqual([2, 1]);
    expect(stepBatches(1, 2)).toEqual([1]);
  });

  it('the speedup at a step size: log-log between the measured sizes, the nearest beyond; the largest k up to the ranks; none measured or a rank alone: undefined', () => {
    const d: DeviceSpeed = { ...DEFAULT_DEVICE_SPEED, shared: [step(1e6, 2), step(1e8, 0.5), step(1e6, 3, 4)] };
    expect(stepShareSpeedup(d, 1e7, 2)).toBeCloseTo(1, 12);
    expect(stepShareSpeedup(d, 1e3, 2)).toBe(2);
    expect(stepShareSpeedup(d, 1e9, 3)).toBe(0.5);
    expect(stepShareSpeedup(d, 1e9, 8)).toBe(3);
    expect(stepShareSpeedup(d, 1e7, 1)).toBeUndefined();
    expect(stepShareSpeedup(DEFAULT_DEVICE_SPEED, 1e7, 2)).toBeUndefined();
    // the per-kernel figures leave the step ones out: a matmul with only step figures measured shares 1
    expect(shareSpeedup(d, 'matmul', 1e7, 0, 2)).toBe(1);
    expect(shareSpeedup(d, 'layernorm', 0, 1e6, 2)).toBe(1);
  });

  it('the step figure, where measured, replaces the per-kernel ones: compute is both ranks` launches alone over it; single is unchanged', () => {
    const base = planTiny(oneDevice(DEFAULT_DEVICE_SPEED));
    // per-kernel x0.8 everywhere, whole steps x1.3 at every size
    const kernels = sharedAt(0.8)!;
    const both = planTiny(oneDevice({ ...DEFAULT_DEVICE_SPEED, shared: [...kernels, step(1e5, 1.3), step(1e8, 1.3)] }));
    const onlyKernels = planTiny(oneDevice({ ...DEFAULT_DEVICE_SPEED, shared: kernels }));
    for (const name of ['dp x2', 'ddp x2', 'zero1 x2', 'zero2 x2', 'zero3 x2', 'tp 2', 'pp 2 m2 gpipe', 'pp 2 m8 1f1b']) {
      expect(row(both, name).time.compute_ms / (row(base, name).time.compute_ms / 1.3), name).toBeCloseTo(1, 9);
      expect(row(onlyKernels, name).time.compute_ms, name).toBeGreaterThan(row(base, name).time.compute_ms);
    }
    expect(row(both, 'single').time).toEqual(row(base, 'single').time);
    expect(both.notes).toContain(
      "ranks that share GPU 0 get its throughput times the aggregate speedup 'shardwise profile' measured for 2 processes each running a whole training step on it (x1.30 at the micro-batches it timed, by the size of each rank's launches; more ranks than that: the largest measured)",
    );
  });

  it('the figures measured here: dp x2 and tp 2 share at the B=4 figure, pp 2 m8 (B=1 micro-batches) at about the B=1 one; each layout`s compute is its ranks` launches alone over it', () => {
    const measured = {
      ...DEFAULT_DEVICE_SPEED,
      shared: [step(MEASURED.b4.flops, MEASURED.b4.speedup), step(MEASURED.b1.flops, MEASURED.b1.speedup)],
    };
    const base = planTiny(oneDevice(DEFAULT_DEVICE_SPEED));
    const r = planTiny(oneDevice(measured));
    const speedupOf = (name: string) => row(base, name).time.compute_ms / row(r, name).time.compute_ms;
    // a dp rank's launches at B=4 are no smaller than the profile's step at B=4: its figure (the nearest beyond)
    for (const name of ['dp x2', 'ddp x2', 'zero1 x2', 'zero3 x2']) expect(speedupOf(name), name).toBeCloseTo(MEASURED.b4.speedup, 9);
    // a pipeline of 8 micro-batches of one sequence: within 2% of the B=1 figure (a stage's launches a little larger: the head)
    expect(speedupOf('pp 2 m8 gpipe')).toBeGreaterThan(0.98 * MEASURED.b1.speedup);
    expect(speedupOf('pp 2 m8 gpipe')).toBeLessThanOrEqual(MEASURED.b1.speedup);
    // tensor parallelism halves each launch's width at twice the rows: a dp rank's size, its figure
    expect(speedupOf('tp 2')).toBeCloseTo(MEASURED.b4.speedup, 9);
  });
});

// A smaller step can run faster per sequence than the kernel model (timed at the whole batch's
// sizes) says: here small's step of 4 sequences took 370 ms alone against 1,038 ms for 8.
const alone = (flops: number, batch: number, aloneMs: number, whole: number, wholeMs: number, speedup = 1): ShareSample =>
  ({ ...step(flops, speedup), batch, alone_ms: aloneMs, whole_batch: whole, whole_batch_ms: wholeMs }) as ShareSample;

describe('micro-batches at the speed the profile measured for them alone', () => {
  it('the scale: (step alone / whole batch alone) over the model`s ratio, log-log by the part of the batch, 1 at the whole, the nearest below; the shape nearest the model', () => {
    const linear = (b: number) => b; // a model whose step time is proportional to the batch
    const small = [alone(43e6, 4, 370, 8, 1038), alone(10.8e6, 1, 100, 8, 1038)];
    const tiny = [alone(5.9e6, 4, 200, 8, 222)];
    const d: DeviceSpeed = { ...DEFAULT_DEVICE_SPEED, shared: [...tiny, ...small] };
    const c4 = 370 / 1038 / 0.5;
    const c1 = 100 / 1038 / 0.125;
    expect(microBatchScale(d, 0.5, 8, 86e6, linear)).toBeCloseTo(c4, 12);
    expect(microBatchScale(d, 0.125, 8, 86e6, linear)).toBeCloseTo(c1, 12);
    expect(microBatchScale(d, 1 / 16, 8, 86e6, linear)).toBeCloseTo(c1, 12);
    expect(microBatchScale(d, 1, 8, 86e6, linear)).toBe(1);
    // between 4 of 8 and the whole: log-log
    expect(microBatchScale(d, Math.SQRT1_2, 8, 86e6, linear)).toBeCloseTo(Math.sqrt(c4), 12);
    // a model the size of tiny takes tiny's figure
    expect(microBatchScale(d, 0.5, 8, 12e6, linear)).toBeCloseTo(200 / 222 / 0.5, 12);
    // nothing measured alone beside its whole batch (a profile from before): 1
    expect(microBatchScale({ ...DEFAULT_DEVICE_SPEED, shared: [step(43e6, 1.1)] }, 0.5, 8, 86e6, linear)).toBe(1);
    expect(microBatchScale(DEFAULT_DEVICE_SPEED, 0.5, 8, 86e6, linear)).toBe(1);
  });

  it('in the plan: a data-parallel rank`s compute scaled, the whole batch`s layouts (single, tp 2) unchanged, a deeper pipeline at its own figure', () => {
    const withFigures = (xs: ShareSample[]) => planSmall(oneDevice({ ...DEFAULT_DEVICE_SPEED, shared: xs }));
    const bare = withFigures([step(43e6, 1.1), step(10.8e6, 1.1)]);
    const measured = withFigures([alone(43e6, 4, 370, 8, 1038, 1.1), alone(10.8e6, 1, 100, 8, 1038, 1.1)]);
    for (const name of ['single', 'tp 2']) expect(row(measured, name).time, name).toEqual(row(bare, name).time);
    const ratio = (name: string) => row(measured, name).time.compute_ms / row(bare, name).time.compute_ms;
    // 370 of 1,038 ms is 0.36 of the whole batch's step, where the model has a part near half
    for (const name of ['ddp x2', 'zero1 x2', 'zero3 x2']) expect(ratio(name), name).toBeLessThan(0.9);
    // the pipeline of 8 micro-batches of one sequence goes by the B=1 figure, not the B=4 one
    expect(ratio('pp 2 m8 gpipe')).not.toBeCloseTo(ratio('ddp x2'), 2);
  });
});
