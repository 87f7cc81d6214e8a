// Predicted against measured for a run launched with the advisor's prediction beside it
// (prediction.json in the run folder: the LayoutPlan of the run's layout). Memory: per rank and
// category, the predicted peak bytes against the measured peak (summary.peak_bytes at the end,
// the largest step sample while live). Step time: the median step after the first (the first
// compiles every kernel) against the predicted step, and its parts from the spans of those
// steps. A part is its share of the step's window (first span start to last span end over all
// ranks), averaged over ranks and steps, times the measured step, so the parts add up to the step
// (a span's end is when the host saw the device finish: under load it trails the work, and raw
// span lengths can sum to more than the step itself):
//   compute        the union of the rank's forward, backward and optimizer spans;
//   comm exposed   the union of its comm spans not under compute;
//   bubble         (pipelined layouts) the rest of the window, idle;
//   host + other   the rest of the window where no pipeline waits: host copies (offload), launch overhead.
// The run view and the HTML report draw the same rows and charts (run-charts.ts).
import type { EChartsOption } from 'echarts';
import type { LayoutPlan } from '../advisor/types.js';
import { MEMORY_CATEGORIES } from '../memory-categories.js';
import { type Interval, intersectionLength, totalLength, unionIntervals } from './intervals.js';
import { byteUnit, COLORS, formatBytes } from './style.js';
import type { Span, StepMetric } from './types.js';
import { mean, median } from '../stats.js';

export interface ComparisonRow {
  key: string;
  label: string;
  predicted: number;
  /** null: not measured (yet, or not separately) */
  measured: number | null;
  /** (measured - predicted) / measured, null without a measurement */
  error: number | null;
}

const MEMORY_KEYS = [...MEMORY_CATEGORIES, 'total'] as const;

const row = (key: string, label: string, predicted: number, measured: number | null): ComparisonRow => ({
  key,
  label,
  predicted,
  measured,
  error: measured !== null && measured > 0 ? (measured - predicted) / measured : null,
});

/** Measured peak bytes of `rank` per category and in total: the summary's peaks, else the largest step sample. */
export function measuredPeakBytes(
  rank: number,
  summary: Record<string, any> | null,
  steps: readonly StepMetric[],
): Record<(typeof MEMORY_KEYS)[number], number> | null {
  const peak = summary?.peak_bytes?.[String(rank)] as Record<string, number> | undefined;
  const samples = steps.map((s) => s.memory?.[String(rank)]).filter((b): b is Record<string, number> => !!b);
  if (!peak && samples.length === 0) return null;
  const out = {} as Record<(typeof MEMORY_KEYS)[number], number>;
  for (const c of MEMORY_CATEGORIES) out[c] = typeof peak?.[c] === 'number' ? peak[c] : Math.max(0, ...samples.map((b) => b[c] ?? 0));
  const sampleTotals = samples.map((b) => MEMORY_CATEGORIES.reduce((t, c) => t + (b[c] ?? 0), 0));
  out.total = typeof peak?.total === 'number' ? peak.total : Math.max(0, ...sampleTotals);
  return out;
}

/** Per rank of the plan: each memory category and the total, predicted beside measured. */
export function memoryComparison(plan: LayoutPlan, summary: Record<string, any> | null, steps: readonly StepMetric[]) {
  return plan.ranks.map((r) => {
    const m = measuredPeakBytes(r.rank, summary, steps);
    return { rank: r.rank, device: r.device, rows: MEMORY_KEYS.map((c) => row(c, c, r.memory[c], m ? m[c] : null)) };
  });
}

export interface MeasuredStepTime {
  /** steps measured (after the first) */
  steps: number;
  step_ms: number;
  compute_ms: number | null;
  comm_exposed_ms: number | null;
  bubble_ms: number | null;
  other_ms: number | null;
}

