// The bucket-overlap timeline: one lane per rank, split in a compute track (forward/backward per
// layer, the optimizer) and a communication track (bucket all-reduces, ZeRO gathers and
// reduce-scatters, pipeline p2p), on the run's one clock in ms from the first span; zoomable
// (dataZoom). The overlap figure is the trainer's: the share of gradient-bucket communication
// time hidden under backward compute, per rank and step, averaged.
import type { CustomSeriesOption, EChartsOption } from 'echarts';
import { overlapPercent } from './intervals.js';
import { renderSpanBlock } from './render-block.js';
import { COLORS, opColor } from './style.js';
import type { Span } from './types.js';

export type Track = 'compute' | 'comm';
export interface Lane {
  rank: number;
  track: Track;
  label: string;
}

export const trackOf = (s: Span): Track => (s.kind === 'comm' ? 'comm' : 'compute');

/** Lanes top to bottom: per rank ascending, its compute track then its comm track. */
export function timelineLanes(spans: readonly Span[]): Lane[] {
  const ranks = [...new Set(spans.map((s) => s.rank))].sort((a, b) => a - b);
  const stageOf = new Map<number, number>();
  for (const s of spans) if (s.stage !== undefined && !stageOf.has(s.rank)) stageOf.set(s.rank, s.stage);
  return ranks.flatMap((r) => {
    const stage = stageOf.get(r);
    const who = `rank ${r}${stage !== undefined ? ` (stage ${stage})` : ''}`;
    return [
      { rank: r, track: 'compute' as const, label: `${who} compute` },
      { rank: r, track: 'comm' as const, label: `${who} comm` },
    ];
  });
}

/** Gradient communication: the spans of gradient buckets (DDP all-reduce, ZeRO-2/3 reduce-scatter). */
const isGradComm = (s: Span) => s.kind === 'comm' && s.labels?.bucket !== undefined;

/** Mean over (rank, step) of the percent of gradient-bucket communication hidden under backward; null without any. */
export function timelineOverlapPercent(spans: readonly Span[]): number | null {
  const groups = new Map<string, Span[]>();
  for (const s of spans) {
    const k = `${s.rank}:${s.step}`;
    let g = groups.get(k);
    if (!g) groups.set(k, (g = []));
    g.push(s);
  }
  const values: number[] = [];
  for (const g of groups.values()) {
    const o = overlapPercent(
      g.filter((s) => s.kind === 'backward'),
      g.filter(isGradComm),
    );
    if (o !== null) values.push(o);
  }
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

/** Legend group of a span: forward / backward / optimizer, or the collective's op name. */
const seriesOf = (s: Span): string => (s.kind === 'comm' ? s.name : s.kind);
const colorOf = (group: string, s: Span): string =>
  s.kind === 'comm' ? opColor(group) : s.kind === 'forward' ? COLORS.forward : s.kind === 'backward' ? COLORS.backward : COLORS.optimizer;

function spanTitle(s: Span): string {
  const what = s.kind === 'comm' ? s.name : `${s.kind} ${s.name}`;
  const extra = [
    s.micro !== undefined ? `micro ${s.micro}` : '',
    s.stage !== undefined ? `stage ${s.stage}` : '',
    s.bytes !== undefined ? `${s.bytes} B` : '',
    ...Object.entries(s.labels ?? {}).map(([k, v]) => `${k} ${v}`),
  ].filter(Boolean);
  return `step ${s.step} · ${what}${extra.length ? ` (${extra.join(', ')})` : ''} · ${(s.end - s.start).toFixed(2)} ms`;
}

export interface TimelineOptions {
  /** steps shown when the chart opens (the last ones; zoom out for the rest); default 2 */
  initialSteps?: number;
  /** overlap figure to print; default: computed from the spans (timelineOverlapPercent) */
  overlapPct?: number | null;
  /** keep only the spans of the last N steps (a live view redrawn every step stays cheap); default: all */
  lastSteps?: number;
}

/** The spans of the last `n` steps present. */
export function spansOfLastSteps(spans: readonly Span[], n: number): Span[] {
  const present = new Set<number>();
  for (const s of spans) present.add(s.step);
  const kept = new Set([...present].sort((a, b) => b - a).slice(0, Math.max(0, n)));
  return spans.filter((s) => kept.has(s.step));
}

export function timelineChartOption(allSpans: readonly Span[], opts: TimelineOptions = {}): EChartsOption {
  const spans = opts.lastSteps === undefined ? allSpans : spansOfLastSteps(allSpans, opts.lastSteps);
  const lanes = timelineLanes(spans);
  const laneIndex = new Map(lanes.map((l, i) => [`${l.rank}:${l.track}`, i]));
  // loops, not Math.min(...spans): a long run has more spans than a call has arguments
  let t0 = Infinity;
  for (const s of spans) t0 = Math.min(t0, s.start);
  if (!Number.isFinite(t0)) t0 = 0;
  const groups = new Map<string, { color: string; data: { name: string; value: [number, number, number, number, number] }[] }>();
  for (const s of spans) {
    const g = seriesOf(s);
    let entry = groups.get(g);
    if (!entry) groups.set(g, (entry = { color: colorOf(g, s), data: [] }));
    entry.data.push({ name: spanTitle(s), value: [laneIndex.get(`${s.rank}:${trackOf(s)}`)!, s.start - t0, s.end - t0, s.step, -1] });
  }
  const order = (g: string) => (g === 'forward' ? 0 : g === 'backward' ? 1 : g === 'optimizer' ? 2 : 3);
  const series: CustomSeriesOption[] = [...groups.entries()]
    .sort(([a], [b]) => order(a) - order(b) || a.localeCompare(b))
    .map(([name, g]) => ({
      name,
      type: 'custom',
      renderItem: renderSpanBlock,
      itemStyle: { color: g.color },
      encode: { x: [1, 2], y: 0, tooltip: [1, 2] },
      dimensions: ['lane', 'start (ms)', 'end (ms)', 'step', 'label'],
      data: g.data,
    }));
  // open on the last `initialSteps` steps: a whole run of spans is a blur
  const steps = [...new Set(spans.map((s) => s.step))].sort((a, b) => a - b);
  const from = steps[Math.max(0, steps.length - (opts.initialSteps ?? 2))];
  let startValue = Infinity;
  for (const s of spans) if (s.step === from) startValue = Math.min(startValue, s.start - t0);
  if (!Number.isFinite(startValue)) startValue = 0;
  const overlap = opts.overlapPct !== undefined ? opts.overlapPct : timelineOverlapPercent(spans);
  return {
    title: {
      text: 'Compute and communication timeline',
      subtext:
        overlap === null
          ? 'no gradient-bucket communication'
          : `overlap: ${overlap.toFixed(1)}% of gradient communication hidden under backward`,
      left: 'center',
      textStyle: { fontSize: 14 },
    },
    tooltip: { trigger: 'item' },
    legend: { top: 44 },
    grid: { left: 150, right: 24, top: 80, bottom: 70 },
    xAxis: { type: 'value', name: 'ms', min: 0, nameLocation: 'middle', nameGap: 24 },
    yAxis: { type: 'category', data: lanes.map((l) => l.label), inverse: true, axisTick: { show: false } },
    dataZoom: [
      { type: 'slider', xAxisIndex: 0, filterMode: 'weakFilter', startValue, bottom: 8, height: 18 },
      { type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter' },
    ],
    series,
  };
}
