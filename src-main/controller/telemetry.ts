// A run's live stream with bounded memory: the hub keeps only the latest steps (for
// snapshots); everything else is on disk in the run folder. Each subscriber has a bounded
// queue: one that falls behind (a slow socket) loses its queue and gets a single snapshot in
// its place, so a slow dashboard costs the controller at most MAX_QUEUE events, never more.
import type { RunEvent, RunStateView, StepRow } from '../../common/api/index.js';

export const RECENT_STEPS = 200;
export const MAX_QUEUE = 1000;

export class Subscription {
  private queue: RunEvent[] = [];
  private dropped = 0;
  private closed = false;
  /** called when an event is queued; the transport then drains with take() */
  onReady: (() => void) | null = null;

  constructor(
    private readonly hub: RunTelemetry,
    private readonly maxQueue: number,
  ) {
    this.queue.push(hub.snapshot(0));
  }

  push(e: RunEvent) {
    if (this.closed) return;
    if (this.queue.length >= this.maxQueue) {
      // resync: the lagging subscriber refetches what it missed (runs.metrics / runs.spans)
      this.dropped += this.queue.length + 1;
      this.queue = [this.hub.snapshot(this.dropped)];
    } else this.queue.push(e);
    this.onReady?.();
  }

  take(): RunEvent | undefined {
    return this.queue.shift();
  }

  get pending() {
    return this.queue.length;
  }

  close() {
    this.closed = true;
    this.queue = [];
    this.hub.remove(this);
  }
}

export class RunTelemetry {
  private recent: StepRow[] = [];
  private readonly subs = new Set<Subscription>();

  constructor(
    private readonly readState: () => RunStateView,
    recentSteps: StepRow[] = [],
    private readonly maxQueue = MAX_QUEUE,
  ) {
    this.recent = recentSteps.slice(-RECENT_STEPS);
  }

  publish(e: RunEvent) {
    if (e.type === 'step') {
      this.recent.push(e.row);
      if (this.recent.length > RECENT_STEPS) this.recent.splice(0, this.recent.length - RECENT_STEPS);
    }
    for (const s of this.subs) s.push(e);
  }

  snapshot(dropped: number): RunEvent {
    return { type: 'snapshot', snapshot: { state: this.readState(), recent_steps: [...this.recent], dropped } };
  }

  subscribe(maxQueue = this.maxQueue): Subscription {
    const s = new Subscription(this, maxQueue);
    this.subs.add(s);
    return s;
  }

  remove(s: Subscription) {
    this.subs.delete(s);
  }

  get subscribers() {
    return this.subs.size;
  }
}
