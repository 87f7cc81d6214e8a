// Bytes moved per step by collective: the payload of every communication span, summed per step
// and op over the ranks and divided by the number of ranks (bytes per rank, comparable with the
// summary's bytes_moved_per_step), as stacked bars.
import type { BarSeriesOption, EChartsOption } from 'echarts';
import { byteUnit, formatBytes, opColor } from './style.js';
import type { Span } from './types.js';

export interface CommBytes {
  steps: number[];
  ops: string[];
  /** op -> mean payload bytes per rank, per step (same order as steps) */
  bytes: Record<string, number[]>;
}

export function commBytesByStep(spans: readonly Span[]): CommBytes {
  const comm = spans.filter((s) => s.kind === 'comm' && typeof s.bytes === 'number');
  const ranks = new Set(spans.map((s) => s.rank)).size || 1;
  const steps = [...new Set(comm.map((s) => s.step))].sort((a, b) => a - b);
  const ops = [...new Set(comm.map((s) => s.name))].sort();
  const at = new Map(steps.map((s, i) => [s, i]));
  const bytes: Record<string, number[]> = Object.fromEntries(ops.map((op) => [op, steps.map(() => 0)]));
  for (const s of comm) bytes[s.name]![at.get(s.step)!]! += s.bytes! / ranks;
  return { steps, ops, bytes };
}

export function commBytesChartOption(spans: readonly Span[]): EChartsOption {
  const c = commBytesByStep(spans);
  let max = 0;
  for (let i = 0; i < c.steps.length; i++)
    max = Math.max(
      max,
      c.ops.reduce((t, op) => t + c.bytes[op]![i]!, 0),
    );
  const { unit, scale } = byteUnit(max);
  const series: BarSeriesOption[] = c.ops.map((op) => ({
    name: op,
    type: 'bar',
    stack: 'bytes',
    itemStyle: { color: opColor(op) },
    data: c.bytes[op]!.map((b) => b / scale),
  }));
  return {
    title: {
      text: 'Bytes moved per step by collective',
      subtext: 'payload per rank (mean over ranks)',
      left: 'center',
      textStyle: { fontSize: 14 },
    },
    tooltip: { trigger: 'axis' },
    legend: { top: 44 },
    grid: { left: 72, right: 24, top: 80, bottom: 40 },
    xAxis: { type: 'category', name: 'step', nameLocation: 'middle', nameGap: 24, data: c.steps.map(String) },
    yAxis: { type: 'value', name: unit },
    series,
  };
}

/**
 * A run summary's bytes moved per step, one entry per rank: "rank 0: 1.21 MiB", plus the share
 * that went through shared memory (ranks on one machine) when the summary has it. Null when the
 * summary has no bytes_moved_per_step (a single-rank run).
 */
export function bytesMovedPerRank(summary: Record<string, unknown> | null | undefined): string[] | null {
  const moved = summary?.bytes_moved_per_step as Record<string, number> | undefined;
  if (!moved || typeof moved !== 'object') return null;
  const shm = summary?.shm_bytes_per_step as Record<string, number> | undefined;
  return Object.entries(moved).map(([rank, b]) => {
    const via = shm?.[rank];
    // floored: 100% only when every byte went that way (frame headers always take the socket)
    const share = typeof via === 'number' && b > 0 ? ` (${Math.floor((100 * via) / b)}% via shared memory)` : '';
    return `rank ${rank}: ${formatBytes(b)}${share}`;
  });
}
