// A data-parallel rank's compute spans, layer by layer: each layer's forward and backward closed
// on the device clock as the model's hooks pass it (a micro-batch ends at layer 0's backward), and
// per step the spans message and how much of the gradient communication (the spans labelled with
// a bucket) overlapped backward, DDP's point, whose mean over the run goes in the summary.
import { overlapPercent } from '../../common/charts/intervals.js';
import type { CommSpan } from '../comm/index.js';
import type { ComputeSpan } from '../gpu/gpu-timeline.js';
import { type SpansMessage, spansMessage } from './spans-message.js';

/** What measures the spans: the device's timeline (gpu-timeline.ts) or an emulated device. */
export interface Timeline {
  mark(kind: 'forward' | 'backward', layer: string, micro: number): void;
  drain(): Promise<ComputeSpan[]>;
}

/** The model's layer hooks (workers/model/gpt.ts), as far as spans use them. */
interface LayerHooks {
  afterForward?(layer: { name: string; index: number }): unknown;
  afterBackward?(layer: { name: string; index: number }): unknown;
}

export class LayerSpans {
  private readonly overlaps: number[] = [];

  /** `send`: spans go in messages (else the timeline is only drained each step, an emulated device's step closed) */
  constructor(
    private readonly timeline: Timeline,
    hooks: LayerHooks,
    private readonly rank: number,
    private readonly send: boolean,
  ) {
    let micro = 0;
    hooks.afterForward = (l) => timeline.mark('forward', l.name, micro);
    hooks.afterBackward = (l) => {
      timeline.mark('backward', l.name, micro);
      if (l.index === 0) micro++;
    };
  }

  /** The step's spans message from its communication spans (null when spans are not sent). */
  async message(step: number, comm: readonly CommSpan[]): Promise<SpansMessage | null> {
    const compute = await this.timeline.drain();
    if (!this.send) return null;
    const gradComm = comm.filter((x) => x.labels?.bucket !== undefined);
    const o = overlapPercent(
      compute.filter((x) => x.kind === 'backward'),
      gradComm,
    );
    if (o !== null) this.overlaps.push(o);
    const spans = compute.map((x) => ({ kind: x.kind, name: x.layer, start: x.start, end: x.end, micro: x.micro }));
    return spansMessage(this.rank, step, spans, comm);
  }

  /** the mean overlap of gradient communication with backward over the steps that had any */
  summary(): { overlap_pct?: number } {
    return this.overlaps.length ? { overlap_pct: this.overlaps.reduce((a, b) => a + b, 0) / this.overlaps.length } : {};
  }
}
