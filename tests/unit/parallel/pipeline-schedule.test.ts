import { describe, expect, it } from 'vitest';
import {
  computeOrder,
  maxInFlight,
  partitionLayers,
  type PipelineAction,
  simulate,
  stageActions,
  theoreticalBubble,
} from '../../../workers/parallel/pipeline-schedule.js';

const SCHEDULES = ['gpipe', '1f1b'] as const;
const lists = (s: (typeof SCHEDULES)[number], p: number, m: number) =>
  Array.from({ length: p }, (_, stage) => stageActions(s, p, stage, m));

describe('pipeline schedules', () => {
  it('1F1B on 4 stages, 8 micro-batches: warm-up p-stage-1 forwards, then alternate, then cool-down', () => {
    const show = (stage: number) =>
      computeOrder('1f1b', 4, stage, 8)
        .map((a) => `${a.op[0]!.toUpperCase()}${a.micro}`)
        .join(' ');
    expect(show(0)).toBe('F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7');
    expect(show(3)).toBe('F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7');
    expect(computeOrder('gpipe', 2, 1, 3).map((a) => `${a.op[0]}${a.micro}`)).toEqual(['f0', 'f1', 'f2', 'b0', 'b1', 'b2']);
  });

  it('transfers surround compute: stage 1 of 3 receives before F and sends after it, both ways', () => {
    const a = stageActions('1f1b', 3, 1, 1);
    expect(a).toEqual<PipelineAction[]>([
      { op: 'recv-act', micro: 0, peer: 0 },
      { op: 'forward', micro: 0 },
      { op: 'send-act', micro: 0, peer: 2 },
      { op: 'recv-grad', micro: 0, peer: 2 },
      { op: 'backward', micro: 0 },
      { op: 'send-grad', micro: 0, peer: 0 },
    ]);
  });

  it('every stage runs every micro-batch forward once and backward once, backward after forward', () => {
    for (const s of SCHEDULES)
      for (const p of [1, 2, 3, 4, 8])
        for (const m of [1, 2, 3, 4, 8, 16])
          for (let stage = 0; stage < p; stage++) {
            const order = computeOrder(s, p, stage, m);
            for (let i = 0; i < m; i++) {
              const f = order.findIndex((a) => a.op === 'forward' && a.micro === i);
              const b = order.findIndex((a) => a.op === 'backward' && a.micro === i);
              expect(f, `${s} p=${p} m=${m} stage ${stage} micro ${i}`).toBeGreaterThanOrEqual(0);
              expect(b).toBeGreaterThan(f);
            }
            expect(order).toHaveLength(2 * m);
          }
  });

  it('activation slots: GPipe holds m micro-batches, 1F1B at most min(p - stage, m)', () => {
    for (const p of [2, 4, 8])
      for (const m of [1, 2, 4, 8, 16])
        for (let stage = 0; stage < p; stage++) {
          expect(maxInFlight(stageActions('gpipe', p, stage, m))).toBe(m);
          expect(maxInFlight(stageActions('1f1b', p, stage, m))).toBe(Math.min(p - stage, m));
        }
  });

  it('deadlock freedom: simulated against each other (blocking recvs, buffered sends) every schedule completes', () => {
    for (const s of SCHEDULES)
      for (const p of [1, 2, 3, 4, 5, 8])
        for (const m of [1, 2, 3, 4, 7, 8, 16]) {
          const r = simulate(lists(s, p, m), 2);
          expect(r.completed, `${s} p=${p} m=${m} stopped at ${r.positions.join(',')}`).toBe(true);
          expect(r.timeline).toHaveLength(2 * m * p);
        }
  });

  it('the simulation catches a deadlock: two stages that both receive first', () => {
    const bad = [
      [
        { op: 'recv-grad', micro: 0, peer: 1 },
        { op: 'forward', micro: 0 },
        { op: 'send-act', micro: 0, peer: 1 },
      ],
      [
        { op: 'recv-act', micro: 0, peer: 0 },
        { op: 'forward', micro: 0 },
        { op: 'send-grad', micro: 0, peer: 0 },
      ],
    ] as PipelineAction[][];
    expect(simulate(bad).completed).toBe(false);
  });

  it('with unit forward and backward=2 ticks, both schedules take (m+p-1)*3 ticks: the bubble is (p-1)/(m+p-1)', () => {
    for (const s of SCHEDULES)
      for (const p of [2, 4])
        for (const m of [1, 2, 4, 8]) {
          const r = simulate(lists(s, p, m), 2);
          const end = Math.max(...r.timeline.map((x) => x.tick + (x.op === 'backward' ? 2 : 1)));
          expect(end, `${s} p=${p} m=${m}`).toBe((m + p - 1) * 3);
          const busy = m * 3;
          expect(1 - busy / end).toBeCloseTo(theoreticalBubble(p, m), 12);
        }
  });

  it('partition: consecutive blocks, balanced by parameters, at least one block per stage', () => {
    expect(partitionLayers(4, 2, 100, 0, 0)).toEqual([
      { from: 0, to: 2 },
      { from: 2, to: 4 },
    ]);
    expect(partitionLayers(4, 4, 100, 10, 10)).toEqual([
      { from: 0, to: 1 },
      { from: 1, to: 2 },
      { from: 2, to: 3 },
      { from: 3, to: 4 },
    ]);
    // a heavy embedding moves blocks off the first stage
    expect(partitionLayers(6, 2, 100, 250, 0)).toEqual([
      { from: 0, to: 2 },
      { from: 2, to: 6 },
    ]);
    // a heavy head (ln_f + the wte copy): the last stage takes one block, the largest stage is 300
    const r = partitionLayers(6, 3, 100, 0, 150);
    expect(r.at(-1)).toEqual({ from: 5, to: 6 });
    expect(Math.max(...r.map((x, s) => (x.to - x.from) * 100 + (s === 2 ? 150 : 0)))).toBe(300);
    expect(() => partitionLayers(2, 4, 100, 0, 0)).toThrow(/n_layer 2 is smaller than the pipeline stages \(parallel.pp = 4\)/);
  });
});
