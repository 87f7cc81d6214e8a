// The numeric formats a run can train in. fp32: everything in float32 (Shardwise's first
// engine). bf16 / fp16: mixed precision as the ZeRO paper and DeepSpeed count it: 16-bit compute
// weights and gradients on the device (2 + 2 bytes per parameter), an fp32 master copy and
// AdamW's two fp32 moments as the optimizer's state (K = 12 bytes per parameter). fp16 needs
// loss scaling (its exponent is bf16's minus 3 bits); bf16 has float32's range and needs none.
export const PRECISIONS = ['fp32', 'bf16', 'fp16'] as const;
export type Precision = (typeof PRECISIONS)[number];
export const DEFAULT_PRECISION: Precision = 'fp32';

/** bytes per element of the device's compute copy of the weights and of the gradients */
export const computeBytes = (p: Precision): number => (p === 'fp32' ? 4 : 2);

/**
 * fp16's loss scaling, with DeepSpeed's config names (its `fp16` section) and defaults. A
 * static scale (DeepSpeed's `fp16.loss_scale` > 0) replaces the dynamic one.
 */
export interface LossScaleSpec {
  /** the dynamic scale starts at 2^initial_scale_power */
  initial_scale_power: number;
  /** clean (overflow-free) steps before the scale doubles */
  loss_scale_window: number;
  /** overflows tolerated before the scale halves (DeepSpeed's delayed shift) */
  hysteresis: number;
  /** the scale never halves below this */
  min_loss_scale: number;
  /** DeepSpeed's consecutive_hysteresis: a clean step refills the hysteresis (default false: only a doubling does) */
  consecutive_hysteresis?: boolean;
  /** when set (> 0): this constant scale, no dynamic adjustment */
  static_scale?: number;
}

export const DEFAULT_LOSS_SCALE: Readonly<LossScaleSpec> = {
  initial_scale_power: 16,
  loss_scale_window: 1000,
  hysteresis: 2,
  min_loss_scale: 1,
};
