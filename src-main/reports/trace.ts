// A run's spans as Chrome Trace Event JSON (the format chrome://tracing and Perfetto open):
// one process per rank (pid = rank + 1, named "rank N"), one thread per track: compute
// (forward/backward per layer, optimizer), comm (collectives and p2p) and, in pipeline runs,
// "pipeline stage S" for the stage's forward/backward blocks. Complete events ('X') in
// microseconds from the run's first span. A track whose spans overlap (two bucket all-reduces
// in flight at once) gets extra threads ("comm #2"): events on one thread must nest. Device
// memory per category is a counter track of each rank ('C' events at each step's end).
import type { Span } from '../../common/charts/types.js';
import { MEMORY_CATEGORIES } from '../../common/memory.js';
import type { RunData } from '../runs/read-run.js';

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

export function traceOf(run: RunData): TraceFile {
  const spans = [...run.spans].sort((a, b) => a.start - b.start || b.end - a.end);
  let t0 = Infinity;
  for (const s of spans) t0 = Math.min(t0, s.start);
  const us = (ms: number) => Math.round((ms - t0) * 1000 * 1000) / 1000; // µs, ns resolution
  const events: TraceEvent[] = [];
  const threads = new Map<string, { pid: number; tid: number; name: string }>();
  // per (rank, track): end time of each of its threads, to place overlapping spans on a free one
  const lanes = new Map<string, number[]>();
  for (const s of spans) {
    const pid = s.rank + 1;
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
  }
  // device memory per rank as counter tracks, sampled at the end of each step's last span
  const stepEnd = new Map<string, number>();
  for (const s of spans) stepEnd.set(`${s.rank}:${s.step}`, Math.max(stepEnd.get(`${s.rank}:${s.step}`) ?? -Infinity, s.end));
  for (const m of run.steps) {
    for (const [rank, bytes] of Object.entries(m.memory ?? {})) {
      const end = stepEnd.get(`${rank}:${m.step}`);
      if (end === undefined) continue;
      const args = Object.fromEntries(MEMORY_CATEGORIES.filter((c) => typeof bytes[c] === 'number').map((c) => [c, bytes[c]!]));
      events.push({ name: 'device memory (bytes)', ph: 'C', pid: Number(rank) + 1, tid: 0, ts: us(end), args });
    }
  }
  const ranks = [...new Set(spans.map((s) => s.rank))].sort((a, b) => a - b);
  const meta: TraceEvent[] = ranks.flatMap((r) => [
    { name: 'process_name', ph: 'M' as const, pid: r + 1, tid: 0, args: { name: `rank ${r}` } },
    { name: 'process_sort_index', ph: 'M' as const, pid: r + 1, tid: 0, args: { sort_index: r } },
  ]);
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
      clock: 'microseconds from the first span of the run',
      ...(Number.isFinite(t0) ? { t0_epoch_ms: t0 } : {}),
    },
  };
}
