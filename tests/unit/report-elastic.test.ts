// The report of a run whose membership changed (tests/e2e/elastic-run-fixture.ts: a machine lost,
// back, then stopped and resumed): the HTML report's Elastic section (restarts, lost steps, a row
// per segment), its step charts banded by segment, the trace's one process per rank per segment,
// and the CSV's segment column. A run without segments keeps its report and trace as they were.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { metricsCsv } from '../../src-main/reports/csv.js';
import { reportHtml } from '../../src-main/reports/html.js';
import { traceOf } from '../../src-main/reports/trace.js';
import { readRun } from '../../src-main/runs/read-run.js';
import { writeElasticRun } from '../e2e/elastic-run-fixture.js';

const THREE_D = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../e2e/fixtures/run-3d-2x2x2');
const cellsOf = (row: string) => [...row.matchAll(/<td>([^<]*)<\/td>/g)].map((m) => m[1]);

describe('the report of an elastic run', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-elastic-report-'));
  writeElasticRun(dir);
  const run = readRun(dir);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has an Elastic section: restarts, lost steps and one row per segment with layout, machines and reason', () => {
    const html = reportHtml(run, new Date('2026-01-01T00:00:00Z'));
    const section = /<section id="elastic">([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';
    expect(section).toContain('<h2>Elastic</h2>');
    const figures = Object.fromEntries([...section.matchAll(/<span>([^<]*)<\/span><strong>([^<]*)<\/strong>/g)].map((m) => [m[1], m[2]]));
    expect(figures).toEqual({ restarts: '2', 'lost steps': '2', segments: '4', bounds: '1–2 ranks, at most 3 restarts' });
    const rows = [...section.matchAll(/<tr data-segment="(\d)">(.*?)<\/tr>/g)].map((r) => cellsOf(r[2]!));
    expect(rows.map((r) => r.slice(0, 2))).toEqual([
      ['1', '1–12'],
      ['2', '11–20'],
      ['3', '21–24'],
      ['4', '25–30'],
    ]);
    expect(rows[1]).toEqual([
      '2',
      '11–20',
      'ddp × 1',
      'this machine (rank 0)',
      'machine-lost: agent b (10.0.0.2:7420) stopped answering',
      '2',
      'state from the checkpoint on disk, back in 2.3 s',
    ]);
    expect(rows[3]![4]).toBe('resume');
    // the step charts carry the bands and the markers
    const data = JSON.parse(/<script type="application\/json" id="shardwise-report-data">([\s\S]*?)<\/script>/.exec(html)![1]!) as {
      charts: { id: string; option: { series: { name: string; markLine?: { data: { label: { formatter?: string } }[] } }[] } }[];
    };
    const loss = data.charts.find((c) => c.id === 'loss')!;
    const m = loss.option.series.find((s) => s.name === 'membership')!;
    expect(m.markLine!.data.map((l) => l.label.formatter)).toEqual([
      'world 1 · machine-lost · 2 lost steps',
      'world 2 · scale-up',
      'world 2 · resume',
    ]);
  });

  it('the trace keeps one process per rank per segment, named with its segment and world', () => {
    const trace = traceOf(run);
    const names = trace.traceEvents.filter((e) => e.name === 'process_name').map((e) => e.args!.name);
    expect(names).toEqual([
      'rank 0 · segment 1 (world 2)',
      'rank 1 · segment 1 (world 2)',
      'rank 0 · segment 2 (world 1)',
      'rank 0 · segment 3 (world 2)',
      'rank 1 · segment 3 (world 2)',
      'rank 0 · segment 4 (world 2)',
      'rank 1 · segment 4 (world 2)',
    ]);
    // steps 11 and 12 ran twice on rank 0: once in segment 1, again in segment 2
    const pidName = new Map(trace.traceEvents.filter((e) => e.name === 'process_name').map((e) => [e.pid, e.args!.name]));
    const step11 = trace.traceEvents
      .filter((e) => e.ph === 'X' && e.args?.step === 11 && e.name === 'optimizer')
      .map((e) => pidName.get(e.pid));
    expect(step11.sort()).toEqual(['rank 0 · segment 1 (world 2)', 'rank 0 · segment 2 (world 1)', 'rank 1 · segment 1 (world 2)']);
    const step22 = trace.traceEvents.filter((e) => e.ph === 'X' && e.args?.step === 22).map((e) => pidName.get(e.pid));
    expect(new Set(step22)).toEqual(new Set(['rank 0 · segment 3 (world 2)', 'rank 1 · segment 3 (world 2)']));
    expect(trace.otherData.segments).toHaveLength(4);
  });

  it('the CSV says which segment recorded each step', () => {
    const csv = metricsCsv(run).split('\n');
    expect(csv[0]!.startsWith('step,segment,loss')).toBe(true);
    const segmentOf = (step: number) => csv.find((l) => l.startsWith(`${step},`))!.split(',')[1];
    expect([1, 10, 11, 12, 20, 21, 24, 25, 30].map(segmentOf)).toEqual(['1', '1', '2', '2', '2', '3', '3', '4', '4']);
  });

  it('a run without segments has no Elastic section, its trace one process per rank named "rank N", no segment column', () => {
    const plain = readRun(THREE_D);
    expect(reportHtml(plain)).not.toContain('id="elastic"');
    const names = traceOf(plain)
      .traceEvents.filter((e) => e.name === 'process_name')
      .map((e) => e.args!.name);
    expect(names).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((r) => `rank ${r}`));
    expect(metricsCsv(plain).split('\n')[0]).not.toContain('segment');
  });
});
