// The timeline of an emulated device (workers/gpu/emulated-device.ts): one in-order queue, like the
// GPU queue it stands for. Work enqueued at host time t with device time d starts at
// max(t, end of the previous work) and ends d later. The host never waits on the queue except
// where a real program would: a readback (Runtime.read) returns no earlier than the emulated
// device reaches the point in the stream where the read was issued, and no earlier than the
// real kernels finished. Pure arithmetic over an injected clock, so the pacing is unit-tested.
export interface EmulatedWork {
  start: number;
  end: number;
}

export class EmulatedClock {
  /** epoch ms at which the emulated device finishes everything enqueued so far */
  private tail = 0;
  /** emulated device time enqueued since the last takeBusyMs() */
  private busy = 0;
  /** readbacks that waited on pending emulated work, and those where the real kernels came later */
  reads = 0;
  realBound = 0;

  constructor(
    readonly now: () => number = () => performance.timeOrigin + performance.now(),
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  /** The device's time for work enqueued now that lasts `ms`. */
  enqueue(ms: number): EmulatedWork {
    const start = Math.max(this.tail, this.now());
    this.tail = start + ms;
    this.busy += ms;
    return { start, end: this.tail };
  }

  /** The point in the stream a readback issued now must wait for. */
  get end(): number {
    return this.tail;
  }

  /**
   * Called when the real readback of a read issued at `issued` (when the stream's end was
   * `until`) completed: wait out the rest of the emulated device's time, and count which came last.
   */
  async reach(until: number, issued: number): Promise<void> {
    if (until <= issued) return; // the emulated device was idle: nothing to wait for
    this.reads++;
    const left = until - this.now();
    if (left > 0) await this.sleep(left);
    else this.realBound++;
  }

  /** Waits until the device reaches `until` (a result the host needs next), without counting a readback. */
  async wait(until: number): Promise<void> {
    const left = until - this.now();
    if (left > 0) await this.sleep(left);
  }

  /** Device time enqueued since the last call (a step's emulated compute). */
  takeBusyMs(): number {
    const b = this.busy;
    this.busy = 0;
    return b;
  }
}
