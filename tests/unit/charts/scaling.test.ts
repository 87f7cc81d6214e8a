import { describe, expect, it } from 'vitest';
import {
  runCharts,
  scalingChartOption,
  scalingFigures,
  scalingLine,
  scalingSteps,
  scalingVersus,
  type Span,
  type StepMetric,
} from '../../../common/charts/index.js';

const span = (rank: number, step: number, kind: string, start: number, end: number): Span => ({ rank, step, kind, name: kind, start, end });

// two DDP ranks, step 2 and 3 after a compiling step 1:
//  rank 0: backward 0-60, all-reduce 40-80 -> 20 ms exposed; rank 1: backward 0-50, all-reduce 40-90 -> 40 ms exposed
//  step 3: rank 0 all-reduce 100-110 entirely under backward 100-160 (0 exposed), rank 1: two all-reduces
//  155-170 and 165-175 after backward 100-160 (union 155-175, 15 exposed)
const spans: Span[] = [
  span(0, 1, 'backward', 0, 500),
  span(0, 1, 'comm', 400, 900),
  span(0, 2, 'backward', 0, 60),
  span(0, 2, 'comm', 40, 80),
  span(1, 2, 'backward', 0, 50),
  span(1, 2, 'comm', 40, 90),
  span(0, 3, 'backward', 100, 160),
  span(0, 3, 'comm', 100, 110),
  span(1, 3, 'backward', 100, 160),
  span(1, 3, 'comm', 155, 170),
  span(1, 3, 'comm', 165, 175),
];
const steps: StepMetric[] = [
  { step: 1, loss: 3, step_ms: 900, tokens_per_s: 100 },
  { step: 2, loss: 2.9, step_ms: 100, tokens_per_s: 1000 },
  { step: 3, loss: 2.8, step_ms: 80, tokens_per_s: 1250 },
];

describe('scaling: step time, exposed communication, efficiency', () => {
  it('exposed comm per step is the comm union less its overlap with compute, the slowest rank counting; the compiling step is left out', () => {
    expect(scalingSteps(steps, spans)).toEqual([
      { step: 2, step_ms: 100, exposed_comm_ms: 40 },
      { step: 3, step_ms: 80, exposed_comm_ms: 15 },
    ]);
  });

  it('without a baseline the efficiency is estimated as (step - exposed) / step over the medians: (90 - 27.5) / 90 = 69%', () => {
    const f = scalingFigures(2, scalingSteps(steps, spans))!;
    expect(f).toMatchObject({ world: 2, steps: 2, step_ms: 90, exposed_comm_ms: 27.5, basis: 'spans' });
    expect(f.efficiency).toBeCloseTo(62.5 / 90, 12);
    expect(scalingLine(f)).toBe(
      'scaling efficiency 69% at 2 ranks (estimated from spans) · exposed communication 27.5 ms of a 90.0 ms step (medians over 2 steps)',
    );
  });

  it('with a world-1 baseline it is measured: 1,600 tokens/s at 4 ranks against 1,000 at 1 rank = 40%', () => {
    const f = scalingFigures(4, scalingSteps(steps, spans), { tokens_per_s: 1000, run_tokens_per_s: 1600 })!;
    expect(f.basis).toBe('baseline');
    expect(f.efficiency).toBeCloseTo(0.4, 12);
    expect(scalingLine(f)).toMatch(/^scaling efficiency 40% at 4 ranks \(against the world-1 run\)/);
  });

  it('one rank, or no measured step: no figures', () => {
    expect(scalingFigures(1, scalingSteps(steps, spans))).toBeNull();
    expect(scalingFigures(2, scalingSteps(steps.slice(0, 1), spans))).toBeNull();
    expect(scalingSteps([], spans)).toEqual([]);
  });

  it('the chart stacks the rest of the step on the exposed communication per step, with the estimate in percent', () => {
    const rows = scalingSteps(steps, spans);
    const o = scalingChartOption(rows, scalingFigures(2, rows)!) as {
      series: { name: string; data: number[] }[];
      xAxis: { data: string[] };
    };
    expect(o.xAxis.data).toEqual(['2', '3']);
    expect(o.series.map((s) => [s.name, s.data])).toEqual([
      ['rest of the step', [60, 65]],
      ['exposed communication', [40, 15]],
      ['efficiency estimate', [60, 81.25]],
    ]);
    expect(JSON.parse(JSON.stringify(o))).toEqual(o); // plain JSON: the report ships it as is
  });

  it('runCharts shows it for several ranks only', () => {
    const run = { config: { parallel: { strategy: 'ddp', world: 2 } }, summary: null, steps, evals: [], spans };
    expect(runCharts(run).find((c) => c.id === 'scaling')?.section).toBe('communication');
    const single = { ...run, config: { parallel: { strategy: 'single', world: 1 } } };
    expect(runCharts(single).some((c) => c.id === 'scaling')).toBe(false);
  });

  it('comparing with a world-1 run of the same job measures the efficiency; another job or world only gets the estimate', () => {
    const ddp = { world: 2, tokens_per_s: 1500, steps, spans, job: 'tiny b8' };
    const single = { world: 1, tokens_per_s: 1000, steps: [], spans: [], job: 'tiny b8' };
    expect(scalingVersus(ddp, single)).toMatch(
      /^scaling efficiency 75% at 2 ranks \(against the world-1 run\) · exposed communication 27.5 ms/,
    );
    expect(scalingVersus(ddp, { ...single, job: 'small b8' })).toMatch(/^scaling efficiency 69% at 2 ranks \(estimated from spans\)/);
    expect(scalingVersus(ddp, { ...ddp, world: 4 })).toMatch(/\(estimated from spans\)/);
    // a run without spans (telemetry off) still compares against its baseline
    expect(scalingVersus({ ...ddp, spans: [] }, single)).toBe('scaling efficiency 75% at 2 ranks (against the world-1 run)');
    expect(scalingVersus(single, ddp)).toBeNull();
  });
});
