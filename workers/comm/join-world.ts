// Joining the world from a rank process, torchrun-style. Like torch's default TCPStore, rank 0
// hosts the rendezvous store: with MASTER_PORT=0 it binds an ephemeral port on MASTER_ADDR and tells
// its launcher which one (so there is no port race), and the launcher starts the other ranks
// with that port. How long a rank waits for the others to arrive is the rendezvous deadline
// (SHARDWISE_RENDEZVOUS_TIMEOUT_MS, default by world size), apart from a collective's.
import { initProcessGroup, rendezvousTimeoutFromEnv, type WorldGroup } from './init.js';
import { StoreServer } from './store.js';
import { COMM_ENV } from '../protocol/comm.js';

export interface World {
  rank: number;
  size: number;
  pg: WorldGroup;
  store: StoreServer | null;
}

export async function joinWorld(onStorePort: (port: number) => Promise<void> | void): Promise<World> {
  const env = process.env;
  const rank = Number(env[COMM_ENV.rank] ?? 0);
  const size = Number(env[COMM_ENV.worldSize] ?? 1);
  const secret = env[COMM_ENV.secret] ?? '';
  const rendezvousTimeoutMs = rendezvousTimeoutFromEnv(env);
  let store: StoreServer | null = null;
  let port = Number(env[COMM_ENV.masterPort] ?? 0);
  if (rank === 0 && port === 0) {
    store = await StoreServer.start({ host: env[COMM_ENV.masterAddr] ?? '127.0.0.1', port: 0, secret });
    port = store.port;
    await onStorePort(port);
  }
  const pg = await initProcessGroup({
    rank,
    worldSize: size,
    masterAddr: env[COMM_ENV.masterAddr] ?? '127.0.0.1',
    masterPort: port,
    secret,
    // ranks on several machines listen on their LAN address (the launcher says which)
    bindAddr: env[COMM_ENV.bindAddr] || undefined,
    advertiseAddr: env[COMM_ENV.advertiseAddr] || undefined,
    ...(rendezvousTimeoutMs !== undefined ? { rendezvousTimeoutMs } : {}),
  });
  return { rank, size, pg, store };
}
