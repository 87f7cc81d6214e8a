// Run folders for the dashboard tests: written by hand, a finished pipeline run (2 stages x 4
// micro-batches, GPipe; spans carry stage and micro as a pp run writes them) and a run that
// failed at step 2 naming its rank; copied, the files of real 8-rank runs (3d, ddp, pp). The controller's
// run store reads any folder of the runs root.
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const FIXTURES = path.join(path.dirname(new URL(import.meta.url).pathname), 'fixtures');

/**
 * Real runs on SwiftShader here, tiny preset, kept byte for byte (checkpoints left out):
 * - run-3d-2x2x2: D 2 x T 2 x P 2 (8 ranks, 1F1B, 2 micro-batches), 4 steps, from
 *   shardwise train --preset tiny --strategy 3d --dp 2 --tp 2 --pp 2 --micro-batches 2 --steps 4 --json
 * - run-ddp-8: 8 ranks, 3 steps, from
 *   shardwise train --preset tiny --strategy ddp --world 8 --steps 3 --eval-interval 0 --checkpoint-interval 0 --json
 *   with the advisor's prediction.json for its layout (a what-if machine of 8 devices: 16 GB,
 *   0.05 TFLOP/s, 10 Gbit/s, 50 us; predictRun over adviseRequest, as a launch writes it)
 * - run-pp-8: 8 stages (1F1B, 8 micro-batches; --config of model.n_layer 8), 3 steps, from
 *   shardwise train --preset tiny --config n_layer-8.json --strategy pp --world 8 --pp 8 --schedule 1f1b
 *     --micro-batches 8 --steps 3 --eval-interval 0 --checkpoint-interval 0 --json
 * Only config.run_dir is pointed at the copy.
 */
export type RecordedRun = 'run-3d-2x2x2' | 'run-ddp-8' | 'run-pp-8';

export function copyRecordedRun(name: RecordedRun, dir: string) {
  cpSync(path.join(FIXTURES, name), dir, { recursive: true });
  const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, run_dir: dir }, null, 2));
}

export const copyThreeDRun = (dir: string) => copyRecordedRun('run-3d-2x2x2', dir);

const MODEL = { preset: 'tiny', n_layer: 2, n_head: 2, d_model: 64, block_size: 64 };
const lines = (rows: object[]) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');

function write(dir: string, files: Record<string, string>) {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
}

const memory = (step: number) => ({
  '0': { params: 60_000, grads: 60_000, optimizer: 120_000, activations: 40_000 + step * 10, comm: 4_096, workspace: 8_192 },
  '1': { params: 58_000, grads: 58_000, optimizer: 116_000, activations: 20_000, comm: 4_096, workspace: 8_192 },
});

/** p = 2 stages, m = 4 micro-batches, 3 steps: forward 2 ms and backward 4 ms per block. */
export function writePipelineRun(dir: string) {
  const p = 2;
  const m = 4;
  const spans: object[] = [];
  const steps: object[] = [];
  const t0 = 1_700_000_000_000;
  for (let step = 1; step <= 3; step++) {
    const base = t0 + step * 100;
    const bwdBase = base + (m + p - 1) * 2;
    for (let s = 0; s < p; s++) {
      for (let i = 0; i < m; i++) {
        const f = base + (i + s) * 2;
        spans.push({ rank: s, step, kind: 'forward', name: `block.${s}`, stage: s, micro: i, start: f, end: f + 2 });
        const j = m - 1 - i; // backward in reverse micro order, last stage first
        const b = bwdBase + (j + (p - 1 - s)) * 4;
        spans.push({ rank: s, step, kind: 'backward', name: `block.${s}`, stage: s, micro: i, start: b, end: b + 4 });
      }
    }
    steps.push({
      type: 'step',
      step,
      loss: 4.2 - 0.3 * step,
      lr: 0.006,
      grad_norm: 1.5 - 0.1 * step,
      tokens_per_s: 900 + step,
      step_ms: 62,
      memory: memory(step),
    });
  }
  const now = new Date(t0).toISOString();
  write(dir, {
    'config.json': JSON.stringify({
      run_dir: dir,
      model: MODEL,
      data: { dataset: 'builtin:grammar' },
      train: { steps: 3, batch_size: 8, lr: 0.006 },
      parallel: { strategy: 'pp', world: 2, micro_batches: m },
    }),
    'state.json': JSON.stringify({
      status: 'completed',
      created_at: now,
      updated_at: new Date(t0 + 4000).toISOString(),
      step: 3,
      steps: 3,
    }),
    'metrics.jsonl': lines(steps),
    'spans.jsonl': lines(spans),
    'summary.json': JSON.stringify({
      type: 'summary',
      steps: 3,
      final_loss: 3.3,
      strategy: 'pp',
      world: 2,
      params: 120_000,
      tokens_per_s: 902,
    }),
  });
}

export function writeFailedRun(dir: string) {
  const t0 = Date.parse('2026-01-02T03:04:05Z');
  write(dir, {
    'config.json': JSON.stringify({
      run_dir: dir,
      model: MODEL,
      data: { dataset: 'builtin:grammar' },
      train: { steps: 10, batch_size: 8, lr: 0.006 },
      parallel: { strategy: 'ddp', world: 2 },
    }),
    'state.json': JSON.stringify({
      status: 'failed',
      created_at: new Date(t0).toISOString(),
      updated_at: new Date(t0 + 9000).toISOString(),
      step: 2,
      steps: 10,
      error: 'rank 1 exited with code 137 (killed)',
      failed_rank: 1,
    }),
    'metrics.jsonl': lines(
      [1, 2].map((step) => ({
        type: 'step',
        step,
        loss: 4 - step * 0.1,
        lr: 0.006,
        grad_norm: 1,
        tokens_per_s: 800,
        step_ms: 70,
        memory: memory(step),
      })),
    ),
  });
}
