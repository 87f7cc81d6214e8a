// The advisor's chart builders with exact numbers: the panel's rows (bars of memory per rank
// against the device, the step stacked as compute / exposed comm / bubble / host copies, each a
// share of the slowest step), and predicted against measured for a run (peaks per category, the
// step's parts from the spans of the steps after the first). Each option is rendered by the real
// echarts (SSR) so it is one ECharts accepts.
import * as echarts from 'echarts';
import { describe, expect, it } from 'vitest';
import type { AdviseResult, LayoutPlan } from '../../../common/advisor/types.js';
import {
  advisorRows,
  advisorStepTimeChartOption,
  formatError,
  layoutLabel,
  measuredPeakBytes,
  measuredStepTime,
  memoryComparison,
  predictedMemoryChartOption,
  predictedStepTimeChartOption,
  runCharts,
  type Span,
  type StepMetric,
  stepTimeComparison,
} from '../../../common/charts/index.js';

const MiB = 1024 ** 2;

function renderSvg(option: object): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: 900, height: 400 });
  chart.setOption({ ...option, animation: false });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return svg;
}

const mem = (params: number, grads: number, optimizer: number, activations: number, comm = 0, workspace = 0) => ({
  params,
  grads,
  optimizer,
  activations,
  comm,
  workspace,
  total: params + grads + optimizer + activations + comm + workspace,
});

const zero2: LayoutPlan = {
  layout: { strategy: 'zero2', world: 2, micro_batches: 1 },
  launch: { strategy: 'zero2', world: 2 },
  fits: true,
  reason: 'fastest that fits: optimizer and gradients sharded over 2 ranks',
  ranks: [0, 1].map((rank) => ({
    rank,
    device: `GPU ${rank}`,
    device_memory_bytes: 100 * MiB,
    memory: mem(10 * MiB, 5 * MiB, 10 * MiB, 20 * MiB, 4 * MiB, 1 * MiB),
    host_memory_bytes: 0,
  })),
  time: { step_ms: 80, compute_ms: 60, comm_exposed_ms: 20, bubble_ms: 0, host_copy_ms: 0 },
  tokens_per_s: 6400,
  mfu: 0.25,
  rank_order: 0,
};
const pp: LayoutPlan = {
  layout: { strategy: 'pp', world: 2, pp: 2, micro_batches: 4, schedule: '1f1b', activation_checkpointing: true },
  launch: { strategy: 'pp', world: 2, pp: 2, micro_batches: 4, schedule: '1f1b', activation_checkpointing: true },
  fits: true,
  reason: 'fits; the bubble (p-1)/(m+p-1) = 0.2 costs more than ZeRO-2 communication',
  ranks: [0, 1].map((rank) => ({ rank, device: `GPU ${rank}`, memory: mem(20 * MiB, 20 * MiB, 40 * MiB, 10 * MiB), host_memory_bytes: 0 })),
  time: { step_ms: 160, compute_ms: 100, comm_exposed_ms: 10, bubble_ms: 40, host_copy_ms: 10 },
  tokens_per_s: 3200,
  rank_order: 1,
};
const single: LayoutPlan = {
  layout: { strategy: 'single', world: 1, micro_batches: 1 },
  launch: { strategy: 'single', world: 1 },
  fits: false,
  reason: 'optimizer 8Ψ = 200 MiB > 100 MiB on GPU 0: use ZeRO-1 or offload',
  ranks: [
    { rank: 0, device: 'GPU 0', device_memory_bytes: 100 * MiB, memory: mem(50 * MiB, 50 * MiB, 100 * MiB, 0), host_memory_bytes: 0 },
  ],
  time: { step_ms: 120, compute_ms: 120, comm_exposed_ms: 0, bubble_ms: 0, host_copy_ms: 0 },
  tokens_per_s: 4266,
  rank_order: 2,
};
const result: AdviseResult = {
  profile: { source: 'measured', measured_at: '2026-12-01T12:00:00Z' },
  model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 96, params: 100_000 },
  layouts: [single, pp, zero2], // out of order: the rows follow rank_order
  notes: [],
};

