// The pipeline chart: stages x time, one block per (stage, micro-batch, forward|backward) of each
// step, idle time shaded as bubbles, and the measured bubble fraction of each stage beside the
// theory, (p-1)/(m+p-1) for p stages and m micro-batches.
//
// Span fields it expects (spans.jsonl of a pipeline run; see types.ts):
//   { kind: 'forward' | 'backward', stage: s, micro: i, rank: r, step: k, start, end, name }
// One stage may log several spans per micro-batch (one per layer): a block is their extent.
// Where several ranks run one stage (data or tensor parallel replicas), the lowest rank's
// spans stand for the stage. Bubble of a stage in a step = the time inside the step's window
// (first pipeline span start to last end, over all stages) the stage spent outside its
// blocks; the measured fraction sums bubbles and windows over the steps.
import type { CustomSeriesOption, EChartsOption } from 'echarts';
import { gapsIn, totalLength, unionIntervals, type Interval } from './intervals.js';
import { renderSpanBlock } from './render-block.js';
import { COLORS, percent } from './style.js';
import { timeAxis, timeZoom } from './time-axis.js';
import type { Span } from './types.js';
import { roundMs } from './tooltip-units.js';

type PipelineSpan = Span & { stage: number; micro: number; kind: 'forward' | 'backward' };

const isPipelineSpan = (s: Span): s is PipelineSpan =>
  (s.kind === 'forward' || s.kind === 'backward') && Number.isInteger(s.stage) && Number.isInteger(s.micro);

/** True when the spans describe a pipeline (they carry `stage` and `micro`): the pipeline chart applies. */
export const hasPipelineSpans = (spans: readonly Span[]): boolean => spans.some(isPipelineSpan);

export interface PipelineBlock {
  stage: number;
  micro: number;
  kind: 'forward' | 'backward';
  step: number;
  start: number;
  end: number;
}

/** Blocks per (step, stage, micro, kind) of the stage's lowest rank, ordered by start. */
export function pipelineBlocks(spans: readonly Span[]): PipelineBlock[] {
  const ps = spans.filter(isPipelineSpan);
  const rankOfStage = new Map<number, number>();
  for (const s of ps) rankOfStage.set(s.stage, Math.min(rankOfStage.get(s.stage) ?? Infinity, s.rank));
  const blocks = new Map<string, PipelineBlock>();
  for (const s of ps) {
    if (rankOfStage.get(s.stage) !== s.rank) continue;
    const k = `${s.step}:${s.stage}:${s.micro}:${s.kind}`;
    const b = blocks.get(k);
    if (b) {
      b.start = Math.min(b.start, s.start);
      b.end = Math.max(b.end, s.end);
    } else blocks.set(k, { stage: s.stage, micro: s.micro, kind: s.kind, step: s.step, start: s.start, end: s.end });
  }
  return [...blocks.values()].sort((a, b) => a.start - b.start);
}

export interface BubbleFigure {
  /** the stages, ascending */
  stages: number[];
  /** measured idle fraction per stage (same order), in [0, 1] */
  measured: number[];
  /** (p-1)/(m+p-1) */
  theory: number;
  p: number;
  m: number;
  /** idle intervals per stage (for shading) */
  bubbles: { stage: number; step: number; start: number; end: number }[];
}

export function pipelineBubble(spans: readonly Span[]): BubbleFigure {
  const blocks = pipelineBlocks(spans);
  const stages = [...new Set(blocks.map((b) => b.stage))].sort((a, b) => a - b);
  const byStep = new Map<number, PipelineBlock[]>();
  for (const b of blocks) {
    let g = byStep.get(b.step);
    if (!g) byStep.set(b.step, (g = []));
    g.push(b);
  }
  const idle = new Map(stages.map((s) => [s, 0]));
  let windows = 0;
  let m = 0;
  const bubbles: BubbleFigure['bubbles'] = [];
  for (const [step, inStep] of [...byStep.entries()].sort(([a], [b]) => a - b)) {
    const window: Interval = { start: Infinity, end: -Infinity };
    const byStage = new Map<number, PipelineBlock[]>();
    for (const b of inStep) {
      window.start = Math.min(window.start, b.start);
      window.end = Math.max(window.end, b.end);
      let g = byStage.get(b.stage);
      if (!g) byStage.set(b.stage, (g = []));
      g.push(b);
    }
    windows += window.end - window.start;
    m = Math.max(m, new Set(inStep.map((b) => b.micro)).size);
    for (const stage of stages) {
      const gaps = gapsIn(window, unionIntervals(byStage.get(stage) ?? []));
      idle.set(stage, idle.get(stage)! + totalLength(gaps));
      for (const g of gaps) bubbles.push({ stage, step, ...g });
    }
  }
  const p = stages.length;
  return {
    stages,
    measured: stages.map((s) => (windows > 0 ? idle.get(s)! / windows : 0)),
    theory: p > 0 && m > 0 ? (p - 1) / (m + p - 1) : 0,
    p,
    m,
    bubbles,
  };
}

