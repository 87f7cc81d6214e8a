// Every chart of a run, in the order the report (and the dashboard's past-run view) shows
// them: training curves, device memory per rank against the formula, the compute/comm
// timeline, the pipeline chart when the spans carry stages, bytes per collective, and for a run
// launched with the advisor's prediction beside it, predicted against measured.
import type { EChartsOption } from 'echarts';
import type { Segment } from '../api/elastic.js';
import type { RunPrediction } from '../api/prediction.js';
import type { GptConfig } from '../model-layout.js';
import { strategyOf } from '../strategies.js';
import { modelStatePadding, modelStateTotal, predictModelStateBytes, vocabFromParams } from '../model-state.js';
import { rankRoles, roleLabel, type TopologyInput } from '../topology.js';
import {
  measuredStepTime,
  memoryComparison,
  predictedMemoryChartOption,
  predictedStepTimeChartOption,
  stepTimeComparison,
} from './advisor-compare.js';
import { commBytesChartOption } from './comm-bytes.js';
import { memoryChartOption, memoryRanks, memoryScaleTop } from './memory.js';
import { hasPipelineSpans, pipelineChartOption } from './pipeline.js';
import { precisionOrDefault } from '../precision.js';
import { scalingChartOption, scalingFigures, scalingSteps } from './scaling.js';
import { withSegmentBands } from './segments.js';
import { timelineChartOption, timelineLanes } from './timeline.js';
import { gradNormChartOption, learningRateChartOption, lossChartOption, tokensPerSecondChartOption } from './training.js';
import type { EvalMetric, Span, StepMetric } from './types.js';

/** What the charts of a run read: the run folder's files (src-main/runs/read-run.ts) or the live stream. */
export interface RunChartData {
  /** config.json (its `parallel` block: strategy, world, offload_optimizer, the tp/pp/dp grid; its model sizes) */
  config: {
    parallel?: { strategy?: string; world?: number; offload_optimizer?: string; tp?: number; pp?: number; dp?: number };
    model?: Partial<Pick<GptConfig, 'n_layer' | 'd_model' | 'block_size'>>;
    /** fp32 (absent), bf16 or fp16: the formula follows it */
    precision?: string;
  } & TopologyInput['config'];
  /** state.json's placement and ranks (where each rank runs), when known */
  state?: TopologyInput['state'];
  /** summary.json, null while running (params, peak_bytes, overlap_pct) */
  summary: Record<string, any> | null;
  steps: readonly StepMetric[];
  evals: readonly EvalMetric[];
  spans: readonly Span[];
  /** prediction.json: what the advisor predicted for this run's layout, when the controller wrote one */
  prediction?: RunPrediction | null;
  /** membership segments (metrics.jsonl's segment rows): the step charts band by them */
  segments?: readonly Segment[];
  /** the loss chart's EMA weight (the dashboard's slider); default lossChartOption's */
  lossSmoothing?: number;
}

export interface RunChart {
  id: string;
  section: 'training' | 'memory' | 'prediction' | 'timeline' | 'pipeline' | 'communication';
  /** suggested height in px (lane charts grow with their lanes) */
  height: number;
  /** charts of the section side by side: 1 (full width), 2, or 4 (memory small multiples) */
  columns: 1 | 2 | 4;
  option: EChartsOption;
}