describe('Advisor panel rows', () => {
  const rows = advisorRows(result);

  it("keep the advisor order and label each layout in the launch form's words", () => {
    expect(rows.map((r) => r.label)).toEqual(['zero2 × 2', 'pp P 2, 4 micro-batches (1f1b) + checkpointing', 'single × 1']);
    expect(rows.map((r) => r.fits)).toEqual([true, true, false]);
    expect(rows[2]!.reason).toMatch(/optimizer 8Ψ = 200 MiB > 100 MiB on GPU 0/);
    expect(rows[1]!.launch).toEqual(pp.launch);
    expect(
      layoutLabel({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2, schedule: 'gpipe', offload_optimizer: true }),
    ).toBe('3d D 2 × T 2 × P 2, 2 micro-batches (gpipe) + offload');
  });

  it('draw each rank against its device: 50 of 100 MiB is half the bar, the limit at 100%', () => {
    const bar = rows[0]!.ranks[1]!;
    expect(bar.total).toBe(50 * MiB);
    expect(bar.limitPct).toBe(100);
    expect(bar.over).toBe(false);
    expect(bar.segments.map((s) => [s.key, s.pct])).toEqual([
      ['params', 10],
      ['grads', 5],
      ['optimizer', 10],
      ['activations', 20],
      ['comm', 4],
      ['workspace', 1],
    ]);
    expect(bar.title).toBe('rank 1 on GPU 1: 50.0 MiB of 100 MiB');
  });

  it('an over-full rank spans its own total, the limit inside the bar; an unknown device shares the largest total (200 MiB)', () => {
    const over = rows[2]!.ranks[0]!;
    expect(over.over).toBe(true);
    expect(over.limitPct).toBe(50);
    expect(over.segments.reduce((a, s) => a + s.pct, 0)).toBeCloseTo(100, 10);
    expect(over.title).toMatch(/does not fit/);
    const unknown = rows[1]!.ranks[0]!;
    expect(unknown.limit).toBeNull();
    expect(unknown.limitPct).toBeNull();
    expect(unknown.segments.reduce((a, s) => a + s.pct, 0)).toBeCloseTo(45, 10); // 90 of 200 MiB
  });

  it('stack the step as shares of the slowest (160 ms): zero2 60+20 = 50%, pp 100+10+40+10 = 100%', () => {
    expect(rows[0]!.time.map((s) => [s.label, s.pct])).toEqual([
      ['compute', 37.5],
      ['communication (exposed)', 12.5],
    ]);
    expect(rows[1]!.time.map((s) => s.pct)).toEqual([62.5, 6.25, 25, 6.25]);
    expect(rows[0]!.mfu).toBe(0.25);
    expect(rows[1]!.mfu).toBeNull();
  });

  it('the overview chart stacks the four parts per layout, first choice on top, and renders', () => {
    const o = advisorStepTimeChartOption(result) as any;
    expect(o.yAxis.data).toEqual(['✗ single × 1', 'pp P 2, 4 micro-batches (1f1b) + checkpointing', 'zero2 × 2']);
    expect(o.series.map((s: any) => s.data)).toEqual([
      [120, 100, 60],
      [0, 10, 20],
      [0, 40, 0],
      [0, 10, 0],
    ]);
    expect(renderSvg(o)).toContain('<svg');
  });
});

