// Joining a world, torchrun-style: RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT (the rendezvous
// store the launcher serves) and the run secret, from the environment or passed explicitly.
import { COMM_ENV, DEFAULT_COMM_TIMEOUT_MS, defaultRendezvousTimeoutMs, STORE_KEYS } from '../protocol/comm.js';
import { CommError } from './errors.js';
import { checkSecret } from './transport/handshake.js';
import { DEFAULT_TUNING, ProcessGroup, type CollectiveTuning } from './process-group.js';
import { StoreClient } from './store.js';
import { LINK_KINDS, Transport, type LinkKind } from './transport/transport.js';
import { shmSupported } from './shm/shm-ring.js';
import { setArenaBytes } from './host-memory/simd.js';
import { DEFAULT_HEARTBEAT } from './transport/connection.js';

export interface InitOptions extends Partial<CollectiveTuning> {
  rank: number;
  worldSize: number;
  localRank?: number;
  masterAddr: string;
  masterPort: number;
  secret: string;
  /** address this rank's data server binds to (default 127.0.0.1) */
  bindAddr?: string;
  /** address peers dial (default: bindAddr) */
  advertiseAddr?: string;
  /** largest frame payload accepted (default 64 MiB) */
  maxFrameBytes?: number;
  /** unflushed bytes per link before sends queue (default 8 MiB) */
  windowBytes?: number;
  /** bytes held for operations not yet posted on this rank (default 1 GiB) */
  maxEarlyBytes?: number;
  /** rank-to-rank links: raw TCP (default, fastest) or WebSocket; every rank must agree */
  transport?: LinkKind;
  /**
   * payloads between ranks on the same machine through shared memory (/dev/shm rings, Linux;
   * frames stay on the links): default on where supported; SHARDWISE_COMM_SHM=0 turns it off
   */
  shm?: boolean;
  /** bytes of each shared-memory ring, one per direction of each same-machine link (default 8 MiB) */
  shmRingBytes?: number;
  /**
   * size of the registered memory arena memAlloc allocates from (default 128 MiB of address
   * space, backed only as tensors are used); takes effect only before the first reduction
   */
  registeredBytes?: number;
  /** ms between liveness probes on each link (default 1000; 0 = off) */
  heartbeatIntervalMs?: number;
  /** silent probe intervals in a row after which a peer is lost (default 15) */
  heartbeatMissed?: number;
  /**
   * how long to wait for the store and every peer when joining (default: 60 s, more for worlds
   * over 4 ranks; SHARDWISE_RENDEZVOUS_TIMEOUT_MS), apart from the collectives' timeoutMs
   */
  rendezvousTimeoutMs?: number;
  log?: (line: string) => void;
}

function intEnv(env: NodeJS.ProcessEnv, name: string, required: boolean): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') {
    if (required)
      throw new Error(`${name} is not set ---> HINT: launch ranks with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and ${COMM_ENV.secret}`);
    return undefined;
  }
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name}=${JSON.stringify(v)} is not a non-negative integer`);
  return n;
}

/** Reads the torchrun-style environment. */
export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): InitOptions {
  const timeout = intEnv(env, COMM_ENV.timeoutMs, false);
  const hbInterval = intEnv(env, COMM_ENV.heartbeatMs, false);
  const hbMissed = intEnv(env, COMM_ENV.heartbeatMissed, false);
  const rendezvous = intEnv(env, COMM_ENV.rendezvousTimeoutMs, false);
  const transport = env[COMM_ENV.transport] || undefined;
  if (transport !== undefined && !LINK_KINDS.includes(transport as LinkKind))
    throw new Error(`${COMM_ENV.transport}=${JSON.stringify(transport)} is not a transport ---> HINT: use ${LINK_KINDS.join(' or ')}`);
  return {
    rank: intEnv(env, COMM_ENV.rank, true)!,
    worldSize: intEnv(env, COMM_ENV.worldSize, true)!,
    localRank: intEnv(env, COMM_ENV.localRank, false),
    masterAddr: env[COMM_ENV.masterAddr] ?? '127.0.0.1',
    masterPort: intEnv(env, COMM_ENV.masterPort, true)!,
    secret: env[COMM_ENV.secret] ?? '',
    bindAddr: env[COMM_ENV.bindAddr] || undefined,
    advertiseAddr: env[COMM_ENV.advertiseAddr] || undefined,
    ...(timeout !== undefined ? { timeoutMs: timeout } : {}),
    ...(transport ? { transport: transport as LinkKind } : {}),
    ...(hbInterval !== undefined ? { heartbeatIntervalMs: hbInterval } : {}),
    ...(hbMissed !== undefined ? { heartbeatMissed: hbMissed } : {}),
    ...(rendezvous !== undefined ? { rendezvousTimeoutMs: rendezvous } : {}),
  };
}

/** SHARDWISE_RENDEZVOUS_TIMEOUT_MS, checked (a positive integer), or undefined when unset. */
export function rendezvousTimeoutFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const n = intEnv(env, COMM_ENV.rendezvousTimeoutMs, false);
  if (n === 0) throw new Error(`${COMM_ENV.rendezvousTimeoutMs}=0 is not a deadline ---> HINT: give it in milliseconds, e.g. 180000`);
  return n;
}

export interface NewGroupOptions {
  /** name used in spans and errors (default g<id>) */
  name?: string;
  timeoutMs?: number;
  tuning?: Partial<CollectiveTuning>;
}

/** The group of all ranks; it owns the links and the store client and creates sub-groups. */
export class WorldGroup extends ProcessGroup {
  private readonly subgroups = new Set<ProcessGroup>();
  private destroyed = false;

  constructor(
    t: Transport,
    readonly store: StoreClient,
    tuning: CollectiveTuning,
    readonly localRank: number,
  ) {
    super(
      t,
      0,
      'world',
      Array.from({ length: t.worldSize }, (_, i) => i),
      tuning,
    );
  }

  /**
   * Creates a sub-group (c10d's new_group): every rank of the world must call it, in the same
   * order, with the same ranks. Members get the group, other ranks null. Sub-groups share the
   * world's links and run concurrently with each other and with the world group.
   */
  async newGroup(ranks: readonly number[], o: NewGroupOptions = {}): Promise<ProcessGroup | null> {
    if (this.destroyed) throw new CommError('newGroup: the world group was destroyed', { code: 'closed', op: 'newGroup', group: 'world' });
    const sorted = [...new Set(ranks)].sort((a, b) => a - b);
    if (sorted.length === 0 || sorted.length !== ranks.length || sorted.some((r) => !Number.isInteger(r) || r < 0 || r >= this.size))
      throw new CommError(`newGroup: ranks ${JSON.stringify(ranks)} must be distinct ranks of the ${this.size}-rank world`, {
        code: 'invalid',
        op: 'newGroup',
      });
    const id = this.t.nextGroupId++;
    const want = JSON.stringify(sorted);
    const got = await this.store.compareSet(STORE_KEYS.groupRanks(id), '', want);
    if (got !== want)
      throw new CommError(
        `newGroup #${id}: this rank asked for ranks ${want}, another rank for ${got} ---> HINT: every rank must call newGroup in the same order with the same ranks`,
        { code: 'mismatch', op: 'newGroup' },
      );
    if (!sorted.includes(this.globalRank)) {
      this.t.notAMember(id);
      return null;
    }
    const tuning = { ...this.tuning, ...(o.tuning ?? {}), ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}) };
    const g = new ProcessGroup(this.t, id, o.name ?? `g${id}`, sorted, tuning);
    this.subgroups.add(g);
    return g;
  }

  /** Fails whatever is pending, closes every link and the store connection. */
  override destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const g of this.subgroups) g.destroy();
    const cause = this.abortError;
    super.destroy();
    this.t.close(cause && (cause.code === 'peer-lost' || cause.code === 'timeout' || cause.code === 'protocol') ? cause.peer : undefined);
    this.store.close();
  }
}

