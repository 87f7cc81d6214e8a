// The run's charts at 8 ranks, on the real 3d run's files (D 2 x T 2 x P 2): memory as small
// multiples on one shared scale, timeline lanes grouped by machine and stage, time labels
// rounded. Options are rendered by the real echarts (SVG) to read the labels a user sees.
import * as echarts from 'echarts';
import { describe, expect, it } from 'vitest';
import { formatMsLabel, runCharts, type Span, timelineChartOption, timelineLanes } from '../../../common/charts/index.js';
import { threeDRun } from '../three-d-fixture.js';

type AnyOption = Record<string, any>;

function svgOf(option: object, width = 1300, height = 700): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width, height });
  chart.setOption({ ...option, animation: false });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return svg;
}
const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);

describe('memory of 8 ranks: small multiples on one scale', () => {
  const run = threeDRun();
  const charts = runCharts(run);
  const memory = charts.filter((c) => c.section === 'memory');
  it('one chart per rank, four to a row, each titled by its rank and subtitled by its role and peak', () => {
    expect(memory.map((c) => c.id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((r) => `memory-rank-${r}`));
    expect(memory.every((c) => c.columns === 4)).toBe(true);
    const o = memory[5]!.option as AnyOption;
    expect(o.title.text).toBe('Rank 5');
    // the role on one line, the figures under it: one line was cut at a quarter of the row
    expect(o.title.subtext).toBe('stage 1 · TP 1 · DP 0\npeak 1010 KiB · formula 307 KiB');
    // every category in the legend (a scrolling one showed, and printed, a third of them)
    expect(o.legend.type).toBeUndefined();
    expect(o.legend.data).toEqual(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace', 'total']);
    // the formula line names its bytes only (its padding notes were cut at this width)
    const formula = o.series.at(-1).markLine.data.find((d: { name: string }) => d.name === 'formula');
    expect(formula.label.formatter).toBe('formula 307 KiB');
  });
  it('every rank on the same axis: stage 0 peaks at 1.60 MiB, so every y axis ends at 1.7 MiB (5% room above)', () => {
    const axes = memory.map((c) => (c.option as AnyOption).yAxis);
    expect(new Set(axes.map((a) => a.name))).toEqual(new Set(['MiB']));
    expect(new Set(axes.map((a) => a.max))).toEqual(new Set([Number(((1_673_644 / 2 ** 20) * 1.05).toPrecision(2))]));
  });
  it('two ranks stay two per row, still on one scale; one rank keeps its own scale', () => {
    const two = runCharts({ ...run, steps: run.steps.map((s) => ({ ...s, memory: { '0': s.memory!['0']!, '4': s.memory!['4']! } })) });
    const mem = two.filter((c) => c.section === 'memory');
    expect(mem.map((c) => c.columns)).toEqual([2, 2]);
    expect((mem[0]!.option as AnyOption).yAxis.max).toBe((mem[1]!.option as AnyOption).yAxis.max);
    expect((mem[1]!.option as AnyOption).title.text).toBe('Rank 4 device memory');
  });
});

describe('timeline of 8 ranks', () => {
  const run = threeDRun();
  it('16 lanes (compute and comm of each rank), stage 0 ranks above stage 1 ranks, every label kept', () => {
    const lanes = timelineLanes(run.spans);
    expect(lanes).toHaveLength(16);
    expect(lanes.slice(0, 2).map((l) => l.label)).toEqual(['rank 0 (stage 0) compute', 'rank 0 (stage 0) comm']);
    expect(lanes.map((l) => l.group)).toEqual([...Array(8).fill('stage 0'), ...Array(8).fill('stage 1')]);
    const o = timelineChartOption(run.spans) as AnyOption;
    expect(o.yAxis.axisLabel.interval).toBe(0);
    // drawn: the shaded bands cover exactly the lower 8 of the 16 equal lanes (stage 1): from halfway
    // between the grid's top (80 px) and its bottom, to its bottom
    const svg = svgOf(o, 1300, 700);
    const shaded = [...svg.matchAll(/<path d="M[\d.]+ ([\d.]+)l[\d.]+ 0l0 (-?[\d.]+)l-[\d.]+ 0Z" fill="#eef1f8"/g)].map((m) => {
      const [y, h] = [Number(m[1]), Number(m[2])];
      return [Math.min(y, y + h), Math.max(y, y + h)];
    });
    const bottom = Math.max(...shaded.map((s) => s[1]!));
    expect(bottom).toBeGreaterThan(500);
    expect(Math.min(...shaded.map((s) => s[0]!))).toBeCloseTo((80 + bottom) / 2, 0);
    const covered = shaded.reduce((t, [a, b]) => t + (b! - a!), 0);
    expect(covered).toBeGreaterThanOrEqual((bottom - 80) / 2 - 1);
  });
  it('lanes grouped by machine first (in order of their lowest rank), then stage; the machine named when there are several', () => {
    const spans: Span[] = [0, 1, 2, 3].map((rank) => ({ rank, step: 1, kind: 'forward', name: 'stage.0', start: rank, end: rank + 1 }));
    const lanes = timelineLanes(spans, { 0: 'this machine', 1: 'bench-b', 2: 'this machine', 3: 'bench-b' });
    expect(lanes.filter((l) => l.track === 'compute').map((l) => l.label)).toEqual([
      'this machine · rank 0 compute',
      'this machine · rank 2 compute',
      'bench-b · rank 1 compute',
      'bench-b · rank 3 compute',
    ]);
    const one = timelineLanes(spans, { 0: 'this machine', 1: 'this machine', 2: 'this machine', 3: 'this machine' });
    expect(one[0]!.label).toBe('rank 0 compute');
  });
  it('time labels are rounded: 9053.4248046875 ms reads "9.05 s", and no label of the rendered chart has more than 2 decimals', () => {
    expect(formatMsLabel(9053.4248046875)).toBe('9.05 s');
    expect(formatMsLabel(850.25)).toBe('850 ms');
    expect(formatMsLabel(2.345)).toBe('2.3 ms');
    expect(formatMsLabel(0)).toBe('0 ms');
    expect(formatMsLabel(12_345)).toBe('12.3 s');
    // the chart opens zoomed on the last 2 steps: its window starts at a raw span time
    const o = timelineChartOption(run.spans) as AnyOption;
    expect(Number.isInteger(o.dataZoom[0].startValue)).toBe(false);
    const labels = texts(svgOf(o));
    expect(labels.filter((t) => /^\d[\d.]* m?s$/.test(t)).length).toBeGreaterThan(3);
    expect(labels.filter((t) => /\d\.\d{3,}/.test(t))).toEqual([]);
    expect(labels).toEqual(expect.arrayContaining(['rank 7 (stage 1) comm']));
  });
});
