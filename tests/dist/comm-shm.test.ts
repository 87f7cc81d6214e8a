// Shared-memory payloads between rank processes on one machine (workers/comm/shm-ring.ts):
// exact results through the rings, every link of a world using them both ways, no ring file
// left on /dev/shm while they are in use or after the processes exit, a rank with shared
// memory off talking over its links instead, and a forged ring offer or ring position from a
// peer refused without harm to anything but that peer's link.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { describeFailures, runWorld } from './fixtures/comm-launch.js';
import { shmSupported } from '../../workers/comm/index.js';

interface LinkReport {
  peer: number;
  shm: boolean;
  ring: string | null;
  ringOnDisk: boolean;
  sent: number;
  received: number;
  bytes: number;
}

describe.runIf(shmSupported())('shared-memory payloads between ranks on one machine', () => {
  for (const world of [2, 4]) {
    // world 2 on registered tensors (memAlloc: reduced in place in the kernels' memory), world 4 on plain ones
    const registered = world === 2;
    it(`world ${world}: 16 MiB allReduce, reduceScatter, allGather and broadcast${registered ? ' of registered tensors' : ''} are exact through /dev/shm rings on every link, both ways; no ring file outlives the handshake or the processes`, async () => {
      const res = await runWorld(world, 'shm', { bytes: 16 << 20, registered });
      expect(describeFailures(res)).toBe('');
      for (const r of res) expect(r.last!.registered).toBe(registered);
      const rings: string[] = [];
      for (const r of res) {
        const links = r.last!.links as LinkReport[];
        expect(links.map((l) => l.peer).sort()).toEqual([...Array(world).keys()].filter((p) => p !== r.rank));
        for (const l of links) {
          expect(l, `rank ${r.rank} -> ${l.peer}`).toMatchObject({ shm: true, ringOnDisk: false });
          // 16 MiB in 2 MiB pieces: several ring payloads each way between ring neighbours (the
          // ring runs both directions; at world 4, ranks two apart have nothing large to say)
          if ((l.peer - r.rank + world) % world === 1 || (r.rank - l.peer + world) % world === 1) {
            expect(l.sent).toBeGreaterThanOrEqual(4);
            expect(l.received).toBeGreaterThanOrEqual(4);
          }
          expect(l.ring).toMatch(/^shardwise-\d+-[0-9a-f]{32}$/);
          rings.push(l.ring!);
        }
      }
      expect(new Set(rings).size).toBe(world * (world - 1));
      for (const name of rings) expect(existsSync(`/dev/shm/${name}`)).toBe(false);
    });
  }

  it('world 3 with shared memory off on rank 1: its links carry payloads themselves; a forged offer (a path for a name) is declined and the link keeps working; a payload outside its ring drops only that link, naming the peer', async () => {
    const res = await runWorld(3, 'shmbad', { shmOffRanks: [1] });
    const [r0, r1, r2] = res;
    expect(r0.last, r0.stderr).toMatchObject({ type: 'ok', failures: [] });
    expect(r1.last, r1.stderr).toMatchObject({ type: 'ok', failures: [] });
    expect(r2.last?.type).toBe('ok');
    // rank 1 offered no ring and declined rank 2's; rank 0 and 2 share memory
    expect(r0.stderr).toMatch(/declined peer rank 1's shared-memory ring: malformed ring name/);
    expect(r1.stderr).toMatch(/declined peer rank 0's shared-memory ring: shared memory is off on this rank/);
    expect(r0.last!.shm).toEqual({ 1: false, 2: true });
    expect(r1.last!.shm).toEqual({ 0: false, 2: false });
    // the out-of-ring payload: rank 0 drops rank 2's link with the reason, fails its op naming rank 2
    expect(r0.stderr).toMatch(
      /closing the connection to peer rank 2: bad frame from peer rank 2: a 1048576-byte shared-memory payload at ring position 4293918720 lies outside the 8388608-byte ring/,
    );
    expect(r0.last!.error).toMatchObject({ peer: 2, code: 'protocol' });
    for (const r of res) expect(r.code).toBe(0);
  });
});