describe('predicted vs measured', () => {
  // two ranks, steps 1..3; step 1 (compile) is left out. Rank r's step s: forward [0,30), backward [30,70),
  // an all-reduce [50,90) of which [50,70) is under backward, the update [95,100): a 100 ms window of
  // which compute is 75%, exposed comm 20%, idle 5%
  const spans: Span[] = [];
  for (const step of [1, 2, 3])
    for (const rank of [0, 1]) {
      const t0 = 1000 * step;
      spans.push(
        { rank, step, kind: 'forward', name: 'block.0', start: t0, end: t0 + 30 },
        { rank, step, kind: 'backward', name: 'block.0', start: t0 + 30, end: t0 + 70 },
        { rank, step, kind: 'comm', name: 'allReduce', start: t0 + 50, end: t0 + 90, bytes: 1000 },
        { rank, step, kind: 'optimizer', name: 'adamw', start: t0 + 95, end: t0 + 100 },
      );
    }
  const sample = (activations: number) => ({
    params: 10 * MiB,
    grads: 5 * MiB,
    optimizer: 10 * MiB,
    activations,
    comm: 4 * MiB,
    workspace: 0,
  });
  const steps: StepMetric[] = [
    { step: 1, loss: 4, step_ms: 900, memory: { '0': sample(30 * MiB), '1': sample(18 * MiB) } },
    { step: 2, loss: 3.9, step_ms: 100, memory: { '0': sample(16 * MiB), '1': sample(16 * MiB) } },
    { step: 3, loss: 3.8, step_ms: 110, memory: { '0': sample(16 * MiB), '1': sample(16 * MiB) } },
  ];
  const ms2 = (x: number | null) => (x === null ? null : Number(x.toFixed(2)));

  it("the step is the median after the first (105 ms); its parts the spans' shares of the window times it: 75%, 20%, 5%", () => {
    const m = measuredStepTime(steps, spans, false)!;
    expect([m.steps, m.step_ms, ms2(m.compute_ms), ms2(m.comm_exposed_ms), m.bubble_ms, ms2(m.other_ms)]).toEqual([
      2,
      105,
      78.75,
      21,
      null,
      5.25,
    ]);
    const rows = stepTimeComparison(zero2, m);
    expect(rows.map((r) => [r.key, r.predicted, ms2(r.measured)])).toEqual([
      ['compute_ms', 60, 78.75],
      ['comm_exposed_ms', 20, 21],
      ['bubble_ms', 0, null],
      ['host_copy_ms', 0, 5.25],
      ['step_ms', 80, 105],
    ]);
    expect(formatError(rows[4]!.error)).toBe('+24%'); // (105 - 80) / 105
    expect(formatError(rows[1]!.error)).toBe('+5%'); // (21 - 20) / 21
    expect(formatError(stepTimeComparison({ ...zero2, time: { ...zero2.time, step_ms: 105 } }, m)[4]!.error)).toBe('±0%');
  });

  it('a one-rank run (no spans) measures its whole step as compute, with no communication', () => {
    const single: LayoutPlan = { ...zero2, ranks: zero2.ranks.slice(0, 1) };
    const m = measuredStepTime(steps, [], false)!;
    expect(m.compute_ms).toBeNull(); // nothing to split without spans...
    const rows = stepTimeComparison(single, m);
    expect(rows.map((r) => [r.key, r.measured])).toEqual([
      ['compute_ms', 105],
      ['comm_exposed_ms', 0],
      ['bubble_ms', null],
      ['host_copy_ms', 0],
      ['step_ms', 105],
    ]);
    expect(stepTimeComparison(zero2, m)[0]!.measured).toBeNull(); // ...and a multi-rank run without spans stays unmeasured
  });

  it('a pipelined run counts the idle rest of the step window as bubble', () => {
    // rank 1 (stage 1) works only in the second half of a 100 ms window: compute 75%, bubble 25% on average
    const pipe: Span[] = [2, 3].flatMap((step) => [
      { rank: 0, step, kind: 'forward', name: 'block.0', start: 1000 * step, end: 1000 * step + 100, stage: 0, micro: 0 },
      { rank: 1, step, kind: 'forward', name: 'block.1', start: 1000 * step + 50, end: 1000 * step + 100, stage: 1, micro: 0 },
    ]);
    const m = measuredStepTime(steps, pipe, true)!;
    expect([ms2(m.compute_ms), ms2(m.bubble_ms), m.other_ms]).toEqual([78.75, 26.25, 0]);
    expect(measuredStepTime(steps.slice(0, 1), pipe, true)).toBeNull(); // only the compile step so far
  });

  it("memory: the summary's peaks when the run ended, else the largest sample per category", () => {
    expect(measuredPeakBytes(0, null, steps)).toEqual({ ...sample(30 * MiB), total: 59 * MiB });
    const summary = { peak_bytes: { '0': { ...sample(31 * MiB), total: 60 * MiB } } };
    expect(measuredPeakBytes(0, summary, steps)!.activations).toBe(31 * MiB);
    expect(measuredPeakBytes(0, summary, steps)!.total).toBe(60 * MiB);
    expect(measuredPeakBytes(5, null, steps)).toBeNull();
    const cmp = memoryComparison(zero2, null, steps);
    expect(cmp.map((r) => r.rank)).toEqual([0, 1]);
    const act = cmp[1]!.rows.find((r) => r.key === 'activations')!;
    expect([act.predicted, act.measured, formatError(act.error)]).toEqual([20 * MiB, 18 * MiB, '−11%']);
  });

  it('charts: predicted and measured bars per part and per category, in one byte unit; they render', () => {
    const t = predictedStepTimeChartOption(stepTimeComparison(zero2, measuredStepTime(steps, spans, false)), 2) as any;
    expect(t.series.map((s: any) => s.name)).toEqual(['predicted', 'measured']);
    expect(t.series[1].data).toEqual([78.75, 21, null, 5.25, 105]);
    expect(t.title.subtext).toBe('step: predicted 80.0 ms, measured 105.0 ms (+24%)\nmeasured: the median of 2 steps after the first');
    // the parts down the side (their names would overlap side by side at half a row)
    expect(t.yAxis.data).toHaveLength(5);
    expect(t.yAxis.inverse).toBe(true);
    const m = predictedMemoryChartOption(0, 'GPU 0', memoryComparison(zero2, null, steps)[0]!.rows) as any;
    expect(m.yAxis.name).toBe('MiB');
    expect(m.xAxis.data).toEqual(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace', 'total']);
    expect(m.series[0].data).toEqual([10, 5, 10, 20, 4, 1, 50]);
    expect(m.series[1].data).toEqual([10, 5, 10, 30, 4, 0, 59]);
    const compact = predictedMemoryChartOption(0, 'GPU 0', memoryComparison(zero2, null, steps)[0]!.rows, true) as any;
    expect(compact.yAxis.data).toEqual(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace', 'total']);
    expect(compact.title.subtext).toBe('total 50.0 MiB · 59.0 MiB (+15%)');
    expect(renderSvg(t)).toContain('<svg');
    expect(renderSvg(m)).toContain('<svg');
  });

  it('runCharts adds the section for a run with a prediction and steps, not without', () => {
    const run = {
      config: { parallel: { strategy: 'zero2', world: 2 } },
      summary: null,
      steps,
      evals: [],
      spans,
    };
    const prediction = {
      predicted_at: '2026-12-01T12:00:00Z',
      request: { batch_size: 8, seq_len: 64 },
      profile: result.profile,
      plan: zero2,
      notes: [],
    };
    const ids = runCharts({ ...run, prediction })
      .filter((c) => c.section === 'prediction')
      .map((c) => c.id);
    expect(ids).toEqual(['prediction-time', 'prediction-memory-rank-0', 'prediction-memory-rank-1']);
    expect(runCharts(run).some((c) => c.section === 'prediction')).toBe(false);
    expect(runCharts({ ...run, steps: [], prediction }).some((c) => c.section === 'prediction')).toBe(false);
  });
});