export function runCharts(run: RunChartData): RunChart[] {
  const charts: RunChart[] = [];
  const add = (id: string, section: RunChart['section'], option: EChartsOption | null, height = 320, columns: RunChart['columns'] = 2) => {
    if (option) charts.push({ id, section, option, height, columns });
  };
  if (run.steps.length > 0) {
    add('loss', 'training', lossChartOption(run.steps, run.evals, run.lossSmoothing === undefined ? {} : { smoothing: run.lossSmoothing }));
    add('tokens-per-s', 'training', tokensPerSecondChartOption(run.steps));
    add('grad-norm', 'training', gradNormChartOption(run.steps));
    add('learning-rate', 'training', learningRateChartOption(run.steps));
  }
  const par = run.config.parallel ?? {};
  const params = typeof run.summary?.params === 'number' ? run.summary.params : null;
  const strategy = par.strategy ?? 'single';
  const m = run.config.model;
  // tp, pp and 3d predict from the tensors: the model's sizes and its vocabulary (the state's, else
  // the one its Ψ implies, already padded: then the line cannot name the padding)
  const sizes = m && m.n_layer && m.d_model && m.block_size ? { n_layer: m.n_layer, d_model: m.d_model, block_size: m.block_size } : null;
  const stateVocab = typeof run.state?.vocab_size === 'number' ? run.state.vocab_size : null;
  const vocab = sizes && params !== null ? (stateVocab ?? vocabFromParams(sizes, strategy, par.tp ?? par.world ?? 1, params)) : null;
  const model = sizes && vocab !== null ? { ...sizes, vocab_size: vocab } : undefined;
  const ranks = memoryRanks(run.steps);
  const precision = precisionOrDefault(run.config.precision);
  const queryOf = (rank: number) =>
    params === null
      ? null
      : {
          strategy,
          world: par.world ?? 1,
          params,
          rank,
          offloadOptimizer: par.offload_optimizer === 'cpu',
          precision,
          ...(model ? { model } : {}),
          ...(par.tp ? { tp: par.tp } : {}),
          ...(par.pp ? { pp: par.pp } : {}),
          ...(par.dp ? { dp: par.dp } : {}),
        };
  const predicted = new Map(
    ranks.map((rank) => {
      const q = queryOf(rank);
      const p = q && predictModelStateBytes(q);
      return [rank, p ? { total: modelStateTotal(p), padding: modelStatePadding(q) } : null];
    }),
  );
  const peakOf = (rank: number): number | undefined => {
    const p = run.summary?.peak_bytes?.[String(rank)]?.total;
    return typeof p === 'number' ? p : undefined;
  };
  // several ranks are small multiples on one scale; from 4 ranks, four to a row, each subtitled by its role
  const several = ranks.length > 1;
  const compact = ranks.length >= 4;
  const scaleTop = several ? memoryScaleTop(run.steps, [...ranks.map(peakOf), ...[...predicted.values()].map((p) => p?.total)]) : undefined;
  const roles = compact ? new Map(rankRoles({ ...run, summary: run.summary ?? null }).map((r) => [r.rank, roleLabel(r)])) : null;
  for (const rank of ranks) {
    const peak = peakOf(rank);
    const role = roles?.get(rank);
    add(
      `memory-rank-${rank}`,
      'memory',
      memoryChartOption(rank, run.steps, {
        predicted: predicted.get(rank)?.total ?? null,
        precision,
        padding: predicted.get(rank)?.padding ?? [],
        ...(peak !== undefined ? { peak } : {}),
        ...(scaleTop !== undefined ? { scaleTop } : {}),
        ...(compact ? { compact: true } : {}),
        ...(role ? { role } : {}),
      }),
      compact ? 310 : 340,
      compact ? 4 : 2,
    );
  }
  if (run.prediction && run.steps.length > 0) {
    const plan = run.prediction.plan;
    const measured = measuredStepTime(run.steps, run.spans, strategyOf(strategy)?.pipelined ?? false);
    add('prediction-time', 'prediction', predictedStepTimeChartOption(stepTimeComparison(plan, measured), measured?.steps ?? 0));
    const byRank = memoryComparison(plan, run.summary, run.steps);
    for (const r of byRank)
      add(
        `prediction-memory-rank-${r.rank}`,
        'prediction',
        predictedMemoryChartOption(r.rank, r.device, r.rows, byRank.length >= 4),
        byRank.length >= 4 ? 280 : 320,
        byRank.length >= 4 ? 4 : 2,
      );
  }
  if (run.spans.length > 0) {
    const machines = Object.fromEntries((run.state?.ranks ?? []).map((r) => [r.rank, r.machine]));
    const lanes = timelineLanes(run.spans, machines).length;
    const overlap = typeof run.summary?.overlap_pct === 'number' ? run.summary.overlap_pct : undefined;
    add(
      'timeline',
      'timeline',
      timelineChartOption(run.spans, { machines, ...(overlap === undefined ? {} : { overlapPct: overlap }) }),
      160 + 36 * lanes,
      1,
    );
    if (hasPipelineSpans(run.spans)) {
      const stages = new Set(run.spans.map((s) => s.stage).filter((s) => s !== undefined)).size;
      add('pipeline', 'pipeline', pipelineChartOption(run.spans), 180 + 44 * stages, 1);
    }
    if (run.spans.some((s) => s.kind === 'comm' && typeof s.bytes === 'number'))
      add('comm-bytes', 'communication', commBytesChartOption(run.spans), 320, 1);
    // several ranks: the step against its exposed communication, and the scaling efficiency
    const rows = scalingSteps(run.steps, run.spans);
    const scaling = scalingFigures(par.world ?? 1, rows);
    if (scaling) add('scaling', 'communication', scalingChartOption(rows, scaling), 340, 1);
  }
  const segments = run.segments ?? [];
  if (segments.length > 0) {
    const lastStep = run.steps.reduce((m, s) => Math.max(m, s.step), 0);
    for (const c of charts) c.option = withSegmentBands(c.option, segments, lastStep);
  }
  return charts;
}
