// Compute spans on the device, on the same epoch-ms clock as the communication spans: the work
// of each layer is submitted on its own and its span ends when the queue reports it done. The
// queue runs submissions in order, so a span starts when the previous one ended or when it was
// submitted, whichever is later.
import { nowMs } from '../comm/index.js';
import type { Runtime } from './runtime.js';

export interface ComputeSpan {
  kind: 'forward' | 'backward' | 'optimizer';
  layer: string;
  micro: number;
  start: number;
  end: number;
}

export class GpuTimeline {
  readonly spans: ComputeSpan[] = [];
  private lastEnd = 0;
  private pending: Promise<void>[] = [];

  constructor(private readonly rt: Runtime) {}

  /** Close the span of the work recorded since the previous mark. */
  mark(kind: ComputeSpan['kind'], layer: string, micro: number) {
    this.rt.flush();
    const submitted = nowMs();
    const p = this.rt.device.queue.onSubmittedWorkDone().then(() => {
      const end = nowMs();
      const start = Math.max(submitted, this.lastEnd);
      this.lastEnd = end;
      this.spans.push({ kind, layer, micro, start, end });
    });
    this.pending.push(p);
  }

  /** Wait for every marked span to be measured, and hand them over. */
  async drain(): Promise<ComputeSpan[]> {
    await Promise.all(this.pending);
    this.pending = [];
    return this.spans.splice(0);
  }
}
