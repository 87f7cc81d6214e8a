// The run view's membership: the segments a run went through (its metrics rows and the elastic
// block of its state and summary), the rows of the Membership table, and who is present now (the
// newest segment's machines) against the machines that left. Pure: tests/unit/membership.test.ts.
import type { Segment } from '../../common/api/elastic.js';
import type { RunDetail } from '../../common/api/index.js';
import {
  mergeSegments,
  segmentLayout,
  segmentMachines,
  segmentRecovery,
  segmentStretches,
  showsSegments,
} from '../../common/charts/index.js';

/**
 * The run's segments: its metrics rows (live: the stream's segment events) with state.json's and
 * summary.json's `elastic` laid over them (kept up to date as segments end and recover).
 */
export function runSegments(d: { detail: Pick<RunDetail, 'state' | 'summary'> | null; segments: readonly Segment[] }): Segment[] {
  const state = d.detail?.state.elastic?.segments;
  const summary = (d.detail?.summary?.elastic as { segments?: Segment[] } | undefined)?.segments;
  return mergeSegments(mergeSegments(d.segments, state), Array.isArray(summary) ? summary : undefined);
}

export interface MembershipRow {
  index: number;
  steps: string;
  layout: string;
  machines: string;
  reason: string;
  detail: string;
  lost: number;
  recovery: string;
  current: boolean;
}

/** One row per segment, the newest marked current while it has no end; [] when the segments show nothing. */
export function membershipRows(segments: readonly Segment[], lastStep: number, live: boolean): MembershipRow[] {
  if (!showsSegments(segments)) return [];
  const stretches = segmentStretches(segments, lastStep);
  return stretches.map((st) => ({
    index: st.index,
    steps: st.to > st.from ? `${st.from + 1}–${st.to}` : `from ${st.from + 1}`,
    layout: segmentLayout(st.segment),
    machines: segmentMachines(st.segment),
    reason: st.segment.reason,
    detail: st.segment.detail ?? '',
    lost: st.segment.lost_steps,
    recovery: st.index === 1 && st.segment.reason === 'start' ? '—' : segmentRecovery(st.segment),
    current: live && st.index === stretches.length,
  }));
}

export interface Presence {
  /** the newest segment's machines, each with its ranks: "this machine (ranks 0, 1)" */
  present: string;
  /** the newest segment's machines, as placement names them */
  machines: string[];
  /** machines an earlier segment had and the newest has not, with the step they were last seen at */
  gone: { machine: string; lastStep: number }[];
}

/** Who trains now and who left; null when the segments show nothing. */
export function presenceOf(segments: readonly Segment[]): Presence | null {
  if (!showsSegments(segments)) return null;
  const newest = segments[segments.length - 1]!;
  const now = new Set(newest.placement);
  const gone = new Map<string, number>();
  segments.forEach((s, i) => {
    const end = segments[i + 1]?.from_step ?? s.to_step ?? s.from_step;
    for (const m of s.placement) if (!now.has(m)) gone.set(m, Math.max(gone.get(m) ?? 0, s.to_step ?? end));
  });
  return { present: segmentMachines(newest), machines: [...now], gone: [...gone].map(([machine, lastStep]) => ({ machine, lastStep })) };
}
