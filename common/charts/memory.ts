// Device memory of one rank over the run: bytes per category stacked (params at the bottom, so
// the top of params+grads+optimizer meets the formula's model-state line), the total, its peak,
// and the strategy formula's prediction as reference lines. Several ranks are small multiples:
// one shared scale (memoryScaleTop) so their heights compare at a glance, and from 4 ranks a
// compact form four to a row: the rank's role and its figures on two subtitle lines, a small
// legend that wraps, the formula line labelled with its bytes only.
import type { EChartsOption, LineSeriesOption } from 'echarts';
import { MEMORY_CATEGORIES } from '../memory-categories.js';
import type { Precision } from '../precision.js';
import { byteUnit, CATEGORY_COLORS, COLORS, formatBytes } from './style.js';
import type { StepMetric } from './types.js';
import { bytesTooltip } from './tooltip-units.js';

/** The ranks that reported memory, ascending. */
export function memoryRanks(steps: readonly StepMetric[]): number[] {
  const ranks = new Set<number>();
  for (const s of steps) for (const r of Object.keys(s.memory ?? {})) ranks.add(Number(r));
  return [...ranks].filter((r) => Number.isInteger(r)).sort((a, b) => a - b);
}

export interface MemoryChartOptions {
  /** peak device bytes of the rank (summary.peak_bytes[rank].total); default: the highest sampled total */
  peak?: number;
  /** model-state bytes the strategy's formula predicts for this rank (common/model-state.ts) */
  predicted?: number | null;
  /** the precision the formula counts in (named on its line unless fp32) */
  precision?: Precision;
  /** the padding the formula counts where it changes the number (common/model-state.ts modelStatePadding), named on its line */
  padding?: readonly string[];
  /** device limit, when known */
  limit?: number;
  /** bytes the y axis reaches, shared by every rank's chart (memoryScaleTop); default: this chart's own top */
  scaleTop?: number;
  /** a small multiple: a small wrapping legend, the formula label without its padding notes, tighter margins */
  compact?: boolean;
  /** what the rank is, for the subtitle ("stage 1 · TP shard 0 · DP replica 1") */
  role?: string;
}

/** Sampled device total of `rank` at each step that has it. */
function sampledTotals(rank: number, steps: readonly StepMetric[]): number[] {
  const key = String(rank);
  return steps.flatMap((s) => {
    const b = s.memory?.[key];
    return b ? [MEMORY_CATEGORIES.reduce((t, c) => t + (b[c] ?? 0), 0)] : [];
  });
}

/** The one top of every rank's memory chart: the largest sample, peak or reference line over the ranks. */
export function memoryScaleTop(steps: readonly StepMetric[], refs: readonly (number | null | undefined)[] = []): number {
  let top = 0;
  for (const r of memoryRanks(steps)) for (const t of sampledTotals(r, steps)) top = Math.max(top, t);
  for (const b of refs) if (typeof b === 'number' && Number.isFinite(b)) top = Math.max(top, b);
  return top;
}

