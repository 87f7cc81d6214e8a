// Collectives between real rank processes on loopback: exact results (integer-valued inputs)
// for every operation (gather, scatter and all-to-all with uneven blocks too), both algorithms of
// each, float32 and float16 (bfloat16 at world 3), world sizes 1 to 8 and
// lengths 0, 1, world-1, world, odd and indivisible ones, with many operations in flight;
// 16 MiB tensors; sub-groups used concurrently; tagged send/recv ordering. The full matrix runs
// over the default raw-TCP links, a smaller one over WebSocket links; large payloads go through
// shared memory in some cases and over the links in others.
import { describe, expect, it } from 'vitest';
import { describeFailures, runWorld } from './fixtures/comm-launch.js';

describe('collectives over raw TCP (the default) between rank processes', () => {
  for (const world of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`world ${world}: every op x {small, large} algorithm x {f32, f16}, lengths 0..${3 * world + 1} and 101, 1001 are exact`, async () => {
      // tiny pieces (64 floats) so the ring and chains pipeline many pieces even at these lengths
      const res = await runWorld(world, 'correctness', { pieceBytes: 256, timeoutMs: 30_000 });
      expect(describeFailures(res)).toBe('');
      for (const r of res) expect(r.last?.checked as number).toBeGreaterThan(250);
    });
  }

  // world 2 carries its payloads through shared memory (the default on one machine, see
  // comm-shm.test.ts); world 3 with it off, so the payloads go over the TCP links themselves
  for (const [world, env] of [
    [2, undefined],
    [3, { SHARDWISE_COMM_SHM: '0' }],
  ] as const) {
    it(`world ${world}: 16 MiB allReduce, reduceScatter, allGather and broadcast are exact${env ? ' with payloads over the TCP links (SHARDWISE_COMM_SHM=0)' : ''}`, async () => {
      const res = await runWorld(world, 'big', { bytes: 16 << 20 }, env);
      expect(describeFailures(res)).toBe('');
    });
  }

  it('world 3: every op x {small, large} algorithm in bfloat16 ({ dtype: "bfloat16" } on Uint16Array bits) is exact; bfloat16 against float16 bits fails as a mismatch', async () => {
    const res = await runWorld(3, 'correctness', {
      pieceBytes: 256,
      timeoutMs: 30_000,
      dtypes: ['bfloat16'],
      lengths: [0, 1, 3, 7, 101, 1001],
      dtypeMismatch: true,
    });
    expect(describeFailures(res)).toBe('');
    for (const r of res) expect(r.last?.checked as number).toBeGreaterThan(100);
    expect(res.slice(0, 2).map((r) => (r.last?.mismatch as { code?: string } | undefined)?.code)).toEqual(['mismatch', 'mismatch']);
  });

  it('world 6: TP pairs, DP triples and the world group run collectives concurrently, exactly', async () => {
    const res = await runWorld(6, 'subgroups', { pieceBytes: 4096 });
    expect(describeFailures(res)).toBe('');
    expect(res[3].last?.groups).toEqual(['tp1:2,3', 'dp1:1,3,5']);
  });

  it('world 4: send/recv keep per-tag order with interleaved tags and 4 MiB multi-piece messages', async () => {
    const res = await runWorld(4, 'p2p');
    expect(describeFailures(res)).toBe('');
    expect(res[3].last?.checked).toBe(12);
  });
});

describe('collectives over ws links (SHARDWISE_COMM_TRANSPORT=ws)', () => {
  // payloads over the WebSocket links themselves, not through shared memory
  const ws = { SHARDWISE_COMM_TRANSPORT: 'ws', SHARDWISE_COMM_SHM: '0' };
  for (const world of [2, 3, 5]) {
    it(`world ${world}: every op x {small, large} algorithm x {f32, f16} is exact`, async () => {
      const res = await runWorld(world, 'correctness', { pieceBytes: 256, timeoutMs: 30_000 }, ws);
      expect(describeFailures(res)).toBe('');
      for (const r of res) expect(r.last?.checked as number).toBeGreaterThan(250);
    });
  }
  it('world 3: 16 MiB allReduce, reduceScatter, allGather and broadcast are exact', async () => {
    const res = await runWorld(3, 'big', { bytes: 16 << 20 }, ws);
    expect(describeFailures(res)).toBe('');
  });
});
