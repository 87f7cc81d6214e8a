// What each rank is (common/topology.ts), on the real 8-rank 3d run's files and on small
// configs: grid cells in Megatron's tp-dp-pp order, the layers of each stage (the run's own
// split, and the prediction before it ends), machines and devices, memory.
import { describe, expect, it } from 'vitest';
import { rankRoles, roleLabel, runGrid, strategyLine } from '../../common/topology.js';
import { threeDRun } from './three-d-fixture.js';

describe('rankRoles on a real 3d run (D 2 x T 2 x P 2)', () => {
  const run = threeDRun();
  const roles = rankRoles(run);
  it('8 ranks, TP ranks adjacent, then DP, then PP: rank 5 = stage 1, TP 1, DP 0', () => {
    expect(roles.map((r) => [r.stage, r.tp, r.dp])).toEqual([
      [0, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
      [0, 1, 1],
      [1, 0, 0],
      [1, 1, 0],
      [1, 0, 1],
      [1, 1, 1],
    ]);
    expect(roleLabel(roles[5]!)).toBe('stage 1 · TP 1 · DP 0');
  });
  it("layers from the run's own split: stage 0 the embedding and block 0, stage 1 block 1 and the head; each TP rank one of 2 heads", () => {
    expect(roles.every((r) => r.layersFrom === 'run')).toBe(true);
    expect(roles[2]!.layers).toBe('embedding, block 0 · heads 0 of 2, 1/2 of the MLP and vocabulary');
    expect(roles[7]!.layers).toBe('block 1, ln_f + LM head · heads 1 of 2, 1/2 of the MLP and vocabulary');
  });
  it('before the summary exists (a live run), the prediction from Ψ gives the same layers', () => {
    const live = rankRoles({ ...run, summary: null, state: { ...run.state, params: run.summary.params } });
    expect(live.every((r) => r.layersFrom === 'config')).toBe(true);
    expect(live.map((r) => r.layers)).toEqual(roles.map((r) => r.layers));
    const early = rankRoles({ ...run, summary: null });
    expect(early[0]!.layers).toMatch(/^stage 0 of 2's blocks \(known once the model is built\)/);
  });
  it("peak memory is the summary's total: 1.60 MiB on stage 0 (1 673 644 B), 1 034 664 B on stage 1; one machine, the default adapter", () => {
    expect(roles.map((r) => r.peakBytes)).toEqual([...Array(4).fill(1_673_644), ...Array(4).fill(1_034_664)]);
    expect(roles[0]!.latestBytes).toBe(120_704 * 2 + 120_832 + 793_600 + 517_804);
    expect(new Set(roles.map((r) => `${r.machine} / ${r.device}`))).toEqual(new Set(['this machine / default adapter']));
  });
  it('strategy line', () => {
    expect(strategyLine(run.config.parallel)).toBe('3d: DP 2 × TP 2 × PP 2 · 1f1b, 2 micro-batches');
  });
});

describe('rankRoles on other strategies', () => {
  const steps = [{ memory: { '0': { params: 10, grads: 10 }, '1': { params: 10, grads: 12 } } }];
  it('ddp over 8 ranks: DP replicas 0..7, no stage or TP shard, the whole model each', () => {
    const roles = rankRoles({ config: { parallel: { strategy: 'ddp', world: 8 }, model: { n_layer: 4 } }, steps: [] });
    expect(runGrid({ strategy: 'ddp', world: 8 })).toEqual({ dp: 8, tp: 1, pp: 1 });
    expect(roles.map((r) => r.dp)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(roles.every((r) => r.stage === null && r.tp === null)).toBe(true);
    expect(roles[3]!.layers).toBe('embedding, blocks 0–3, ln_f + LM head');
    expect(roleLabel(roles[3]!)).toBe('DP 3');
  });
  it('machines from the run state, devices from the placement; memory against the device where it reports it', () => {
    const roles = rankRoles({
      config: { parallel: { strategy: 'zero3', world: 2 } },
      state: {
        placement: [{ machine: 'local' }, { machine: '10.0.0.2:7341', device: '1' }],
        ranks: [
          { rank: 0, machine: 'this machine' },
          { rank: 1, machine: 'bench-b (10.0.0.2:7341)' },
        ],
      },
      steps,
      deviceBytes: { 1: 8 * 2 ** 30 },
    });
    expect(roles.map((r) => [r.machine, r.device])).toEqual([
      ['this machine', 'default adapter'],
      ['bench-b (10.0.0.2:7341)', '1'],
    ]);
    expect(roles[1]!.layers).toMatch(/1\/2 of every parameter between uses \(ZeRO-3\)$/);
    expect(roles.map((r) => [r.peakBytes, r.deviceBytes])).toEqual([
      [20, null],
      [22, 8 * 2 ** 30],
    ]);
  });
  it('a pipeline split by measured time is not guessed before the run says it', () => {
    const roles = rankRoles({
      config: { parallel: { strategy: 'pp', world: 2, partition: 'time' }, model: { n_layer: 2, d_model: 64, block_size: 64 } },
      state: { params: 100_000 },
      steps: [],
    });
    expect(roles[1]!.layers).toBe("stage 1 of 2's blocks (split by measured time: known at the end)");
  });
});
