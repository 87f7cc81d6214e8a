// The rendezvous deadline is its own setting (SHARDWISE_RENDEZVOUS_TIMEOUT_MS), apart from a
// collective's (SHARDWISE_COMM_TIMEOUT_MS, which fault tests set to 5 s): a world whose ranks do
// not all arrive in time fails on every rank that came, naming the ranks that did not and the
// setting to raise. Ranks 0 and 1 of a world of 4 in this process, over loopback.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { initProcessGroup, optionsFromEnv, StoreServer } from '../../workers/comm/index.js';
import { rendezvousTimeoutFromEnv } from '../../workers/comm/init.js';
import { defaultRendezvousTimeoutMs } from '../../workers/protocol/comm.js';

it('ranks 0 and 1 of 4, ranks 2 and 3 never started: both fail after the rendezvous deadline naming ranks 2, 3 and SHARDWISE_RENDEZVOUS_TIMEOUT_MS', async () => {
  const secret = randomBytes(24).toString('hex');
  const store = await StoreServer.start({ secret });
  try {
    const t0 = Date.now();
    const join = (rank: number) =>
      initProcessGroup({
        rank,
        worldSize: 4,
        masterAddr: '127.0.0.1',
        masterPort: store.port,
        secret,
        shm: false,
        // a collective deadline far longer than the rendezvous's: the rendezvous must not use it
        timeoutMs: 120_000,
        rendezvousTimeoutMs: 1500,
      }).then(
        () => 'joined',
        (e: Error) => e.message,
      );
    const [r0, r1] = await Promise.all([join(0), join(1)]);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(1400);
    expect(took).toBeLessThan(30_000);
    for (const [rank, message] of [
      [0, r0],
      [1, r1],
    ] as const) {
      expect(message).toContain(
        `rank ${rank}: the 4-rank world did not gather within 1500 ms (SHARDWISE_RENDEZVOUS_TIMEOUT_MS): ranks 2, 3 did not arrive`,
      );
      expect(message).toContain('raise SHARDWISE_RENDEZVOUS_TIMEOUT_MS (ms)');
    }
  } finally {
    await store.close();
  }
}, 60_000);

it('the rendezvous deadline defaults by world size and is read apart from the collective deadline; a bad value names the variable', () => {
  expect(defaultRendezvousTimeoutMs(2)).toBe(60_000);
  expect(defaultRendezvousTimeoutMs(4)).toBe(60_000);
  expect(defaultRendezvousTimeoutMs(8)).toBe(100_000);
  const env = {
    RANK: '0',
    WORLD_SIZE: '8',
    MASTER_PORT: '1',
    SHARDWISE_COMM_TIMEOUT_MS: '5000',
    SHARDWISE_RENDEZVOUS_TIMEOUT_MS: '180000',
  };
  expect(optionsFromEnv(env)).toMatchObject({ timeoutMs: 5000, rendezvousTimeoutMs: 180_000 });
  expect(rendezvousTimeoutFromEnv({ SHARDWISE_COMM_TIMEOUT_MS: '5000' })).toBeUndefined();
  expect(() => rendezvousTimeoutFromEnv({ SHARDWISE_RENDEZVOUS_TIMEOUT_MS: '2min' })).toThrow(
    'SHARDWISE_RENDEZVOUS_TIMEOUT_MS="2min" is not a non-negative integer',
  );
  expect(() => rendezvousTimeoutFromEnv({ SHARDWISE_RENDEZVOUS_TIMEOUT_MS: '0' })).toThrow(
    /SHARDWISE_RENDEZVOUS_TIMEOUT_MS=0 is not a deadline/,
  );
});
