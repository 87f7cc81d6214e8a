// The chart-option builders of common/charts with real numbers: EMA values, stacked memory sums,
// the formula's bytes, timeline lanes and overlap, the pipeline bubble of an ideal GPipe
// schedule, bytes per collective. Each option is also rendered by the real echarts (server-side
// SVG), so the options and renderSpanBlock are what ECharts accepts.
import * as echarts from 'echarts';
import { describe, expect, it } from 'vitest';
import {
  bytesMovedPerRank,
  commBytesByStep,
  commBytesChartOption,
  emaSmooth,
  gapsIn,
  hasPipelineSpans,
  lossChartOption,
  memoryChartOption,
  memoryRanks,
  overlapPercent,
  pipelineBubble,
  pipelineChartOption,
  runCharts,
  timelineChartOption,
  timelineLanes,
  timelineOverlapPercent,
  type Span,
  type StepMetric,
} from '../../../common/charts/index.js';
import { predictModelStateBytes } from '../../../common/model-state.js';

type AnyOption = Record<string, any>;

/** Render an option with the real echarts (SSR, SVG) and return the markup. */
function renderSvg(option: object): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: 900, height: 400 });
  chart.setOption({ ...option, animation: false });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return svg;
}

/** GPipe with unit-time blocks: forward of micro i on stage s at s+i, backwards after the last forward, last stage first. */
function gpipeSpans(p: number, m: number, step = 1, t0 = 1000): Span[] {
  const spans: Span[] = [];
  for (let s = 0; s < p; s++)
    for (let i = 0; i < m; i++) {
      const f = s + i;
      const b = m + p - 1 + (p - 1 - s) + i;
      spans.push({ rank: s, step, kind: 'forward', name: `block.${s}`, stage: s, micro: i, start: t0 + f, end: t0 + f + 1 });
      spans.push({ rank: s, step, kind: 'backward', name: `block.${s}`, stage: s, micro: i, start: t0 + b, end: t0 + b + 1 });
    }
  return spans;
}

describe('emaSmooth (TensorBoard smoothing, debiased)', () => {
  it('[1, 2, 3] at weight 0.5 -> [1, 5/3, 17/7]; weight 0 is the identity', () => {
    const s = emaSmooth([1, 2, 3], 0.5);
    expect(s[0]).toBeCloseTo(1, 12);
    expect(s[1]).toBeCloseTo(5 / 3, 12);
    expect(s[2]).toBeCloseTo(17 / 7, 12);
    expect(emaSmooth([3.3, 2.9, 2.5], 0)).toEqual([3.3, 2.9, 2.5]);
  });
  it('a constant series stays constant; NaN passes through without poisoning the average', () => {
    expect(emaSmooth([2, 2, 2, 2], 0.9).every((v) => Math.abs(v - 2) < 1e-12)).toBe(true);
    const s = emaSmooth([1, NaN, 3], 0.5);
    expect(s[1]).toBeNaN();
    expect(s[2]).toBeCloseTo(7 / 3, 12); // emaSmooth([1, 3], 0.5)[1]: as if NaN were absent
  });
  it('refuses a weight outside [0, 1)', () => {
    expect(() => emaSmooth([1], 1)).toThrow(/smoothing weight/);
  });
});

describe('training curves', () => {
  const steps: StepMetric[] = [1, 2, 3].map((i) => ({ step: i, loss: i, lr: 0.001 * i, grad_norm: 1 / i, tokens_per_s: 100 * i }));
  it('loss chart: raw, EMA (0.5) and validation series with the real numbers', () => {
    const o = lossChartOption(steps, [{ step: 2, val_loss: 2.5 }], { smoothing: 0.5 }) as AnyOption;
    expect(o.series.map((s: AnyOption) => s.name)).toEqual(['loss', 'loss (EMA 0.5)', 'validation loss']);
    expect(o.series[0].data).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(o.series[1].data[2][1]).toBeCloseTo(17 / 7, 12);
    expect(o.series[2].data).toEqual([[2, 2.5]]);
    expect(renderSvg(o)).toContain('<path');
  });
});

