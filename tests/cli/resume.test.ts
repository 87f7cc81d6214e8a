import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tinyJob } from '../unit/tiny-job.js';
import { BIN, jsonLines, shardwise, stepLosses, tempDir } from './helpers.js';

// `train --resume` rewinds the run folder like the API's runs.resume (src-main/launch/resume.ts):
// metrics and spans past the checkpoint are dropped, so each replayed step is in the folder once.
// tests/dist/serve-api.test.ts checks the same from the API.
const LONG = 600_000;

/** spans.jsonl as a count per "rank:step" */
function spanCounts(dir: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const l of readFileSync(path.join(dir, 'spans.jsonl'), 'utf8').split('\n')) {
    if (!l.trim()) continue;
    const s = JSON.parse(l) as { rank: number; step: number };
    counts[`${s.rank}:${s.step}`] = (counts[`${s.rank}:${s.step}`] ?? 0) + 1;
  }
  return counts;
}

describe('train --resume', () => {
  it(
    'replays the steps after the checkpoint once: metrics and spans past it are dropped first, losses are the same',
    () => {
      const root = tempDir('resume');
      const full = path.join(root, 'full');
      const args = [
        '--strategy',
        'ddp',
        '--world',
        '2',
        '--steps',
        '4',
        '--seed',
        '3',
        '--checkpoint-interval',
        '2',
        '--eval-interval',
        '0',
      ];
      const a = shardwise(['train', ...args, '--out', full, '--json']);
      expect(a.code, a.stderr).toBe(0);
      const counts = spanCounts(full);
      expect(Object.keys(counts).sort()).toEqual(['0:1', '0:2', '0:3', '0:4', '1:1', '1:2', '1:3', '1:4']);

      // the same folder, continued from step 2: steps 3 and 4 run again
      const copy = path.join(root, 'copy');
      cpSync(full, copy, { recursive: true });
      const b = shardwise(['train', '--resume', path.join(copy, 'checkpoints', 'step-000002'), '--json']);
      expect(b.code, b.stderr).toBe(0);
      const replayed = jsonLines(b.stdout).filter((m) => m.type === 'step');
      expect(replayed.map((m) => m.step)).toEqual([3, 4]);
      expect(stepLosses(b.stdout)).toEqual(stepLosses(a.stdout).slice(2));

      expect(spanCounts(copy)).toEqual(counts);
      const metrics = jsonLines(readFileSync(path.join(copy, 'metrics.jsonl'), 'utf8')).filter((m) => m.type === 'step');
      expect(metrics.map((m) => m.step)).toEqual([1, 2, 3, 4]);
      expect(JSON.parse(readFileSync(path.join(copy, 'state.json'), 'utf8'))).toMatchObject({ status: 'completed', step: 4 });
    },
    LONG,
  );
});

/** every file under dir (relative path -> sha256), to see a folder byte for byte */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = path.join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else out[path.relative(dir, p)] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

