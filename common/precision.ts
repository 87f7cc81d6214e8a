// The numeric formats a run can train in. fp32: everything in float32 (Shardwise's first
// engine). bf16 / fp16: mixed precision as the ZeRO paper and DeepSpeed count it: 16-bit compute
// weights and gradients on the device (2 + 2 bytes per parameter), an fp32 master copy and
// AdamW's two fp32 moments as the optimizer's state (K = 12 bytes per parameter). fp16 needs
// loss scaling (its exponent is bf16's minus 3 bits); bf16 has float32's range and needs none.
export const PRECISIONS = ['fp32', 'bf16', 'fp16'] as const;
export type Precision = (typeof PRECISIONS)[number];
export const DEFAULT_PRECISION: Precision = 'fp32';

/** a stored run's precision (config.json's field, absent before mixed precision = fp32) */
export const precisionOrDefault = (v: unknown): Precision =>
  (PRECISIONS as readonly unknown[]).includes(v) ? (v as Precision) : DEFAULT_PRECISION;

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

/** How outputs name a run's precision ("bf16 mixed precision"); a run's config is data from its folder, read loosely. */
export function precisionLabel(config: unknown): string {
  const p = precisionOrDefault((config as { precision?: unknown } | null | undefined)?.precision);
  return p === 'fp32' ? 'fp32' : `${p} mixed precision (fp32 master weights and moments)`;
}

/**
 * The loss-scale line of the run view and the report ("loss scale 65536 · 3 steps skipped"),
 * from the latest step row or the summary; null when the run reports neither (fp32, bf16).
 */
export function lossScaleLine(row: { loss_scale?: unknown; skipped_steps?: unknown } | null | undefined): string | null {
  const scale = typeof row?.loss_scale === 'number' ? row.loss_scale : null;
  const skipped = typeof row?.skipped_steps === 'number' ? row.skipped_steps : null;
  if (scale === null && skipped === null) return null;
  const parts = scale !== null ? [`loss scale ${scale}`] : [];
  if (skipped !== null) parts.push(`${skipped} step${skipped === 1 ? '' : 's'} skipped (overflow)`);
  return parts.join(' · ');
}
