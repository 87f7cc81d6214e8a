// What the communication layer reports to the rank's telemetry: one span per operation (on the
// epoch-millisecond clock every rank uses, so the controller can line ranks up after offset
// correction) and bytes sent/received per peer.

/** Milliseconds since the Unix epoch, sub-millisecond resolution. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface CommSpan {
  kind: 'comm';
  op: string;
  /** process-group name (`world`, `g1`, ...) */
  group: string;
  seq: number;
  /** global rank that recorded the span */
  rank: number;
  /** payload bytes of the operation (the tensor size, nccl-tests' "size") */
  bytes: number;
  algorithm: string;
  start: number;
  end: number;
  ok: boolean;
  error?: string;
  /** optional labels set by the caller (bucket, layer, micro-batch) */
  labels?: Record<string, string | number>;
}

export interface PeerBytes {
  peer: number;
  sent: number;
  received: number;
  framesSent: number;
  framesReceived: number;
  /** payload bytes of `sent` that went through the shared-memory ring (same machine), not the link */
  sentViaSharedMemory: number;
}

export class CommTelemetry {
  private readonly spans: CommSpan[] = [];
  private readonly listeners = new Set<(s: CommSpan) => void>();
  constructor(private readonly maxSpans = 100_000) {}

  record(span: CommSpan): void {
    // drop the oldest half at once when full (amortised O(1) per span)
    if (this.spans.length >= this.maxSpans) this.spans.splice(0, this.spans.length >> 1);
    this.spans.push(span);
    for (const l of this.listeners) l(span);
  }

  /** Spans recorded so far (oldest first); `drain` empties the buffer. */
  takeSpans(drain = false): CommSpan[] {
    return drain ? this.spans.splice(0) : this.spans.slice();
  }

  onSpan(listener: (s: CommSpan) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
