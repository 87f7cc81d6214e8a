// Membership segments on the step charts, from synthetic metrics rows: a band per segment and a
// marker where each change begins, labelled "world N · reason · K lost steps", with the whole
// story (layout, machines, reason, lost steps) on hover; nothing at all for a run with no segment
// rows or only its start. Options are rendered by the real echarts (server-side SVG): the bands
// and labels are drawn, not only present in the object.
import * as echarts from 'echarts';
import { describe, expect, it } from 'vitest';
import type { Segment } from '../../../common/api/elastic.js';
import {
  latestPerStep,
  lossChartOption,
  runCharts,
  segmentDetailLines,
  segmentLabel,
  segmentStretches,
  segmentsOfRows,
  showsSegments,
  type StepMetric,
  withSegment,
  withSegmentBands,
} from '../../../common/charts/index.js';

type AnyOption = Record<string, any>;

const HERE = 'this machine';
const B = 'b (10.0.0.2:7420)';
const seg = (s: Partial<Segment> & Pick<Segment, 'from_step' | 'reason'>): Segment => ({
  world: 2,
  strategy: 'ddp',
  placement: [HERE, B],
  source: 'init',
  lost_steps: 0,
  ...s,
});

/** 30 steps: started on 2 machines, lost b at step 12 (back from step 10, 2 lost), b came back at 20. */
const START = seg({ from_step: 0, reason: 'start', to_step: 12 });
const LOST = seg({
  from_step: 10,
  reason: 'machine-lost',
  world: 1,
  placement: [HERE],
  source: 'disk',
  lost_steps: 2,
  detail: 'agent b (10.0.0.2:7420) stopped answering',
  recovery_ms: 1400,
  to_step: 20,
});
const BACK = seg({ from_step: 20, reason: 'scale-up', source: 'memory', detail: 'agent b (10.0.0.2:7420) came back', recovery_ms: 350 });
const ROWS = [START, LOST, BACK].map((segment) => ({ type: 'segment', step: segment.from_step, segment }));

const steps: StepMetric[] = Array.from({ length: 30 }, (_, i) => ({
  step: i + 1,
  loss: 4 - i * 0.05,
  lr: 0.006,
  grad_norm: 1,
  tokens_per_s: 900,
  step_ms: 60,
  memory: { '0': { params: 1000, grads: 1000, optimizer: 2000, activations: 500 } },
}));

function renderSvg(option: object): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: 900, height: 400 });
  chart.setOption({ ...option, animation: false });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return svg;
}

const membershipOf = (o: AnyOption): AnyOption | undefined => (o.series as AnyOption[]).find((s) => s.name === 'membership');
const membership = (o: AnyOption): AnyOption => membershipOf(o)!;

