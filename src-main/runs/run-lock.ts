// One writer per run folder: `run.lock` holds {pid, host, started_at} of the process that writes
// the run (a CLI train or resume, or the controller of `serve` for runs.launch / runs.resume). It
// is created with O_EXCL ('wx'), so two writers can never both hold it; it is removed when the
// run ends. A lock whose pid is gone on this host was left by a killed writer and is taken over;
// a lock from another host cannot be checked from here, so it is refused with how to clear it.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

export const LOCK_FILE = 'run.lock';

export interface LockHolder {
  pid: number;
  host: string;
  started_at: string;
}

/** A second writer for a run folder: names the holder and what to do. */
export class RunLockedError extends Error {
  override name = 'RunLockedError';
}

/** Is process `pid` alive on this machine? (EPERM: alive, owned by another user) */
export function pidAlive(pid: number | undefined): boolean {
  if (!pid || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(file: string): LockHolder | null {
  try {
    const v = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockHolder>;
    if (typeof v.pid === 'number' && typeof v.host === 'string')
      return { pid: v.pid, host: v.host, started_at: String(v.started_at ?? '?') };
  } catch {
    // unreadable: a writer killed while creating it (its content is written right after the create)
  }
  return null;
}

/** The holder of a run folder's lock when a live writer (or one on another host) holds it; null when it is free or stale. */
export function lockHolder(dir: string): LockHolder | null {
  const h = readHolder(path.join(dir, LOCK_FILE));
  if (!h) return null;
  return h.host !== hostname() || pidAlive(h.pid) ? h : null;
}

function heldMessage(dir: string, h: LockHolder): string {
  const time = h.started_at.replace(/^.*T(\d\d:\d\d:\d\d).*$/, '$1');
  const started = `started ${time === h.started_at ? h.started_at : `${time} UTC`}`;
  if (h.host !== hostname())
    return `run folder ${dir} is in use by pid ${h.pid} on host ${h.host} (${started}); this machine cannot tell whether it still runs: if it does not, delete ${path.join(dir, LOCK_FILE)}`;
  return `run folder ${dir} is in use by pid ${h.pid} on host ${h.host} (${started}); wait for it to end or stop it`;
}

export class RunLock {
  private constructor(
    readonly file: string,
    private readonly text: string,
  ) {}

  /** Take `dir`'s lock for this process; throws RunLockedError naming the live holder. */
  static acquire(dir: string): RunLock {
    const file = path.join(dir, LOCK_FILE);
    const text = `${JSON.stringify({ pid: process.pid, host: hostname(), started_at: new Date().toISOString() })}\n`;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        writeFileSync(file, text, { flag: 'wx' });
        return new RunLock(file, text);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const seen = existsSync(file) ? readFileSync(file, 'utf8') : '';
      const h = readHolder(file);
      if (h && (h.host !== hostname() || pidAlive(h.pid))) throw new RunLockedError(heldMessage(dir, h));
      // stale: move it aside (atomic), and put it back if another writer replaced it meanwhile
      const aside = `${file}.stale-${process.pid}`;
      try {
        renameSync(file, aside);
      } catch {
        continue; // someone else moved it first: try the create again
      }
      if (readFileSync(aside, 'utf8') !== seen) {
        renameSync(aside, file);
        const now = readHolder(file);
        throw new RunLockedError(now ? heldMessage(dir, now) : `run folder ${dir} is being taken by another writer; try again`);
      }
      rmSync(aside, { force: true });
    }
    throw new RunLockedError(`run folder ${dir}: could not take ${LOCK_FILE}; another writer keeps taking it`);
  }

  /** Remove the lock if it is still this process's (idempotent). */
  release() {
    try {
      if (readFileSync(this.file, 'utf8') === this.text) rmSync(this.file, { force: true });
    } catch {
      // already gone (the folder was deleted)
    }
  }
}
