// Faults during an elastic run's recovery, on one machine with real rank processes: rank 0 killed
// -9 while it writes a checkpoint, two losses in a row, and the controller itself killed -9 while
// it restarts the run. None may leave a torn checkpoint, a torn metrics line, a step recorded
// twice or a process behind; the first two complete on their own, the third resumes by hand.
import { spawnSync } from 'node:child_process';
import { existsSync, watch } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ElasticSummary } from '../../common/api/elastic.js';
import { listCheckpoints, loadCheckpoint } from '../../workers/checkpoint/checkpoint.js';
import { BIN, jsonLines, tempDir } from '../cli/helpers.js';
import { DDP3, expectCleanlyGone, expectWholeFolder, losses, readJson, replicaFoldersLeft, Run } from './helpers/elastic-run.js';
import { alive, childPids, waitFor } from './helpers/processes.js';

const everyStep = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** every checkpoint in the folder loads and verifies (sizes, sha256, tensors) and holds its own step */
function expectCheckpointsLoad(dir: string) {
  const all = listCheckpoints(dir);
  expect(all.length).toBeGreaterThan(0);
  for (const c of all) expect(loadCheckpoint(c.dir).manifest.step).toBe(c.step);
}

/**
 * Freezes rank 0 (SIGSTOP) as soon as a checkpoint's temp folder appears; if the folder is still
 * there, the write is under way: rank 0 is killed -9 in the middle of it. Otherwise (the write
 * finished first) rank 0 goes on and the next checkpoint is tried. Resolves with the torn folder's name.
 */
function killRank0MidCheckpoint(run: Run, checkpoints: string, ms: number): Promise<string> {
  const rank0 = run.ranks().get(0)!;
  return new Promise((resolve, reject) => {
    const give = setTimeout(() => (w.close(), reject(new Error(`no checkpoint write caught in ${ms} ms`))), ms);
    const w = watch(checkpoints, (_, name) => {
      if (!name || !/^step-\d{6}\.tmp-\d+-[0-9a-f]+$/.test(name)) return;
      process.kill(rank0, 'SIGSTOP');
      if (existsSync(path.join(checkpoints, name))) {
        process.kill(rank0, 'SIGKILL');
        w.close();
        clearTimeout(give);
        resolve(name);
      } else process.kill(rank0, 'SIGCONT');
    });
  });
}

