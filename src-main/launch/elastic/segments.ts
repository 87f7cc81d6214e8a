// The record of a run's membership segments: a `segment` line in metrics.jsonl where each begins
// (so charts band by segment while the run goes on), and, for an elastic run, state.json's
// `elastic` (bounds, restarts, lost steps, every segment) that the summary repeats when the run
// completes. A resumed run keeps the segments before its checkpoint and adds one (reason resume).
import type { ElasticSummary, Recovery, Segment } from '../../../common/api/elastic.js';
import { TABLE } from '../../../common/strategies.js';
import type { TrainJob } from '../../../workers/protocol/train.js';
import type { RunFolder } from '../../runs/run-folder.js';
import type { ElasticBounds } from './bounds.js';

/** a segment's layout fields from its job: world, strategy, grid */
export function layoutOf(job: TrainJob): Pick<Segment, 'world' | 'strategy' | 'grid'> {
  const par = job.parallel;
  if (!par) return { world: 1, strategy: 'single' };
  const s = TABLE[par.strategy];
  const grid = s.knobs.has('tp') || s.knobs.has('pp') || s.knobs.has('dp') ? { grid: s.grid(par) } : {};
  return { world: par.world, strategy: par.strategy, ...grid };
}

export class SegmentRecord {
  /** null for a run that is not elastic: its segments are only metrics.jsonl's lines */
  private readonly summary: ElasticSummary | null;

  constructor(
    private readonly folder: RunFolder,
    bounds: ElasticBounds | undefined,
    /** a resume: the step it continues from (the folder's earlier segments up to there are kept) */
    resumedFrom?: number,
  ) {
    if (!bounds) {
      this.summary = null;
      return;
    }
    const before = resumedFrom !== undefined ? folder.readState().elastic : undefined;
    const segments = (before?.segments ?? [])
      .filter((s) => s.from_step < (resumedFrom ?? 0))
      .map((s) => (s.to_step === undefined || s.to_step > resumedFrom! ? { ...s, to_step: resumedFrom } : s));
    this.summary = {
      min: bounds.min,
      max: bounds.max,
      max_restarts: bounds.max_restarts,
      restarts: segments.filter((s) => s.reason !== 'start' && s.reason !== 'resume').length,
      lost_steps: segments.reduce((n, s) => n + s.lost_steps, 0),
      segments,
    };
  }

  get elastic(): ElasticSummary | null {
    return this.summary;
  }

  /** the segment in progress */
  private get current(): Segment | undefined {
    return this.summary?.segments.at(-1);
  }

  /** A segment begins at its from_step: its line in metrics.jsonl, and state.json's `elastic`. */
  begin(segment: Segment): void {
    this.folder.appendMetric({ type: 'segment', step: segment.from_step, segment });
    if (!this.summary) return;
    const prev = this.current;
    if (prev && prev.to_step === undefined) prev.to_step = segment.from_step;
    this.summary.segments.push(segment);
    if (segment.reason !== 'start' && segment.reason !== 'resume') this.summary.restarts++;
    this.summary.lost_steps += segment.lost_steps;
    this.folder.updateState({ elastic: this.summary });
  }

  /** the segment in progress trained its first step: ms from the loss being noticed, and where they went */
  recovered(ms: number, phases?: Recovery): void {
    const seg = this.current;
    if (!seg || seg.recovery_ms !== undefined) return;
    seg.recovery_ms = Math.round(ms);
    if (phases) seg.recovery = Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, Math.round(v)])) as Recovery;
    this.folder.updateState({ elastic: this.summary! });
  }

  /** The summary's `elastic` with the last segment ended at `lastStep` (null: not elastic). */
  closed(lastStep: number | null): ElasticSummary | null {
    if (!this.summary) return null;
    const seg = this.current;
    if (seg && lastStep !== null) seg.to_step = Math.max(seg.from_step, lastStep);
    return this.summary;
  }
}
