// fp16's loss scaler: the number the loss is multiplied by before backward so that small
// gradients do not flush to zero in 16 bits, raised while steps stay clean and lowered when
// the scaled gradients overflow. Pure (no GPU): the training loop checks the gradients for
// inf/NaN over every rank, calls `update(overflow)` once per optimizer step with that global
// verdict, skips the update when it answers `skip`, and runs the next backward at `scale`.
//
// The semantics are DeepSpeed's DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py,
// `update_scale`), with its config names (the `fp16` section: initial_scale_power,
// loss_scale_window, hysteresis, min_loss_scale, consecutive_hysteresis, loss_scale):
//   - the scale starts at 2^initial_scale_power;
//   - an overflowing step is always skipped. If the hysteresis left is 1 (or hysteresis is 1)
//     the scale halves, but never below min_loss_scale; otherwise the scale stays and the
//     hysteresis left drops by one ("delayed shift": a rare spike costs a skipped step, not a
//     halved scale);
//   - the hysteresis left is refilled only when the scale doubles, unless
//     consecutive_hysteresis, where every clean step refills it (then only `hysteresis`
//     consecutive overflows halve the scale). Once it is down to 1, every overflow halves the
//     scale until the next doubling;
//   - after loss_scale_window clean steps in a row (since the start, the last overflow or the
//     last doubling) the scale doubles. This counts like PyTorch's GradScaler (growth_interval
//     clean steps); DeepSpeed's code measures the interval from the step after the overflow,
//     so its first doubling comes one clean step later;
//   - a static scale (DeepSpeed's fp16.loss_scale > 0) never changes; overflowing steps are
//     still skipped, since inf/NaN gradients would wreck the weights.
// Where DeepSpeed raises when an overflow meets the minimum scale, this scaler stays at the
// minimum and skips: the training loop decides whether a run of skipped steps is fatal.
import type { LossScaleSpec } from '../../common/precision.js';

/** What a checkpoint keeps of the scaler, so that a resumed run scales its next step alike. */
export interface LossScalerState {
  scale: number;
  /** clean steps since the start, the last overflow or the last doubling */
  good_steps: number;
  /** overflows still tolerated before the scale halves */
  hysteresis_left: number;
  /** optimizer steps skipped for an overflow, since the run began */
  skipped_steps: number;
}

export type LossScaleVerdict = 'apply' | 'skip';

export class LossScaler {
  private s: LossScalerState;

  constructor(
    readonly spec: LossScaleSpec,
    state?: LossScalerState,
  ) {
    if (spec.loss_scale_window < 1 || spec.hysteresis < 1 || !(spec.min_loss_scale > 0)) {
      throw new Error(
        `loss scaler: loss_scale_window ${spec.loss_scale_window} and hysteresis ${spec.hysteresis} must be at least 1 and min_loss_scale ${spec.min_loss_scale} above 0`,
      );
    }
    this.s = state ? checkedState(state) : LossScaler.initialState(spec);
  }

  static initialState(spec: LossScaleSpec): LossScalerState {
    const scale = spec.static_scale ?? 2 ** spec.initial_scale_power;
    return { scale, good_steps: 0, hysteresis_left: spec.hysteresis, skipped_steps: 0 };
  }

  get dynamic(): boolean {
    return this.spec.static_scale === undefined;
  }

  /** the factor the next backward's loss (and so every gradient) is multiplied by */
  get scale(): number {
    return this.s.scale;
  }

  get skippedSteps(): number {
    return this.s.skipped_steps;
  }

  /** Called once per optimizer step with the overflow verdict of every rank together. */
  update(overflow: boolean): LossScaleVerdict {
    const s = this.s;
    const spec = this.spec;
    if (overflow) {
      s.skipped_steps++;
      if (!this.dynamic) return 'skip';
      s.good_steps = 0;
      if (s.hysteresis_left <= 1) s.scale = Math.max(s.scale / 2, spec.min_loss_scale);
      else s.hysteresis_left--;
      return 'skip';
    }
    if (!this.dynamic) return 'apply';
    if (spec.consecutive_hysteresis) s.hysteresis_left = spec.hysteresis;
    s.good_steps++;
    if (s.good_steps >= spec.loss_scale_window) {
      s.scale *= 2;
      s.good_steps = 0;
      s.hysteresis_left = spec.hysteresis;
    }
    return 'apply';
  }

  state(): LossScalerState {
    return { ...this.s };
  }
}

function checkedState(state: LossScalerState): LossScalerState {
  const ok =
    Number.isFinite(state.scale) &&
    state.scale > 0 &&
    [state.good_steps, state.hysteresis_left, state.skipped_steps].every((n) => Number.isInteger(n) && n >= 0);
  if (!ok)
    throw new Error(
      `loss scaler: checkpoint state ${JSON.stringify(state)} is not a scaler's state (scale > 0, whole counts): the checkpoint is damaged`,
    );
  return { ...state };
}
