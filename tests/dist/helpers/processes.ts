// Which rank processes a launcher started, and whether they are gone: for the kill and stop
// tests (Linux /proc; the tests run where ranks are local processes).
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { BIN } from '../../cli/helpers.js';

// the rank processes a CLI or agent process started (pid by RANK), and whether a pid still runs:
// one definition, shared with the fault matrix's harness
import { alive, rankPids } from '../../../bench/faults/harness.js';

export { alive, rankPids };

/** Every child process of `parent`. */
export function childPids(parent: number): number[] {
  const r = spawnSync('pgrep', ['-P', String(parent)], { encoding: 'utf8' });
  return r.stdout.trim().split('\n').filter(Boolean).map(Number);
}

/** A process's command line, arguments joined by spaces ('' once it is gone). */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** A process's state letter (R, S, T, Z, ...), '' once it is gone. */
export function stateOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0]!;
  } catch {
    return '';
  }
}

/** The files under /dev/shm a process holds open, by the names they were opened under. */
export function shmFilesOf(pid: number): string[] {
  const out: string[] = [];
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`).replace(/ \(deleted\)$/, '');
        if (target.startsWith('/dev/shm/')) out.push(target);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    // gone
  }
  return out;
}

/** Polls `ok` every 50 ms until it holds, or throws naming `what` after `ms`. */
export async function waitFor(ok: () => boolean, ms: number, what: string): Promise<void> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface KilledRun {
  /** the CLI's exit code */
  code: number;
  /** ms from the kill to the CLI's exit */
  msAfterKill: number;
  stderr: string;
  /** the rank processes (pid by rank) seen before the kill */
  ranks: Map<number, number>;
}

/**
 * Runs `shardwise <argv>` (comm deadline 5 s), waits for `afterSteps` step lines on stdout,
 * kill -9s rank `victim` and waits for the CLI to exit: the kill tests of every strategy.
 */
export async function killRankMidRun(argv: string[], victim: number, afterSteps: number): Promise<KilledRun> {
  const child = spawn(process.execPath, [BIN, ...argv], { env: { ...process.env, SHARDWISE_COMM_TIMEOUT_MS: '5000' } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
  const t0 = Date.now();
  while ((stdout.match(/"type":"step"/g) ?? []).length < afterSteps) {
    if (Date.now() - t0 > 120_000) {
      child.kill('SIGKILL');
      throw new Error(`no ${afterSteps} steps after 120 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const ranks = rankPids(child.pid!);
  const killedAt = Date.now();
  const pid = ranks.get(victim);
  if (pid === undefined) {
    child.kill('SIGKILL');
    throw new Error(`rank ${victim} is not among the rank processes ${JSON.stringify([...ranks])}`);
  }
  process.kill(pid, 'SIGKILL');
  const code = await exited;
  return { code, msAfterKill: Date.now() - killedAt, stderr, ranks };
}
