// Scaling of a multi-rank run: per step, its time and the communication no compute hid
// (exposed: the union of a rank's comm spans less their overlap with its compute spans; the
// step waits for its slowest rank, so the step's figure is the largest over the ranks), and the
// scaling efficiency: tokens/s at N ranks / (N x tokens/s at 1).
//
// With a world-1 run of the same job as baseline the efficiency is measured. Without one it is
// estimated from the spans: a data-parallel rank computes 1/N of the batch, so a perfectly
// scaling step would last the step less its exposed communication, and efficiency ≈
// (step - exposed comm) / step. The estimate leaves out what else grows with N (host work,
// stragglers, the pipeline bubble), so outputs call it an estimate.
import type { BarSeriesOption, EChartsOption, LineSeriesOption } from 'echarts';
import { intersectionLength, totalLength, unionIntervals } from './intervals.js';
import { opColor } from './style.js';
import type { Span, StepMetric } from './types.js';
import { median } from '../stats.js';

export interface ScalingStep {
  step: number;
  step_ms: number;
  /** the largest exposed communication of the step's ranks, ms */
  exposed_comm_ms: number;
}

export interface ScalingFigures {
  world: number;
  /** steps measured (after the first, which compiles) */
  steps: number;
  /** medians over those steps */
  step_ms: number;
  exposed_comm_ms: number;
  /** 0..1: measured against the baseline where one was given, else estimated from the spans */
  efficiency: number;
  basis: 'baseline' | 'spans';
}

/** Each step with a time and spans, after the first step (it compiles every kernel). */
export function scalingSteps(steps: readonly StepMetric[], spans: readonly Span[]): ScalingStep[] {
  if (steps.length === 0) return [];
  const first = Math.min(...steps.map((s) => s.step));
  const byStep = new Map<number, Map<number, Span[]>>();
  for (const s of spans) {
    let ranks = byStep.get(s.step);
    if (!ranks) byStep.set(s.step, (ranks = new Map()));
    ranks.set(s.rank, [...(ranks.get(s.rank) ?? []), s]);
  }
  const out: ScalingStep[] = [];
  for (const m of steps) {
    const ranks = byStep.get(m.step);
    if (m.step === first || !ranks || typeof m.step_ms !== 'number' || !Number.isFinite(m.step_ms)) continue;
    let exposed = 0;
    for (const list of ranks.values()) {
      const comm = unionIntervals(list.filter((s) => s.kind === 'comm'));
      const work = list.filter((s) => s.kind !== 'comm');
      exposed = Math.max(exposed, totalLength(comm) - intersectionLength(comm, work));
    }
    out.push({ step: m.step, step_ms: m.step_ms, exposed_comm_ms: exposed });
  }
  return out;
}

/**
 * The run's scaling figures; null for one rank or before a measured step. `baseline`: tokens/s
 * of a world-1 run of the same job, beside the run's own mean tokens/s.
 */
export function scalingFigures(
  world: number,
  rows: readonly ScalingStep[],
  baseline?: { tokens_per_s: number; run_tokens_per_s: number },
): ScalingFigures | null {
  if (world < 2 || rows.length === 0) return null;
  const step_ms = median(rows.map((r) => r.step_ms));
  const exposed_comm_ms = median(rows.map((r) => r.exposed_comm_ms));
  const measured = baseline && baseline.tokens_per_s > 0;
  const efficiency = measured
    ? baseline.run_tokens_per_s / (world * baseline.tokens_per_s)
    : step_ms > 0
      ? Math.max(0, step_ms - exposed_comm_ms) / step_ms
      : 0;
  return { world, steps: rows.length, step_ms, exposed_comm_ms, efficiency, basis: measured ? 'baseline' : 'spans' };
}

/** One line for the run view and the report: "scaling efficiency 87% (estimated from spans) · exposed communication 12.3 ms of a 95.0 ms step". */
export function scalingLine(f: ScalingFigures): string {
  const basis = f.basis === 'baseline' ? 'against the world-1 run' : 'estimated from spans';
  return (
    `scaling efficiency ${(100 * f.efficiency).toFixed(0)}% at ${f.world} ranks (${basis}) · ` +
    `exposed communication ${f.exposed_comm_ms.toFixed(1)} ms of a ${f.step_ms.toFixed(1)} ms step (medians over ${f.steps} steps)`
  );
}

/** Stacked bars per step: the step without its exposed communication, and the exposed communication; the efficiency estimate as a line. */
export function scalingChartOption(rows: readonly ScalingStep[], f: ScalingFigures): EChartsOption {
  const bars: BarSeriesOption[] = [
    {
      name: 'rest of the step',
      type: 'bar',
      stack: 'step',
      itemStyle: { color: '#5b8ff9' },
      data: rows.map((r) => Math.max(0, r.step_ms - r.exposed_comm_ms)),
    },
    {
      name: 'exposed communication',
      type: 'bar',
      stack: 'step',
      itemStyle: { color: opColor('allReduce') },
      data: rows.map((r) => Math.min(r.exposed_comm_ms, r.step_ms)),
    },
  ];
  const line: LineSeriesOption = {
    name: 'efficiency estimate',
    type: 'line',
    yAxisIndex: 1,
    symbol: 'none',
    itemStyle: { color: '#333' },
    data: rows.map((r) => (r.step_ms > 0 ? (100 * Math.max(0, r.step_ms - r.exposed_comm_ms)) / r.step_ms : 0)),
  };
  return {
    title: { text: 'Scaling: step time and exposed communication', subtext: scalingLine(f), left: 'center', textStyle: { fontSize: 14 } },
    tooltip: { trigger: 'axis' },
    // the legend clear of the subtitle (the PDF's glyph boxes are taller than the screen's)
    legend: { top: 50 },
    grid: { left: 64, right: 64, top: 88, bottom: 40 },
    xAxis: { type: 'category', name: 'step', nameLocation: 'middle', nameGap: 24, data: rows.map((r) => String(r.step)) },
    yAxis: [
      { type: 'value', name: 'ms' },
      { type: 'value', name: '%', min: 0, max: 100, splitLine: { show: false } },
    ],
    series: [...bars, line],
  };
}

/** A run as the comparison reads it: its world, mean tokens/s, steps and spans, and what must match for a baseline. */
export interface ScalingRun {
  world: number;
  tokens_per_s: number | null;
  steps: readonly StepMetric[];
  spans: readonly Span[];
  /** the model and global batch (any stable text): a world-1 run is a baseline only for the same job */
  job: string;
}

/**
 * The scaling line of `run` beside `other` (the dashboard's comparison): measured when `other`
 * is a world-1 run of the same job, else estimated from `run`'s spans; null for a world-1 run.
 */
export function scalingVersus(run: ScalingRun, other: ScalingRun | null): string | null {
  const rows = scalingSteps(run.steps, run.spans);
  const baseline =
    other && other.world === 1 && other.job === run.job && other.tokens_per_s && run.tokens_per_s
      ? { tokens_per_s: other.tokens_per_s, run_tokens_per_s: run.tokens_per_s }
      : undefined;
  // a baseline needs no spans: the efficiency is the tokens/s ratio
  if (baseline && run.world > 1 && rows.length === 0)
    return `scaling efficiency ${((100 * baseline.run_tokens_per_s) / (run.world * baseline.tokens_per_s)).toFixed(0)}% at ${run.world} ranks (against the world-1 run)`;
  const f = scalingFigures(run.world, rows, baseline);
  return f ? scalingLine(f) : null;
}
