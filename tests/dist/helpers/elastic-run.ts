// An elastic `shardwise train` in the background, as the elastic tests watch it: its JSON output,
// every rank process it started (any segment), and what must hold once it is gone: no process,
// no replica folder, only finished checkpoints, every metrics line whole and each step once.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { BIN, jsonLines } from '../../cli/helpers.js';
import { alive, rankPids, waitFor } from './processes.js';

/** `shardwise train ARGS --json` in the background, its output and rank processes watched */
export class Run {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<number>;
  /** every rank process seen, any segment */
  readonly seen = new Set<number>();

  constructor(args: string[], env: NodeJS.ProcessEnv = {}) {
    this.child = spawn(process.execPath, [BIN, 'train', ...args, '--json'], {
      env: { ...process.env, SHARDWISE_DEBUG: '', SHARDWISE_COMM_TIMEOUT_MS: '5000', ...env },
    });
    this.child.stdout!.on('data', (d) => (this.stdout += d));
    this.child.stderr!.on('data', (d) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code ?? -1)));
  }

  ranks(): Map<number, number> {
    const r = rankPids(this.child.pid!);
    for (const pid of r.values()) this.seen.add(pid);
    return r;
  }

  steps(): number[] {
    return jsonLines(this.stdout)
      .filter((m) => m.type === 'step')
      .map((m) => m.step as number);
  }

  /** the segments begun so far, from the output's segment lines */
  segments(): { reason: string; world: number; from_step: number }[] {
    return jsonLines(this.stdout)
      .filter((m) => m.type === 'segment')
      .map((m) => m.segment as { reason: string; world: number; from_step: number });
  }

  async untilStep(step: number, ms = 150_000) {
    await waitFor(() => this.steps().includes(step), ms, `step ${step} (${this.stderr.slice(-400)})`);
  }

  kill(rank: number): number {
    const pid = this.ranks().get(rank);
    if (pid === undefined) throw new Error(`no rank ${rank} among ${JSON.stringify([...this.ranks()])}`);
    process.kill(pid, 'SIGKILL');
    return pid;
  }
}

export const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'));

/** step -> loss, from metrics.jsonl */
export function losses(dir: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const l of readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').split('\n'))
    if (l.includes('"type":"step"')) {
      const m = JSON.parse(l) as { step: number; loss: number };
      out.set(m.step, m.loss);
    }
  return out;
}

/** nothing of the run is left running, and its folder holds only finished checkpoints */
export async function expectCleanlyGone(run: Run, dir: string) {
  await new Promise((r) => setTimeout(r, 500));
  expect(run.seen.size).toBeGreaterThan(0);
  for (const pid of run.seen) expect(alive(pid), `rank process ${pid}`).toBe(false);
  expect(rankPids(run.child.pid!).size).toBe(0);
  expectWholeFolder(dir);
}

/** only finished checkpoints (no temp folder a killed writer left), every metrics line parses, no step recorded twice */
export function expectWholeFolder(dir: string) {
  const ckpts = readdirSync(path.join(dir, 'checkpoints'));
  for (const c of ckpts) {
    expect(c, 'a half-written checkpoint folder').toMatch(/^step-\d{6}$/);
    expect(existsSync(path.join(dir, 'checkpoints', c, 'manifest.json'))).toBe(true);
  }
  const lines = readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n');
  const steps = lines.map((l) => JSON.parse(l) as { type: string; step: number }).filter((m) => m.type === 'step');
  expect(new Set(steps.map((s) => s.step)).size).toBe(steps.length);
}

/** replica folders on /dev/shm of these controller processes (the name carries the pid: other runs on the machine do not count) */
export const replicaFoldersLeft = (...controllers: number[]) =>
  existsSync('/dev/shm') ? readdirSync('/dev/shm').filter((n) => controllers.some((pid) => n.startsWith(`shardwise-replica-${pid}-`))) : [];

export const DDP3 = ['--preset', 'tiny', '--strategy', 'ddp', '--world', '3', '--batch-size', '12', '--eval-interval', '0'];
