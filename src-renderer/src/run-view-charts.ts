// The charts of the run view: common/charts' runCharts (the same set as the HTML report) over
// what the store holds, with the loss re-smoothed at the user's slider, and while the run is
// live the formula's Ψ taken from the run's state (the summary, which holds it, comes at the end);
// the step charts band by membership segment.
import { type RunChart, runCharts } from '../../common/charts/index.js';
import { runSegments } from './membership';
import type { RunData } from './stores/run';

export function runViewCharts(d: RunData, smoothing: number): RunChart[] {
  if (!d.detail) return [];
  const params = d.detail.state.params;
  const summary = d.detail.summary ?? (typeof params === 'number' ? { params } : null);
  return runCharts({
    config: d.detail.config as never,
    state: d.detail.state,
    summary,
    steps: d.steps,
    evals: d.evals,
    spans: d.spans,
    prediction: d.detail.prediction ?? null,
    segments: runSegments(d),
    lossSmoothing: smoothing,
  });
}

/** Mean step time of the last `n` steps (ms), for the ETA. */
export function recentStepMs(d: RunData, n = 10): number | null {
  const xs = d.steps
    .slice(-n)
    .map((s) => s.step_ms)
    .filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

// one definition with the report's training and wall times
export { formatDuration } from '../../common/run-time.js';
