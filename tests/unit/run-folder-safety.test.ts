// Nothing a user does to a run loses it, for the run folder itself: one writer (run.lock,
// a stale one taken over, a live one refused naming its holder), whole error messages from its
// files, a resume checked whole before anything is rewound (a refused one leaves config.json and
// state.json byte for byte), "running" with its process gone read as interrupted, and whether a
// halted run can be resumed at all (what the dashboard offers).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ControllerService } from '../../src-main/controller/service.js';
import { prepareResume, rewindRun } from '../../src-main/launch/resume.js';
import { readRun } from '../../src-main/runs/read-run.js';
import { RunFolder, type RunState } from '../../src-main/runs/run-folder.js';
import { LOCK_FILE, RunLock } from '../../src-main/runs/run-lock.js';
import { tinyJob } from './tiny-job.js';

const dirs: string[] = [];
const children: { kill(): void }[] = [];
afterAll(() => {
  children.forEach((c) => c.kill());
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

function tmp(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'shardwise-folder-safety-'));
  dirs.push(d);
  return d;
}

/** the pid of a process that has exited (gone on this host) */
function deadPid(): number {
  return Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);
}

/** a live process that is not this one (killed after the tests) */
function livePid(): number {
  const c = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  children.push(c);
  return c.pid!;
}

/** A run folder of a 6-step tiny run, halted at `state.step` with checkpoints at `ckpts` (manifest only: enough to choose one). */
function haltedRun(dir: string, state: Partial<RunState>, ckpts: number[] = []): RunFolder {
  const job = tinyJob({ run_dir: dir, train: { steps: 6, checkpoint_interval: 2 } });
  const folder = RunFolder.create(dir, job, 6);
  folder.updateState({ status: 'stopped', step: 3, ...state });
  for (const s of ckpts) {
    const c = path.join(dir, 'checkpoints', `step-${String(s).padStart(6, '0')}`);
    mkdirSync(c, { recursive: true });
    writeFileSync(path.join(c, 'manifest.json'), '{}\n');
  }
  return folder;
}

const bytes = (dir: string) => ({
  config: readFileSync(path.join(dir, 'config.json'), 'utf8'),
  state: readFileSync(path.join(dir, 'state.json'), 'utf8'),
});

function holdLock(dir: string, pid: number, host = hostname()) {
  writeFileSync(path.join(dir, LOCK_FILE), JSON.stringify({ pid, host, started_at: '2026-12-06T12:00:01.000Z' }));
}

describe('run.lock: one writer per run folder', () => {
  it('a second writer is refused naming pid, host and start time; after release it is free', () => {
    const dir = tmp();
    const a = RunLock.acquire(dir);
    expect(() => RunLock.acquire(dir)).toThrow(
      `run folder ${dir} is in use by pid ${process.pid} on host ${hostname()} (started ${/T(\d\d:\d\d:\d\d)/.exec(JSON.parse(readFileSync(path.join(dir, LOCK_FILE), 'utf8')).started_at)![1]} UTC); wait for it to end or stop it`,
    );
    a.release();
    RunLock.acquire(dir).release();
  });

  it('a lock whose pid is gone on this host is taken over; one from another host is refused with how to clear it', () => {
    const dir = tmp();
    holdLock(dir, deadPid());
    const l = RunLock.acquire(dir);
    expect(JSON.parse(readFileSync(path.join(dir, LOCK_FILE), 'utf8')).pid).toBe(process.pid);
    l.release();
    holdLock(dir, 1234, 'other-host');
    expect(() => RunLock.acquire(dir)).toThrow(
      `run folder ${dir} is in use by pid 1234 on host other-host (started 12:00:01 UTC); this machine cannot tell whether it still runs: if it does not, delete ${path.join(dir, LOCK_FILE)}`,
    );
  });
});

