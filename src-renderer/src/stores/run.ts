// One run's data for the run view and the comparison: detail, steps, evals, spans, logs. Past
// runs load once from the run folder (runs.get / metrics / spans / logs); a live run then
// follows its event stream. The arrays are plain (not deeply reactive: thousands of spans),
// and `version` bumps at most once per animation frame, which is what the charts watch.
// A live run keeps only the spans of its last LIVE_SPAN_STEPS steps in memory.
import { defineStore } from 'pinia';
import { markRaw, shallowRef } from 'vue';
import { type ApiError, type LogRow, type RunDetail, type RunEvent, type ShardwiseApi, type SpanRow } from '../../../common/api/index.js';
import type { Segment } from '../../../common/api/elastic.js';
import { type EvalMetric, latestPerStep, segmentsOfRows, type Span, type StepMetric, withSegment } from '../../../common/charts/index.js';
import { useApi } from '../api/connection';

export const LIVE_SPAN_STEPS = 4;
/** charts of a live run redraw at most this often (and never more than once per frame) */
export const LIVE_REDRAW_MS = 250;
const MAX_LOGS = 500;
const LIVE = new Set(['starting', 'running']);

export interface RunData {
  detail: RunDetail | null;
  steps: StepMetric[];
  evals: EvalMetric[];
  spans: Span[];
  spansTruncated: boolean;
  logs: LogRow[];
  /** membership segments (metrics.jsonl's segment rows, live through the stream), in step order */
  segments: Segment[];
}

export type LoadError = { kind: 'not-found' | 'error'; message: string };

/** A run's data and its live stream; `id` names the store (several runs may be open: compare). */
export function useRunStore(id: string) {
  return defineStore(`run:${id}`, () => {
    const data = shallowRef<RunData>(
      markRaw({ detail: null, steps: [], evals: [], spans: [], spansTruncated: false, logs: [], segments: [] }),
    );
    const version = shallowRef(0);
    const error = shallowRef<LoadError | null>(null);
    const loading = shallowRef(true);
    let unsubscribe: (() => Promise<void>) | null = null;
    let frame = 0;
    let waiting: ReturnType<typeof setTimeout> | undefined;
    let lastRedraw = 0;
    const bump = () => {
      if (frame || waiting) return;
      const wait = lastRedraw + LIVE_REDRAW_MS - performance.now();
      const draw = () => {
        waiting = undefined;
        frame = requestAnimationFrame(() => {
          frame = 0;
          lastRedraw = performance.now();
          version.value++;
        });
      };
      if (wait > 0) waiting = setTimeout(draw, wait);
      else draw();
    };

    const isLive = () => LIVE.has(data.value.detail?.state.status ?? '');

    async function fetchSpans(api: ShardwiseApi, live: boolean) {
      const d = data.value;
      const last = d.steps.length ? d.steps[d.steps.length - 1]!.step : 0;
      const r = await api.call(
        'runs.spans',
        live ? { runId: id, fromStep: Math.max(0, last - LIVE_SPAN_STEPS + 1) } : { runId: id, limit: 200_000 },
      );
      d.spans = r.spans as Span[];
      d.spansTruncated = r.truncated;
    }

    async function fetchMetrics(api: ShardwiseApi) {
      const rows = (await api.call('runs.metrics', { runId: id })).rows;
      const d = data.value;
      // a lost step trained again has two rows: the later wins, as in the report
      d.steps = latestPerStep(rows.filter((r) => r.type === 'step') as StepMetric[]);
      d.evals = latestPerStep(rows.filter((r) => r.type === 'eval') as unknown as EvalMetric[]);
      d.segments = segmentsOfRows(rows);
    }

    async function load() {
      loading.value = true;
      error.value = null;
      await stop();
      try {
        const api = await useApi();
        const detail = await api.call('runs.get', { runId: id });
        data.value = markRaw({ detail, steps: [], evals: [], spans: [], spansTruncated: false, logs: [], segments: [] });
        await fetchMetrics(api);
        await fetchSpans(api, isLive());
        data.value.logs = (await api.call('runs.logs', { runId: id, limit: 200 })).lines;
        if (isLive()) unsubscribe = await api.subscribe(id, (e) => onEvent(api, e));
      } catch (e) {
        const err = e as ApiError;
        error.value = { kind: err.name === 'NotFound' ? 'not-found' : 'error', message: err.message };
      } finally {
        loading.value = false;
        version.value++;
      }
    }

    function onEvent(api: ShardwiseApi, e: RunEvent) {
      const d = data.value;
      switch (e.type) {
        case 'snapshot':
          d.detail = { ...d.detail!, state: e.snapshot.state };
          if (e.snapshot.dropped > 0) void fetchMetrics(api).then(bump); // we fell behind: refetch
          break;
        case 'state':
          d.detail = { ...d.detail!, state: e.state };
          if (!LIVE.has(e.state.status)) void finish(api);
          break;
        case 'step': {
          const last = d.steps[d.steps.length - 1];
          if (!last || e.row.step > last.step) d.steps.push(e.row as StepMetric);
          // state events come on status changes only: progress follows the steps
          if (d.detail && e.row.step > d.detail.state.step) d.detail = { ...d.detail, state: { ...d.detail.state, step: e.row.step } };
          break;
        }
        case 'eval':
          d.evals.push(e.row as unknown as EvalMetric);
          break;
        case 'segment':
          d.segments = withSegment(d.segments, e.row.segment);
          // the new segment trains again from its from_step: its steps replace the lost ones
          if (d.steps.length && d.steps[d.steps.length - 1]!.step > e.row.segment.from_step)
            d.steps = d.steps.filter((s) => s.step <= e.row.segment.from_step);
          break;
        case 'spans': {
          for (const s of e.spans as SpanRow[]) d.spans.push(s as Span);
          // keep the last steps only: a live timeline of 8 ranks stays small
          const keepFrom = e.step - LIVE_SPAN_STEPS + 1;
          if (d.spans.length && d.spans[0]!.step < keepFrom) d.spans = d.spans.filter((s) => s.step >= keepFrom);
          break;
        }
        case 'log':
          d.logs.push({ time: e.time, level: e.level, message: e.message, ...(e.rank !== undefined ? { rank: e.rank } : {}) });
          if (d.logs.length > MAX_LOGS) d.logs.splice(0, d.logs.length - MAX_LOGS);
          break;
        case 'summary':
          d.detail = { ...d.detail!, summary: e.summary };
          break;
        default:
          break;
      }
      bump();
    }

    /** The run ended: the full picture from its folder (summary, every span). */
    async function finish(api: ShardwiseApi) {
      await stop();
      try {
        data.value.detail = await api.call('runs.get', { runId: id });
        await fetchMetrics(api);
        await fetchSpans(api, false);
      } catch {
        // the stream already told the end; the folder view is a refinement
      }
      version.value++;
    }

    async function stop() {
      const u = unsubscribe;
      unsubscribe = null;
      await u?.().catch(() => undefined);
    }

    return { data, version, error, loading, load, stop, isLive };
  })();
}