/** Stacked bytes per category of `rank` per step, the total line and the reference lines. */
export function memoryChartOption(rank: number, steps: readonly StepMetric[], opts: MemoryChartOptions = {}): EChartsOption {
  const key = String(rank);
  const samples = steps.filter((s) => s.memory?.[key]).map((s) => ({ step: s.step, bytes: s.memory![key]! }));
  const totals = sampledTotals(rank, steps);
  const series: LineSeriesOption[] = MEMORY_CATEGORIES.map((c) => ({
    name: c,
    type: 'line',
    stack: 'device',
    areaStyle: { opacity: 0.85 },
    showSymbol: false,
    lineStyle: { width: 0 },
    itemStyle: { color: CATEGORY_COLORS[c] },
    data: samples.map((s) => [s.step, s.bytes[c] ?? 0]),
  }));
  const peak = opts.peak ?? (totals.length ? Math.max(...totals) : 0);
  // plotted in one binary unit chosen from the largest value; the tooltip writes it (tooltip-units.ts)
  let dataMax = 0;
  for (const t of totals) dataMax = Math.max(dataMax, t);
  const top = Math.max(peak, opts.predicted ?? 0, opts.limit ?? 0, dataMax, opts.scaleTop ?? 0);
  const { unit, scale } = byteUnit(top);
  const y = (b: number) => b / scale;
  for (const s of series) s.data = (s.data as number[][]).map(([x, b]) => [x!, y(b!)]);
  const mixed = opts.precision && opts.precision !== 'fp32' ? `, ${opts.precision}` : '';
  const padding = opts.padding?.length ? `; ${opts.padding.join('; ')}` : '';
  const refs: {
    name: string;
    yAxis: number;
    lineStyle: { color: string; type: 'solid' | 'dashed' };
    label: { formatter: string; position: 'insideEndTop' };
  }[] = [
    {
      name: 'peak',
      yAxis: y(peak),
      lineStyle: { color: COLORS.peak, type: 'solid' },
      label: { formatter: `peak ${formatBytes(peak)}`, position: 'insideEndTop' },
    },
  ];
  if (opts.predicted != null) {
    refs.push({
      name: 'formula',
      yAxis: y(opts.predicted),
      lineStyle: { color: COLORS.predicted, type: 'dashed' },
      // a small multiple has no room for the padding notes (the full-size chart names them)
      label: {
        formatter: opts.compact
          ? `formula ${formatBytes(opts.predicted)}`
          : `formula (model states${mixed}${padding}) ${formatBytes(opts.predicted)}`,
        position: 'insideEndTop',
      },
    });
  }
  if (opts.limit != null) {
    refs.push({
      name: 'limit',
      yAxis: y(opts.limit),
      lineStyle: { color: '#000', type: 'dashed' },
      label: { formatter: `device limit ${formatBytes(opts.limit)}`, position: 'insideEndTop' },
    });
  }
  series.push({
    name: 'total',
    type: 'line',
    showSymbol: false,
    lineStyle: { width: 1.5, color: '#333' },
    itemStyle: { color: '#333' },
    data: samples.map((s, i) => [s.step, y(totals[i]!)]),
    markLine: { symbol: 'none', silent: true, data: refs },
  });
  const subtext = [
    opts.role ?? '',
    `peak ${formatBytes(peak)}`,
    opts.predicted != null ? `formula${mixed ? ` (${opts.precision})` : ''} ${formatBytes(opts.predicted)}` : '',
  ].filter(Boolean);
  // a shared scale always fixes the top (same max on every chart); reference lines do not
  // stretch an axis either: leave room for one above the data
  const fixedTop = opts.scaleTop !== undefined || top > dataMax;
  const yAxis = { type: 'value' as const, name: unit, nameGap: 8, ...(fixedTop ? { max: Number((y(top) * 1.05).toPrecision(2)) } : {}) };
  const xAxis = {
    type: 'value' as const,
    name: 'step',
    nameLocation: 'middle' as const,
    nameGap: 24,
    minInterval: 1,
    min: 'dataMin' as const,
  };
  const legendData = [...MEMORY_CATEGORIES, 'total'];
  if (opts.compact) {
    // a quarter of a row (about 240 px in the PDF): the role on one line, the figures under it;
    // every legend item shown (a scrolling legend prints a third of itself), on up to three lines
    const [role, ...figures] = opts.role ? subtext : ['', ...subtext];
    return {
      title: {
        text: `Rank ${rank}`,
        subtext: role ? `${role}\n${figures.join(' · ')}` : figures.join(' · '),
        left: 'center',
        textStyle: { fontSize: 13 },
        subtextStyle: { fontSize: 11, lineHeight: 14 },
        itemGap: 4,
      },
      tooltip: { trigger: 'axis', valueFormatter: bytesTooltip(unit) },
      legend: { top: 58, left: 8, right: 8, itemWidth: 8, itemHeight: 8, itemGap: 4, textStyle: { fontSize: 10 }, data: legendData },
      grid: { left: 48, right: 12, top: 128, bottom: 36 },
      xAxis,
      yAxis: { ...yAxis, nameGap: 14 },
      series,
    };
  }
  return {
    title: {
      text: `Rank ${rank} device memory`,
      subtext: subtext.join(' · '),
      left: 'center',
      textStyle: { fontSize: 14 },
    },
    tooltip: { trigger: 'axis', valueFormatter: bytesTooltip(unit) },
    // under the title and its subtitle (12 px at about 29-43): at 42 the legend touched the peak line
    legend: { top: 50, itemWidth: 14, itemGap: 6, textStyle: { fontSize: 11 }, data: legendData },
    grid: { left: 80, right: 24, top: 110, bottom: 40 },
    xAxis,
    yAxis,
    series,
  };
}