describe('whole error messages from the folder files', () => {
  it('config.json with wrong types: every field on its own line, naming folder, file and field', () => {
    const dir = tmp();
    const folder = haltedRun(dir, {}, [2]);
    const c = JSON.parse(readFileSync(folder.configPath, 'utf8'));
    c.train.steps = 'ten';
    c.train.lr = null;
    writeFileSync(folder.configPath, JSON.stringify(c));
    expect(() => folder.readJob()).toThrow(
      [
        `run folder ${dir}: config.json: train.steps: expected number, got "ten"`,
        `run folder ${dir}: config.json: train.lr: expected number, got null`,
      ].join('\n'),
    );
  });

  it('a garbage state.json names the folder and the file', () => {
    const dir = tmp();
    haltedRun(dir, {}, [2]);
    writeFileSync(path.join(dir, 'state.json'), 'not json {');
    expect(() => readRun(dir)).toThrow(new RegExp(`^run folder ${dir}: state.json is not valid JSON \\(Unexpected token`));
    expect(() => prepareResume(dir)).toThrow(new RegExp(`^run folder ${dir}: state.json is not valid JSON`));
    writeFileSync(path.join(dir, 'state.json'), JSON.stringify({ status: 'paused', step: 'x' }));
    expect(() => RunFolder.open(dir).readState()).toThrow(`run folder ${dir}: state.json: step: expected number, got "x"`);
  });
});