describe('membership segments from metrics rows', () => {
  it('reads the segment rows in step order, one per start step (a later row wins), ignoring other rows', () => {
    const rows = [
      { type: 'step', step: 1, loss: 4 },
      ...ROWS.slice().reverse(),
      { type: 'segment', step: 10, segment: { ...LOST, world: 3 } },
    ];
    const s = segmentsOfRows(rows);
    expect(s.map((x) => [x.from_step, x.world])).toEqual([
      [0, 2],
      [10, 3],
      [20, 2],
    ]);
    expect(withSegment([START], BACK).map((x) => x.from_step)).toEqual([0, 20]);
    expect(withSegment([START, BACK], { ...BACK, world: 4 }).map((x) => x.world)).toEqual([2, 4]);
  });

  it("a lost step's rows: the later (trained again) wins, in step order", () => {
    const rows = [10, 11, 12, 11, 12, 13].map((step, i) => ({ step, loss: i }));
    expect(latestPerStep(rows)).toEqual([
      { step: 10, loss: 0 },
      { step: 11, loss: 3 },
      { step: 12, loss: 4 },
      { step: 13, loss: 5 },
    ]);
  });

  it('an ordinary run (no rows, or its start only) shows nothing; a change or a resume does', () => {
    expect(showsSegments([])).toBe(false);
    expect(showsSegments([START])).toBe(false);
    expect(showsSegments([seg({ from_step: 6, reason: 'resume' })])).toBe(true);
    expect(showsSegments([START, LOST])).toBe(true);
  });

  it('each segment covers its steps: to its to_step, else the next start, else the last step', () => {
    const st = segmentStretches([START, LOST, BACK], 30);
    expect(st.map((s) => [s.index, s.from, s.to])).toEqual([
      [1, 0, 12],
      [2, 10, 20],
      [3, 20, 30],
    ]);
    expect(segmentStretches([seg({ from_step: 0, reason: 'start' }), seg({ from_step: 5, reason: 'resume' })], 9).map((s) => s.to)).toEqual(
      [5, 9],
    );
  });

  it('labels a change briefly and tells it whole', () => {
    expect(segmentLabel(LOST)).toBe('world 1 · machine-lost · 2 lost steps');
    expect(segmentLabel(seg({ from_step: 3, reason: 'rank-lost', lost_steps: 1 }))).toBe('world 2 · rank-lost · 1 lost step');
    expect(segmentLabel(BACK)).toBe('world 2 · scale-up');
    expect(segmentDetailLines(segmentStretches([START, LOST, BACK], 30)[1]!)).toEqual([
      'segment 2: steps 11–20',
      'layout ddp × 1',
      'machines this machine (rank 0)',
      'reason machine-lost: agent b (10.0.0.2:7420) stopped answering',
      '2 lost steps · state from the checkpoint on disk, back in 1.4 s',
    ]);
    const tp = seg({
      from_step: 0,
      reason: 'resume',
      strategy: '3d',
      world: 8,
      grid: { dp: 2, tp: 2, pp: 2 },
      placement: Array(8).fill(HERE),
    });
    expect(segmentDetailLines(segmentStretches([tp], 4)[0]!)[1]).toBe('layout 3d × 8 (DP 2 × TP 2 × PP 2)');
    expect(segmentDetailLines(segmentStretches([tp], 4)[0]!)[2]).toBe('machines this machine (ranks 0, 1, 2, 3, 4, 5, 6, 7)');
  });
});

