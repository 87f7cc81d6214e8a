// The training loop's side of mixed precision: fp16's dynamic loss scaling around each optimizer
// step (DeepSpeed's fp16 optimizer, apart from the loop as apex's amp keeps it). Each step's backward is seeded
// with loss x scale; the step's gradient norm, read back once as every step does, is inf or NaN
// when the scaled gradients overflowed: the optimizer has then skipped the update, and the
// scaler (loss-scaler.ts) lowers the scale. fp32 and bf16 train at scale 1 and report no scaling.
import { lossScaleOf, type TrainJob } from '../protocol/train.js';
import { LossScaler, type LossScalerState } from './loss-scaler.js';

export class StepScaling {
  private readonly scaler: LossScaler | null;

  /** `resumed`: the scaler's state in the checkpoint the run continues from */
  constructor(job: Pick<TrainJob, 'precision' | 'loss_scale'>, resumed?: LossScalerState) {
    const spec = lossScaleOf(job);
    this.scaler = spec ? new LossScaler(spec, resumed) : null;
  }

  /** the factor the next step's backward is seeded with */
  get scale(): number {
    return this.scaler?.scale ?? 1;
  }

  /**
   * The optimizer step at `scale` returned `norm`: the norm the step reports and the step
   * message's scaling fields. A skipped step applied no gradient: its norm is reported as 0 (inf
   * does not survive JSON), `skipped` says why.
   */
  settle(norm: number, scale: number): { gradNorm: number; fields: { loss_scale?: number; skipped?: boolean; skipped_steps?: number } } {
    if (!this.scaler) return { gradNorm: norm, fields: {} };
    const skipped = this.scaler.update(!Number.isFinite(norm)) === 'skip';
    return { gradNorm: skipped ? 0 : norm, fields: { loss_scale: scale, skipped, skipped_steps: this.scaler.skippedSteps } };
  }

  /** what a checkpoint keeps (nothing without loss scaling) */
  state(): LossScalerState | undefined {
    return this.scaler?.state();
  }

  /** the done message's fields */
  summary(): { loss_scale?: number; skipped_steps?: number } {
    return this.scaler ? { loss_scale: this.scaler.scale, skipped_steps: this.scaler.skippedSteps } : {};
  }
}
