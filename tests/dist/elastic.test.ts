// Elastic runs on one machine, as a user runs them: `shardwise train --elastic MIN:MAX` with real
// rank processes, one of them killed -9. The run goes on at the smaller world from the newest
// state (the in-memory replica of the last step) with no user action, and trains what a
// by-hand resume at that world trains; below MIN or past --max-restarts it fails saying why,
// and a kill during the restart leaves no process and a folder that resumes.
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ElasticSummary } from '../../common/api/elastic.js';
import { shardwise, tempDir } from '../cli/helpers.js';
import { DDP3, expectCleanlyGone, losses, readJson, replicaFoldersLeft, Run } from './helpers/elastic-run.js';
import { waitFor } from './helpers/processes.js';

it('bad --elastic and --max-restarts values are refused before anything runs, naming the flag and what to do', () => {
  const cases: [string[], string][] = [
    [['--elastic', '3:2'], '--elastic 3:2: MIN must be at most MAX (e.g. 2:3)'],
    [['--elastic', '4:6'], '--elastic 4:6: MIN is more than the 3 ranks the run starts with; lower MIN or raise --world'],
    [['--elastic', '1:2'], '--elastic 1:2: MAX is less than the 3 ranks the run starts with; raise MAX or lower --world'],
    [['--elastic', 'two'], '--elastic must be MIN:MAX, the ranks the run may shrink to and grow back to (e.g. 2:3), got "two"'],
    [['--max-restarts', '2'], '--max-restarts applies to an elastic run; add --elastic MIN:MAX'],
    [['--elastic', '2:3', '--max-restarts', '-1'], '--max-restarts must be a non-negative integer, got -1'],
  ];
  const out = path.join(tempDir('elastic-bad'), 'run');
  for (const [flags, message] of cases) {
    const r = shardwise(['train', ...DDP3, ...flags, '--out', out]);
    expect([r.code, r.stderr]).toEqual([2, `shardwise: ${message}\n`]);
  }
  const single = shardwise(['train', '--elastic', '1:2', '--out', out]);
  expect(single.stderr).toMatch(/an elastic run needs several ranks/);
  expect(existsSync(out)).toBe(false);
});

