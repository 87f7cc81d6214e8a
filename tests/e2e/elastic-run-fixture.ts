// A run folder whose membership changed, written by hand for the dashboard's and the report's
// tests: ddp on this machine and agent b, 30 steps. b stopped answering after step 12 (the run
// went back to its checkpoint at step 10 and went on alone: 2 lost steps), came back at step 20
// (scale-up from a replica in memory), and the run was stopped after step 24 and resumed.
// metrics.jsonl holds a segment row where each segment begins, as the run driver writes them,
// and the lost steps' rows twice (the later wins); spans.jsonl has each rank's spans per step.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ElasticSummary, Segment } from '../../common/api/elastic.js';

export const HERE = 'this machine';
export const AGENT_B = 'b (10.0.0.2:7420)';

export const ELASTIC_SEGMENTS: Segment[] = [
  { from_step: 0, to_step: 12, world: 2, strategy: 'ddp', placement: [HERE, AGENT_B], reason: 'start', source: 'init', lost_steps: 0 },
  {
    from_step: 10,
    to_step: 20,
    world: 1,
    strategy: 'ddp',
    placement: [HERE],
    reason: 'machine-lost',
    detail: 'agent b (10.0.0.2:7420) stopped answering',
    source: 'disk',
    lost_steps: 2,
    recovery_ms: 2300,
  },
  {
    from_step: 20,
    to_step: 24,
    world: 2,
    strategy: 'ddp',
    placement: [HERE, AGENT_B],
    reason: 'scale-up',
    detail: 'agent b (10.0.0.2:7420) came back',
    source: 'memory',
    lost_steps: 0,
    recovery_ms: 900,
  },
  {
    from_step: 24,
    to_step: 30,
    world: 2,
    strategy: 'ddp',
    placement: [HERE, AGENT_B],
    reason: 'resume',
    source: 'disk',
    lost_steps: 0,
    recovery_ms: 4100,
  },
];

export const ELASTIC_SUMMARY: ElasticSummary = { min: 1, max: 2, max_restarts: 3, restarts: 2, lost_steps: 2, segments: ELASTIC_SEGMENTS };

const MODEL = { preset: 'tiny', n_layer: 2, n_head: 2, d_model: 64, block_size: 64 };
const lines = (rows: object[]) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');

/** `segments`: only the first N (2: the run ends alone, b gone) */
export function writeElasticRun(dir: string, segments = ELASTIC_SEGMENTS.length) {
  mkdirSync(dir, { recursive: true });
  const kept = ELASTIC_SEGMENTS.slice(0, segments);
  const last = kept.at(-1)!.to_step!;
  const elastic: ElasticSummary = {
    ...ELASTIC_SUMMARY,
    segments: kept,
    restarts: kept.filter((s) => s.reason !== 'start' && s.reason !== 'resume').length,
    lost_steps: kept.reduce((a, s) => a + s.lost_steps, 0),
  };
  const t0 = Date.parse('2026-02-03T04:05:06Z');
  const metrics: object[] = [];
  const spans: object[] = [];
  let t = t0;
  kept.forEach((seg) => {
    metrics.push({ type: 'segment', step: seg.from_step, segment: seg });
    t += seg.recovery_ms ?? 0;
    for (let step = seg.from_step + 1; step <= seg.to_step!; step++) {
      const memory: Record<string, Record<string, number>> = {};
      for (let rank = 0; rank < seg.world; rank++) {
        memory[String(rank)] = {
          params: 60_000,
          grads: 60_000,
          optimizer: 120_000,
          activations: 40_000 + 100 * step,
          comm: 4096,
          workspace: 8192,
        };
        spans.push({ rank, step, kind: 'forward', name: 'block.0', start: t, end: t + 10 });
        spans.push({ rank, step, kind: 'backward', name: 'block.0', start: t + 10, end: t + 30 });
        if (seg.world > 1) spans.push({ rank, step, kind: 'comm', name: 'allReduce', start: t + 20, end: t + 40, bytes: 240_000 });
        spans.push({ rank, step, kind: 'optimizer', name: 'adamw', start: t + 40, end: t + 45 });
      }
      metrics.push({
        type: 'step',
        step,
        loss: 4.2 - 0.06 * step,
        lr: 0.006,
        grad_norm: 1.2 - 0.01 * step,
        tokens_per_s: seg.world === 2 ? 1800 : 950,
        step_ms: seg.world === 2 ? 50 : 95,
        memory,
      });
      t += seg.world === 2 ? 50 : 95;
    }
  });
  const now = (ms: number) => new Date(ms).toISOString();
  const files: Record<string, string> = {
    'config.json': JSON.stringify({
      run_dir: dir,
      model: MODEL,
      data: { dataset: 'builtin:grammar' },
      train: { steps: 30, batch_size: 8, lr: 0.006 },
      parallel: { strategy: 'ddp', world: 2 },
      elastic: { min: 1, max: 2, max_restarts: 3 },
    }),
    'state.json': JSON.stringify({
      ...(last === 30 ? { status: 'completed' } : { status: 'stopped', error: `stopped after step ${last}` }),
      created_at: now(t0),
      updated_at: now(t),
      step: last,
      steps: 30,
      placement: [{ machine: 'local' }, { machine: '10.0.0.2:7420' }],
      ranks: [
        { rank: 0, machine: HERE, pid: 101 },
        { rank: 1, machine: AGENT_B, pid: 202 },
      ],
      elastic,
    }),
    'metrics.jsonl': lines(metrics),
    'spans.jsonl': lines(spans),
    'summary.json': JSON.stringify({
      type: 'summary',
      steps: last,
      final_loss: 4.2 - 0.06 * last,
      strategy: 'ddp',
      world: 2,
      params: 120_000,
      tokens_per_s: 1500,
      elastic,
    }),
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
}
