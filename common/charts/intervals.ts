// Interval arithmetic on [start, end) spans of one clock: the union of busy time, its length,
// the gaps inside a window and the share of one set hidden under another (overlap).
export interface Interval {
  start: number;
  end: number;
}

/** Sorted, disjoint union of the intervals (empty ones dropped). */
export function unionIntervals(xs: readonly Interval[]): Interval[] {
  const sorted = xs.filter((x) => x.end > x.start).sort((a, b) => a.start - b.start);
  const out: Interval[] = [];
  for (const x of sorted) {
    const last = out[out.length - 1];
    if (last && x.start <= last.end) last.end = Math.max(last.end, x.end);
    else out.push({ start: x.start, end: x.end });
  }
  return out;
}

export const totalLength = (xs: readonly Interval[]): number => xs.reduce((s, x) => s + (x.end - x.start), 0);

/** Length of the intersection of two unions. */
export function intersectionLength(a: readonly Interval[], b: readonly Interval[]): number {
  const ua = unionIntervals(a);
  const ub = unionIntervals(b);
  let s = 0;
  let j = 0;
  for (const x of ua) {
    while (j < ub.length && ub[j]!.end <= x.start) j++;
    for (let k = j; k < ub.length && ub[k]!.start < x.end; k++)
      s += Math.max(0, Math.min(x.end, ub[k]!.end) - Math.max(x.start, ub[k]!.start));
  }
  return s;
}

/** The idle gaps of `busy` inside `window`. */
export function gapsIn(window: Interval, busy: readonly Interval[]): Interval[] {
  const out: Interval[] = [];
  let t = window.start;
  for (const b of unionIntervals(busy)) {
    if (b.end <= window.start || b.start >= window.end) continue;
    if (b.start > t) out.push({ start: t, end: b.start });
    t = Math.max(t, b.end);
  }
  if (t < window.end) out.push({ start: t, end: window.end });
  return out;
}

/** Percent of the communication time during which compute also ran; null without communication. */
export function overlapPercent(compute: readonly Interval[], comm: readonly Interval[]): number | null {
  const commTime = totalLength(unionIntervals(comm));
  if (commTime <= 0) return null;
  return (100 * intersectionLength(comm, compute)) / commTime;
}