describe('memory per rank', () => {
  const mem = (params: number, acts: number) => ({
    params,
    grads: params,
    optimizer: 2 * params,
    activations: acts,
    comm: 0,
    workspace: 1000,
    reserved: 99,
    fragmentation: 0,
  });
  const steps: StepMetric[] = [
    { step: 1, loss: 3, memory: { '0': mem(4000, 20000), '1': mem(1000, 20000) } },
    { step: 2, loss: 2, memory: { '0': mem(4000, 30000), '1': mem(1000, 25000) } },
  ];
  it('stacks the six categories; at every step their sum is the total line; peak and formula lines', () => {
    expect(memoryRanks(steps)).toEqual([0, 1]);
    const o = memoryChartOption(0, steps, { predicted: 16000 }) as AnyOption;
    const stacked = o.series.filter((s: AnyOption) => s.stack === 'device');
    expect(stacked.map((s: AnyOption) => s.name)).toEqual(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace']);
    const total = o.series.find((s: AnyOption) => s.name === 'total');
    expect(o.yAxis.name).toBe('KiB');
    for (let i = 0; i < 2; i++) {
      const sum = stacked.reduce((t: number, s: AnyOption) => t + s.data[i][1], 0);
      expect(sum).toBeCloseTo(total.data[i][1], 9);
    }
    // step 2: 4000+4000+8000+30000+0+1000 = 47000 B (reserved and fragmentation are not categories)
    expect(total.data[1][1] * 1024).toBeCloseTo(47000, 6);
    const lines = total.markLine.data;
    expect(lines.map((l: AnyOption) => l.name)).toEqual(['peak', 'formula']);
    expect(lines[0].yAxis * 1024).toBeCloseTo(47000, 6);
    expect(lines[1].yAxis * 1024).toBeCloseTo(16000, 6);
    expect(renderSvg(o)).toContain('formula (model states)');
  });
  it('the formula: ZeRO-3 over 4 ranks keeps 1/4 of 4+4+8 bytes per parameter; DP keeps the optimizer on rank 0', () => {
    expect(predictModelStateBytes({ strategy: 'ddp', world: 2, params: 1000, rank: 1 })).toEqual({
      params: 4000,
      grads: 4000,
      optimizer: 8000,
    });
    expect(predictModelStateBytes({ strategy: 'zero1', world: 4, params: 1000, rank: 0 })).toEqual({
      params: 4000,
      grads: 4000,
      optimizer: 2000,
    });
    expect(predictModelStateBytes({ strategy: 'zero2', world: 4, params: 1000, rank: 0 })).toEqual({
      params: 4000,
      grads: 1000,
      optimizer: 2000,
    });
    expect(predictModelStateBytes({ strategy: 'zero3', world: 4, params: 1000, rank: 3 })).toEqual({
      params: 1000,
      grads: 1000,
      optimizer: 2000,
    });
    expect(predictModelStateBytes({ strategy: 'zero2', world: 4, params: 1000, rank: 0, offloadOptimizer: true })?.optimizer).toBe(0);
    expect(predictModelStateBytes({ strategy: 'dp', world: 2, params: 1000, rank: 1 })?.optimizer).toBe(0);
    expect(predictModelStateBytes({ strategy: 'pp', world: 2, params: 1000, rank: 1 })).toBeNull();
  });
});

describe('compute/communication timeline', () => {
  // two ranks, one step: backward 0..10 ms; bucket all-reduce 5..15 (half hidden); rank 1's 12..14 (not hidden)
  const spans: Span[] = [
    { rank: 0, step: 1, kind: 'forward', name: 'block.0', start: 100, end: 100.5, micro: 0 },
    { rank: 0, step: 1, kind: 'backward', name: 'block.0', start: 100.5, end: 110, micro: 0 },
    { rank: 0, step: 1, kind: 'comm', name: 'allReduce', start: 105, end: 115, bytes: 768, labels: { bucket: 0, params: 3 } },
    { rank: 1, step: 1, kind: 'backward', name: 'block.0', start: 100, end: 110, micro: 0 },
    { rank: 1, step: 1, kind: 'comm', name: 'allReduce', start: 112, end: 114, bytes: 768, labels: { bucket: 0, params: 3 } },
    { rank: 1, step: 1, kind: 'comm', name: 'allGather', start: 115, end: 116, bytes: 400 },
  ];
  it('one lane per rank with a compute and a comm track; every span drawn on its own track', () => {
    expect(timelineLanes(spans).map((l) => l.label)).toEqual(['rank 0 compute', 'rank 0 comm', 'rank 1 compute', 'rank 1 comm']);
    const o = timelineChartOption(spans) as AnyOption;
    expect(o.yAxis.data).toHaveLength(4);
    const byName = Object.fromEntries(o.series.map((s: AnyOption) => [s.name, s]));
    expect(Object.keys(byName)).toEqual(['forward', 'backward', 'allGather', 'allReduce']);
    expect(byName.allReduce.data.map((d: AnyOption) => d.value[0])).toEqual([1, 3]); // comm tracks
    expect(byName.backward.data.map((d: AnyOption) => d.value[0])).toEqual([0, 2]); // compute tracks
    expect(byName.allReduce.data[0].value.slice(1, 3)).toEqual([5, 15]); // ms from the first span
    expect(o.series.every((s: AnyOption) => s.type === 'custom' && typeof s.renderItem === 'function')).toBe(true);
    expect(o.dataZoom.map((d: AnyOption) => d.type)).toEqual(['slider', 'inside']);
  });
  it('overlap: 50% on rank 0 (5 of 10 ms hidden under backward), 0% on rank 1 -> 25% shown', () => {
    expect(overlapPercent([{ start: 0, end: 10 }], [{ start: 5, end: 15 }])).toBeCloseTo(50, 12);
    expect(timelineOverlapPercent(spans)).toBeCloseTo((100 * (110 - 105)) / 10 / 2, 9);
    expect((timelineChartOption(spans) as AnyOption).title.subtext).toContain('25.0%');
  });
  it('lastSteps keeps only the spans of the last N steps (a live view)', () => {
    const more = [...spans, ...spans.map((s) => ({ ...s, step: 2, start: s.start + 100, end: s.end + 100 }))];
    const o = timelineChartOption(more, { lastSteps: 1 }) as AnyOption;
    const values = o.series.flatMap((s: AnyOption) => s.data.map((d: AnyOption) => d.value[3]));
    expect(values).toHaveLength(spans.length);
    expect(new Set(values)).toEqual(new Set([2]));
  });
  it('renders every span as a block in the real echarts (SVG)', () => {
    const svg = renderSvg(timelineChartOption(spans, { initialSteps: 1 }));
    expect((svg.match(/<path/g) ?? []).length).toBeGreaterThanOrEqual(spans.length);
  });
});

describe('pipeline chart (spans with stage and micro)', () => {
  it('ideal GPipe, p=4, m=4: every stage idles (p-1)/(m+p-1) = 3/7 of the step, as the theory says', () => {
    const spans = gpipeSpans(4, 4);
    expect(hasPipelineSpans(spans)).toBe(true);
    const fig = pipelineBubble(spans);
    expect(fig.p).toBe(4);
    expect(fig.m).toBe(4);
    expect(fig.theory).toBeCloseTo(3 / 7, 12);
    for (const x of fig.measured) expect(x).toBeCloseTo(3 / 7, 12);
    // the shaded bubbles are exactly the idle time: 6 of 14 time units per stage
    for (const s of fig.stages)
      expect(fig.bubbles.filter((b) => b.stage === s).reduce((t, b) => t + b.end - b.start, 0)).toBeCloseTo(6, 12);
  });
  it('p=2, m=8 over two steps: 1/9 measured and in theory; a slow stage 1 shows more bubble on stage 0', () => {
    const spans = [...gpipeSpans(2, 8, 1, 0), ...gpipeSpans(2, 8, 2, 100)];
    const fig = pipelineBubble(spans);
    expect(fig.theory).toBeCloseTo(1 / 9, 12);
    for (const x of fig.measured) expect(x).toBeCloseTo(1 / 9, 12);
    // stage 1's last backward (16..17) takes 3 units instead of 1: the step's window grows from
    // 18 to 19 units; stage 0 stays busy 16 (idle 3/19), stage 1 is busy 18 (idle 1/19)
    const slow = gpipeSpans(2, 8, 1, 0).map((s) =>
      s.stage === 1 && s.kind === 'backward' && s.micro === 7 ? { ...s, end: s.end + 2 } : s,
    );
    const f2 = pipelineBubble(slow);
    expect(f2.measured[0]).toBeCloseTo(3 / 19, 12);
    expect(f2.measured[1]).toBeCloseTo(1 / 19, 12);
  });
  it('layer spans of one micro-batch merge into one block; chart has forward, backward and bubble series with the figure in its title', () => {
    const spans = gpipeSpans(2, 2).flatMap((s) => [
      { ...s, name: 'a', end: (s.start + s.end) / 2 },
      { ...s, name: 'b', start: (s.start + s.end) / 2 },
    ]);
    const o = pipelineChartOption(spans) as AnyOption;
    const byName = Object.fromEntries(o.series.map((s: AnyOption) => [s.name, s]));
    expect(byName.forward.data).toHaveLength(4); // 2 stages x 2 micro-batches
    expect(byName.backward.data.map((d: AnyOption) => d.value[4]).sort()).toEqual([0, 0, 1, 1]); // micro labels
    expect(byName['bubble (idle)'].data.length).toBeGreaterThan(0);
    expect(o.title.subtext).toContain('theory (p-1)/(m+p-1) = 1/3 = 33.3%');
    expect(o.yAxis.data).toEqual(['stage 0 · idle 33.3%', 'stage 1 · idle 33.3%']);
    expect(renderSvg(o)).toContain('<path');
  });
  it('DDP spans (micro, no stage) are not a pipeline: no chart', () => {
    const ddp: Span[] = [{ rank: 0, step: 1, kind: 'forward', name: 'block.0', start: 0, end: 1, micro: 0 }];
    expect(hasPipelineSpans(ddp)).toBe(false);
    expect(pipelineChartOption(ddp)).toBeNull();
  });
  it('gapsIn: idle parts of a window', () => {
    expect(
      gapsIn({ start: 0, end: 10 }, [
        { start: 2, end: 4 },
        { start: 3, end: 5 },
        { start: 9, end: 12 },
      ]),
    ).toEqual([
      { start: 0, end: 2 },
      { start: 5, end: 9 },
    ]);
  });
});

describe('bytes moved per step by collective', () => {
  it('sums payloads per op and step, per rank (mean over ranks)', () => {
    const spans: Span[] = [
      { rank: 0, step: 1, kind: 'comm', name: 'allReduce', start: 0, end: 1, bytes: 768 },
      { rank: 0, step: 1, kind: 'comm', name: 'allReduce', start: 1, end: 2, bytes: 199936 },
      { rank: 1, step: 1, kind: 'comm', name: 'allReduce', start: 0, end: 1, bytes: 768 },
      { rank: 1, step: 1, kind: 'comm', name: 'allReduce', start: 1, end: 2, bytes: 199936 },
      { rank: 0, step: 2, kind: 'comm', name: 'reduceScatter', start: 5, end: 6, bytes: 1000 },
      { rank: 1, step: 2, kind: 'comm', name: 'reduceScatter', start: 5, end: 6, bytes: 1000 },
      { rank: 1, step: 2, kind: 'backward', name: 'head', start: 4, end: 5 },
    ];
    const c = commBytesByStep(spans);
    expect(c.steps).toEqual([1, 2]);
    expect(c.ops).toEqual(['allReduce', 'reduceScatter']);
    expect(c.bytes.allReduce).toEqual([200704, 0]);
    expect(c.bytes.reduceScatter).toEqual([0, 1000]);
    const o = commBytesChartOption(spans) as AnyOption;
    expect(o.yAxis.name).toBe('KiB');
    expect(o.series[0].data[0] * 1024).toBeCloseTo(200704, 6);
    expect(renderSvg(o)).toContain('<path');
  });
});

describe("a summary's bytes moved per rank", () => {
  it('with the share that went through shared memory, when the summary has it', () => {
    expect(
      bytesMovedPerRank({ bytes_moved_per_step: { '0': 424_040, '1': 424_040 }, shm_bytes_per_step: { '0': 422_912, '1': 0 } }),
    ).toEqual([
      'rank 0: 414 KiB (99% via shared memory)', // 99.7%: the frame headers took the socket
      'rank 1: 414 KiB (0% via shared memory)',
    ]);
    // summaries written before shared memory existed: no share
    expect(bytesMovedPerRank({ bytes_moved_per_step: { '0': 3 * 1024 * 1024 } })).toEqual(['rank 0: 3.00 MiB']);
    // a rank that moved nothing has no share to give
    expect(bytesMovedPerRank({ bytes_moved_per_step: { '0': 0 }, shm_bytes_per_step: { '0': 0 } })).toEqual(['rank 0: 0 B']);
    expect(bytesMovedPerRank({ params: 10 })).toBeNull();
    expect(bytesMovedPerRank(undefined)).toBeNull();
  });
});

describe('runCharts: the charts a run gets', () => {
  const mem = { params: 400, grads: 400, optimizer: 800, activations: 1000, comm: 0, workspace: 10 };
  const steps: StepMetric[] = [1, 2].map((step) => ({
    step,
    loss: 3 / step,
    lr: 0.001,
    grad_norm: 1,
    tokens_per_s: 100,
    memory: { '0': mem, '1': mem },
  }));
  it('a single-device run without spans: the four curves and one memory chart with the formula (16 B per parameter)', () => {
    const charts = runCharts({
      config: {},
      summary: { params: 100 },
      steps: steps.map((s) => ({ ...s, memory: { '0': mem } })),
      evals: [],
      spans: [],
    });
    expect(charts.map((c) => c.id)).toEqual(['loss', 'tokens-per-s', 'grad-norm', 'learning-rate', 'memory-rank-0']);
    const total = (charts[4]!.option as AnyOption).series.find((x: AnyOption) => x.name === 'total');
    expect(total.markLine.data.find((l: AnyOption) => l.name === 'formula').yAxis).toBeCloseTo(1600 / 1024, 12); // KiB
  });
  it('a 2-stage pipeline run over 2 ranks adds the timeline, the pipeline and the bytes charts', () => {
    const spans = [...gpipeSpans(2, 2), { rank: 0, step: 1, kind: 'comm', name: 'send', start: 1001, end: 1001.5, bytes: 4096 }];
    const charts = runCharts({ config: { parallel: { strategy: 'pp', world: 2 } }, summary: null, steps, evals: [], spans });
    expect(charts.map((c) => c.id)).toEqual([
      'loss',
      'tokens-per-s',
      'grad-norm',
      'learning-rate',
      'memory-rank-0',
      'memory-rank-1',
      'timeline',
      'pipeline',
      'comm-bytes',
    ]);
    // no formula for pp here: no reference line beyond the peak
    expect((charts[4]!.option as AnyOption).series.at(-1).markLine.data.map((l: AnyOption) => l.name)).toEqual(['peak']);
  });
});
