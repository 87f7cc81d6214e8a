// The report's first screen on the real 8-rank 3d run: the strategy, the layout of every rank
// (machine, device, stage, TP shard, DP replica, layers, peak memory) and the result, before
// the config and the charts.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { reportHtml } from '../../src-main/reports/html.js';
import { readRun } from '../../src-main/runs/read-run.js';

const DIR = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../e2e/fixtures/run-3d-2x2x2');
const cellsOf = (row: string) => [...row.matchAll(/<td>([^<]*)<\/td>/g)].map((m) => m[1]);

describe('report summary (3d, D 2 x T 2 x P 2)', () => {
  const html = reportHtml(readRun(DIR), new Date('2026-01-01T00:00:00Z'));
  const glance = /<section id="at-a-glance">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';
  it('opens the page, before the summary table, the config and the charts', () => {
    expect(glance).not.toBe('');
    const at = html.indexOf('id="at-a-glance"');
    for (const later of ['id="summary"', 'id="config"', 'id="chart-loss"']) expect(html.indexOf(later)).toBeGreaterThan(at);
  });
  it('the strategy in one line, with the model', () => {
    expect(glance).toMatch(
      /<strong>3d: DP 2 × TP 2 × PP 2 · 1f1b, 2 micro-batches<\/strong> · tiny model: 2 layers, 2 heads, d_model 64, 105,920 parameters/,
    );
  });
  it('the layout: one row per rank with its cell of the grid, its layers and its peak', () => {
    const rows = [...glance.matchAll(/<tr data-rank="(\d+)">(.*?)<\/tr>/g)];
    expect(rows.map((r) => Number(r[1]))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(cellsOf(rows[5]![2]!)).toEqual([
      '5',
      'this machine',
      'default adapter',
      '1',
      '1',
      '0',
      'block 1, ln_f + LM head · heads 1 of 2, 1/2 of the MLP and vocabulary',
      '1010 KiB',
    ]);
  });
  it('the result: status, steps, final loss, tokens/s, the largest peak and its rank, bytes moved', () => {
    const figures = Object.fromEntries([...glance.matchAll(/<span>([^<]*)<\/span><strong>([^<]*)<\/strong>/g)].map((m) => [m[1], m[2]]));
    expect(figures).toMatchObject({
      status: 'completed',
      steps: '4 / 4',
      'final loss': '2.9415',
      'tokens/s': '256',
      'largest peak memory': '1.60 MiB (rank 0)',
    });
    // (4 x 518 448 + 4 x 505 888) / 8 bytes per rank and step
    expect(figures['bytes moved per step']).toBe('500 KiB per rank (mean)');
  });
});
