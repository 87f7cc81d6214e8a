// The controller's side of an elastic run's in-memory replicas: a folder in this machine's memory
// (/dev/shm where there is one) where rank 0, which always runs here, writes the newest whole
// state after every step as a checkpoint folder (workers/elastic/state-save.ts), and reports it.
// It outlives any rank, rank 0 included, so a lost rank or machine costs at most the step in
// progress. A restart from it first copies it into the run folder as a normal checkpoint,
// atomically, so the folder alone can resume the run. Removed when the run ends; a controller
// killed -9 cannot remove its own, so the folder's name carries its pid and the next elastic run
// on this machine removes those whose controller is gone.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { commitDirAtomic, writeFileAtomic } from '../../../workers/protocol/atomic-file.js';
import { pidAlive } from '../../runs/run-lock.js';

const PREFIX = 'shardwise-replica-';

/** memory-backed where the OS has it (Linux's tmpfs), else the temp folder */
function memoryRoot(): string {
  return existsSync('/dev/shm') && statSync('/dev/shm').isDirectory() ? '/dev/shm' : tmpdir();
}

export class ReplicaStore {
  private newest: { step: number; path: string } | null = null;

  private constructor(readonly dir: string) {}

  static create(): ReplicaStore {
    const root = memoryRoot();
    sweepOrphans(root);
    return new ReplicaStore(mkdtempSync(path.join(root, `${PREFIX}${process.pid}-`)));
  }

  /** rank 0 wrote the state after `step` to `at`: kept when it lies in this store's folder and is a finished checkpoint */
  note(step: number, at: string): void {
    const p = path.resolve(at);
    const inside = path.relative(this.dir, p);
    if (inside.startsWith('..') || path.isAbsolute(inside) || !existsSync(path.join(p, 'manifest.json'))) return;
    if (this.newest === null || step > this.newest.step) this.newest = { step, path: p };
  }

  /** the newest replica's step (null: none yet) */
  get step(): number | null {
    return this.newest?.step ?? null;
  }

  /** Copy the newest replica into runDir/checkpoints as a normal checkpoint (atomically: whole or absent); its folder. */
  materialize(runDir: string): string {
    if (!this.newest) throw new Error('no replica to restart from');
    const { path: from } = this.newest;
    const to = path.join(runDir, 'checkpoints', path.basename(from));
    commitDirAtomic(to, (tmp) => {
      for (const f of readdirSync(from)) writeFileAtomic(path.join(tmp, f), readFileSync(path.join(from, f)));
    });
    return to;
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Remove replica folders whose controller (the pid in the name) is no longer running: one killed -9 left them. */
function sweepOrphans(root: string): void {
  for (const name of readdirSync(root)) {
    const m = new RegExp(`^${PREFIX}(\\d+)-`).exec(name);
    if (m && !pidAlive(Number(m[1]))) rmSync(path.join(root, name), { recursive: true, force: true });
  }
}
