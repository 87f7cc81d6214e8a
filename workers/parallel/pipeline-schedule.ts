// Pipeline schedules as data (Megatron's schedule factory, without the model): for p stages
// and m micro-batches, each stage gets its ordered list of actions. A compute action is
// surrounded by the point-to-point transfers it needs:
//   forward i : recv-act i from stage-1 (not on the first stage), F i, send-act i to stage+1 (not on the last)
//   backward i: recv-grad i from stage+1 (not on the last stage), B i, send-grad i to stage-1 (not on the first)
// Sends never block (they are handed to the socket); a recv waits for its matching send.
// GPipe: all forwards, then all backwards (m activation slots per stage).
// 1F1B (PipeDream-Flush): warm-up of p-stage-1 forwards, then one forward / one backward, then
// the cool-down backwards: at most min(p-stage, m) micro-batches in flight per stage.

import { partitionByCost } from '../../common/model-layout.js';
import type { StageRange } from '../model/stage.js';

export type PipelineSchedule = 'gpipe' | '1f1b';

export type PipelineAction =
  | { op: 'forward'; micro: number }
  | { op: 'backward'; micro: number }
  | { op: 'recv-act'; micro: number; peer: number }
  | { op: 'send-act'; micro: number; peer: number }
  | { op: 'recv-grad'; micro: number; peer: number }
  | { op: 'send-grad'; micro: number; peer: number };

/** The compute order of one stage: which micro-batch runs forward (F) or backward (B) next. */
export function computeOrder(
  schedule: PipelineSchedule,
  p: number,
  stage: number,
  m: number,
): { op: 'forward' | 'backward'; micro: number }[] {
  const F = (micro: number) => ({ op: 'forward' as const, micro });
  const B = (micro: number) => ({ op: 'backward' as const, micro });
  const range = (a: number, b: number) => Array.from({ length: Math.max(0, b - a) }, (_, i) => a + i);
  if (schedule === 'gpipe') return [...range(0, m).map(F), ...range(0, m).map(B)];
  const warmup = Math.min(p - stage - 1, m);
  const out: { op: 'forward' | 'backward'; micro: number }[] = range(0, warmup).map(F);
  for (let i = 0; i < m - warmup; i++) out.push(F(warmup + i), B(i));
  for (let i = m - warmup; i < m; i++) out.push(B(i));
  return out;
}

/** The full action list of one stage, transfers included. */
export function stageActions(schedule: PipelineSchedule, p: number, stage: number, m: number): PipelineAction[] {
  const out: PipelineAction[] = [];
  for (const c of computeOrder(schedule, p, stage, m)) {
    if (c.op === 'forward') {
      if (stage > 0) out.push({ op: 'recv-act', micro: c.micro, peer: stage - 1 });
      out.push(c);
      if (stage < p - 1) out.push({ op: 'send-act', micro: c.micro, peer: stage + 1 });
    } else {
      if (stage < p - 1) out.push({ op: 'recv-grad', micro: c.micro, peer: stage + 1 });
      out.push(c);
      if (stage > 0) out.push({ op: 'send-grad', micro: c.micro, peer: stage - 1 });
    }
  }
  return out;
}

/** Most micro-batches whose forward ran and whose backward has not: the activation slots a stage needs. */
export function maxInFlight(actions: readonly PipelineAction[]): number {
  let now = 0;
  let peak = 0;
  for (const a of actions) {
    if (a.op === 'forward') peak = Math.max(peak, ++now);
    else if (a.op === 'backward') now--;
  }
  return peak;
}

export interface SimulationResult {
  /** every stage ran its whole list */
  completed: boolean;
  /** where each stage stopped (its list length when completed) */
  positions: number[];
  /** compute actions per stage, in the order they ran, with the time step (unit-cost compute) they ran at */
  timeline: { stage: number; op: 'forward' | 'backward'; micro: number; tick: number }[];
}

/**
 * Runs every stage's list against each other: sends are buffered, a recv waits for the matching
 * send (same micro-batch, direction and peer pair). Each compute action takes one tick (a
 * backward `backwardCost` ticks); a stage does nothing while it waits. Stops when every stage is
 * done or none can move (a deadlock).
 */
export function simulate(lists: readonly (readonly PipelineAction[])[], backwardCost = 1): SimulationResult {
  const p = lists.length;
  const pos = new Array<number>(p).fill(0);
  const busyUntil = new Array<number>(p).fill(0);
  const sent = new Map<string, number>(); // transfer -> tick it was sent
  const key = (dir: string, from: number, to: number, micro: number) => `${dir}:${from}>${to}:${micro}`;
  const timeline: SimulationResult['timeline'] = [];
  let tick = 0;
  for (;;) {
    let moved = false;
    for (let s = 0; s < p; s++) {
      while (pos[s]! < lists[s]!.length && busyUntil[s]! <= tick) {
        const a = lists[s]![pos[s]!]!;
        if (a.op === 'send-act' || a.op === 'send-grad') {
          sent.set(key(a.op === 'send-act' ? 'act' : 'grad', s, a.peer, a.micro), tick);
        } else if (a.op === 'recv-act' || a.op === 'recv-grad') {
          if (!sent.has(key(a.op === 'recv-act' ? 'act' : 'grad', a.peer, s, a.micro))) break;
        } else {
          const cost = a.op === 'backward' ? backwardCost : 1;
          timeline.push({ stage: s, op: a.op, micro: a.micro, tick });
          busyUntil[s] = tick + cost;
        }
        pos[s]!++;
        moved = true;
      }
    }
    if (pos.every((x, s) => x === lists[s]!.length)) return { completed: true, positions: pos, timeline };
    if (moved) continue; // a send may have unblocked a stage visited earlier in this tick
    const next = Math.min(...busyUntil.filter((b) => b > tick));
    if (!Number.isFinite(next)) return { completed: false, positions: pos, timeline };
    tick = next;
  }
}

// the stage split (by parameter count or by measured cost) is shared with the launch form's
// prediction of per-rank bytes: it lives once, in common/
export { partitionByCost, partitionLayers } from '../../common/model-layout.js';

/** Median forward + backward ms of the embedding, of every block and of the head. */
export interface LayerTimes {
  embedding: number;
  blocks: number[];
  head: number;
}

/** The block ranges of p stages balanced by measured time. */
export function partitionByTime(times: LayerTimes, p: number): { from: number; to: number }[] {
  return partitionByCost(times.blocks, p, times.embedding, times.head);
}

/** A stage's measured ms per micro-batch: its blocks, plus the embedding (first) and head (last). */
export function stageMs(times: LayerTimes, r: StageRange): number {
  return times.blocks.slice(r.from, r.to).reduce((a, b) => a + b, 0) + (r.first ? times.embedding : 0) + (r.last ? times.head : 0);
}

export { theoreticalBubble } from '../protocol/pipeline.js';
