// Membership segments on the step charts: a run that lost a rank or a machine, grew back, or was
// stopped and resumed trained in stretches, each by one set of ranks in one layout. Every chart
// whose x axis is the step gets a light band per segment and a marker line where each begins,
// labelled briefly ("world 2 · rank-lost · 1 lost step"); hovering a band gives the whole story
// (layout, machines, reason, lost steps). A run with no segment rows, or only its 'start', keeps
// its charts exactly as they were.
import type { EChartsOption } from 'echarts';
import type { Segment } from '../api/elastic.js';

/** A segment with the steps it covers on a chart: (from, to], `to` being its last recorded step. */
export interface SegmentStretch {
  /** 1-based, in step order */
  index: number;
  segment: Segment;
  from: number;
  to: number;
}

const BAND_COLORS = ['rgba(84,112,198,0.07)', 'rgba(250,173,20,0.12)'];
const MARKER_COLOR = '#8c5a00';
/** a marker gets its label only this far (share of the chart's steps) from the last labelled one: labels never overlap */
const LABEL_GAP = 0.08;

/** The segments of a run, from its metrics rows ({type:'segment', step, segment}); one per start step, the later row winning; in step order. */
export function segmentsOfRows(rows: readonly { type?: unknown }[]): Segment[] {
  const byStep = new Map<number, Segment>();
  for (const r of rows) {
    if (r.type !== 'segment') continue;
    const s = (r as { segment?: Segment }).segment;
    if (s && typeof s.from_step === 'number') byStep.set(s.from_step, s);
  }
  return [...byStep.values()].sort((a, b) => a.from_step - b.from_step);
}

/**
 * One row per step, in step order, the later row winning: a segment that went back to an older
 * checkpoint trains its lost steps again, and metrics.jsonl then holds those steps twice (the
 * charts would draw a line back in time).
 */
