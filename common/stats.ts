// The summary statistics the benchmarks, the profiler and the charts take of repeated
// measurements (step times, kernel times, link probes): one definition of each, so that two
// numbers called a median are the same statistic. Pure.

/** The middle value (the mean of the two middle values for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The arithmetic mean; NaN for none. */
export const mean = (xs: readonly number[]): number => (xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length);

/** The p-th percentile (0..100), linearly interpolated between the nearest ranks; NaN for none. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const at = (Math.min(Math.max(p, 0), 100) / 100) * (s.length - 1);
  const lo = Math.floor(at);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo);
}

/** How far `x` is from `base`, in percent of `base` (+10: 10% more). */
export const relDiffPct = (x: number, base: number): number => ((x - base) / base) * 100;

/** `x` rounded to `digits` decimals, as the JSON the benchmarks print keeps it. */
export const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;
