// The bytes a rank's training steps put on the wire, from its process group's per-peer counters:
// what the summary's bytes_moved_per_step and shm_bytes_per_step report. Only the steps' own
// traffic counts (begin/end bracket each step), not checkpoint gathers or evaluation.
import type { PeerBytes } from '../comm/index.js';

export interface StepTrafficPerStep {
  /** payload and frame bytes sent per step, over links and shared memory together */
  bytes: number;
  /** the part of `bytes` that went through shared-memory rings to ranks on this machine */
  viaSharedMemory: number;
}

export class StepTraffic {
  private sent = 0;
  private viaShm = 0;
  private before: { sent: number; viaShm: number } | null = null;

  constructor(private readonly peers: () => readonly PeerBytes[]) {}

  begin(): void {
    this.before = this.now();
  }

  end(): void {
    if (!this.before) throw new Error('StepTraffic.end() without begin()');
    const now = this.now();
    this.sent += now.sent - this.before.sent;
    this.viaShm += now.viaShm - this.before.viaShm;
    this.before = null;
  }

  perStep(steps: number): StepTrafficPerStep {
    return steps > 0 ? { bytes: this.sent / steps, viaSharedMemory: this.viaShm / steps } : { bytes: 0, viaSharedMemory: 0 };
  }

  private now() {
    let sent = 0;
    let viaShm = 0;
    for (const p of this.peers()) {
      sent += p.sent;
      viaShm += p.sentViaSharedMemory;
    }
    return { sent, viaShm };
  }
}

/** The `done` message's fields for a rank's traffic per step. */
export function trafficFields(t: StepTrafficPerStep): { bytes_moved_per_step: number; shm_bytes_per_step: number } {
  return { bytes_moved_per_step: t.bytes, shm_bytes_per_step: t.viaSharedMemory };
}