describe('a resume is checked whole before anything is rewound', () => {
  const cases: [string, (dir: string) => void, RegExp | string, number | undefined][] = [
    [
      'a bad config',
      (dir) => {
        const p = path.join(dir, 'config.json');
        writeFileSync(p, readFileSync(p, 'utf8').replace('"steps": 6', '"steps": "ten"'));
      },
      `run folder DIR: config.json: train.steps: expected number, got "ten"`,
      undefined,
    ],
    [
      'no checkpoint',
      () => {},
      'run folder DIR cannot be resumed: stopped at step 3 before its first checkpoint; start it again',
      undefined,
    ],
    ['locked by a live writer', (dir) => holdLock(dir, livePid()), /^run folder DIR is in use by pid \d+ on host /, undefined],
    ['--steps not past the checkpoint', () => {}, "--steps 2 is not past the checkpoint's step 2; pass --steps M > 2", 2],
  ];
  for (const [what, spoil, message, steps] of cases) {
    it(`${what}: refused, config.json and state.json byte for byte as they were`, () => {
      const dir = tmp();
      haltedRun(dir, {}, what === 'no checkpoint' ? [] : [2]);
      spoil(dir);
      const before = bytes(dir);
      const expected = typeof message === 'string' ? message.replace('DIR', dir) : new RegExp(message.source.replace('DIR', dir));
      expect(() => prepareResume(dir, steps)).toThrow(expected);
      expect(bytes(dir)).toEqual(before);
    });
  }

  it('a completed run without --steps says so and stays completed; with --steps past it, it resumes', () => {
    const dir = tmp();
    haltedRun(dir, { status: 'completed', step: 6 }, [4, 6]);
    const before = bytes(dir);
    expect(() => prepareResume(dir)).toThrow('run already completed at step 6; pass --steps M > 6');
    expect(() => prepareResume(dir, 6)).toThrow('run already completed at step 6; pass --steps M > 6');
    expect(bytes(dir)).toEqual(before);
    const p = prepareResume(dir, 8);
    expect([p.fromStep, p.job.train.steps, p.job.run_dir, p.job.resume_from]).toEqual([
      6,
      8,
      dir,
      path.join(dir, 'checkpoints/step-000006'),
    ]);
    rewindRun(p, { status: 'running' });
    p.lock.release();
    // config.json stays position-free
    expect(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'))).toMatchObject({ run_dir: '.', train: { steps: 8 } });
    expect(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')).resume_from).toBeUndefined();
  });

  it('a completed run whose latest checkpoint is before its end replays from it without --steps', () => {
    const dir = tmp();
    haltedRun(dir, { status: 'completed', step: 6 }, [4]);
    const p = prepareResume(dir);
    p.lock.release();
    expect([p.fromStep, p.job.train.steps]).toEqual([4, 6]);
  });

  it('an old folder with an absolute run_dir elsewhere resumes as itself', () => {
    const dir = tmp();
    haltedRun(dir, {}, [2]);
    const p = path.join(dir, 'config.json');
    writeFileSync(p, JSON.stringify({ ...JSON.parse(readFileSync(p, 'utf8')), run_dir: '/somewhere/else' }));
    const r = prepareResume(dir);
    r.lock.release();
    expect([r.job.run_dir, r.job.resume_from]).toEqual([dir, path.join(dir, 'checkpoints/step-000002')]);
  });
});

describe('stale "running"', () => {
  it('a run whose process (pid N) is gone on this host reads and is recorded as interrupted', () => {
    const dir = tmp();
    const pid = deadPid();
    haltedRun(dir, { status: 'running', step: 3, pid, host: hostname() }, [2]);
    const run = readRun(dir);
    expect(run.state).toMatchObject({
      status: 'interrupted',
      error: `the process that ran it (pid ${pid}) is gone; it had finished step 3 of 6`,
    });
    expect(JSON.parse(readFileSync(path.join(dir, 'state.json'), 'utf8')).status).toBe('interrupted');
  });

  it('a live pid, or one on another host, stays running', () => {
    const dir = tmp();
    haltedRun(dir, { status: 'running', pid: livePid(), host: hostname() });
    expect(readRun(dir).state.status).toBe('running');
    const other = tmp();
    haltedRun(other, { status: 'running', pid: deadPid(), host: 'other-host' });
    expect(readRun(other).state.status).toBe('running');
  });
});

describe('the API: runs.list / runs.get say whether a run can resume; runs.resume refuses what cannot', () => {
  it('stopped before its first checkpoint: not resumable, with the reason; runs.resume refused with it', async () => {
    const root = tmp();
    const service = new ControllerService({ runsRoot: root });
    haltedRun(path.join(root, 'early'), { status: 'stopped', step: 2 });
    haltedRun(path.join(root, 'later'), { status: 'stopped', step: 3 }, [2]);
    const { runs } = await service.call<'runs.list'>('runs.list', {});
    const byId = Object.fromEntries(runs.map((r) => [r.id, r]));
    expect(byId.early).toMatchObject({ resumable: false, not_resumable_reason: 'stopped at step 2 before its first checkpoint' });
    expect(byId.later).toMatchObject({ resumable: true });
    expect(byId.later!.not_resumable_reason).toBeUndefined();
    expect(await service.call<'runs.get'>('runs.get', { runId: 'early' })).toMatchObject({ resumable: false });
    await expect(service.call('runs.resume', { runId: 'early' })).rejects.toMatchObject({
      name: 'Conflict',
      message: `run folder ${path.join(root, 'early')} cannot be resumed: stopped at step 2 before its first checkpoint; start it again`,
    });
  });

  it('a folder another process writes (its lock held) is refused naming the holder, untouched', async () => {
    const root = tmp();
    const service = new ControllerService({ runsRoot: root });
    const dir = path.join(root, 'live');
    haltedRun(dir, { status: 'stopped', step: 3 }, [2]);
    const pid = livePid();
    holdLock(dir, pid);
    const before = bytes(dir);
    await expect(service.call('runs.resume', { runId: 'live' })).rejects.toMatchObject({
      name: 'Conflict',
      message: `run folder ${dir} is in use by pid ${pid} on host ${hostname()} (started 12:00:01 UTC); wait for it to end or stop it`,
    });
    expect(bytes(dir)).toEqual(before);
  });

  it('a completed run without steps: refused with the field, and it stays completed', async () => {
    const root = tmp();
    const service = new ControllerService({ runsRoot: root });
    const dir = path.join(root, 'done');
    haltedRun(dir, { status: 'completed', step: 6 }, [6]);
    await expect(service.call('runs.resume', { runId: 'done' })).rejects.toMatchObject({
      name: 'ValidationError',
      field: 'steps',
      message: 'runs.resume params: steps: run already completed at step 6; pass steps M > 6',
    });
    expect(JSON.parse(readFileSync(path.join(dir, 'state.json'), 'utf8')).status).toBe('completed');
  });
});
