// Several runs' curves on one chart with one shared y axis (W&B's and TensorBoard's overlay),
// against the step, the training time so far, or the tokens seen so far. Side by side each run
// got its own y scale, so a 0.1 gap in loss looked like none; overlaid it shows.
// Training time is the sum of the steps' step_ms (metrics.jsonl rows carry no wall time; a
// resumed run's pause is not counted, which is what a comparison of speed wants), tokens the
// sum of tokens_per_s x step_ms per step.
import type { EChartsOption, LineSeriesOption } from 'echarts';
import type { StepMetric } from './types.js';

export const OVERLAY_AXES = ['step', 'time', 'tokens'] as const;
export type OverlayAxis = (typeof OVERLAY_AXES)[number];

export const OVERLAY_METRICS = {
  loss: { title: 'Loss', unit: 'cross-entropy', pick: (s: StepMetric) => s.loss },
  tokens_per_s: { title: 'Throughput', unit: 'tokens/s', pick: (s: StepMetric) => s.tokens_per_s },
  grad_norm: { title: 'Gradient norm', unit: 'global L2', pick: (s: StepMetric) => s.grad_norm },
  lr: { title: 'Learning rate', unit: 'lr', pick: (s: StepMetric) => s.lr },
} as const;
export type OverlayMetric = keyof typeof OVERLAY_METRICS;

const AXIS_NAMES: Record<OverlayAxis, string> = { step: 'step', time: 'training time (s)', tokens: 'tokens seen' };
/** one colour per compared run, distinct from each other at a glance */
export const OVERLAY_COLORS = ['#5470c6', '#ee6666', '#91cc75', '#fac858', '#9a60b4', '#73c0de'];

export interface OverlayRun {
  /** the run id: the legend's name */
  id: string;
  steps: readonly StepMetric[];
}

/** x of each step on the chosen axis: the step, seconds of training so far, or tokens so far (at the end of the step). */
export function overlayXs(steps: readonly StepMetric[], axis: OverlayAxis): number[] {
  if (axis === 'step') return steps.map((s) => s.step);
  let acc = 0;
  return steps.map((s) => {
    const ms = Number.isFinite(s.step_ms) ? s.step_ms! : 0;
    acc += axis === 'time' ? ms / 1000 : Number.isFinite(s.tokens_per_s) ? (s.tokens_per_s! * ms) / 1000 : 0;
    return axis === 'time' ? acc : Math.round(acc);
  });
}

/** One line per run of `metric` against `axis`, on one y axis. */
export function compareOverlayOption(runs: readonly OverlayRun[], metric: OverlayMetric, axis: OverlayAxis): EChartsOption {
  const m = OVERLAY_METRICS[metric];
  const series: LineSeriesOption[] = runs.map((r, i) => {
    const xs = overlayXs(r.steps, axis);
    const data = r.steps.flatMap((s, j) => {
      const v = m.pick(s);
      return v === undefined || !Number.isFinite(v) ? [] : [[xs[j]!, v]];
    });
    return {
      name: r.id,
      type: 'line',
      showSymbol: data.length < 30,
      data,
      itemStyle: { color: OVERLAY_COLORS[i % OVERLAY_COLORS.length] },
    };
  });
  return {
    title: { text: m.title, left: 'center', textStyle: { fontSize: 14 } },
    tooltip: { trigger: 'axis' },
    legend: { top: 24, type: 'scroll' },
    grid: { left: 64, right: 24, top: 72, bottom: 40 },
    xAxis: {
      type: 'value',
      name: AXIS_NAMES[axis],
      nameLocation: 'middle',
      nameGap: 24,
      min: 'dataMin',
      ...(axis === 'step' ? { minInterval: 1 } : {}),
    },
    yAxis: { type: 'value', name: m.unit, scale: true },
    series,
  };
}
