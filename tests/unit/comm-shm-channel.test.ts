// The shared-memory side of one connection (workers/comm/shm/shm-channel.ts), driven in-process by
// two channels wired back to back through their control frames: offer, accept, ring payloads
// read into their targets, credits, the decline when shared memory is off on one side, and the
// fallback to the link when writing the ring fails (here: its file descriptor is gone).
import { describe, expect, it } from 'vitest';
import { Ctl, ShmChannel, type ShmHost } from '../../workers/comm/shm/shm-channel.js';
import { FrameKind, type FrameHeader } from '../../workers/comm/transport/frames.js';
import { shmSupported } from '../../workers/comm/shm/shm-ring.js';

const header = (over: Partial<FrameHeader>): FrameHeader => ({
  kind: FrameKind.Collective,
  dtype: 'float32',
  flags: 0,
  frameSeq: 0,
  group: 1,
  seq: 0,
  step: 0,
  offset: 0,
  bytes: 0,
  check: 0,
  ...over,
});

/** Two channels whose control frames reach each other (synchronously, in order). */
function pair(aOn: boolean, bOn: boolean) {
  const logs: string[] = [];
  const pumps = { a: 0, b: 0 };
  const targets: { b: Buffer | null } = { b: null };
  const chans: { a?: ShmChannel; b?: ShmChannel } = {};
  const host = (me: 'a' | 'b', other: 'a' | 'b'): ShmHost => ({
    peer: me === 'a' ? 1 : 0,
    writeControl: (type: Ctl, value: number, body?: Buffer | null) =>
      chans[other]!.onControl(
        header({ kind: FrameKind.Control, step: type, offset: value, bytes: body?.length ?? 0 }),
        body ?? Buffer.alloc(0),
      ),
    bodyTarget: () => (me === 'b' ? targets.b : null),
    pump: () => void pumps[me]++,
    log: (l) => logs.push(`${me}: ${l}`),
  });
  const opts = { ringBytes: 1 << 20, maxPeerRingBytes: 1 << 24 };
  chans.a = new ShmChannel(aOn ? opts : null, host('a', 'b'));
  chans.b = new ShmChannel(bOn ? opts : null, host('b', 'a'));
  chans.a.offer();
  chans.b.offer();
  return { a: chans.a, b: chans.b, logs, pumps, targets };
}