export async function initProcessGroup(partial: Partial<InitOptions> = {}): Promise<WorldGroup> {
  const needsEnv = ['rank', 'worldSize', 'masterPort', 'secret'].some((k) => (partial as Record<string, unknown>)[k] === undefined);
  const o: InitOptions = { ...(needsEnv ? optionsFromEnv() : ({} as InitOptions)), ...partial };
  if (o.registeredBytes !== undefined) setArenaBytes(o.registeredBytes);
  const secret = checkSecret(o.secret);
  if (!Number.isInteger(o.worldSize) || o.worldSize < 1) throw new Error(`world size ${o.worldSize} must be a positive integer`);
  if (!Number.isInteger(o.rank) || o.rank < 0 || o.rank >= o.worldSize) throw new Error(`rank ${o.rank} is not in [0, ${o.worldSize})`);
  const log = o.log ?? ((line: string) => process.stderr.write(`[rank ${o.rank}] ${line}\n`));
  const tuning: CollectiveTuning = { ...DEFAULT_TUNING, timeoutMs: DEFAULT_COMM_TIMEOUT_MS };
  for (const k of Object.keys(DEFAULT_TUNING) as (keyof CollectiveTuning)[]) if (o[k] !== undefined) tuning[k] = o[k]!;
  const rendezvousMs = o.rendezvousTimeoutMs ?? defaultRendezvousTimeoutMs(o.worldSize);
  const store = await StoreClient.connect({
    host: o.masterAddr,
    port: o.masterPort,
    secret,
    name: `rank${o.rank}`,
    connectTimeoutMs: rendezvousMs,
    timeoutMs: tuning.timeoutMs,
  });
  const transport = o.transport ?? 'tcp';
  if (!LINK_KINDS.includes(transport)) throw new Error(`transport ${JSON.stringify(transport)} is not one of ${LINK_KINDS.join(', ')}`);
  const heartbeat = {
    intervalMs: o.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT.intervalMs,
    missed: o.heartbeatMissed ?? DEFAULT_HEARTBEAT.missed,
  };
  if (!(heartbeat.intervalMs >= 0) || !Number.isInteger(heartbeat.missed) || heartbeat.missed < 1)
    throw new Error(
      `heartbeat ${heartbeat.intervalMs} ms x ${heartbeat.missed} is invalid: the interval must be >= 0 ms (0 = off) and the missed count an integer >= 1`,
    );
  const bindAddr = o.bindAddr ?? '127.0.0.1';
  const maxFrameBytes = o.maxFrameBytes ?? 64 << 20;
  let t: Transport;
  try {
    t = await Transport.connect({
      rank: o.rank,
      transport,
      heartbeat,
      worldSize: o.worldSize,
      secret,
      bindAddr,
      advertiseAddr: o.advertiseAddr ?? bindAddr,
      store,
      timeoutMs: rendezvousMs,
      maxFrameBytes,
      windowBytes: o.windowBytes ?? 8 << 20,
      shm: (o.shm ?? true) && shmSupported() ? { ringBytes: o.shmRingBytes ?? 8 << 20, maxPeerRingBytes: 256 << 20 } : null,
      maxEarlyBytes: o.maxEarlyBytes ?? 1 << 30,
      log,
    });
  } catch (err) {
    store.close();
    throw err;
  }
  if (tuning.pieceBytes > maxFrameBytes) tuning.pieceBytes = maxFrameBytes;
  return new WorldGroup(t, store, tuning, o.localRank ?? o.rank);
}
