// What a tab says once it reconnected by itself: a dropped connection (same controller start)
// says runs kept going; a restart names each run that was live in the tab and what its folder
// says now (interrupted, resumable), never that it kept going.
import { describe, expect, it } from 'vitest';
import type { RunListItem } from '../../../common/api/index.js';
import { LiveRuns, restartNotice } from '../../../src-renderer/src/api/restart-report.js';

const run = (id: string, over: Partial<RunListItem>): RunListItem => ({
  id,
  dir: `/runs/${id}`,
  status: 'running',
  step: 9,
  steps: 50,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:01:00Z',
  preset: 'tiny',
  strategy: 'ddp',
  world: 2,
  final_loss: null,
  resumable: true,
  ...over,
});

describe('the notice after a reconnect', () => {
  it('tracks the runs last seen live: a launch adds, a finished state removes', () => {
    const live = new LiveRuns();
    live.launched('a');
    live.see('b', 'running');
    live.see('c', 'completed');
    live.see('b', 'stopped');
    expect(live.list()).toEqual(['a']);
  });

  it('the same controller start: only the connection dropped', () => {
    const n = restartNotice('i1', 'i1', ['a'], []);
    expect(n).toEqual({ restarted: false, text: 'Reconnected to the same controller: only the connection dropped, runs kept going.' });
  });

  it('a restart names each run that was live with what its folder now says', () => {
    const n = restartNotice(
      'i1',
      'i2',
      ['a', 'b', 'gone'],
      [
        run('a', { status: 'interrupted', step: 9 }),
        run('b', { status: 'stopped', step: 3, resumable: false, not_resumable_reason: 'stopped at step 3 before its first checkpoint' }),
      ],
    );
    expect(n.restarted).toBe(true);
    expect(n.text).toBe(
      'The controller restarted, and runs do not outlive it. The runs that were live: a: interrupted at step 9 of 50, resumable from its last checkpoint; ' +
        'b: stopped at step 3 of 50, not resumable (stopped at step 3 before its first checkpoint); gone: no longer in the runs folder.',
    );
    expect(n.text).not.toMatch(/keep going|kept going/);
  });

  it('a restart with no live run says so; a controller that gives no start id counts as restarted', () => {
    expect(restartNotice('i1', 'i2', [], []).text).toBe(
      "The controller restarted, and runs do not outlive it. No run was live in this tab's view.",
    );
    expect(restartNotice(undefined, undefined, [], []).restarted).toBe(true);
  });
});
