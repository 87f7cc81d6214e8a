// When a run writes a checkpoint: every `checkpoint_interval` steps (and at the last step), or
// when `checkpoint_minutes` have passed since the last one (or the start), whichever comes
// first; 0 turns either off. The minutes are measured on one clock (rank 0's) and agreed with
// the others (step-agreement.ts): every rank must gather the same step's checkpoint.
import { DEFAULT_CHECKPOINT_MINUTES } from '../protocol/train.js';

export interface CadenceSpec {
  steps: number;
  checkpoint_interval: number;
  /** absent (a job from before the field): the default */
  checkpoint_minutes?: number;
}

export class CheckpointCadence {
  private last: number;
  private readonly periodMs: number;

  constructor(
    private readonly spec: CadenceSpec,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.last = now();
    this.periodMs = (spec.checkpoint_minutes ?? DEFAULT_CHECKPOINT_MINUTES) * 60_000;
  }

  /** the step's number says so (every N steps, and the run's last step) */
  stepDue(step: number): boolean {
    const n = this.spec.checkpoint_interval;
    return n > 0 && (step % n === 0 || step === this.spec.steps);
  }

  /** this clock says so: the period has passed since the last checkpoint */
  timeDue(): boolean {
    return this.periodMs > 0 && this.now() - this.last >= this.periodMs;
  }

  /** a checkpoint was written: the period starts again */
  written(): void {
    this.last = this.now();
  }
}
