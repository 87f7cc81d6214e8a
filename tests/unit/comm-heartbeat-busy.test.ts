// A rank busy taking its peer's frames keeps probing the peer (workers/comm/transport/connection.ts):
// one poll of the event loop can read and reduce dozens of queued pieces back to back while the
// heartbeat's timer waits, and the peer must not read that rank as silent. Here the event loop is
// held for 600 ms while frames arrive every 20 ms: the link sees a probe per 100-ms interval from
// that path, and none while nothing arrives.
import { EventEmitter } from 'node:events';
import { expect, it } from 'vitest';
import { PeerConnection } from '../../workers/comm/transport/connection.js';
import { encodeHeader, type FrameHeader } from '../../workers/comm/transport/frames.js';
import type { Link } from '../../workers/comm/transport/link.js';

/** A link that only counts what the connection does to it. */
class CountingLink extends EventEmitter {
  readonly OPEN = 1;
  readonly CONNECTING = 0;
  readyState = 1;
  pings = 0;
  ping() {
    this.pings++;
  }
  send() {}
  close() {}
  terminate() {}
}

const frame = (frameSeq: number): Buffer =>
  encodeHeader({ kind: 1, dtype: 'float32', flags: 0, frameSeq, group: 1, seq: 0, step: 0, offset: 0, bytes: 0, check: 0 } as FrameHeader);

it('frames arriving every 20 ms through a 600 ms stretch that holds the event loop: at least 4 probes of a 100 ms heartbeat go out from that path', () => {
  const link = new CountingLink();
  let frames = 0;
  const conn = new PeerConnection(
    link as unknown as Link,
    1,
    { onFrame: () => frames++, onClosed: () => {}, log: () => {} },
    1 << 20,
    8 << 20,
    { intervalMs: 100, missed: 15 },
  );
  try {
    const t0 = performance.now();
    let seq = 0;
    for (let next = t0; performance.now() - t0 < 600;) {
      if (performance.now() < next) continue; // the event loop is held: no timer can run
      conn.onMessage(frame(seq++), true);
      next += 20;
    }
    expect(frames, 'frames taken during the stretch').toBeGreaterThanOrEqual(10);
    // one probe per 100 ms interval of the stretch (the first at once: none was sent before)
    expect(link.pings).toBeGreaterThanOrEqual(4);
    expect(link.pings).toBeLessThanOrEqual(7);
    const before = link.pings;
    const t1 = performance.now();
    while (performance.now() - t1 < 250); // held, and nothing arrives: nothing to answer
    expect(link.pings).toBe(before);
  } finally {
    conn.close();
  }
});