describe('bands and markers on the step charts', () => {
  it('adds a band per segment and a labelled marker per change, on a membership series; the chart is drawn with them', () => {
    const option = withSegmentBands(lossChartOption(steps), [START, LOST, BACK], 30) as AnyOption;
    const m = membership(option);
    expect(m.markArea.data.map((a: AnyOption[]) => [a[0]!.xAxis, a[1]!.xAxis])).toEqual([
      [0, 12],
      [10, 20],
      [20, 30],
    ]);
    expect(m.markLine.data.map((l: AnyOption) => [l.xAxis, l.label.show && l.label.formatter])).toEqual([
      [10, 'world 1 · machine-lost · 2 lost steps'],
      [20, 'world 2 · scale-up'],
    ]);
    // hovering names the segment whole
    expect(m.markArea.tooltip).toMatchObject({ trigger: 'item', formatter: '{b}', confine: true });
    expect(m.markLine.data[0].name).toContain('machines this machine (rank 0)');
    // labels inside the plot, along the line: clear of the title and legend
    expect(m.markLine.data[0].label.position).toBe('insideEndTop');
    // the original series untouched
    expect((option.series as AnyOption[]).map((s) => s.name)).toEqual(['loss', 'loss (EMA 0.6)', 'membership']);
    const svg = renderSvg(option);
    expect(svg).toContain('world 1 · machine-lost · 2 lost steps');
    expect(svg).toContain('world 2 · scale-up');
  });

  it('labels only markers far enough apart (no two labels on top of each other); every marker still drawn', () => {
    const close = [START, seg({ from_step: 10, reason: 'rank-lost', lost_steps: 1 }), seg({ from_step: 11, reason: 'scale-up' })];
    const m = membership(withSegmentBands(lossChartOption(steps), close, 30) as AnyOption);
    expect(m.markLine.data.map((l: AnyOption) => [l.xAxis, l.label.show])).toEqual([
      [10, true],
      [11, false],
    ]);
  });

  it('a resumed run gets its resume marker; a legend that lists its series lists membership too', () => {
    const resumed = [START, seg({ from_step: 15, reason: 'resume' })];
    const o = withSegmentBands({ ...lossChartOption(steps), legend: { top: 24, data: ['loss'] } }, resumed, 30) as AnyOption;
    expect(membership(o).markLine.data.map((l: AnyOption) => l.label.formatter)).toEqual(['world 2 · resume']);
    expect(o.legend.data).toEqual(['loss', 'membership']);
  });

  it('leaves the chart exactly as it was without segments, with the start only, or off the step axis', () => {
    const plain = lossChartOption(steps);
    expect(withSegmentBands(plain, [], 30)).toBe(plain);
    expect(withSegmentBands(plain, [START], 30)).toBe(plain);
    const time = { xAxis: { type: 'value', name: 'time since the first span' }, series: [] } as AnyOption;
    expect(withSegmentBands(time, [START, LOST], 30)).toBe(time);
  });

  it('a bar chart of steps (step time, bytes moved) bands its categories, a lost step trained again in the later segment', () => {
    // the categories as the scaling chart lists them: steps 11 and 12 twice, the second time in segment 2
    const steps = [...Array.from({ length: 12 }, (_, i) => i + 1), 11, 12, ...Array.from({ length: 18 }, (_, i) => i + 13)];
    const bars = {
      xAxis: { type: 'category', name: 'step', data: steps.map(String) },
      yAxis: { type: 'value' },
      series: [{ type: 'bar', data: steps }],
    };
    const m = membership(withSegmentBands(bars as never, [START, LOST, BACK], 30) as AnyOption);
    // category indices: segment 1 = 0..11 (steps 1-12), segment 2 = 12..21 (11-20), segment 3 = 22..31 (21-30)
    expect(m.markArea.data.map((a: AnyOption[]) => [a[0]!.xAxis, a[1]!.xAxis])).toEqual([
      [0, 11],
      [12, 21],
      [22, 31],
    ]);
    expect(m.markLine.data.map((l: AnyOption) => [l.xAxis, l.label.formatter])).toEqual([
      [12, 'world 1 · machine-lost · 2 lost steps'],
      [22, 'world 2 · scale-up'],
    ]);
    expect(renderSvg(withSegmentBands(bars as never, [START, LOST, BACK], 30))).toContain('world 2 · scale-up');
    // bars missing for a stretch (world 1: no communication to chart): segment 2 has only its lost
    // steps' categories (one per step: the later segment's), segment 3 starts at step 21
    const comm = [...Array.from({ length: 12 }, (_, i) => i + 1), ...Array.from({ length: 10 }, (_, i) => i + 21)];
    const c = membership(
      withSegmentBands(
        { xAxis: { type: 'category', name: 'step', data: comm.map(String) }, series: [] } as never,
        [START, LOST, BACK],
        30,
      ) as AnyOption,
    );
    expect(c.markLine.data.map((l: AnyOption) => [l.xAxis, l.label.formatter])).toEqual([
      [10, 'world 1 · machine-lost · 2 lost steps'],
      [12, 'world 2 · scale-up'],
    ]);
  });

  it('runCharts bands every step chart (loss, throughput, gradient norm, lr, memory) and only those', () => {
    const base = { config: { parallel: { strategy: 'ddp', world: 2 } }, summary: null, steps, evals: [], spans: [] };
    const banded = runCharts({ ...base, segments: [START, LOST, BACK] });
    const ids = banded.filter((c) => membershipOf(c.option as AnyOption)).map((c) => c.id);
    expect(ids).toEqual(['loss', 'tokens-per-s', 'grad-norm', 'learning-rate', 'memory-rank-0']);
    expect(runCharts({ ...base, segments: [START] })).toEqual(runCharts(base));
    for (const c of banded) renderSvg(c.option);
  });
});

describe('bar charts of steps, one category per step', () => {
  it("a lost step's category belongs to the segment that trained it again", () => {
    const steps = Array.from({ length: 29 }, (_, i) => i + 2);
    const bars = { xAxis: { type: 'category', name: 'step', data: steps.map(String) }, yAxis: { type: 'value' }, series: [] };
    const m = (withSegmentBands(bars as never, [START, LOST, BACK], 30) as AnyOption).series.at(-1);
    // steps 2-10 in segment 1, 11-20 (indices 9..18) in segment 2, 21-30 in segment 3
    expect(m.markArea.data.map((a: AnyOption[]) => [a[0]!.xAxis, a[1]!.xAxis])).toEqual([
      [0, 8],
      [9, 18],
      [19, 28],
    ]);
  });
});
