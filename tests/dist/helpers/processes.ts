// Which rank processes a launcher started, and whether they are gone: for the kill and stop
// tests (Linux /proc; the tests run where ranks are local processes).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The rank processes a CLI or agent process started (pid by RANK). */
export function rankPids(parent: number): Map<number, number> {
  const out = new Map<number, number>();
  const r = spawnSync('pgrep', ['-P', String(parent)], { encoding: 'utf8' });
  for (const line of r.stdout.trim().split('\n').filter(Boolean)) {
    try {
      const rank = readFileSync(`/proc/${line}/environ`, 'utf8').split('\0').find((e) => e.startsWith('RANK='));
      if (rank) out.set(Number(rank.slice(5)), Number(line));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Running: a zombie waiting for its parent to reap it has already exited. */
export function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
  } catch {
    return false;
  }
}
