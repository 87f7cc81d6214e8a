// Stopping early never loses the run: Ctrl-C of `shardwise train` at step ~3,
// long before its first interval checkpoint (half the steps), lets the ranks finish their step
// and checkpoint it; the resume then continues from that step with the uninterrupted run's losses.
// A pipeline's ranks do the same when one of them is sent SIGTERM directly.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive } from '../dist/helpers/processes.js';
import { BIN, jsonLines, lastJsonLine, shardwise, stepLosses, tempDir } from './helpers.js';

const LONG = 300_000;
const STEPS = 10;

interface Stopped {
  code: number | null;
  stderr: string;
  steps: number[];
  losses: number[];
}

/** `shardwise ARGS --json`, stopped at its step-3 line: SIGINT to the CLI, or SIGTERM to the rank `rankPid` picks from state.json */
function stopAtStep3(
  args: string[],
  how: { signal: 'SIGINT'; twice?: boolean } | { signal: 'SIGTERM'; rankOf: () => number },
): Promise<Stopped> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args, '--json'], { env: { ...process.env, SHARDWISE_DEBUG: '' } });
    let out = '';
    let err = '';
    let sent = false;
    child.stdout.on('data', (d) => {
      out += d;
      if (sent || !/"type":"step","step":3,/.test(out)) return;
      sent = true;
      if (how.signal === 'SIGINT') {
        child.kill('SIGINT');
        if (how.twice) setTimeout(() => child.kill('SIGINT'), 20);
      } else process.kill(how.rankOf(), 'SIGTERM');
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => {
      const steps = jsonLines(out).filter((m) => m.type === 'step');
      resolve({ code, stderr: err, steps: steps.map((m) => m.step as number), losses: steps.map((m) => m.loss as number) });
    });
  });
}

const metricSteps = (dir: string) =>
  readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; step: number })
    .filter((m) => m.type === 'step')
    .map((m) => m.step);

describe('a stopped run checkpoints the step it stopped at, and resumes from it', () => {
  const root = tempDir('stop-ckpt');

  it(
    `Ctrl-C of train (ddp x 2, ${STEPS} steps) at step 3: exit 130, a checkpoint of the stop step, and the resume's losses are the uninterrupted run's`,
    async () => {
      const run = path.join(root, 'ddp');
      const common = ['train', '--preset', 'tiny', '--steps', String(STEPS), '--strategy', 'ddp', '--world', '2', '--seed', '5'];
      // the uninterrupted reference runs beside the stopped one
      const reference = lastJsonLine('reference', [...common, '--out', path.join(root, 'ref'), '--json']);
      const s = await stopAtStep3([...common, '--out', run], { signal: 'SIGINT' });
      expect(s.code, s.stderr).toBe(130);
      const at = s.steps.at(-1)!;
      // the ranks finished the step they were in: step 3, or 4 when the signal came during it
      expect(at, s.stderr).toBeGreaterThanOrEqual(3);
      expect(at).toBeLessThan(STEPS / 2);
      expect(s.stderr).toContain('stopping after the step in progress');
      expect(s.stderr).toContain('(Ctrl-C again to quit without one)');
      expect(s.stderr).toContain(`stopped after step ${at}, its checkpoint written; continue with: shardwise train --resume ${run}`);
      expect(readdirSync(path.join(run, 'checkpoints'))).toEqual([`step-00000${at}`]);
      const state = JSON.parse(readFileSync(path.join(run, 'state.json'), 'utf8'));
      expect([state.status, state.step]).toEqual(['interrupted', at]);

      const r = shardwise(['train', '--resume', run, '--json']);
      expect(r.code, r.stderr).toBe(0);
      const resumed = jsonLines(r.stdout).filter((m) => m.type === 'step');
      expect(resumed[0]!.step).toBe(at + 1);
      expect((await reference).steps).toBe(STEPS);
      const refLosses = readFileSync(path.join(root, 'ref', 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; loss: number })
        .filter((m) => m.type === 'step')
        .map((m) => m.loss);
      expect(refLosses).toHaveLength(STEPS);
      // bitwise: the stopped run's steps, then the resumed ones, are the uninterrupted run's
      expect([...s.losses, ...stepLosses(r.stdout)]).toEqual(refLosses);
      expect(metricSteps(run)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    },
    LONG,
  );

  it(
    'SIGTERM to one rank of a pipeline (pp x 2, 1F1B) at step 3: both stages checkpoint the same step, the run is interrupted and resumes from it',
    async () => {
      const run = path.join(root, 'pp');
      const rankPid = (rank: number) =>
        (JSON.parse(readFileSync(path.join(run, 'state.json'), 'utf8')) as { ranks: { rank: number; pid: number }[] }).ranks.find(
          (r) => r.rank === rank,
        )!.pid;
      const args = ['train', '--preset', 'tiny', '--steps', String(STEPS), '--strategy', 'pp', '--pp', '2', '--schedule', '1f1b'];
      const s = await stopAtStep3([...args, '--micro-batches', '2', '--out', run], { signal: 'SIGTERM', rankOf: () => rankPid(1) });
      const at = s.steps.at(-1)!;
      expect(s.code).toBe(1);
      expect(s.stderr).toContain(
        `rank 1 was sent SIGTERM: every rank stopped after step ${at} and wrote its checkpoint; resume it to continue`,
      );
      expect(readdirSync(path.join(run, 'checkpoints'))).toEqual([`step-00000${at}`]);
      expect(JSON.parse(readFileSync(path.join(run, 'state.json'), 'utf8')).status).toBe('interrupted');
      const r = shardwise(['train', '--resume', run, '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(jsonLines(r.stdout).filter((m) => m.type === 'step')[0]!.step).toBe(at + 1);
      expect(metricSteps(run)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    },
    LONG,
  );

  it(
    'a second Ctrl-C quits at once without the checkpoint: exit 130, the run interrupted, no rank left, and it says the run cannot be resumed',
    async () => {
      const run = path.join(root, 'twice');
      const s = await stopAtStep3(
        ['train', '--preset', 'tiny', '--steps', String(STEPS), '--strategy', 'ddp', '--world', '2', '--out', run],
        {
          signal: 'SIGINT',
          twice: true,
        },
      );
      expect(s.code, s.stderr).toBe(130);
      expect(s.stderr.trim().split('\n').at(-1)).toBe(
        'shardwise: interrupted by the user; quit without a checkpoint of this step; no checkpoint was written, so it cannot be resumed',
      );
      expect(existsSync(path.join(run, 'checkpoints'))).toBe(false);
      const state = JSON.parse(readFileSync(path.join(run, 'state.json'), 'utf8')) as { status: string; ranks: { pid: number }[] };
      expect(state.status).toBe('interrupted');
      expect(state.ranks).toHaveLength(2);
      await expect.poll(() => state.ranks.filter((r) => alive(r.pid)), { timeout: 5_000 }).toEqual([]);
    },
    LONG,
  );
});