describe.sequential('elastic recovery under faults', () => {
  it(
    'ddp 3 --elastic 2:3, rank 0 killed -9 while it writes a checkpoint: the run goes on at world 2 from its replica ' +
      'and completes; the torn write is removed and every checkpoint in the folder loads',
    async () => {
      const dir = path.join(tempDir('elastic-ckpt-kill'), 'run');
      const steps = 16;
      const run = new Run(
        [...DDP3, '--steps', String(steps), '--checkpoint-interval', '2', '--keep-checkpoints', '100'].concat([
          '--elastic',
          '2:3',
          '--out',
          dir,
        ]),
      );
      const checkpoints = path.join(dir, 'checkpoints');
      await waitFor(() => existsSync(checkpoints), 150_000, `the first checkpoint (${run.stderr.slice(-400)})`);
      const torn = await killRank0MidCheckpoint(run, checkpoints, 120_000);
      const tornStep = Number(torn.slice(5, 11));
      const poll = setInterval(() => run.ranks(), 300);
      const code = await run.exited;
      clearInterval(poll);
      expect(code, run.stderr).toBe(0);
      const summary = readJson(path.join(dir, 'summary.json'));
      const elastic = summary.elastic as ElasticSummary;
      expect(elastic.segments.map((s) => [s.reason, s.world])).toEqual([
        ['start', 3],
        ['rank-lost', 2],
      ]);
      const after = elastic.segments[1]!;
      expect(after.detail).toMatch(/rank 0 .*SIGKILL/);
      // the checkpoint being written never counted: the run went on from the replica of the step before it
      expect(after).toMatchObject({ source: 'memory', from_step: tornStep - 1 });
      expect(summary.steps).toBe(steps);
      expect([...losses(dir).keys()]).toEqual(everyStep(steps));
      expect(existsSync(path.join(checkpoints, torn))).toBe(false);
      await expectCleanlyGone(run, dir);
      expectCheckpointsLoad(dir);
      expect(listCheckpoints(dir).map((c) => c.step)).toContain(tornStep); // written again by the next segment
      expect(replicaFoldersLeft(run.child.pid!)).toEqual([]);
    },
    300_000,
  );

  it('ddp 3 --elastic 1:3, rank 2 lost, then rank 1 in the next segment: completes at world 1 with 2 restarts and 3 segments', async () => {
    const dir = path.join(tempDir('elastic-two-losses'), 'run');
    const steps = 10;
    const run = new Run([...DDP3, '--steps', String(steps), '--checkpoint-interval', '4', '--elastic', '1:3', '--out', dir]);
    await run.untilStep(3);
    run.ranks();
    run.kill(2);
    // the second segment trained a step: then its rank 1 goes too
    const trainedAfterRestart = () => {
      const lines = jsonLines(run.stdout);
      const at = lines.findIndex((m) => m.type === 'segment' && (m.segment as { reason: string }).reason === 'rank-lost');
      return at >= 0 && lines.slice(at).some((m) => m.type === 'step');
    };
    await waitFor(trainedAfterRestart, 150_000, `a step of the second segment (${run.stderr.slice(-400)})`);
    run.kill(1);
    const poll = setInterval(() => run.ranks(), 300);
    const code = await run.exited;
    clearInterval(poll);
    expect(code, run.stderr).toBe(0);
    const summary = readJson(path.join(dir, 'summary.json'));
    const elastic = summary.elastic as ElasticSummary;
    expect(elastic.restarts).toBe(2);
    expect(elastic.segments.map((s) => [s.reason, s.world])).toEqual([
      ['start', 3],
      ['rank-lost', 2],
      ['rank-lost', 1],
    ]);
    expect(elastic.segments[2]!.detail).toMatch(/rank 1 .*SIGKILL/);
    expect(elastic.segments[2]!.placement).toEqual(['this machine']);
    expect(summary.world).toBe(1);
    expect(elastic.lost_steps).toBeLessThanOrEqual(2);
    expect([...losses(dir).keys()]).toEqual(everyStep(steps));
    await expectCleanlyGone(run, dir);
    expectCheckpointsLoad(dir);
    expect(replicaFoldersLeft(run.child.pid!)).toEqual([]);
  }, 300_000);

  it(
    'the controller killed -9 while it restarts the run (rank 2 lost, the new ranks starting): no process of either ' +
      'segment is left, and `train --resume` completes the folder',
    async () => {
      const dir = path.join(tempDir('elastic-controller-kill'), 'run');
      const steps = 10;
      const run = new Run([...DDP3, '--steps', String(steps), '--checkpoint-interval', '2', '--elastic', '1:3', '--out', dir]);
      await run.untilStep(3);
      const first = run.ranks();
      run.kill(2);
      // the restarted segment's rank 0 exists: the controller is mid-recovery
      await waitFor(() => [...run.ranks()].some(([rank, pid]) => rank === 0 && pid !== first.get(0)), 60_000, 'the restarted ranks');
      const stepsBefore = run.steps().length;
      run.ranks();
      const helpers = childPids(run.child.pid!); // the ranks and the rank watchdog
      run.child.kill('SIGKILL');
      await run.exited;
      expect(run.steps().length).toBeLessThanOrEqual(stepsBefore + 1);
      const everything = [...new Set([...run.seen, ...helpers])];
      await waitFor(() => everything.every((p) => !alive(p)), 20_000, `the processes ${everything.filter(alive).join(', ')} to end`);
      expect(replicaFoldersLeft(run.child.pid!), 'the killed controller could not remove its replica folder').toHaveLength(1);

      const r = spawnSync(process.execPath, [BIN, 'train', '--resume', dir, '--json'], {
        encoding: 'utf8',
        env: { ...process.env, SHARDWISE_DEBUG: '', SHARDWISE_COMM_TIMEOUT_MS: '5000' },
      });
      expect(r.status, r.stderr).toBe(0);
      const state = readJson(path.join(dir, 'state.json'));
      expect(state.status).toBe('completed');
      expect(state.elastic.segments.at(-1)).toMatchObject({ reason: 'resume', world: 3 });
      expect([...losses(dir).keys()]).toEqual(everyStep(steps));
      expectWholeFolder(dir);
      expectCheckpointsLoad(dir);
      // the killed controller's replica folder went with the next elastic run's start, the resumed run's with its end
      expect(replicaFoldersLeft(run.child.pid!, r.pid!)).toEqual([]);
    },
    300_000,
  );
});
