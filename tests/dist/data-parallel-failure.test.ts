import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { BIN, tempDir } from '../cli/helpers.js';
import { alive, childPids, cmdline, killRankMidRun, rankPids, shmFilesOf, stateOf, waitFor } from './helpers/processes.js';

it('kill -9 of rank 1 mid-run: the run fails within the collective deadline naming rank 1, and no rank process is left', async () => {
  const out = path.join(tempDir('kill'), 'run');
  const {
    code,
    msAfterKill: elapsed,
    stderr,
    ranks,
  } = await killRankMidRun(
    [
      'train',
      '--strategy',
      'ddp',
      '--world',
      '2',
      '--steps',
      '2000',
      '--eval-interval',
      '0',
      '--checkpoint-interval',
      '0',
      '--out',
      out,
      '--json',
    ],
    1,
    3,
  );
  expect([...ranks.keys()].sort()).toEqual([0, 1]);
  expect(code).not.toBe(0);
  expect(elapsed).toBeLessThan(15_000);
  // the first report wins: rank 1's death itself, or rank 0's collective failing on its lost peer
  expect(stderr.trim().split('\n').at(-1)).toMatch(/^shardwise: (rank 1 was killed by SIGKILL|rank 0: .*peer rank 1)/);
  expect(JSON.parse(readFileSync(path.join(out, 'state.json'), 'utf8')).status).toBe('failed');
  await new Promise((r) => setTimeout(r, 500));
  for (const pid of ranks.values()) expect(alive(pid), `rank process ${pid}`).toBe(false);
});

it('the controller killed -9 mid-run with rank 1 stopped (SIGSTOP): within 5 s no rank and no watchdog is alive, and /dev/shm holds nothing of the run', async () => {
  const out = path.join(tempDir('orphan'), 'run');
  const child = spawn(process.execPath, [
    BIN,
    'train',
    '--strategy',
    'ddp',
    '--world',
    '2',
    '--steps',
    '2000',
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--out',
    out,
    '--json',
  ]);
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  const t0 = Date.now();
  while (!stdout.includes('"type":"step"')) {
    if (Date.now() - t0 > 120_000) throw new Error('no step after 120 s');
    await new Promise((r) => setTimeout(r, 200));
  }
  const ranks = rankPids(child.pid!);
  expect(ranks.size).toBe(2);
  const watchdogs = childPids(child.pid!).filter((pid) => cmdline(pid).includes('rank-watchdog-main.js'));
  expect(watchdogs).toHaveLength(1);
  // the ring files on /dev/shm the ranks hold, named or already unlinked: none may outlive them
  const rings = [...ranks.values()].flatMap(shmFilesOf);
  process.kill(ranks.get(1)!, 'SIGSTOP'); // a stopped rank cannot run its own disconnect handler
  await waitFor(() => stateOf(ranks.get(1)!) === 'T', 5000, 'rank 1 to stop');
  child.kill('SIGKILL');
  const killedAt = Date.now();
  const left = () => [...ranks.values(), ...watchdogs].filter(alive);
  while (left().length && Date.now() - killedAt < 5000) await new Promise((r) => setTimeout(r, 100));
  for (const pid of ranks.values()) expect(alive(pid), `rank process ${pid} 5 s after its controller died`).toBe(false);
  for (const pid of watchdogs) expect(alive(pid), `watchdog ${pid} 5 s after its ranks died`).toBe(false);
  expect(rings.filter((f) => existsSync(f))).toEqual([]);
  // every finished step is in the run folder
  const steps = readFileSync(path.join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .filter((l) => l.includes('"type":"step"'));
  expect(steps.length).toBeGreaterThanOrEqual(1);
});

it('train --json | head: the closed pipe stops the run as interrupted (resumable), with one line, and no rank left', async () => {
  const out = path.join(tempDir('pipe'), 'run');
  const child = spawn(process.execPath, [
    BIN,
    'train',
    '--strategy',
    'ddp',
    '--world',
    '2',
    '--steps',
    '2000',
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--out',
    out,
    '--json',
  ]);
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  const ranks = rankPids(child.pid!);
  child.stdout.destroy(); // what `head -1` does after its line
  expect(await exited).toBe(130);
  // the ranks finished the step they were in and checkpointed it (a stop checkpoints)
  const last = stderr.trim().split('\n').at(-1)!;
  expect(last).toMatch(
    /^shardwise: standard output was closed; stopped after step \d+, its checkpoint written; continue with: shardwise train --resume /,
  );
  expect(readdirSync(path.join(out, 'checkpoints'))).toEqual([`step-${/after step (\d+)/.exec(last)![1]!.padStart(6, '0')}`]);
  expect(JSON.parse(readFileSync(path.join(out, 'state.json'), 'utf8')).status).toBe('interrupted');
  await new Promise((r) => setTimeout(r, 3500));
  for (const pid of ranks.values()) expect(alive(pid)).toBe(false);
});
