// The Advisor panel's table (runs.advise's answer, common/advisor/types.ts), as plain data the
// launch view draws: one row per layout, ranked as the advisor ranked them, with a bar of
// memory per rank against its device (segments per category, each a share of the bar) and the
// predicted step time stacked as compute, exposed communication, pipeline bubble and host
// copies (each a share of the slowest layout's step, so rows compare at a glance). Pure: the
// view only sets widths from these numbers; tests/unit/charts/advisor.test.ts checks them.
import type { EChartsOption } from 'echarts';
import type { AdviseResult, Layout, LayoutPlan, RankPlan } from '../advisor/types.js';
import { MEMORY_CATEGORIES } from '../memory-categories.js';
import { TABLE } from '../strategies.js';
import { CATEGORY_COLORS, formatBytes } from './style.js';

/** One coloured part of a bar: `pct` is its width in percent of the whole bar. */
export interface BarSegment {
  key: string;
  label: string;
  value: number;
  pct: number;
  color: string;
}

export interface RankBar {
  rank: number;
  device: string;
  total: number;
  /** the device's memory, where known */
  limit: number | null;
  /** where the device's limit falls on the bar (percent), null when unknown */
  limitPct: number | null;
  over: boolean;
  segments: BarSegment[];
  /** "rank 1 on GPU 0: 1.2 GiB of 2 GiB" */
  title: string;
}

export interface AdvisorRow {
  order: number;
  label: string;
  fits: boolean;
  reason: string;
  launch: LayoutPlan['launch'];
  ranks: RankBar[];
  stepMs: number;
  time: BarSegment[];
  tokensPerS: number;
  mfu: number | null;
}

/** The step-time components, bottom to top of the stack, with their colours. */
export const STEP_TIME_PARTS = [
  { key: 'compute_ms', label: 'compute', color: '#5b8ff9' },
  { key: 'comm_exposed_ms', label: 'communication (exposed)', color: '#fa8c16' },
  { key: 'bubble_ms', label: 'pipeline bubble', color: '#bfbfbf' },
  { key: 'host_copy_ms', label: 'host copies', color: '#9a60b4' },
] as const;

const pct = (v: number, of: number) => (of > 0 ? (100 * v) / of : 0);

/** A layout in the launch form's words: "zero2 × 2", "pp P 2 × 4 micro-batches (1f1b)", "3d D 2 × T 2 × P 2", "+ offload". */
export function layoutLabel(l: Layout): string {
  let s = TABLE[l.strategy].label(l, 'form')!;
  if (l.micro_batches > 1) s += `, ${l.micro_batches} micro-batches`;
  if (l.schedule) s += ` (${l.schedule})`;
  if (l.offload_optimizer) s += ' + offload';
  if (l.activation_checkpointing) s += ' + checkpointing';
  if (l.precision && l.precision !== 'fp32') s += ` · ${l.precision}`;
  return s;
}

function rankBar(r: RankPlan, scale: number): RankBar {
  const limit = r.device_memory_bytes ?? null;
  // a bar spans the device (or the rank's own total where it is over, or the shared scale where the device is unknown)
  const whole = limit !== null ? Math.max(limit, r.memory.total) : scale;
  const segments = MEMORY_CATEGORIES.filter((c) => r.memory[c] > 0).map((c) => ({
    key: c,
    label: c,
    value: r.memory[c],
    pct: pct(r.memory[c], whole),
    color: CATEGORY_COLORS[c] ?? '#999',
  }));
  const over = limit !== null && r.memory.total > limit;
  return {
    rank: r.rank,
    device: r.device,
    total: r.memory.total,
    limit,
    limitPct: limit !== null ? pct(limit, whole) : null,
    over,
    segments,
    title: `rank ${r.rank} on ${r.device}: ${formatBytes(r.memory.total)}${limit !== null ? ` of ${formatBytes(limit)}` : ''}${over ? ' (does not fit)' : ''}`,
  };
}

/** The panel's rows, in the advisor's order (fitting first, fastest first). */
export function advisorRows(result: AdviseResult): AdvisorRow[] {
  const layouts = [...result.layouts].sort((a, b) => a.rank_order - b.rank_order);
  // ranks on devices of unknown size share one scale: the largest total of any layout
  const memScale = Math.max(0, ...layouts.flatMap((l) => l.ranks.map((r) => r.memory.total)));
  const slowest = Math.max(0, ...layouts.map((l) => l.time.step_ms).filter(Number.isFinite));
  return layouts.map((l) => ({
    order: l.rank_order,
    label: layoutLabel(l.layout),
    fits: l.fits,
    reason: l.reason,
    launch: l.launch,
    ranks: l.ranks.map((r) => rankBar(r, memScale)),
    stepMs: l.time.step_ms,
    time: STEP_TIME_PARTS.filter((p) => l.time[p.key] > 0).map((p) => ({
      key: p.key,
      label: p.label,
      value: l.time[p.key],
      pct: pct(l.time[p.key], slowest),
      color: p.color,
    })),
    tokensPerS: l.tokens_per_s,
    mfu: l.mfu ?? null,
  }));
}

/** Predicted step time of every layout as horizontal stacked bars (first choice at the top), for the panel's overview chart. */
export function advisorStepTimeChartOption(result: AdviseResult): EChartsOption {
  const layouts = [...result.layouts].sort((a, b) => b.rank_order - a.rank_order); // echarts draws categories bottom-up
  const names = layouts.map((l) => `${l.fits ? '' : '✗ '}${layoutLabel(l.layout)}`);
  return {
    // the legend names the parts (a subtitle that listed them too ran into it)
    title: { text: 'Predicted step time', left: 'center' },
    tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' } },
    legend: { top: 40, data: STEP_TIME_PARTS.map((p) => p.label) },
    grid: { left: 240, right: 32, top: 80, bottom: 40 },
    xAxis: { type: 'value', name: 'ms', nameLocation: 'middle', nameGap: 24 },
    yAxis: { type: 'category', data: names, axisLabel: { width: 230, overflow: 'truncate' } },
    series: STEP_TIME_PARTS.map((p) => ({
      name: p.label,
      type: 'bar' as const,
      stack: 'step',
      itemStyle: { color: p.color },
      data: layouts.map((l) => Number(l.time[p.key].toPrecision(4))),
    })),
  };
}
