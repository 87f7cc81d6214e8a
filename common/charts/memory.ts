// Device memory of one rank over the run: bytes per category stacked (params at the bottom, so
// the top of params+grads+optimizer meets the formula's model-state line), the total, its peak,
// and the strategy formula's prediction as reference lines.
import type { EChartsOption, LineSeriesOption } from 'echarts';
import { MEMORY_CATEGORIES } from '../memory.js';
import { byteUnit, CATEGORY_COLORS, COLORS, formatBytes } from './style.js';
import type { StepMetric } from './types.js';

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
  /** device limit, when known */
  limit?: number;
}

/** Stacked bytes per category of `rank` per step, the total line and the reference lines. */
export function memoryChartOption(rank: number, steps: readonly StepMetric[], opts: MemoryChartOptions = {}): EChartsOption {
  const key = String(rank);
  const samples = steps.filter((s) => s.memory?.[key]).map((s) => ({ step: s.step, bytes: s.memory![key]! }));
  const totals = samples.map((s) => MEMORY_CATEGORIES.reduce((t, c) => t + (s.bytes[c] ?? 0), 0));
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
  // plotted in one binary unit chosen from the largest value (no formatter functions: options stay JSON)
  let dataMax = 0;
  for (const t of totals) dataMax = Math.max(dataMax, t);
  const top = Math.max(peak, opts.predicted ?? 0, opts.limit ?? 0, dataMax);
  const { unit, scale } = byteUnit(top);
  const y = (b: number) => b / scale;
  for (const s of series) s.data = (s.data as number[][]).map(([x, b]) => [x!, y(b!)]);
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
      label: { formatter: `formula (model states) ${formatBytes(opts.predicted)}`, position: 'insideEndTop' },
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
  return {
    title: {
      text: `Rank ${rank} device memory`,
      subtext: `peak ${formatBytes(peak)}${opts.predicted != null ? ` · formula ${formatBytes(opts.predicted)}` : ''}`,
      left: 'center',
      textStyle: { fontSize: 14 },
    },
    tooltip: { trigger: 'axis' },
    legend: { top: 42, itemWidth: 14, itemGap: 6, textStyle: { fontSize: 11 }, data: [...MEMORY_CATEGORIES, 'total'] },
    grid: { left: 80, right: 24, top: 104, bottom: 40 },
    xAxis: { type: 'value', name: 'step', nameLocation: 'middle', nameGap: 24, minInterval: 1, min: 'dataMin' },
    // reference lines do not stretch an axis: leave room for one above the data
    yAxis: { type: 'value', name: unit, nameGap: 8, ...(top > dataMax ? { max: Number((y(top) * 1.05).toPrecision(2)) } : {}) },
    series,
  };
}
