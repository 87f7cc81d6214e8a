// Every chart of a run, as the report shows them (common/charts builds the options): training
// curves, device memory per rank against the formula, the compute/comm timeline, the pipeline
// chart when the spans carry stages, bytes per collective.
import {
  commBytesChartOption,
  gradNormChartOption,
  hasPipelineSpans,
  learningRateChartOption,
  lossChartOption,
  memoryChartOption,
  memoryRanks,
  pipelineChartOption,
  timelineChartOption,
  timelineLanes,
  tokensPerSecondChartOption,
} from '../../common/charts/index.js';
import { modelStateTotal, predictModelStateBytes } from '../../common/model-state.js';
import type { RunData } from '../runs/read-run.js';

export interface ReportChart {
  id: string;
  section: 'training' | 'memory' | 'timeline' | 'pipeline' | 'communication';
  /** px */
  height: number;
  /** half width (two per row) */
  half: boolean;
  option: object;
}

export function reportCharts(run: RunData): ReportChart[] {
  const charts: ReportChart[] = [];
  const add = (id: string, section: ReportChart['section'], option: object | null, height = 320, half = true) => {
    if (option) charts.push({ id, section, option, height, half });
  };
  if (run.steps.length > 0) {
    add('loss', 'training', lossChartOption(run.steps, run.evals));
    add('tokens-per-s', 'training', tokensPerSecondChartOption(run.steps));
    add('grad-norm', 'training', gradNormChartOption(run.steps));
    add('learning-rate', 'training', learningRateChartOption(run.steps));
  }
  const par = run.config.parallel ?? { strategy: 'single', world: 1 };
  const params = typeof run.summary?.params === 'number' ? run.summary.params : null;
  for (const rank of memoryRanks(run.steps)) {
    const predicted =
      params === null ? null : predictModelStateBytes({ strategy: par.strategy, world: par.world, params, rank, offloadOptimizer: par.offload_optimizer === 'cpu' });
    const peak = run.summary?.peak_bytes?.[String(rank)]?.total;
    add(`memory-rank-${rank}`, 'memory', memoryChartOption(rank, run.steps, { predicted: predicted ? modelStateTotal(predicted) : null, ...(typeof peak === 'number' ? { peak } : {}) }), 340);
  }
  if (run.spans.length > 0) {
    const lanes = timelineLanes(run.spans).length;
    const overlap = typeof run.summary?.overlap_pct === 'number' ? run.summary.overlap_pct : undefined;
    add('timeline', 'timeline', timelineChartOption(run.spans, overlap === undefined ? {} : { overlapPct: overlap }), 160 + 36 * lanes, false);
    if (hasPipelineSpans(run.spans)) {
      const stages = new Set(run.spans.map((s) => s.stage).filter((s) => s !== undefined)).size;
      add('pipeline', 'pipeline', pipelineChartOption(run.spans), 180 + 44 * stages, false);
    }
    if (run.spans.some((s) => s.kind === 'comm' && typeof s.bytes === 'number')) add('comm-bytes', 'communication', commBytesChartOption(run.spans), 320, false);
  }
  return charts;
}
