// The shared-memory ring under the same-machine payload path (workers/comm/shm/shm-ring.ts): its
// space bookkeeping (contiguous payloads, wrap-around, full, release in order) and a sender and
// receiver on one real /dev/shm file, including every reason a receiver declines an offer.
import { spawnSync } from 'node:child_process';
import { existsSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { networkNamespace, RingSpace, ShmReceiver, ShmSender, shmSupported, sweepStaleRings } from '../../workers/comm/shm/shm-ring.js';
import { rng } from './rng.js';

describe('RingSpace', () => {
  it('places payloads one after another, wraps to 0 when the tail has no room, and is full when the head meets the oldest payload', () => {
    const r = new RingSpace(100);
    expect(r.reserve(40)).toBe(0);
    expect(r.reserve(40)).toBe(40);
    expect(r.reserve(30)).toBe(-1); // 80 + 30 > 100 and the oldest payload starts at 0
    expect(r.release(1)).toBe(true); // [0, 40) free
    expect(r.reserve(30)).toBe(0); // the tail [80, 100) is too short: wrap
    expect(r.reserve(10)).toBe(30);
    expect(r.reserve(1)).toBe(-1); // head 40 == oldest live (40): full
    expect(r.release(3)).toBe(true);
    expect(r.livePayloads).toBe(0);
    expect(r.reserve(100)).toBe(0); // empty again: from 0, the whole ring
  });
  it('refuses payloads larger than the ring or empty, and credits for payloads never placed', () => {
    const r = new RingSpace(64);
    expect(r.reserve(65)).toBe(-1);
    expect(r.reserve(0)).toBe(-1);
    expect(r.reserve(64)).toBe(0);
    expect(r.release(2)).toBe(false);
    expect(r.release(1)).toBe(true);
  });
  it('never hands out overlapping live ranges (10,000 random reserve/release steps)', () => {
    const size = 1000;
    const r = new RingSpace(size);
    const live: [number, number][] = [];
    const rnd = rng(7).next;
    for (let k = 0; k < 10_000; k++) {
      if (rnd() < 0.55) {
        const len = 1 + Math.floor(rnd() * 300);
        const pos = r.reserve(len);
        if (pos >= 0) {
          expect(pos + len).toBeLessThanOrEqual(size);
          for (const [p, l] of live) expect(pos + len <= p || p + l <= pos).toBe(true);
          live.push([pos, len]);
        } else expect(live.length).toBeGreaterThan(0); // an empty ring takes any payload that fits
      } else if (live.length) {
        const n = 1 + Math.floor(rnd() * live.length);
        expect(r.release(n)).toBe(true);
        live.splice(0, n);
      }
    }
  });
});

describe.runIf(shmSupported())('ShmSender and ShmReceiver on /dev/shm', () => {
  it('a payload written by the sender is read back by the receiver bit for bit; the name is gone after unlink; a full ring waits for a credit', () => {
    const s = ShmSender.create(1 << 20)!;
    expect(s).not.toBeNull();
    expect(existsSync(`/dev/shm/${s.offer.name}`)).toBe(true);
    const r = ShmReceiver.open(s.offer, 1 << 20);
    if (typeof r === 'string') throw new Error(r);
    // the receiver unlinks the name as soon as it holds the file (so does the sender on acceptance)
    expect(existsSync(`/dev/shm/${s.offer.name}`)).toBe(false);
    s.unlink();
    const a = Buffer.from(new Float32Array(100_000).map((_, i) => i * 0.5 - 7).buffer);
    const b = Buffer.alloc(300_000, 9);
    const pa = s.put(a);
    const pb = s.put(b);
    expect([pa, pb]).toEqual([0, 400_000]);
    expect(s.put(Buffer.alloc(400_000))).toBe(-1); // 700,000 + 400,000 > 1 MiB, oldest at 0
    const got = Buffer.alloc(a.length);
    expect(r.read(pa, got)).toBe(true);
    expect(got.equals(a)).toBe(true);
    const got2 = Buffer.alloc(b.length);
    expect(r.read(pb, got2)).toBe(true);
    expect(got2.equals(b)).toBe(true);
    expect(s.release(1)).toBe(true);
    expect(s.put(Buffer.alloc(400_000, 1))).toBe(0);
    expect(r.read((1 << 20) - 10, Buffer.alloc(11))).toBe(false); // past the end of the ring
    s.close();
    r.close();
  });

  it('declines offers with a path for a name, a bad nonce, a size over the limit, another size than the file, or a file that holds another nonce', () => {
    const s = ShmSender.create(65536)!;
    expect(s.offer.netns).toMatch(/^net:\[\d+\]$/);
    // another network namespace of this host sees the same /dev/shm, but is another machine to the network
    expect(ShmReceiver.open(s.offer, 1 << 20, 'net:[1]')).toMatch(
      /the peer is in another network namespace \(net:\[\d+\], this rank net:\[1\]\)/,
    );
    expect(ShmReceiver.open({ ...s.offer, netns: 7 as unknown as string }, 1 << 20)).toBe('malformed network namespace');
    expect(existsSync(`/dev/shm/${s.offer.name}`), 'a declined offer leaves the ring to its sender').toBe(true);
    expect(ShmReceiver.open({ ...s.offer, name: '../../etc/passwd' }, 1 << 20)).toBe('malformed ring name');
    expect(ShmReceiver.open({ ...s.offer, nonce: 'zz' }, 1 << 20)).toBe('malformed nonce');
    expect(ShmReceiver.open(s.offer, 4096)).toMatch(/ring of 65536 bytes \(at most 4096\)/);
    expect(ShmReceiver.open({ ...s.offer, ringBytes: 32768 }, 1 << 20)).toMatch(/not the announced ring/);
    expect(ShmReceiver.open({ ...s.offer, nonce: 'ab'.repeat(32) }, 1 << 20)).toMatch(/does not hold the announced nonce/);
    expect(ShmReceiver.open({ ...s.offer, name: `shardwise-${process.pid}-${'0'.repeat(32)}` }, 1 << 20)).toMatch(
      /cannot open it \(ENOENT\)/,
    );
    s.close();
    expect(existsSync(`/dev/shm/${s.offer.name}`)).toBe(false);
  });

  it('a ring file left by a sender that died before the answer is swept after 60 s; a fresh one and other files are kept', () => {
    const stale = ShmSender.create(65536)!;
    const fresh = ShmSender.create(65536)!;
    const other = `/dev/shm/shardwise-test-other-${process.pid}`;
    writeFileSync(other, 'x');
    const old = new Date(Date.now() - 120_000);
    utimesSync(`/dev/shm/${stale.offer.name}`, old, old);
    utimesSync(other, old, old);
    expect(sweepStaleRings()).toBeGreaterThanOrEqual(1);
    expect(existsSync(`/dev/shm/${stale.offer.name}`)).toBe(false);
    expect(existsSync(`/dev/shm/${fresh.offer.name}`)).toBe(true);
    expect(existsSync(other)).toBe(true);
    unlinkSync(other);
    stale.close();
    fresh.close();
    expect(existsSync(`/dev/shm/${fresh.offer.name}`)).toBe(false);
  });

  it("a ring file whose creator pid is gone is swept after 2 s (not 60); a live creator's ring of that age is kept", () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!; // exited and reaped: no /proc entry
    const orphan = `/dev/shm/shardwise-${dead}-${'a'.repeat(32)}`;
    const mine = ShmSender.create(65536)!;
    writeFileSync(orphan, 'x');
    const aged = new Date(Date.now() - 5_000);
    utimesSync(orphan, aged, aged);
    utimesSync(`/dev/shm/${mine.offer.name}`, aged, aged);
    expect(sweepStaleRings()).toBeGreaterThanOrEqual(1);
    expect(existsSync(orphan), `ring of dead pid ${dead}`).toBe(false);
    expect(existsSync(`/dev/shm/${mine.offer.name}`)).toBe(true);
    mine.close();
  });

  it('never follows a symbolic link planted under a ring name', () => {
    const name = `shardwise-${process.pid}-${'f'.repeat(32)}`;
    const target = `/dev/shm/shardwise-test-target-${process.pid}`;
    writeFileSync(target, Buffer.alloc(4096 + 65536));
    try {
      symlinkSync(target, `/dev/shm/${name}`);
      expect(ShmReceiver.open({ name, nonce: '00'.repeat(32), ringBytes: 65536, netns: networkNamespace() }, 1 << 20)).toMatch(
        /cannot open it \(ELOOP\)/,
      );
    } finally {
      for (const p of [`/dev/shm/${name}`, target]) if (existsSync(p)) unlinkSync(p);
    }
  });
});