export function latestPerStep<T extends { step: number }>(rows: readonly T[]): T[] {
  const byStep = new Map<number, T>();
  for (const r of rows) byStep.set(r.step, r);
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

/** The segments with `s` added (or replacing the one that starts at the same step), in step order: a live run's new segment row. */
export function withSegment(segments: readonly Segment[], s: Segment): Segment[] {
  return [...segments.filter((x) => x.from_step !== s.from_step), s].sort((a, b) => a.from_step - b.from_step);
}

/**
 * The segments of metrics.jsonl's rows with those of an elastic block (state.json's, summary.json's)
 * laid over them: a row is written as its segment begins, the block keeps it up to date (its last
 * step, how long the recovery took).
 */
export function mergeSegments(rows: readonly Segment[], elastic: readonly Segment[] | undefined): Segment[] {
  let out = [...rows];
  for (const s of elastic ?? []) out = withSegment(out, s);
  return out;
}

/** Whether the segments say anything: a change of membership, or a resume. One 'start' segment is every ordinary run. */
export function showsSegments(segments: readonly Segment[]): boolean {
  return segments.length > 1 || (segments.length === 1 && segments[0]!.reason !== 'start');
}

/** Each segment's steps: to its own to_step, else up to the next one's start, else to the run's last step. */
export function segmentStretches(segments: readonly Segment[], lastStep: number): SegmentStretch[] {
  return segments.map((segment, i) => {
    const next = segments[i + 1];
    const to = segment.to_step ?? (next ? next.from_step : Math.max(lastStep, segment.from_step + 1));
    return { index: i + 1, segment, from: segment.from_step, to: Math.max(to, segment.from_step) };
  });
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/** The marker's label: "world 2 · rank-lost · 1 lost step". */
export function segmentLabel(s: Segment): string {
  return [`world ${s.world}`, s.reason, ...(s.lost_steps > 0 ? [plural(s.lost_steps, 'lost step')] : [])].join(' · ');
}

/** The layout in words: "ddp × 2", "3d × 8 (DP 2 × TP 2 × PP 2)". */
export function segmentLayout(s: Segment): string {
  const grid = s.grid && (s.grid.tp > 1 || s.grid.pp > 1) ? ` (DP ${s.grid.dp} × TP ${s.grid.tp} × PP ${s.grid.pp})` : '';
  return `${s.strategy} × ${s.world}${grid}`;
}

/** The machines of a segment, each with its ranks: "this machine (ranks 0, 1), b (10.0.0.2:7420) (rank 2)". */
export function segmentMachines(s: Segment): string {
  const ranks = new Map<string, number[]>();
  s.placement.forEach((m, rank) => ranks.set(m, [...(ranks.get(m) ?? []), rank]));
  return [...ranks].map(([m, rs]) => `${m} (rank${rs.length > 1 ? 's' : ''} ${rs.join(', ')})`).join(', ');
}

/** Where the segment's state came from and how long the change took: "state from memory, back in 1.4 s". */
export function segmentRecovery(s: Segment): string {
  const from =
    s.source === 'init' ? 'fresh weights' : `state from ${s.source === 'memory' ? 'a replica in memory' : 'the checkpoint on disk'}`;
  const took =
    s.recovery_ms === undefined
      ? ''
      : `, back in ${s.recovery_ms < 1000 ? `${Math.round(s.recovery_ms)} ms` : `${(s.recovery_ms / 1000).toFixed(1)} s`}`;
  return from + took;
}

/** The whole story of a segment, one line per fact (a band's tooltip, the report's table). */
export function segmentDetailLines(st: SegmentStretch): string[] {
  const s = st.segment;
  return [
    `segment ${st.index}: steps ${st.from + 1}–${st.to}`,
    `layout ${segmentLayout(s)}`,
    `machines ${segmentMachines(s)}`,
    `reason ${s.reason}${s.detail ? `: ${s.detail}` : ''}`,
    `${plural(s.lost_steps, 'lost step')} · ${segmentRecovery(s)}`,
  ];
}

/** The option's x axis when it is the step: a value axis, or a category axis of step numbers (the bar charts of steps). */
function stepAxis(option: EChartsOption): { type: 'value' } | { type: 'category'; steps: number[] } | null {
  const x = (Array.isArray(option.xAxis) ? option.xAxis[0] : option.xAxis) as
    { type?: string; name?: string; data?: unknown[] } | undefined;
  if (!x || x.name !== 'step') return null;
  if (x.type === 'value') return { type: 'value' };
  if (x.type === 'category' && Array.isArray(x.data)) return { type: 'category', steps: x.data.map((d) => Number(d)) };
  return null;
}

/**
 * Each category's segment (index into `stretches`), in axis order. Where the steps go back (a lost
 * step trained again is a category of its own after the first), a category moves to the next
 * segment once past its start or when its step goes back.
 */
function segmentOfCategories(steps: readonly number[], stretches: readonly SegmentStretch[]): number[] {
  // one category per step: a lost step's is the one trained again, in the later segment (as the line charts keep it)
  if (steps.every((x, i) => i === 0 || x > steps[i - 1]!))
    return steps.map((step) =>
      Math.max(
        0,
        stretches.findIndex((st, i) => i === stretches.length - 1 || stretches[i + 1]!.from >= step),
      ),
    );
  let k = 0;
  while (k + 1 < stretches.length && steps.length > 0 && stretches[k + 1]!.from < steps[0]! && stretches[k]!.to < steps[0]!) k++;
  let prev = -Infinity;
  return steps.map((step) => {
    for (;;) {
      const next = stretches[k + 1];
      if (!next || step <= next.from) break;
      if (step >= prev && step <= stretches[k]!.to) break;
      k++;
    }
    prev = step;
    return k;
  });
}

/** Where each segment lies on the axis: a band from..to and its marker at `from` (steps, or category indices). */
function placesOn(axis: NonNullable<ReturnType<typeof stepAxis>>, stretches: readonly SegmentStretch[]) {
  if (axis.type === 'value') return stretches.map((st) => ({ st, from: st.from, to: st.to }));
  const of = segmentOfCategories(axis.steps, stretches);
  return stretches.flatMap((st, k) => {
    const first = of.indexOf(k);
    if (first < 0) return [];
    return [{ st, from: first, to: of.lastIndexOf(k) }];
  });
}

/**
 * The option with a band per segment and a marker line where each after the first begins, on one
 * extra series ('membership': toggled from the legend where the chart has one). Unchanged when the
 * x axis is not the step or the segments show nothing.
 */
export function withSegmentBands(option: EChartsOption, segments: readonly Segment[], lastStep: number): EChartsOption {
  const axis = showsSegments(segments) ? stepAxis(option) : null;
  if (!axis) return option;
  const places = placesOn(axis, segmentStretches(segments, lastStep));
  if (places.length === 0) return option;
  const span = Math.max(1, places.at(-1)!.to - places[0]!.from);
  let lastLabelled = -Infinity;
  const markers = places
    .filter(({ st }) => st.index > 1 || st.segment.reason !== 'start')
    .map(({ st, from }) => {
      const labelled = (from - lastLabelled) / span >= LABEL_GAP;
      if (labelled) lastLabelled = from;
      return {
        name: segmentDetailLines(st).join('\n'),
        xAxis: from,
        // along the line, inside the plot: clear of the title and legend above it
        label: labelled
          ? { show: true, formatter: segmentLabel(st.segment), position: 'insideEndTop' as const, fontSize: 10, color: MARKER_COLOR }
          : { show: false },
      };
    });
  // hovering a band or a marker names the segment whole (the charts' axis tooltip shows the values)
  const tooltip = { trigger: 'item' as const, formatter: '{b}', confine: true, extraCssText: 'white-space: pre-line' };
  const series = Array.isArray(option.series) ? option.series : option.series ? [option.series] : [];
  const membership = {
    name: 'membership',
    type: 'line' as const,
    data: [] as number[][],
    // above a bar chart's bars: its marker labels stay readable (the bands are light enough to lie over them)
    z: 3,
    itemStyle: { color: MARKER_COLOR },
    markArea: {
      silent: false,
      tooltip,
      label: { show: false },
      data: places.map(({ st, from, to }) => [
        { name: segmentDetailLines(st).join('\n'), xAxis: from, itemStyle: { color: BAND_COLORS[(st.index - 1) % 2] } },
        { xAxis: to },
      ]),
    },
    markLine: {
      symbol: 'none',
      silent: false,
      tooltip,
      lineStyle: { color: MARKER_COLOR, type: 'dashed' as const, width: 1 },
      data: markers,
    },
  };
  const legend = option.legend as { data?: string[] } | undefined;
  return {
    ...option,
    ...(legend && Array.isArray(legend.data)
      ? { legend: { ...legend, data: [...legend.data, 'membership'] } as EChartsOption['legend'] }
      : {}),
    series: [...series, membership] as EChartsOption['series'],
  };
}
