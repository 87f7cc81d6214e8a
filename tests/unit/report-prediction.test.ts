// The report's "Predicted vs measured" section on the real 8-rank 3d run, given a prediction.json
// beside it: every rank's categories predicted beside its measured peak (summary.json), the
// step's parts beside the median step after the first (metrics.jsonl), and the section's
// charts. A run without prediction.json (or with one that is not valid) has no section.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunPrediction } from '../../common/api/index.js';
import { reportHtml } from '../../src-main/reports/html.js';
import { readRun } from '../../src-main/runs/read-run.js';
import { RunFolder } from '../../src-main/runs/run-folder.js';

const FIXTURE = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../e2e/fixtures/run-3d-2x2x2');
const KiB = 1024;

const prediction: RunPrediction = {
  predicted_at: '2026-12-01T12:00:00.000Z',
  request: { preset: 'tiny', batch_size: 8, seq_len: 64, devices: 8 },
  profile: { source: 'defaults' },
  plan: {
    layout: { strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2, schedule: '1f1b' },
    launch: { strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2, schedule: '1f1b' },
    fits: true,
    reason: 'fits on every device',
    ranks: Array.from({ length: 8 }, (_, rank) => ({
      rank,
      device: 'GPU 0',
      memory: {
        params: 100 * KiB,
        grads: 100 * KiB,
        optimizer: 100 * KiB,
        activations: 400 * KiB,
        comm: 0,
        workspace: 300 * KiB,
        total: 1000 * KiB,
      },
      host_memory_bytes: 0,
    })),
    time: { step_ms: 2000, compute_ms: 1200, comm_exposed_ms: 300, bubble_ms: 400, host_copy_ms: 100 },
    tokens_per_s: 256,
    rank_order: 0,
  },
  notes: ['no profile of this machine is stored: default speeds'],
};

describe('report: predicted vs measured (3d, D 2 x T 2 x P 2)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-prediction-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(FIXTURE, dir, { recursive: true });
  new RunFolder(dir).writePrediction(prediction);
  const html = reportHtml(readRun(dir), new Date('2026-01-01T00:00:00Z'));
  const section = /<section id="prediction">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';

  it('comes after the peak table and before the charts, with the reason and the notes', () => {
    expect(section).toMatch(/The advisor's prediction for this layout \(fits on every device\), from default speeds/);
    expect(section).toContain('<li>no profile of this machine is stored: default speeds</li>');
    expect(html.indexOf('id="prediction"')).toBeLessThan(html.indexOf('id="chart-loss"'));
  });

  it('the step: predicted 2000 ms beside the median of steps 2-4 (2371.7 ms), +16%', () => {
    const step = /<tr data-part="step_ms">(.*?)<\/tr>/.exec(section)?.[1];
    expect(step).toBe('<th>step</th><td>2000.0 ms</td><td>2371.7 ms</td><td>+16%</td>');
    expect(section).toContain('(median of 3 steps after the first)');
    // a pipeline: its bubble is measured from the spans
    expect(/<tr data-part="bubble_ms"><th>pipeline bubble<\/th><td>400\.0 ms<\/td><td>([\d.]+) ms<\/td>/.test(section)).toBe(true);
  });

  it("every rank's categories beside its measured peak: rank 5's activations 400 KiB predicted, 428 KiB measured", () => {
    const rows = [...section.matchAll(/<tr data-rank="(\d+)">(.*?)<\/tr>/g)];
    expect(rows.map((r) => Number(r[1]))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const cells = [...rows[5]![2]!.matchAll(/<td>(.*?)<\/td>/g)].map((m) => m[1]);
    // summary.json: rank 5 activations 437760 B = 427.5 KiB (27.5 / 427.5 = +6%), total 1034664 B
    expect(cells[5]).toBe('400 KiB · 428 KiB<br>(+6%)');
    expect(cells[8]).toBe('1000 KiB · 1010 KiB<br>(+1%)');
  });

  it('the charts: the step parts and one per rank', () => {
    const ids = [...html.matchAll(/id="chart-(prediction-[a-z0-9-]+)"/g)].map((m) => m[1]);
    expect(ids).toEqual(['prediction-time', ...Array.from({ length: 8 }, (_, r) => `prediction-memory-rank-${r}`)]);
  });

  it('no prediction.json, or one that is not valid: no section', () => {
    const other = mkdtempSync(path.join(tmpdir(), 'shardwise-prediction-'));
    try {
      cpSync(FIXTURE, other, { recursive: true });
      expect(reportHtml(readRun(other))).not.toContain('id="prediction"');
      writeFileSync(path.join(other, 'prediction.json'), '{"plan":{}}');
      expect(readRun(other).prediction).toBeNull();
      expect(reportHtml(readRun(other))).not.toContain('id="prediction"');
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
