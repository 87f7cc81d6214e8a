// Resuming a run, one way for `shardwise train --resume` and the API's runs.resume: find the
// checkpoint, take the run's own job, and rewind the run folder to that checkpoint, so metrics
// AND spans past it are dropped before the ranks replay those steps (each step once, whichever
// entry point resumed it).
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { isTmpDirName, writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import type { TrainJob } from '../../workers/protocol/train.js';
import { RunFolder, type RunState } from '../runs/run-folder.js';
import { currentState, isLiveStatus } from '../runs/run-liveness.js';
import { RunLock, RunLockedError } from '../runs/run-lock.js';

/** A run that cannot be resumed: what is missing and where; field: the request's field at fault (steps). */
export class ResumeError extends Error {
  override name = 'ResumeError';
  constructor(
    message: string,
    readonly field?: 'steps',
  ) {
    super(message);
  }
}

export interface ResumePoint {
  folder: RunFolder;
  /** the run's job, continuing from the checkpoint (resume_from set; run_dir the folder's real path) */
  job: TrainJob;
  /** the checkpoint's step: what came after it is replayed */
  fromStep: number;
  /** the folder's writer lock, held from here until the resumed run ends */
  lock: RunLock;
}

/** Steps of the complete checkpoints (checkpoints/step-N with its manifest.json) in a run folder, ascending. */
export function checkpointSteps(runDir: string): number[] {
  const dir = path.join(runDir, 'checkpoints');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => /^step-\d+$/.test(n) && existsSync(path.join(dir, n, 'manifest.json')))
    .map((n) => Number(n.slice(5)))
    .sort((a, b) => a - b);
}

const checkpointDir = (runDir: string, step: number) => path.join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`);

/** Whether runs.resume (with no new step count) would continue the run, and if not why: what the UI shows instead of Resume. */
export function resumability(state: RunState, checkpoints: number[]): { resumable: boolean; not_resumable_reason?: string } {
  if (isLiveStatus(state.status))
    return { resumable: false, not_resumable_reason: `it is ${state.status} (step ${state.step} of ${state.steps})` };
  if (state.status === 'completed')
    return {
      resumable: false,
      not_resumable_reason: checkpoints.length
        ? `it completed at step ${state.step}; resume it with more steps to continue`
        : `it completed at step ${state.step} without a checkpoint`,
    };
  if (checkpoints.length === 0)
    return { resumable: false, not_resumable_reason: `${state.status} at step ${state.step} before its first checkpoint` };
  return { resumable: true };
}

/**
 * Everything a resume needs, checked before anything is written: the folder's config and state,
 * no other writer (its lock is taken here), a complete checkpoint, a step count past it.
 * target: a run folder (its latest checkpoint) or one checkpoint folder inside it; steps: a new
 * total, if given (flag: its name in messages); activeHere: see currentState.
 */
export function prepareResume(target: string, steps?: number, opts: { flag?: string; activeHere?: boolean } = {}): ResumePoint {
  const flag = opts.flag ?? '--steps';
  let runDir = path.resolve(target);
  let ckpt: string | undefined;
  if (path.basename(path.dirname(runDir)) === 'checkpoints') {
    ckpt = runDir;
    runDir = path.dirname(path.dirname(runDir));
  }
  const folder = RunFolder.open(runDir);
  const job = folder.readJob();
  const state = currentState(folder, opts.activeHere);
  let lock: RunLock;
  try {
    lock = RunLock.acquire(runDir);
  } catch (e) {
    if (e instanceof RunLockedError) throw new ResumeError(e.message);
    throw e;
  }
  try {
    if (isLiveStatus(state.status))
      throw new ResumeError(
        `run folder ${runDir} is in use by pid ${state.pid ?? '?'} on host ${state.host ?? hostname()} (its state is ${state.status}); wait for it to end or stop it`,
      );
    let fromStep: number;
    if (ckpt) {
      if (!existsSync(path.join(ckpt, 'manifest.json'))) throw new ResumeError(`${ckpt} is not a checkpoint (no manifest.json)`);
      fromStep = Number(/step-(\d+)$/.exec(ckpt)?.[1] ?? 0);
    } else {
      const all = checkpointSteps(runDir);
      if (all.length === 0) {
        throw new ResumeError(
          `run folder ${runDir} cannot be resumed: ${resumability(state, all).not_resumable_reason ?? 'it has no checkpoint'}; start it again`,
        );
      }
      fromStep = all[all.length - 1]!;
      ckpt = checkpointDir(runDir, fromStep);
    }
    // nothing past the checkpoint to train: a completed run continues only to a new total
    if ((steps ?? job.train.steps) <= fromStep) {
      if (state.status === 'completed')
        throw new ResumeError(`run already completed at step ${state.step}; pass ${flag} M > ${Math.max(state.step, fromStep)}`, 'steps');
      const given = steps !== undefined ? `${flag} ${steps} is` : `the run's ${job.train.steps} steps are`;
      throw new ResumeError(`${given} not past the checkpoint's step ${fromStep}; pass ${flag} M > ${fromStep}`, 'steps');
    }
    if (steps !== undefined) job.train.steps = steps;
    job.resume_from = ckpt;
    return { folder, job, fromStep, lock };
  } catch (e) {
    lock.release();
    throw e;
  }
}

/** Drop span lines past `step` (a torn or unreadable line goes too). */
function truncateSpans(dir: string, step: number) {
  const file = path.join(dir, 'spans.jsonl');
  if (!existsSync(file)) return;
  const kept = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => {
      if (!l.trim()) return false;
      try {
        return (JSON.parse(l) as { step?: number }).step! <= step;
      } catch {
        return false;
      }
    });
  writeFileAtomic(file, kept.map((l) => `${l}\n`).join(''));
}

/**
 * Remove the temp folders of checkpoint writes that never finished (`step-N.tmp-PID-X`, and the
 * `step-N.old-PID-X` of a replace cut short): rank 0 killed while writing a checkpoint leaves
 * one. Nothing reads them (only a folder named step-N with its manifest is a checkpoint); this
 * keeps the folder tidy. Called only under the folder's writer lock with no rank of it running,
 * so no write is in progress.
 */
function removeTornCheckpoints(runDir: string) {
  const dir = path.join(runDir, 'checkpoints');
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) if (isTmpDirName(name)) rmSync(path.join(dir, name), { recursive: true, force: true });
}

/**
 * Rewind the run folder to the resume point: metrics and spans past its step dropped, torn
 * checkpoint writes removed, the state back at that step (`status` and the caller's fields), the
 * config without resume_from.
 */
export function rewindRun(p: Pick<ResumePoint, 'folder' | 'job' | 'fromStep'>, state: Pick<RunState, 'status'> & Partial<RunState>) {
  const { folder, job, fromStep } = p;
  removeTornCheckpoints(folder.dir);
  folder.truncateMetrics(fromStep);
  truncateSpans(folder.dir, fromStep);
  folder.writeState({
    ...folder.readState(),
    step: fromStep,
    steps: job.train.steps,
    error: undefined,
    failed_rank: undefined,
    ranks: undefined,
    updated_at: new Date().toISOString(),
    pid: process.pid,
    host: hostname(),
    ...state,
  });
  folder.writeConfig({ ...job, replica_dir: undefined }); // position-free: run_dir ".", no resume_from, no replica folder
}
