// What a rank reports as its traffic per step (summary bytes_moved_per_step and
// shm_bytes_per_step): only what moved between begin() and end() of each step, summed over its
// peers, with the shared-memory part apart; traffic between steps (checkpoint gathers) is not
// counted.
import { describe, expect, it } from 'vitest';
import type { PeerBytes } from '../../../workers/comm/index.js';
import { StepTraffic, trafficFields } from '../../../workers/telemetry/step-traffic.js';

const peer = (p: number, sent: number, viaShm: number): PeerBytes => ({
  peer: p,
  sent,
  received: 0,
  framesSent: 0,
  framesReceived: 0,
  sentViaSharedMemory: viaShm,
});

describe('StepTraffic', () => {
  it('counts the steps only, over every peer, with the shared-memory share', () => {
    let peers = [peer(1, 0, 0), peer(2, 0, 0)];
    const t = new StepTraffic(() => peers);
    t.begin();
    peers = [peer(1, 1000, 900), peer(2, 500, 0)];
    t.end();
    peers = [peer(1, 9000, 8900), peer(2, 500, 0)]; // a checkpoint gather between the steps
    t.begin();
    peers = [peer(1, 10_000, 9800), peer(2, 1500, 0)];
    t.end();
    expect(t.perStep(2)).toEqual({ bytes: (1500 + 2000) / 2, viaSharedMemory: (900 + 900) / 2 });
    expect(trafficFields(t.perStep(2))).toEqual({ bytes_moved_per_step: 1750, shm_bytes_per_step: 900 });
    expect(t.perStep(0)).toEqual({ bytes: 0, viaSharedMemory: 0 });
  });

  it('a single-rank run (no peers) moves nothing', () => {
    const t = new StepTraffic(() => []);
    t.begin();
    t.end();
    expect(t.perStep(1)).toEqual({ bytes: 0, viaSharedMemory: 0 });
  });

  it('end() without begin() is a bug, said so', () => {
    expect(() => new StepTraffic(() => []).end()).toThrow(/without begin/);
  });
});