/** The measured step and its parts over the steps after the first; null before a second step. */
export function measuredStepTime(steps: readonly StepMetric[], spans: readonly Span[], pipelined: boolean): MeasuredStepTime | null {
  if (steps.length === 0) return null;
  const first = Math.min(...steps.map((s) => s.step));
  const later = steps.filter((s) => s.step > first && typeof s.step_ms === 'number' && Number.isFinite(s.step_ms));
  if (later.length === 0) return null;
  const measured = new Set(later.map((s) => s.step));
  const step_ms = median(later.map((s) => s.step_ms!));
  // spans of the measured steps, by step then rank
  const byStep = new Map<number, Map<number, Span[]>>();
  for (const s of spans) {
    if (!measured.has(s.step)) continue;
    let ranks = byStep.get(s.step);
    if (!ranks) byStep.set(s.step, (ranks = new Map()));
    const list = ranks.get(s.rank);
    if (list) list.push(s);
    else ranks.set(s.rank, [s]);
  }
  const compute: number[] = [];
  const exposed: number[] = [];
  const idle: number[] = [];
  for (const ranks of byStep.values()) {
    const all = [...ranks.values()].flat();
    const window: Interval = { start: Math.min(...all.map((s) => s.start)), end: Math.max(...all.map((s) => s.end)) };
    const length = window.end - window.start;
    if (!(length > 0)) continue;
    for (const list of ranks.values()) {
      const work = unionIntervals(list.filter((s) => s.kind !== 'comm'));
      const comm = unionIntervals(list.filter((s) => s.kind === 'comm'));
      compute.push(totalLength(work) / length);
      exposed.push((totalLength(comm) - intersectionLength(comm, work)) / length);
      idle.push(Math.max(0, 1 - totalLength(unionIntervals([...work, ...comm])) / length));
    }
  }
  if (compute.length === 0)
    return { steps: later.length, step_ms, compute_ms: null, comm_exposed_ms: null, bubble_ms: null, other_ms: null };
  const c = mean(compute) * step_ms;
  const e = mean(exposed) * step_ms;
  const rest = mean(idle) * step_ms;
  return {
    steps: later.length,
    step_ms,
    compute_ms: c,
    comm_exposed_ms: e,
    bubble_ms: pipelined ? rest : null,
    other_ms: pipelined ? 0 : rest,
  };
}

/** The step-time parts, predicted beside measured (the measured host part also holds what no part predicts). */
export function stepTimeComparison(plan: LayoutPlan, measuredSteps: MeasuredStepTime | null): ComparisonRow[] {
  const t = plan.time;
  // a one-rank run records no spans (nothing to overlap or wait for): its whole step is the
  // device's work and the host's round trips, with no communication and no bubble
  const measured =
    measuredSteps && measuredSteps.compute_ms === null && plan.ranks.length === 1
      ? { ...measuredSteps, compute_ms: measuredSteps.step_ms, comm_exposed_ms: 0, other_ms: 0 }
      : measuredSteps;
  return [
    row('compute_ms', 'compute', t.compute_ms, measured?.compute_ms ?? null),
    row('comm_exposed_ms', 'communication (exposed)', t.comm_exposed_ms, measured?.comm_exposed_ms ?? null),
    // like with like: the run measures each rank's idle time, so that is what the bubble row predicts
    row(
      'bubble_ms',
      t.rank_idle_ms !== undefined ? 'pipeline bubble (each rank idle)' : 'pipeline bubble',
      t.rank_idle_ms ?? t.bubble_ms,
      measured?.bubble_ms ?? null,
    ),
    row('host_copy_ms', 'host copies and other', t.host_copy_ms, measured?.other_ms ?? null),
    row('step_ms', 'step', t.step_ms, measured?.step_ms ?? null),
    // the device's own idle time (ranks sharing it fill each other's bubbles), predicted only: part of the step's sum
    ...(t.rank_idle_ms !== undefined ? [row('device_idle_ms', 'device idle (stages on one device fill it)', t.bubble_ms, null)] : []),
  ];
}

