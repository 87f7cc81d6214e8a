// Overlap of communication with computation: the share of the time gradient collectives were
// in flight that the device was also busy with backward (PyTorch DDP's "comm hidden by
// compute"). Intervals on the epoch-ms clock.
type Interval = { start: number; end: number };

function union(xs: readonly Interval[]): Interval[] {
  const sorted = xs.filter((x) => x.end > x.start).sort((a, b) => a.start - b.start);
  const out: Interval[] = [];
  for (const x of sorted) {
    const last = out[out.length - 1];
    if (last && x.start <= last.end) last.end = Math.max(last.end, x.end);
    else out.push({ start: x.start, end: x.end });
  }
  return out;
}

const total = (xs: readonly Interval[]) => xs.reduce((s, x) => s + (x.end - x.start), 0);

/** Percent of communication time that overlaps compute; null when there was no communication. */
export function overlapPercent(compute: readonly Interval[], comm: readonly Interval[]): number | null {
  const c = union(comm);
  const commTime = total(c);
  if (commTime <= 0) return null;
  const k = union(compute);
  let hidden = 0;
  for (const a of c) for (const b of k) hidden += Math.max(0, Math.min(a.end, b.end) - Math.max(a.start, b.start));
  return (100 * hidden) / commTime;
}
