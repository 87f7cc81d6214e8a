// Chart-option builders shared by the dashboard and the run report. Pure: no DOM, no Node, no
// echarts runtime (types only); each returns a plain ECharts option object. The only functions
// inside an option are renderSpanBlock (custom series); everything else is JSON.
export * from './types.js';
export { emaSmooth } from './ema.js';
export { unionIntervals, totalLength, intersectionLength, gapsIn, overlapPercent, type Interval } from './intervals.js';
export {
  lossChartOption,
  tokensPerSecondChartOption,
  gradNormChartOption,
  learningRateChartOption,
  type LossChartOptions,
} from './training.js';
export { memoryRanks, memoryChartOption, memoryScaleTop, type MemoryChartOptions } from './memory.js';
export { formatMsLabel } from './time-axis.js';
export { renderSpanBlock } from './render-block.js';
export {
  timelineLanes,
  timelineOverlapPercent,
  timelineChartOption,
  spansOfLastSteps,
  trackOf,
  type Lane,
  type Track,
  type TimelineOptions,
} from './timeline.js';
export {
  hasPipelineSpans,
  pipelineBlocks,
  pipelineBubble,
  pipelineChartOption,
  type PipelineBlock,
  type BubbleFigure,
  type PipelineChartOptions,
} from './pipeline.js';
export { commBytesByStep, commBytesChartOption, bytesMovedPerRank, type CommBytes } from './comm-bytes.js';
export { gradCompressionLine, type GradCompressionFigures } from './compression.js';
export {
  segmentsOfRows,
  latestPerStep,
  mergeSegments,
  withSegment,
  showsSegments,
  segmentStretches,
  segmentLabel,
  segmentLayout,
  segmentMachines,
  segmentRecovery,
  segmentDetailLines,
  withSegmentBands,
  type SegmentStretch,
} from './segments.js';
export { runCharts, type RunChart, type RunChartData } from './run-charts.js';
export {
  scalingSteps,
  scalingFigures,
  scalingLine,
  scalingChartOption,
  scalingVersus,
  type ScalingRun,
  type ScalingStep,
  type ScalingFigures,
} from './scaling.js';
export { COLORS, CATEGORY_COLORS, opColor, formatBytes, byteUnit } from './style.js';
export {
  advisorRows,
  advisorStepTimeChartOption,
  layoutLabel,
  STEP_TIME_PARTS,
  type AdvisorRow,
  type BarSegment,
  type RankBar,
} from './advisor-table.js';
export {
  formatError,
  measuredPeakBytes,
  measuredStepTime,
  memoryComparison,
  predictedMemoryChartOption,
  predictedStepTimeChartOption,
  stepTimeComparison,
  type ComparisonRow,
  type MeasuredStepTime,
} from './advisor-compare.js';
export {
  compareOverlayOption,
  overlayXs,
  OVERLAY_AXES,
  OVERLAY_COLORS,
  OVERLAY_METRICS,
  type OverlayAxis,
  type OverlayMetric,
  type OverlayRun,
} from './compare-overlay.js';
export { hostCpuChartOption, hostMemoryChartOption, hostMachines } from './host.js';
export { bytesTooltip, roundMs, TOOLTIP_FORMATTERS } from './tooltip-units.js';