/** "+12%" or "−3%" (measured over predicted), "—" without a measurement. */
export function formatError(e: number | null): string {
  if (e === null) return '—';
  const p = Math.round(100 * e);
  return `${p > 0 ? '+' : p < 0 ? '−' : '±'}${Math.abs(p)}%`;
}

function groupedBars(title: string, subtext: string, yName: string, rows: ComparisonRow[], scale = 1, compact = false): EChartsOption {
  const subLines = subtext.split('\n').length;
  const v = (x: number | null) => (x === null ? null : Number((x / scale).toPrecision(4)));
  const series: EChartsOption['series'] = [
    { name: 'predicted', type: 'bar', itemStyle: { color: COLORS.predicted }, data: rows.map((r) => v(r.predicted)) },
    { name: 'measured', type: 'bar', itemStyle: { color: COLORS.peak }, data: rows.map((r) => v(r.measured)) },
  ];
  const categories = { type: 'category' as const, data: rows.map((r) => r.label), axisLabel: { interval: 0, fontSize: 11 } };
  if (compact)
    // a quarter of the row: the category names, one under another, would not fit side by side
    return {
      title: {
        text: title,
        subtext,
        left: 'center',
        textStyle: { fontSize: 13 },
        subtextStyle: { fontSize: 11, lineHeight: 14 },
        itemGap: 4,
      },
      tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' } },
      legend: { top: 30 + 14 * subLines, itemWidth: 10, itemHeight: 8, textStyle: { fontSize: 10 }, data: ['predicted', 'measured'] },
      // room for the longest category name at 11 px
      grid: { left: 16 + 6.5 * Math.max(...rows.map((r) => r.label.length)), right: 16, top: 56 + 14 * subLines, bottom: 40 },
      yAxis: { ...categories, inverse: true },
      xAxis: { type: 'value', name: yName, nameLocation: 'middle', nameGap: 22, axisLabel: { fontSize: 10, hideOverlap: true } },
      series,
    };
  return {
    title: { text: title, subtext, left: 'center', textStyle: { fontSize: 14 } },
    tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' } },
    legend: { top: 48, data: ['predicted', 'measured'] },
    grid: { left: 64, right: 24, top: 84, bottom: 48 },
    xAxis: categories,
    yAxis: { type: 'value', name: yName },
    series,
  };
}

/** One rank's memory categories, predicted beside measured peak bytes; `compact`: a small multiple, four to a row (bars across). */
export function predictedMemoryChartOption(rank: number, device: string, rows: ComparisonRow[], compact = false): EChartsOption {
  const { unit, scale } = byteUnit(Math.max(0, ...rows.map((r) => Math.max(r.predicted, r.measured ?? 0))));
  const total = rows.find((r) => r.key === 'total');
  const measured = total?.measured == null ? '—' : formatBytes(total.measured);
  if (compact) {
    const short = total ? `total ${formatBytes(total.predicted)} · ${measured} (${formatError(total.error)})` : '';
    return groupedBars(`Rank ${rank} · ${device}`, short, unit, rows, scale, true);
  }
  const sub = total ? `total: predicted ${formatBytes(total.predicted)}, measured ${measured} (${formatError(total.error)})` : '';
  return groupedBars(`Rank ${rank} (${device}) memory: predicted vs measured peak`, sub, unit, rows, scale);
}

/** The step's parts, predicted beside measured (ms). */
export function predictedStepTimeChartOption(rows: ComparisonRow[], measuredSteps: number): EChartsOption {
  const step = rows.find((r) => r.key === 'step_ms');
  const sub = step
    ? `step: predicted ${step.predicted.toFixed(1)} ms, measured ${step.measured === null ? '—' : `${step.measured.toFixed(1)} ms`} (${formatError(step.error)})\nmeasured: the median of ${measuredSteps} steps after the first`
    : '';
  // bars across: the parts' names ("communication (exposed)") side by side overlap at half a row
  return groupedBars('Step time: predicted vs measured', sub, 'ms', rows, 1, true);
}
