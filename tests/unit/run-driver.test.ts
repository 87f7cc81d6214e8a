// The one run driver behind `shardwise train` and the controller (src-main/launch/run-driver.ts),
// fed by a fake launcher: what reaches the run folder (one metric line per step over all ranks,
// spans, state, summary), in which order the front end hears it, and how each ending is recorded.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RankInfo } from '../../src-main/launch/local-ranks.js';
import type { LaunchOptions, RankFailureInfo, RankLauncher } from '../../src-main/launch/rank-launcher.js';
import { type RunEnd, RunDriver } from '../../src-main/launch/run-driver.js';
import { RunFolder } from '../../src-main/runs/run-folder.js';
import type { RankMessage, TrainJob } from '../../workers/protocol/train.js';
import { tinyJob } from './tiny-job.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function job(dir: string, world: number): TrainJob {
  return tinyJob({
    run_dir: dir,
    train: { steps: 2 },
    parallel: { strategy: 'ddp', world, micro_batches: 1, bucket_cap_mb: 0.25, first_bucket_mb: 0.0625 },
  });
}

/** A launcher whose "ranks" are this test: it sends their messages and decides how they exit. */
class FakeLauncher implements RankLauncher {
  send!: (m: RankMessage, rank: number) => void;
  opts!: LaunchOptions;
  stopped = 0;
  exit!: (failure: RankFailureInfo | null) => void;
  launch(_job: TrainJob, onMessage: (m: RankMessage, rank: number) => void, opts: LaunchOptions = {}) {
    this.send = onMessage;
    this.opts = opts;
    const result = new Promise<RankFailureInfo | null>((resolve) => (this.exit = resolve));
    return { result, stop: () => void this.stopped++, pids: [] };
  }
}

