// Is a run that says starting/running really live? Its state.json records the pid and host of
// the process that writes it. A reader on that host that finds the pid gone (a `shardwise train`
// or `serve` killed with -9) and no live holder of run.lock records the run as interrupted, so
// every reader (the report, the runs list, `serve` at start, a resume) shows the same truth.
import { hostname } from 'node:os';
import { lockHolder, pidAlive } from './run-lock.js';
import type { RunFolder, RunState } from './run-folder.js';

const LIVE = new Set(['starting', 'running']);

/**
 * folder's state, repaired when its writer is gone. activeHere: whether this process drives the
 * run (the controller knows; undefined: unknown, so a state naming this process is live).
 */
export function currentState(folder: RunFolder, activeHere?: boolean): RunState {
  const s = folder.readState();
  if (!LIVE.has(s.status) || activeHere) return s;
  if (s.host !== undefined && s.host !== hostname()) return s; // cannot be checked from here
  const own = (pid: number | undefined) => pid === process.pid && activeHere === undefined;
  if (s.pid !== undefined && s.pid !== process.pid && pidAlive(s.pid)) return s;
  if (own(s.pid)) return s;
  const holder = lockHolder(folder.dir);
  if (holder && (holder.pid !== process.pid || own(holder.pid))) return s;
  const error = `the process that ran it (pid ${s.pid ?? '?'}) is gone; it had finished step ${s.step} of ${s.steps}`;
  folder.updateState({ status: 'interrupted', error });
  return folder.readState();
}

export const isLiveStatus = (status: string) => LIVE.has(status);
