// Resuming a run, one way for `shardwise train --resume` and the API's runs.resume: find the
// checkpoint, take the run's own job, and rewind the run folder to that checkpoint, so metrics
// AND spans past it are dropped before the ranks replay those steps (each step once, whichever
// entry point resumed it).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import { type TrainJob, TrainJobSchema } from '../../workers/protocol/train.js';
import { RunFolder, type RunState } from '../runs/run-folder.js';

/** A run that cannot be resumed: what is missing and where. */
export class ResumeError extends Error {
  override name = 'ResumeError';
}

export interface ResumePoint {
  folder: RunFolder;
  /** the run's job, continuing from the checkpoint (resume_from set) */
  job: TrainJob;
  /** the checkpoint's step: what came after it is replayed */
  fromStep: number;
}

/** target: a run folder (its latest checkpoint) or one checkpoint folder inside it; steps: a new total, if given. */
export function findResumePoint(target: string, steps?: number): ResumePoint {
  let runDir = path.resolve(target);
  let ckpt: string | undefined;
  if (path.basename(path.dirname(runDir)) === 'checkpoints') {
    ckpt = runDir;
    runDir = path.dirname(path.dirname(runDir));
  }
  const folder = RunFolder.open(runDir);
  const job = TrainJobSchema.parse(folder.readConfig());
  if (!ckpt) {
    const dir = path.join(runDir, 'checkpoints');
    const names = existsSync(dir)
      ? readdirSync(dir)
          .filter((n) => /^step-\d+$/.test(n))
          .sort()
      : [];
    if (names.length === 0) throw new ResumeError(`run ${runDir} has no checkpoint to resume from`);
    ckpt = path.join(dir, names[names.length - 1]!);
  }
  if (!existsSync(path.join(ckpt, 'manifest.json'))) throw new ResumeError(`${ckpt} is not a checkpoint (no manifest.json)`);
  if (steps !== undefined) job.train.steps = steps;
  job.resume_from = ckpt;
  return { folder, job, fromStep: Number(/step-(\d+)$/.exec(ckpt)?.[1] ?? 0) };
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
 * Rewind the run folder to the resume point: metrics and spans past its step dropped, the state
 * back at that step (`status` and the caller's fields), the config without resume_from.
 */
export function rewindRun(p: ResumePoint, state: Pick<RunState, 'status'> & Partial<RunState>) {
  const { folder, job, fromStep } = p;
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
    ...state,
  });
  folder.writeConfig({ ...job, resume_from: undefined });
}