function setup(world = 2) {
  const dir = mkdtempSync(path.join(tmpdir(), 'run-driver-'));
  dirs.push(dir);
  const j = job(dir, world);
  const folder = RunFolder.create(dir, j, j.train.steps);
  const heard: string[] = [];
  const driver = new RunDriver(folder, j, {
    step: (s) => heard.push(`step ${s.step} loss ${s.loss}`),
    eval: (l) => heard.push(`eval ${l.step}`),
    checkpoint: (l) => heard.push(`checkpoint ${l.step}`),
    spans: (lines, rank) => heard.push(`spans rank ${rank}: ${lines.length}`),
    state: (s) => heard.push(`state ${s.status}`),
    end: (e) => heard.push(`end ${e.status}`),
  });
  const launcher = new FakeLauncher();
  const ended = driver.run(launcher);
  const lines = (file: string) =>
    readFileSync(path.join(dir, file), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const state = () => folder.readState();
  return { dir, driver, launcher, ended, heard, lines, state };
}

const step = (step: number, loss: number, stepMs: number): RankMessage => ({
  type: 'step',
  step,
  loss,
  lr: 1e-3,
  grad_norm: 0.5,
  tokens: 8,
  step_ms: stepMs,
  tokens_per_s: 0,
  memory: { params: 100 },
});
const done = (rank: number): RankMessage => ({ type: 'done', rank, steps: 2, final_loss: 1, peak_bytes: { params: 100 }, params: 50 });
const ready: RankMessage = {
  type: 'ready',
  adapter: { description: 'fake', vendor: 'test', isSoftware: true, backend: 'none' },
  vocab_size: 65,
  params: 50,
  start_step: 0,
  memory: { params: 100 },
};
const placed: RankInfo[] = [
  { rank: 0, machine: 'this machine', pid: 11 },
  { rank: 1, machine: 'this machine', pid: 12 },
];

describe('RunDriver', () => {
  it('writes one metric line per step once both ranks reported it (losses summed, slowest rank timed), then a completed summary with the state last', async () => {
    const r = setup();
    r.launcher.send(ready, 0);
    expect(r.state()).toMatchObject({ status: 'running', params: 50, vocab_size: 65 });
    r.launcher.opts.onRanksStarted!(placed);
    expect(r.state().ranks).toEqual(placed);
    r.launcher.send(step(1, 1.5, 100), 1);
    expect(r.lines('metrics.jsonl')).toEqual([]); // rank 0 has not reported step 1
    r.launcher.send(step(1, 2, 200), 0);
    r.launcher.send({ type: 'spans', rank: 0, step: 1, spans: [{ kind: 'forward', name: 'block.0', start: 1, end: 2 }] }, 0);
    r.launcher.send({ type: 'eval', step: 1, val_loss: 3.25 }, 0);
    r.launcher.send({ type: 'checkpoint', step: 1, path: 'checkpoints/step-000001' }, 0);
    expect(r.state().step).toBe(1);
    r.launcher.send(done(0), 0);
    r.launcher.send(done(1), 1);
    r.launcher.exit(null);
    const end = await r.ended;

    const metrics = r.lines('metrics.jsonl');
    expect(metrics).toHaveLength(3);
    expect(metrics[0]).toMatchObject({
      type: 'step',
      step: 1,
      loss: 3.5,
      step_ms: 200,
      tokens_per_s: 40,
      memory: { 0: { params: 100 }, 1: { params: 100 } },
    });
    expect(metrics.slice(1)).toEqual([
      { type: 'eval', step: 1, val_loss: 3.25 },
      { type: 'checkpoint', step: 1, path: 'checkpoints/step-000001' },
    ]);
    expect(r.lines('spans.jsonl')).toEqual([{ rank: 0, step: 1, kind: 'forward', name: 'block.0', start: 1, end: 2 }]);
    expect(end.status).toBe('completed');
    const summary = JSON.parse(readFileSync(path.join(r.dir, 'summary.json'), 'utf8')) as Record<string, unknown>;
    // on disk the folder names itself "." (position-free); the front ends get its real path
    const ended = (end as Extract<RunEnd, { status: 'completed' }>).summary;
    expect(summary).toEqual({ ...ended, run_dir: '.' });
    expect(ended.run_dir).toBe(r.dir);
    expect(summary).toMatchObject({ type: 'summary', steps: 2, final_loss: 3.5, val_loss: 3.25, strategy: 'ddp', world: 2 });
    expect(summary.ranks).toEqual([
      { rank: 0, machine: 'this machine' },
      { rank: 1, machine: 'this machine' },
    ]);
    expect(r.state()).toMatchObject({ status: 'completed', step: 2 });
    expect(r.heard).toEqual([
      'state running',
      'state running', // the ranks' placement
      'step 1 loss 3.5',
      'spans rank 0: 1',
      'eval 1',
      'checkpoint 1',
      'end completed',
      'state completed',
    ]);
  });

  it('a rank failure fails the run with that rank and reason, and writes no summary', async () => {
    const r = setup();
    r.launcher.send(done(1), 1);
    r.launcher.exit({ rank: 0, message: 'rank 0: out of memory' });
    expect(await r.ended).toEqual({ status: 'failed', error: 'rank 0: out of memory', rank: 0 });
    expect(r.state()).toMatchObject({ status: 'failed', error: 'rank 0: out of memory', failed_rank: 0 });
    expect(r.driver.recordedSteps).toBe(false);
    expect(() => readFileSync(path.join(r.dir, 'summary.json'))).toThrow();
    expect(r.heard).toEqual(['end failed', 'state failed']);
  });

  it('ranks that all exit cleanly but not all finished fail the run, naming how many did', async () => {
    const r = setup();
    r.launcher.send(done(0), 0);
    r.launcher.exit(null);
    expect(await r.ended).toEqual({ status: 'failed', error: 'only 1 of 2 ranks finished' });
    expect(r.state().failed_rank).toBeUndefined();
  });

  it('a stop ends the run as stopped once the ranks are gone, whatever their exit said', async () => {
    const r = setup();
    r.driver.stop('stopped', 'stopped by the user');
    r.driver.stop('stopped', 'again');
    expect(r.launcher.stopped).toBe(1);
    expect(r.state().status).toBe('starting'); // not before the ranks are gone
    r.launcher.exit({ rank: 1, message: 'rank 1 was killed by SIGTERM before finishing' });
    expect(await r.ended).toEqual({ status: 'stopped', error: 'stopped by the user' });
    expect(r.state()).toMatchObject({ status: 'stopped', error: 'stopped by the user' });
  });

  it('interrupt marks the run interrupted at once (the process is about to exit) and stops the ranks', () => {
    const r = setup();
    r.driver.interrupt('interrupted by the user');
    expect(r.launcher.stopped).toBe(1);
    expect(r.state()).toMatchObject({ status: 'interrupted', error: 'interrupted by the user' });
  });
});