export interface PipelineChartOptions {
  /** steps shown when the chart opens (the last ones); default 1 */
  initialSteps?: number;
}

/** Null when the spans carry no pipeline fields (not a pipeline run). */
export function pipelineChartOption(spans: readonly Span[], opts: PipelineChartOptions = {}): EChartsOption | null {
  const blocks = pipelineBlocks(spans);
  if (blocks.length === 0) return null;
  const fig = pipelineBubble(spans);
  const lane = new Map(fig.stages.map((s, i) => [s, i]));
  let t0 = Infinity;
  for (const b of blocks) t0 = Math.min(t0, b.start);
  const datum = (b: { stage: number; step: number; start: number; end: number }, label: number, name: string) => ({
    name,
    value: [lane.get(b.stage)!, roundMs(b.start - t0), roundMs(b.end - t0), b.step, label],
  });
  const series: CustomSeriesOption[] = (['forward', 'backward'] as const).map((kind) => ({
    name: kind,
    type: 'custom',
    renderItem: renderSpanBlock,
    itemStyle: { color: kind === 'forward' ? COLORS.forward : COLORS.backward },
    encode: { x: [1, 2], y: 0, tooltip: [1, 2] },
    dimensions: ['stage', 'start (ms)', 'end (ms)', 'step', 'micro'],
    data: blocks
      .filter((b) => b.kind === kind)
      .map((b) => datum(b, b.micro, `step ${b.step} · stage ${b.stage} · ${kind} micro-batch ${b.micro}`)),
  }));
  series.push({
    name: 'bubble (idle)',
    type: 'custom',
    renderItem: renderSpanBlock,
    itemStyle: { color: COLORS.bubble },
    encode: { x: [1, 2], y: 0, tooltip: [1, 2] },
    dimensions: ['stage', 'start (ms)', 'end (ms)', 'step', 'label'],
    data: fig.bubbles.map((b) => datum(b, -1, `step ${b.step} · stage ${b.stage} idle`)),
    z: 1,
  });
  const steps = [...new Set(blocks.map((b) => b.step))].sort((a, b) => a - b);
  const from = steps[Math.max(0, steps.length - (opts.initialSteps ?? 1))]!;
  let startValue = Infinity;
  for (const b of blocks) if (b.step === from) startValue = Math.min(startValue, b.start - t0);
  const measured = fig.stages.map((s, i) => `stage ${s} ${percent(fig.measured[i]!)}`).join(' · ');
  return {
    title: {
      text: `Pipeline: ${fig.p} stages x ${fig.m} micro-batches`,
      subtext: `bubble measured: ${measured}\ntheory (p-1)/(m+p-1) = ${fig.p - 1}/${fig.m + fig.p - 1} = ${percent(fig.theory)}`,
      left: 'center',
      textStyle: { fontSize: 14 },
      subtextStyle: { lineHeight: 16 },
    },
    tooltip: { trigger: 'item' },
    legend: { top: 74 },
    grid: { left: 150, right: 24, top: 108, bottom: 70 },
    xAxis: timeAxis(),
    yAxis: {
      type: 'category',
      inverse: true,
      axisTick: { show: false },
      data: fig.stages.map((s, i) => `stage ${s} · idle ${percent(fig.measured[i]!)}`),
    },
    dataZoom: timeZoom(startValue),
    series,
  };
}
