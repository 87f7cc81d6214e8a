// The dashboard's pure parts for finding things: the runs list's search and filters, the log
// tail's rank selector and search, and which charts share the step zoom.
import { describe, expect, it } from 'vitest';
import type { LogRow, RunListItem } from '../../common/api/index.js';
import { lossChartOption, memoryChartOption, timelineChartOption, commBytesChartOption } from '../../common/charts/index.js';
import { filterLogs, logRanks } from '../../src-renderer/src/log-filter.js';
import { filterChoices, filterRuns, NO_FILTER, parseTagInput } from '../../src-renderer/src/runs-filter.js';
import { isStepChart, STEP_ZOOM_ID, withStepZoom } from '../../src-renderer/src/zoom-sync.js';
import { threeDRun } from './three-d-fixture.js';

type Row = Pick<RunListItem, 'id' | 'strategy' | 'status' | 'precision' | 'tags' | 'note'>;
const runs: Row[] = [
  { id: '20260101-tiny-ddp-a1', strategy: 'ddp', status: 'completed', precision: 'fp32', tags: ['baseline'], note: '' },
  {
    id: '20260102-tiny-zero3-b2',
    strategy: 'zero3',
    status: 'failed',
    precision: 'bf16',
    tags: ['sweep', 'lr 3e-4'],
    note: 'Diverged at step 900',
  },
  {
    id: '20260103-small-zero3-c3',
    strategy: 'zero3',
    status: 'completed',
    precision: 'bf16',
    tags: [],
    note: 'baseline for the small preset',
  },
  { id: 'older-run', strategy: 'single', status: 'interrupted' }, // a list row from before tags and precision
];

describe('runs list search and filters', () => {
  const ids = (f: Partial<typeof NO_FILTER>) => filterRuns(runs, { ...NO_FILTER, ...f }).map((r) => r.id);

  it('search matches the id, a tag or the note, any case, every word', () => {
    expect(ids({ query: 'BASELINE' })).toEqual(['20260101-tiny-ddp-a1', '20260103-small-zero3-c3']);
    expect(ids({ query: 'diverged' })).toEqual(['20260102-tiny-zero3-b2']);
    expect(ids({ query: 'zero3 baseline' })).toEqual(['20260103-small-zero3-c3']);
    expect(ids({ query: 'lr 3e-4' })).toEqual(['20260102-tiny-zero3-b2']);
    expect(ids({ query: '  ' })).toHaveLength(4);
  });

  it('filters by strategy, status and precision (a run without one is fp32), combined with the search', () => {
    expect(ids({ strategy: 'zero3' })).toEqual(['20260102-tiny-zero3-b2', '20260103-small-zero3-c3']);
    expect(ids({ status: 'completed', precision: 'bf16' })).toEqual(['20260103-small-zero3-c3']);
    expect(ids({ precision: 'fp32' })).toEqual(['20260101-tiny-ddp-a1', 'older-run']);
    expect(ids({ strategy: 'zero3', query: 'sweep' })).toEqual(['20260102-tiny-zero3-b2']);
    expect(ids({ strategy: 'pp' })).toEqual([]);
  });

  it('offers as choices the values the runs have', () => {
    expect(filterChoices(runs)).toEqual({
      strategy: ['ddp', 'single', 'zero3'],
      status: ['completed', 'failed', 'interrupted'],
      precision: ['bf16', 'fp32'],
    });
  });

  it('reads comma-separated tags', () => {
    expect(parseTagInput(' baseline, lr sweep ,,')).toEqual(['baseline', 'lr sweep']);
    expect(parseTagInput('')).toEqual([]);
  });
});

describe('log tail', () => {
  const lines: LogRow[] = [
    { time: 1, level: 'info', message: 'launching 2 ranks' },
    { time: 2, level: 'info', message: 'joined the world as rank 0', rank: 0 },
    { time: 3, level: 'info', message: 'joined the world as rank 1', rank: 1 },
    { time: 4, level: 'error', message: 'Device lost: out of memory', rank: 1 },
    { time: 5, level: 'error', message: 'rank 1 exited with code 1' },
  ];
  it('narrows to one rank or the controller, and to lines holding every word of the search', () => {
    expect(filterLogs(lines, 'all', '')).toHaveLength(5);
    expect(filterLogs(lines, '1', '').map((l) => l.time)).toEqual([3, 4]);
    expect(filterLogs(lines, '0', '').map((l) => l.time)).toEqual([2]);
    expect(filterLogs(lines, 'controller', '').map((l) => l.time)).toEqual([1, 5]);
    expect(filterLogs(lines, 'all', 'OUT of').map((l) => l.time)).toEqual([4]);
    expect(filterLogs(lines, 'controller', 'rank 1').map((l) => l.time)).toEqual([5]);
    expect(logRanks(lines)).toEqual([0, 1]);
  });
});

describe('step zoom', () => {
  const run = threeDRun();
  it('step charts (loss, memory per rank) share the inside zoom; the timeline and category charts keep theirs', () => {
    const loss = lossChartOption(run.steps);
    expect(isStepChart(loss)).toBe(true);
    expect(withStepZoom(loss).dataZoom).toEqual([{ type: 'inside', id: STEP_ZOOM_ID, xAxisIndex: 0, filterMode: 'none' }]);
    expect(withStepZoom(loss)).toBe(withStepZoom(loss)); // the same option, the same object: no redraw
    expect(isStepChart(memoryChartOption(0, run.steps))).toBe(true);
    const timeline = timelineChartOption(run.spans as never);
    expect(isStepChart(timeline)).toBe(false);
    expect(withStepZoom(timeline)).toBe(timeline);
    expect(isStepChart(commBytesChartOption(run.spans))).toBe(false);
  });
});
