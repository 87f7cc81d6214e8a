// The bucket-overlap timeline: one lane per rank, split in a compute track (forward/backward per
// layer, the optimizer) and a communication track (bucket all-reduces, ZeRO gathers and
// reduce-scatters, pipeline p2p), on the run's one clock in ms from the first span; zoomable
// (dataZoom). Lanes are grouped by machine, then pipeline stage, then rank, the groups shaded
// in turn, so 8 ranks of a 3D run read as machines and stages rather than 16 loose rows. The overlap figure is the trainer's: the share of gradient-bucket communication
// time hidden under backward compute, per rank and step, averaged.
import type { CustomSeriesOption, EChartsOption } from 'echarts';
import { overlapPercent } from './intervals.js';
import { renderSpanBlock } from './render-block.js';
import { COLORS, opColor } from './style.js';
import { timeAxis, timeZoom } from './time-axis.js';
import type { Span } from './types.js';
import { roundMs } from './tooltip-units.js';

export type Track = 'compute' | 'comm';
export interface Lane {
  rank: number;
  track: Track;
  label: string;
  /** the machine and stage the rank belongs to ("this machine · stage 1"); lanes of one group are adjacent */
  group: string;
}

export const trackOf = (s: Span): Track => (s.kind === 'comm' ? 'comm' : 'compute');

/**
 * Lanes top to bottom: grouped by machine (in order of their lowest rank), then stage, then rank
 * ascending; each rank's compute track then its comm track. `machines` names the machine of each
 * rank (the run state's ranks); the label names it only when the run spans several machines.
 */
export function timelineLanes(spans: readonly Span[], machines: Readonly<Record<number, string>> = {}): Lane[] {
  const ranks = [...new Set(spans.map((s) => s.rank))].sort((a, b) => a - b);
  const stageOf = new Map<number, number>();
  for (const s of spans) if (s.stage !== undefined && !stageOf.has(s.rank)) stageOf.set(s.rank, s.stage);
  const machineOrder = [...new Set(ranks.map((r) => machines[r] ?? ''))];
  const several = machineOrder.length > 1;
  const key = (r: number) => [machineOrder.indexOf(machines[r] ?? ''), stageOf.get(r) ?? -1, r];
  const sorted = [...ranks].sort((a, b) => {
    const [ka, kb] = [key(a), key(b)];
    return ka[0]! - kb[0]! || ka[1]! - kb[1]! || ka[2]! - kb[2]!;
  });
  return sorted.flatMap((r) => {
    const stage = stageOf.get(r);
    const machine = machines[r];
    const who = `${several && machine ? `${machine} · ` : ''}rank ${r}${stage !== undefined ? ` (stage ${stage})` : ''}`;
    const group = [machine ?? '', stage !== undefined ? `stage ${stage}` : ''].filter(Boolean).join(' · ');
    return [
      { rank: r, track: 'compute' as const, label: `${who} compute`, group },
      { rank: r, track: 'comm' as const, label: `${who} comm`, group },
    ];
  });
}

/**
 * The splitArea colours that shade every other group of lanes (null for a single group).
 * ECharts (6.1) leaves the first band bare, gives colour i to band i + 1 and paints the last band
 * twice (colours n-2 and n-1): so the first group is the bare one, the list is shifted by one, and
 * the colours are opaque (the twice-painted band must not come out darker).
 */
export function groupShading(lanes: readonly Lane[]): string[] | null {
  if (new Set(lanes.map((l) => l.group)).size < 2) return null;
  let shade = false;
  const perLane = lanes.map((l, i) => {
    if (i > 0 && l.group !== lanes[i - 1]!.group) shade = !shade;
    return shade ? '#eef1f8' : '#ffffff';
  });
  return [...perLane.slice(1), perLane.at(-1)!];
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
  /** the machine of each rank, for grouping the lanes (the run state's ranks); default: one machine */
  machines?: Readonly<Record<number, string>>;
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
  const lanes = timelineLanes(spans, opts.machines);
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
    entry.data.push({
      name: spanTitle(s),
      value: [laneIndex.get(`${s.rank}:${trackOf(s)}`)!, roundMs(s.start - t0), roundMs(s.end - t0), s.step, -1],
    });
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
  const shading = groupShading(lanes);
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
    // the lane labels set the left margin (a machine's name can be long)
    grid: { left: 12, right: 24, top: 80, bottom: 70, containLabel: true },
    xAxis: timeAxis(),
    yAxis: {
      type: 'category',
      data: lanes.map((l) => l.label),
      inverse: true,
      axisTick: { show: false },
      // every lane keeps its label, whatever the height (ECharts would skip some when crowded)
      axisLabel: { interval: 0 },
      ...(shading ? { splitArea: { show: true, areaStyle: { color: shading } } } : {}),
    },
    dataZoom: timeZoom(startValue),
    series,
  };
}
