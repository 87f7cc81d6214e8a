// Loss smoothing as TensorBoard does it: an exponential moving average, debiased for its zero
// start (so the first smoothed point equals the first value instead of being pulled to 0).
// weight in [0, 1): 0 = no smoothing, 0.9 = strong. Non-finite points pass through unchanged
// and do not disturb the average.
export function emaSmooth(values: readonly number[], weight: number): number[] {
  if (!(weight >= 0 && weight < 1)) throw new Error(`smoothing weight must be in [0, 1), got ${weight}`);
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (!Number.isFinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    n++;
    return last / (1 - weight ** n);
  });
}