const metricLines = (dir: string) => jsonLines(readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8'));
const TINY = ['--steps', '4', '--seed', '5', '--checkpoint-interval', '2', '--eval-interval', '0', '--json'];

describe('run folders are position-free', () => {
  it(
    'cp -a and mv: the resumed copy gets the new steps and checkpoints, the source is byte for byte untouched',
    () => {
      const root = tempDir('moved');
      const src = path.join(root, 'src');
      const a = shardwise(['train', ...TINY, '--out', src]);
      expect(a.code, a.stderr).toBe(0);
      expect(JSON.parse(readFileSync(path.join(src, 'config.json'), 'utf8')).run_dir).toBe('.');
      expect(metricLines(src).filter((m) => m.type === 'checkpoint')).toEqual([
        { type: 'checkpoint', step: 2, path: 'checkpoints/step-000002' },
        { type: 'checkpoint', step: 4, path: 'checkpoints/step-000004' },
      ]);
      expect(JSON.parse(readFileSync(path.join(src, 'summary.json'), 'utf8')).run_dir).toBe('.');
      const before = tree(src);

      const copy = path.join(root, 'copy');
      cpSync(src, copy, { recursive: true, preserveTimestamps: true });
      const b = shardwise(['train', '--resume', copy, '--steps', '6', '--json']);
      expect(b.code, b.stderr).toBe(0);
      expect(jsonLines(b.stdout).at(-1)).toMatchObject({ type: 'summary', run_dir: copy, steps: 6 });
      expect(
        metricLines(copy)
          .filter((m) => m.type === 'step')
          .map((m) => m.step),
      ).toEqual([1, 2, 3, 4, 5, 6]);
      expect(readdirSync(path.join(copy, 'checkpoints'))).toContain('step-000006');
      expect(tree(src)).toEqual(before);

      const moved = path.join(root, 'moved');
      renameSync(src, moved);
      const c = shardwise(['train', '--resume', moved, '--steps', '6', '--json']);
      expect(c.code, c.stderr).toBe(0);
      expect(readdirSync(path.join(moved, 'checkpoints'))).toContain('step-000006');
      expect(existsSync(src)).toBe(false);
      expect(stepLosses(c.stdout)).toEqual(stepLosses(b.stdout));

      // completed: without --steps it says so, exits 2 and the folder stays completed, byte for byte
      const done = tree(copy);
      const d = shardwise(['train', '--resume', copy]);
      expect([d.code, d.stderr]).toEqual([2, 'shardwise: run already completed at step 6; pass --steps M > 6\n']);
      expect(tree(copy)).toEqual(done);
    },
    LONG,
  );
});

describe('one writer per run folder', () => {
  it(
    'train --resume while a CLI run of that folder is live is refused naming its pid and host; metrics.jsonl holds one line per step',
    async () => {
      const out = path.join(tempDir('locked'), 'run');
      const steps = 40;
      const child = spawn(
        process.execPath,
        [BIN, 'train', '--steps', String(steps), '--checkpoint-interval', '2', '--eval-interval', '0', '--out', out, '--json'],
        {
          env: { ...process.env, SHARDWISE_DEBUG: '' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let err = '';
      child.stderr.on('data', (d) => (err += d));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      child.stdout.resume();
      // wait for its first checkpoint: then a resume would otherwise be accepted
      const deadline = Date.now() + 240_000;
      while (!(
        existsSync(path.join(out, 'metrics.jsonl')) && readFileSync(path.join(out, 'metrics.jsonl'), 'utf8').includes('"checkpoint"')
      )) {
        if (Date.now() > deadline) throw new Error(`no checkpoint within 240 s: ${err}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const r = shardwise(['train', '--resume', out]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(
        new RegExp(
          `^shardwise: run folder ${out} is in use by pid ${child.pid} on host ${hostname()} \\(started \\d\\d:\\d\\d:\\d\\d UTC\\); wait for it to end or stop it\n$`,
        ),
      );
      expect(await exited, err).toBe(0);
      expect(
        metricLines(out)
          .filter((m) => m.type === 'step')
          .map((m) => m.step),
      ).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
      expect(existsSync(path.join(out, 'run.lock'))).toBe(false);
    },
    LONG,
  );
});

describe('whole error messages from a run folder', () => {
  function folder(config: unknown, state: string): string {
    const dir = path.join(tempDir('bad-folder'), 'run');
    mkdirSync(path.join(dir, 'checkpoints', 'step-000002'), { recursive: true });
    writeFileSync(path.join(dir, 'checkpoints', 'step-000002', 'manifest.json'), '{}');
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
    writeFileSync(path.join(dir, 'state.json'), state);
    writeFileSync(path.join(dir, 'metrics.jsonl'), '');
    return dir;
  }
  const state = JSON.stringify({ status: 'stopped', created_at: 'x', updated_at: 'x', step: 3, steps: 6 });

  it('a config.json with a wrong type names the folder, file and field; a garbage state.json the file; nothing is rewritten', () => {
    const job = tinyJob({ run_dir: '.' });
    const bad = folder({ ...job, train: { ...job.train, steps: 'ten' } }, state);
    const before = tree(bad);
    const a = shardwise(['train', '--resume', bad]);
    expect([a.code, a.stderr]).toEqual([2, `shardwise: run folder ${bad}: config.json: train.steps: expected number, got "ten"\n`]);
    expect(tree(bad)).toEqual(before);

    const garbage = folder(job, 'not json {');
    const b = shardwise(['train', '--resume', garbage]);
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(
      new RegExp(
        `^shardwise: run folder ${garbage}: state.json is not valid JSON \\(Unexpected token 'o', "not json \\{" is not valid JSON\\)\n$`,
      ),
    );
  });
});
