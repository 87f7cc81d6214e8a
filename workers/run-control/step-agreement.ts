// What every rank does at the end of a step, decided together: write a checkpoint, and stop.
// Ranks see a stop request (SIGTERM) at different moments and only rank 0's clock counts the
// checkpoint minutes, so after each step the world takes the max of [stop requested, time due]
// over all ranks: one 8-byte all-reduce, the same answer everywhere, so every rank gathers the
// same step's checkpoint and leaves the loop at the same step. A run of one rank needs none.
import { CheckpointCadence, type CadenceSpec } from './checkpoint-cadence.js';
import { armStop, markStopped, stopRequested } from './stop-request.js';

/** what the agreement needs of the world's process group (a WorldGroup) */
export interface WorldMax {
  readonly size: number;
  allReduce(buf: Float32Array, o: { op: 'max' }): { wait(): Promise<unknown> };
}

export interface StepDecision {
  /** gather and save this step's checkpoint */
  checkpoint: boolean;
  /** then leave the loop (the checkpoint is written first) */
  stop: boolean;
}

export class StepAgreement {
  private readonly cadence: CheckpointCadence;
  private readonly flags = new Float32Array(2);
  /** the step the loop stopped after, or null while it runs (and when it ran to the end) */
  stoppedAt: number | null = null;

  constructor(
    private readonly spec: CadenceSpec,
    private readonly pg: WorldMax | null,
    private readonly rank: number,
    private readonly stopAsked: () => boolean = stopRequested,
    now?: () => number,
  ) {
    this.cadence = new CheckpointCadence(spec, now);
    armStop();
  }

  /** after step `step` (every rank calls it once per step, in step order) */
  async agree(step: number): Promise<StepDecision> {
    this.flags[0] = this.stopAsked() ? 1 : 0;
    this.flags[1] = this.rank === 0 && this.cadence.timeDue() ? 1 : 0;
    if (this.pg && this.pg.size > 1) await this.pg.allReduce(this.flags, { op: 'max' }).wait();
    // a stop at the run's last step lets it complete
    const stop = this.flags[0] === 1 && step < this.spec.steps;
    const checkpoint = stop || this.flags[1] === 1 || this.cadence.stepDue(step);
    if (checkpoint) this.cadence.written();
    if (stop) markStopped((this.stoppedAt = step));
    return { checkpoint, stop };
  }
}
