// The training curves: loss (raw, EMA-smoothed, validation), tokens/s, gradient norm and
// learning rate, each against the optimizer step.
import type { EChartsOption, LineSeriesOption } from 'echarts';
import { emaSmooth } from './ema.js';
import { COLORS, stepLineFrame } from './style.js';
import type { EvalMetric, StepMetric } from './types.js';

export interface LossChartOptions {
  /** EMA weight in [0, 1) (TensorBoard's slider); default 0.6 */
  smoothing?: number;
}

/** Raw loss (faint), its EMA (bold) and the validation loss per eval step. */
export function lossChartOption(
  steps: readonly StepMetric[],
  evals: readonly EvalMetric[] = [],
  opts: LossChartOptions = {},
): EChartsOption {
  const smoothing = opts.smoothing ?? 0.6;
  const xs = steps.map((s) => s.step);
  const raw = steps.map((s) => s.loss);
  const smooth = emaSmooth(raw, smoothing);
  const series: LineSeriesOption[] = [
    {
      name: 'loss',
      type: 'line',
      showSymbol: false,
      data: xs.map((x, i) => [x, raw[i]!]),
      lineStyle: { width: 1, opacity: 0.35 },
      itemStyle: { color: COLORS.loss },
    },
    {
      name: `loss (EMA ${smoothing})`,
      type: 'line',
      showSymbol: false,
      data: xs.map((x, i) => [x, smooth[i]!]),
      lineStyle: { width: 2 },
      itemStyle: { color: COLORS.smoothed },
    },
  ];
  if (evals.length > 0) {
    series.push({
      name: 'validation loss',
      type: 'line',
      symbol: 'circle',
      symbolSize: 6,
      data: evals.map((e) => [e.step, e.val_loss]),
      itemStyle: { color: COLORS.val },
    });
  }
  return { ...stepLineFrame('Loss', 'cross-entropy'), legend: { top: 30 }, grid: { left: 64, right: 24, top: 80, bottom: 40 }, series };
}

function metricLine(
  title: string,
  yName: string,
  color: string,
  steps: readonly StepMetric[],
  pick: (s: StepMetric) => number | undefined,
): EChartsOption {
  const data = steps.flatMap((s) => {
    const v = pick(s);
    return v === undefined || !Number.isFinite(v) ? [] : [[s.step, v]];
  });
  return { ...stepLineFrame(title, yName), series: [{ name: title, type: 'line', showSymbol: false, data, itemStyle: { color } }] };
}

export const tokensPerSecondChartOption = (steps: readonly StepMetric[]): EChartsOption =>
  metricLine('Throughput', 'tokens/s', COLORS.tokens, steps, (s) => s.tokens_per_s);

export const gradNormChartOption = (steps: readonly StepMetric[]): EChartsOption =>
  metricLine('Gradient norm', 'global L2 (before clipping)', COLORS.gradNorm, steps, (s) => s.grad_norm);

export const learningRateChartOption = (steps: readonly StepMetric[]): EChartsOption =>
  metricLine('Learning rate', 'lr', COLORS.lr, steps, (s) => s.lr);