describe.sequential('elastic runs on one machine', () => {
  it(
    'ddp 3 with --elastic 2:3, rank 2 killed -9 after step 9: completes at world 2 with one restart and two segments, ' +
      'at most one step lost (in-memory replica), and the losses after the change equal a by-hand resume at world 2 from that state',
    async () => {
      const dir = path.join(tempDir('elastic'), 'run');
      const run = new Run([
        ...DDP3,
        '--steps',
        '30',
        '--checkpoint-interval',
        '4',
        '--keep-checkpoints',
        '100',
        '--elastic',
        '2:3',
        '--out',
        dir,
      ]);
      await run.untilStep(9);
      run.ranks();
      run.kill(2);
      // the new segment's ranks, to check none is left
      const poll = setInterval(() => run.ranks(), 300);
      const code = await run.exited;
      clearInterval(poll);
      expect(code, run.stderr).toBe(0);
      expect(readJson(path.join(dir, 'state.json')).status).toBe('completed');
      const summary = readJson(path.join(dir, 'summary.json'));
      const elastic = summary.elastic as ElasticSummary;
      expect(elastic.restarts).toBe(1);
      expect(elastic.segments).toHaveLength(2);
      const [first, second] = elastic.segments as [ElasticSummary['segments'][0], ElasticSummary['segments'][0]];
      expect(first).toMatchObject({ reason: 'start', world: 3, from_step: 0, source: 'init' });
      expect(second).toMatchObject({ reason: 'rank-lost', world: 2, strategy: 'ddp', to_step: 30, source: 'memory' });
      expect(second.placement).toEqual(['this machine', 'this machine']);
      expect(second.detail).toMatch(/rank 2 .*SIGKILL/);
      expect(second.from_step).toBeGreaterThanOrEqual(8);
      expect(first.to_step).toBe(second.from_step);
      expect(elastic.lost_steps).toBeLessThanOrEqual(1);
      expect(second.recovery_ms).toBeGreaterThan(0);
      expect(summary.world).toBe(2);
      // every step once, 1..30, and a segment line where each segment begins
      expect([...losses(dir).keys()]).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      const rows = readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .filter((m) => m.type === 'segment');
      expect(rows.map((r) => [r.step, r.segment.world])).toEqual([
        [0, 3],
        [second.from_step, 2],
      ]);
      await expectCleanlyGone(run, dir);
      expect(replicaFoldersLeft(run.child.pid!)).toEqual([]);

      // by hand: the same state (its checkpoint, which the replica became), the config at world 2
      const byHand = path.join(tempDir('elastic-hand'), 'run');
      cpSync(dir, byHand, { recursive: true });
      const config = readJson(path.join(byHand, 'config.json'));
      config.parallel.world = 2;
      delete config.elastic;
      writeFileSync(path.join(byHand, 'config.json'), JSON.stringify(config));
      const from = path.join(byHand, 'checkpoints', `step-${String(second.from_step).padStart(6, '0')}`);
      const r = shardwise(['train', '--resume', from, '--json']);
      expect(r.code, r.stderr).toBe(0);
      const elasticLosses = losses(dir);
      const handLosses = losses(byHand);
      for (let s = second.from_step + 1; s <= 30; s++) {
        const [a, b] = [elasticLosses.get(s)!, handLosses.get(s)!];
        expect(Math.abs(a - b) / Math.abs(b), `step ${s}: elastic ${a}, by hand ${b}`).toBeLessThan(1e-5);
      }
    },
    300_000,
  );

  it('ddp 2 with --elastic 2:2, rank 1 killed: fails naming the minimum, no process left', async () => {
    const dir = path.join(tempDir('elastic-min'), 'run');
    const run = new Run([
      ...DDP3.slice(0, 5),
      '2',
      '--batch-size',
      '12',
      '--eval-interval',
      '0',
      '--steps',
      '2000',
      '--checkpoint-interval',
      '2',
      '--elastic',
      '2:2',
      '--out',
      dir,
    ]);
    await run.untilStep(3);
    run.kill(1);
    expect(await run.exited).toBe(1);
    expect(run.stderr).toMatch(/1 rank remains, fewer than the elastic run's minimum of 2 \(--elastic 2:2\), so it ends here/);
    const state = readJson(path.join(dir, 'state.json'));
    expect(state.status).toBe('failed');
    expect(state.elastic.restarts).toBe(0);
    await expectCleanlyGone(run, dir);
  }, 180_000);

  it(
    'a kill during the restart with --max-restarts 1: the second loss fails naming the restarts spent, ' +
      'no process is left, and the folder resumes',
    async () => {
      const dir = path.join(tempDir('elastic-twice'), 'run');
      const run = new Run([
        ...DDP3,
        '--steps',
        '2000',
        '--checkpoint-interval',
        '2',
        '--elastic',
        '1:3',
        '--max-restarts',
        '1',
        '--out',
        dir,
      ]);
      await run.untilStep(3);
      const first = run.ranks();
      run.kill(2);
      // the restarted segment's rank 1, as soon as it exists: before it trained a step
      await waitFor(() => [...run.ranks()].some(([rank, pid]) => rank === 1 && pid !== first.get(1)), 60_000, 'the restarted ranks');
      const stepsBefore = run.steps().length;
      run.kill(1);
      expect(await run.exited).toBe(1);
      expect(run.stderr).toMatch(
        /the elastic run already restarted 1 time, its maximum \(--max-restarts 1\), so it ends here; resume it to continue/,
      );
      const state = readJson(path.join(dir, 'state.json'));
      expect(state.status).toBe('failed');
      expect(state.elastic.restarts).toBe(1);
      expect(state.elastic.segments.map((s: { reason: string }) => s.reason)).toEqual(['start', 'rank-lost']);
      expect(run.steps().length).toBeLessThanOrEqual(stepsBefore + 1);
      await expectCleanlyGone(run, dir);
      expect(replicaFoldersLeft(run.child.pid!)).toEqual([]);
      // it resumes from its newest checkpoint (two more steps), as a resumed elastic run
      const at = state.step as number;
      const r = shardwise(['train', '--resume', dir, '--steps', String(at + 2), '--json']);
      expect(r.code, r.stderr).toBe(0);
      const after = readJson(path.join(dir, 'state.json'));
      expect(after.status).toBe('completed');
      expect(after.elastic.segments.at(-1)).toMatchObject({ reason: 'resume', world: 3 });
    },
    300_000,
  );
});
