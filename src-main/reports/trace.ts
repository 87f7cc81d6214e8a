// A run's spans as Chrome Trace Event JSON (the format chrome://tracing and Perfetto open):
// one process per rank (pid = rank + 1, named "rank N"), one thread per track: compute
// (forward/backward per layer, optimizer), comm (collectives and p2p) and, in pipeline runs,
// "pipeline stage S" for the stage's forward/backward blocks. Complete events ('X') in
// microseconds from the run's first span. A track whose spans overlap (two bucket all-reduces
// in flight at once) gets extra threads ("comm #2"): events on one thread must nest. Device
// memory per category is a counter track of each rank ('C' events at each step's end).
// A run whose membership changed keeps one process per rank per segment ("rank 1 · segment 2
// (world 2)"): rank numbers are reused after a restart, by other processes, maybe elsewhere.
import type { Segment } from '../../common/api/elastic.js';
import { showsSegments } from '../../common/charts/index.js';
import type { Span } from '../../common/charts/types.js';
import { MEMORY_CATEGORIES } from '../../common/memory-categories.js';
import type { RunData } from '../runs/read-run.js';
import { segmentsOfRun } from './elastic-section.js';

export interface TraceEvent {
  name: string;
  ph: 'X' | 'M' | 'C';
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

export interface TraceFile {
  traceEvents: TraceEvent[];
  displayTimeUnit: 'ms';
  otherData: Record<string, unknown>;
}

/** Track (thread) of a span and its base thread id: compute 1, comm 100, pipeline stage S 200 + 100*S. */
function trackOf(s: Span): { name: string; tid: number } {
  if (s.kind === 'comm') return { name: 'comm', tid: 100 };
  if (s.stage !== undefined && (s.kind === 'forward' || s.kind === 'backward'))
    return { name: `pipeline stage ${s.stage}`, tid: 200 + 100 * s.stage };
  return { name: 'compute', tid: 1 };
}

function eventName(s: Span): string {
  if (s.kind === 'comm') {
    const b = s.labels?.bucket;
    return b !== undefined ? `${s.name} bucket ${b}` : s.name;
  }
  if (s.stage !== undefined) return `${s.kind === 'forward' ? 'F' : 'B'}${s.micro ?? ''} ${s.name}`;
  return s.kind === 'optimizer' ? 'optimizer' : `${s.kind} ${s.name}`;
}

/** pid of a (segment, rank): segment 0 is the run without segments (pid = rank + 1, as before). */
const SEGMENT_PIDS = 1000;
const pidOf = (segment: number, rank: number) => segment * SEGMENT_PIDS + rank + 1;

/**
 * The segment (1-based) each span was recorded in; all 0 when the segments show nothing. A rank's
 * spans, in time order, move to the next segment once past its start step, or when the rank goes
 * back to a step it already trained (the lost steps, trained again): a lower step, or the same
 * step's forward after its optimizer.
 */
function segmentOfSpans(spans: readonly Span[], segments: readonly Segment[]): number[] {
  if (!showsSegments(segments)) return spans.map(() => 0);
  const state = new Map<number, { k: number; max: number; optimized: boolean }>();
  const firstK = (step: number) => {
    let k = 0;
    while (k + 1 < segments.length && segments[k + 1]!.from_step < step) k++;
    return k;
  };
  return spans.map((s) => {
    let r = state.get(s.rank);
    if (!r) state.set(s.rank, (r = { k: firstK(s.step), max: s.step, optimized: false }));
    for (;;) {
      const next = segments[r.k + 1];
      if (!next || s.step <= next.from_step) break;
      const end = segments[r.k]!.to_step ?? next.from_step;
      const again = s.step < r.max || (s.step === r.max && r.optimized && s.kind === 'forward');
      if (!again && s.step <= end) break;
      r.k++;
      r.max = s.step;
      r.optimized = false;
    }
    if (s.step > r.max) {
      r.max = s.step;
      r.optimized = false;
    }
    if (s.kind === 'optimizer') r.optimized = true;
    return r.k + 1;
  });
}

export function traceOf(run: RunData): TraceFile {
  const spans = [...run.spans].sort((a, b) => a.start - b.start || b.end - a.end);
  const segments = segmentsOfRun(run);
  const segmentOf = segmentOfSpans(spans, segments);
  let t0 = Infinity;
  for (const s of spans) t0 = Math.min(t0, s.start);
  const us = (ms: number) => Math.round((ms - t0) * 1000 * 1000) / 1000; // µs, ns resolution
  const events: TraceEvent[] = [];
  const threads = new Map<string, { pid: number; tid: number; name: string }>();
  // per (rank, track): end time of each of its threads, to place overlapping spans on a free one
  const lanes = new Map<string, number[]>();
  const processes = new Map<number, { segment: number; rank: number }>();
  spans.forEach((s, i) => {
    const pid = pidOf(segmentOf[i]!, s.rank);
    processes.set(pid, { segment: segmentOf[i]!, rank: s.rank });
    const track = trackOf(s);
    const key = `${s.rank}:${track.tid}`;
    let ends = lanes.get(key);
    if (!ends) lanes.set(key, (ends = []));
    let lane = ends.findIndex((end) => end <= s.start);
    if (lane < 0) lane = ends.push(0) - 1;
    ends[lane] = s.end;
    const tid = track.tid + lane;
    if (!threads.has(`${pid}:${tid}`))
      threads.set(`${pid}:${tid}`, { pid, tid, name: lane === 0 ? track.name : `${track.name} #${lane + 1}` });
    const args: Record<string, unknown> = { step: s.step };
    if (s.micro !== undefined) args.micro = s.micro;
    if (s.stage !== undefined) args.stage = s.stage;
    if (s.bytes !== undefined) args.bytes = s.bytes;
    if (s.labels) Object.assign(args, s.labels);
    events.push({ name: eventName(s), cat: s.kind, ph: 'X', pid, tid, ts: us(s.start), dur: Math.max(0, us(s.end) - us(s.start)), args });
  });
  // device memory per rank as counter tracks, sampled at the end of each step's last span (of the
  // segment that recorded the step last: metrics.jsonl keeps a lost step's retrained row)
  const stepEnd = new Map<string, { end: number; pid: number }>();
  spans.forEach((s, i) => {
    const key = `${s.rank}:${s.step}`;
    const pid = pidOf(segmentOf[i]!, s.rank);
    const had = stepEnd.get(key);
    if (!had || pid > had.pid || (pid === had.pid && s.end > had.end)) stepEnd.set(key, { end: s.end, pid });
  });
  for (const m of run.steps) {
    for (const [rank, bytes] of Object.entries(m.memory ?? {})) {
      const at = stepEnd.get(`${rank}:${m.step}`);
      if (at === undefined) continue;
      const args = Object.fromEntries(MEMORY_CATEGORIES.filter((c) => typeof bytes[c] === 'number').map((c) => [c, bytes[c]!]));
      events.push({ name: 'device memory (bytes)', ph: 'C', pid: at.pid, tid: 0, ts: us(at.end), args });
    }
  }
  const meta: TraceEvent[] = [...processes]
    .sort(([a], [b]) => a - b)
    .flatMap(([pid, p]) => {
      const world = segments[p.segment - 1]?.world;
      const name = p.segment === 0 ? `rank ${p.rank}` : `rank ${p.rank} · segment ${p.segment} (world ${world})`;
      return [
        { name: 'process_name', ph: 'M' as const, pid, tid: 0, args: { name } },
        { name: 'process_sort_index', ph: 'M' as const, pid, tid: 0, args: { sort_index: pid - 1 } },
      ];
    });
  for (const t of [...threads.values()].sort((a, b) => a.pid - b.pid || a.tid - b.tid)) {
    meta.push({ name: 'thread_name', ph: 'M', pid: t.pid, tid: t.tid, args: { name: t.name } });
    meta.push({ name: 'thread_sort_index', ph: 'M', pid: t.pid, tid: t.tid, args: { sort_index: t.tid } });
  }
  return {
    traceEvents: [...meta, ...events],
    displayTimeUnit: 'ms',
    otherData: {
      run_dir: run.dir,
      strategy: run.config.parallel?.strategy ?? 'single',
      world: run.config.parallel?.world ?? 1,
      ...(showsSegments(segments)
        ? { segments: segments.map((g) => ({ from_step: g.from_step, world: g.world, strategy: g.strategy, reason: g.reason })) }
        : {}),
      clock: 'microseconds from the first span of the run',
      ...(Number.isFinite(t0) ? { t0_epoch_ms: t0 } : {}),
    },
  };
}
