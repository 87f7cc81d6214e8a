// Real ranks of one process group inside the test process: a rendezvous store on loopback with a
// fresh secret, every rank joined over TCP (no shared memory), for tests of what travels between them.
import { randomBytes } from 'node:crypto';
import { initProcessGroup, StoreServer, type WorldGroup } from '../../workers/comm/index.js';
import { afterAll, beforeAll } from 'vitest';

export interface LoopbackWorld {
  groups: WorldGroup[];
  close(): Promise<void>;
}

export async function loopbackWorld(size: number): Promise<LoopbackWorld> {
  const secret = randomBytes(24).toString('hex');
  const store = await StoreServer.start({ secret });
  const join = (rank: number) =>
    initProcessGroup({ rank, worldSize: size, masterAddr: '127.0.0.1', masterPort: store.port, secret, shm: false, timeoutMs: 30_000 });
  const groups = await Promise.all(Array.from({ length: size }, (_, r) => join(r)));
  return {
    groups,
    async close() {
      for (const g of groups) g.destroy();
      await store.close();
    },
  };
}

/** A loopback world of `size` ranks for the test file: started before its tests, closed after; read the groups inside a test. */
export function withLoopbackWorld(size: number): () => WorldGroup[] {
  let world: LoopbackWorld | undefined;
  beforeAll(async () => {
    world = await loopbackWorld(size);
  });
  afterAll(() => world?.close());
  return () => world!.groups;
}