describe.runIf(shmSupported())('ShmChannel', () => {
  it('both on: each accepts the other, payloads go through the ring into the receiver target, and each read credits the space back', () => {
    const { a, b, pumps, targets } = pair(true, true);
    expect(a.active && b.active).toBe(true);
    expect(pumps.a).toBe(1); // the acceptance
    const payload = Buffer.from(new Float32Array(200_000).map((_, i) => i - 3.5).buffer);
    const pos = a.put(payload);
    expect(pos).toBe(0);
    expect(a.put(Buffer.alloc(700_000))).toBe(-1); // 800,000 + 700,000 > 1 MiB: wait for a credit
    targets.b = Buffer.alloc(payload.length);
    const got = b.readPayload(header({ bytes: payload.length, ringPos: pos }));
    expect(got).toBe(targets.b);
    expect(got.equals(payload)).toBe(true);
    expect(pumps.a).toBe(2); // the credit
    expect(a.put(Buffer.alloc(700_000))).toBe(0); // room again
    expect([a.framesSent, a.bytesSent, b.framesReceived]).toEqual([2, payload.length + 700_000, 1]);
    expect(() => b.readPayload(header({ bytes: 64, ringPos: 1 << 20 }))).toThrow(/lies outside the 1048576-byte ring/);
    a.close();
    b.close();
  });

  it('one side off: it offers nothing and declines the other ring with the reason; payloads are not for the ring', () => {
    const { a, b, logs } = pair(true, false);
    expect(a.active || b.active).toBe(false);
    expect(logs).toContain("b: comm: declined peer rank 0's shared-memory ring: shared memory is off on this rank");
    expect(
      logs.some((l) => /^a: comm: peer rank 1 declined this rank's shared-memory ring \(shared memory is off on this rank\)/.test(l)),
    ).toBe(true);
    expect(a.put(Buffer.alloc(100_000))).toBe(-2);
    expect(() => a.readPayload(header({ bytes: 100_000 }))).toThrow(/no ring was set up/);
    a.close();
    b.close();
  });

  it('before the peer answers the offer, a payload the ring could take waits instead of taking the link; the answer releases it', () => {
    // control frames held back: the peer reads the offer only when told (a peer busy compiling)
    const held: { to: 'a' | 'b'; type: Ctl; body: Buffer }[] = [];
    const pumps = { a: 0, b: 0 };
    const chans: { a?: ShmChannel; b?: ShmChannel } = {};
    const host = (me: 'a' | 'b', other: 'a' | 'b'): ShmHost => ({
      peer: me === 'a' ? 1 : 0,
      writeControl: (type, _value, body) => void held.push({ to: other, type, body: body ?? Buffer.alloc(0) }),
      bodyTarget: () => null,
      pump: () => void pumps[me]++,
      log: () => undefined,
    });
    const deliver = () => {
      for (const m of held.splice(0))
        chans[m.to]!.onControl(header({ kind: FrameKind.Control, step: m.type, bytes: m.body.length }), m.body);
    };
    const opts = { ringBytes: 1 << 20, maxPeerRingBytes: 1 << 24 };
    for (const bOn of [true, false]) {
      chans.a = new ShmChannel(opts, host('a', 'b'));
      chans.b = new ShmChannel(bOn ? opts : null, host('b', 'a'));
      chans.a.offer();
      pumps.a = 0;
      expect(chans.a.put(Buffer.alloc(100_000)), 'offer unanswered').toBe(-1);
      expect(chans.a.put(Buffer.alloc(2 << 20)), 'larger than the ring').toBe(-2);
      deliver(); // b reads the offer and answers
      deliver(); // a reads the answer
      expect(pumps.a, 'the answer retries the waiting payloads').toBe(1);
      expect(chans.a.put(Buffer.alloc(100_000)), bOn ? 'accepted' : 'declined').toBe(bOn ? 0 : -2);
      chans.a.close();
      chans.b.close();
    }
  });

  it('a ring write that fails (the file is gone) logs it and sends every later payload over the link', () => {
    const { a, b, logs } = pair(true, true);
    // break this side's ring underneath the channel: its descriptor is closed
    (a as unknown as { out: { close(): void } }).out.close();
    expect(a.put(Buffer.alloc(100_000))).toBe(-2);
    expect(a.active).toBe(false);
    expect(logs.some((l) => /^a: comm: shared memory to peer rank 1 failed \(.*\): payloads go over the link from now on$/.test(l))).toBe(
      true,
    );
    expect(a.put(Buffer.alloc(100_000))).toBe(-2);
    a.close();
    b.close();
  });

  it('protocol breaks throw: a second offer, an acceptance or a credit nobody asked for, an unknown control type', () => {
    const { a, b } = pair(true, true);
    const offer = Buffer.from(JSON.stringify({ name: 'shardwise-' + '0'.repeat(32), nonce: '00'.repeat(32), ringBytes: 4096 }));
    expect(() => b.onControl(header({ kind: FrameKind.Control, step: Ctl.Offer, bytes: offer.length }), offer)).toThrow(
      /a second shared-memory ring offer/,
    );
    expect(() => a.onControl(header({ kind: FrameKind.Control, step: Ctl.Accept }), Buffer.alloc(0))).toThrow(
      /unexpected shared-memory ring acceptance/,
    );
    expect(() => a.onControl(header({ kind: FrameKind.Control, step: Ctl.Credit, offset: 5 }), Buffer.alloc(0))).toThrow(
      /a credit for 5 ring payloads never sent/,
    );
    expect(() => a.onControl(header({ kind: FrameKind.Control, step: 9 }), Buffer.alloc(0))).toThrow(/unknown control frame type 9/);
    a.close();
    b.close();
  });
});
