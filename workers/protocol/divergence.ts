// A run that diverged: its loss (training or validation) or its gradient norm stopped being a
// finite number. The rank's loop stops at the first such step (throwIfDiverged) after sending the
// step, whose numbers cross as they are (wire-number.ts); the controller's run driver then ends
// the run failed with one sentence (divergenceVerdict) naming what diverged, when, the last finite
// loss of the whole run (a rank knows only its share of it), and what to change. fp16's skipped
// steps are not divergence: their overflowed norm is reported as 0 (precision/step-scaling.ts).
import { precisionOf, type TrainJob } from './train.js';

/** a step's numbers that diverge; null: this rank has none (a rank that does not evaluate) */
export interface StepNumbers {
  loss?: number | null;
  grad_norm?: number | null;
  val_loss?: number | null;
}

const NAMES: Record<keyof StepNumbers, string> = { loss: 'loss', grad_norm: 'gradient norm', val_loss: 'validation loss' };

/** "loss became NaN", for the first non-finite number of a step (loss, then gradient norm, then validation loss); null when all are finite. */
export function divergedWhat(n: StepNumbers): string | null {
  for (const k of ['loss', 'grad_norm', 'val_loss'] as const) {
    const v = n[k];
    if (typeof v === 'number' && !Number.isFinite(v)) return `${NAMES[k]} became ${v}`;
  }
  return null;
}

/** What to change, for this job. */
function advice(job: TrainJob): string {
  const t = job.train;
  const ways = [`lower the learning rate (train.lr = ${t.lr})`];
  if (t.grad_clip === 0) ways.push('clip gradients (train.grad_clip = 1; 0 turns clipping off)');
  if (precisionOf(job) === 'fp16') ways.push("use bf16/fp32 (fp16's range ends at 65504)");
  return ways.length === 1 ? ways[0]! : `${ways.slice(0, -1).join(', ')} or ${ways.at(-1)}`;
}

const fmt = (x: number) => (Math.abs(x) < 1e6 ? String(Number(x.toFixed(4))) : x.toPrecision(4));

/** The run's verdict: "loss became NaN at step 7 (last finite loss 3.1 at step 6); lower the learning rate (train.lr = 1000)". */
export function divergenceVerdict(job: TrainJob, what: string, step: number, last: { loss: number; step: number } | null): string {
  const before = last ? `last finite loss ${fmt(last.loss)} at step ${last.step}` : 'no finite loss before it';
  return `${what} at step ${step} (${before}); ${advice(job)}`;
}

/** The rank's side: stop training at a step whose numbers diverged (its message already sent them). */
export function throwIfDiverged(job: TrainJob, step: number, n: StepNumbers): void {
  const what = divergedWhat(n);
  if (what) throw new Error(`${what} at step ${step}; ${advice(job)}`);
}
