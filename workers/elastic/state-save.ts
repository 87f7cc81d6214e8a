// What a rank saves of the whole state at the end of a step: a checkpoint when one is due (the
// run folder's, agreed by every rank: run-control/), else, in an elastic run, a replica: the same
// checkpoint folder under the job's replica_dir, a memory-backed folder on the controller's
// machine (rank 0 always runs there), so that a lost rank or machine costs at most the step in
// progress. Every rank gathers (a collective); rank 0 writes and reports which one it wrote.
import type { TrainJob } from '../protocol/train.js';

export interface StateSave {
  /** where the checkpoint folder goes */
  run_dir: string;
  /** the message rank 0 sends once it is written */
  type: 'checkpoint' | 'replica';
}

/** null when nothing is saved after this step (no checkpoint due, not elastic) */
export function stateSave(job: TrainJob, checkpointDue: boolean): StateSave | null {
  if (checkpointDue) return { run_dir: job.run_dir, type: 'checkpoint' };
  return job.replica_dir ? { run_dir: job.replica_dir, type: 'replica' } : null;
}
