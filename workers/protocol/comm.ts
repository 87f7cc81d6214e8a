// The wire contract of the communication layer that the controller shares with rank processes:
// torchrun-style environment, the rendezvous store's messages and the authentication handshake.
// Everything here is data checked with zod on receipt; nothing from the network is executed.
import { z } from 'zod';

/** Bumped when a message or frame layout changes; peers with another version are refused. */
export const COMM_PROTOCOL_VERSION = 2;

/** Environment a launcher (controller, agent, test, benchmark) sets for every rank process. */
export const COMM_ENV = {
  rank: 'RANK',
  worldSize: 'WORLD_SIZE',
  localRank: 'LOCAL_RANK',
  /** host of the rendezvous store */
  masterAddr: 'MASTER_ADDR',
  /** port of the rendezvous store */
  masterPort: 'MASTER_PORT',
  /** per-run secret (any string, >= 16 chars); every connection proves it knows it */
  secret: 'SHARDWISE_RUN_SECRET',
  /** address this rank's data server binds to (default 127.0.0.1) */
  bindAddr: 'SHARDWISE_COMM_BIND',
  /** address peers use to reach this rank (default: the bind address) */
  advertiseAddr: 'SHARDWISE_COMM_ADVERTISE',
  /** default deadline of every collective, in ms (default 60000) */
  timeoutMs: 'SHARDWISE_COMM_TIMEOUT_MS',
  /** how long a rank waits for the whole world to gather when it joins, in ms (default: rendezvousTimeoutMs's scale) */
  rendezvousTimeoutMs: 'SHARDWISE_RENDEZVOUS_TIMEOUT_MS',
  /** rank-to-rank links: tcp (default) or ws; the same on every rank */
  transport: 'SHARDWISE_COMM_TRANSPORT',
  /** ms between liveness probes on each link (default 1000, 0 = off) */
  heartbeatMs: 'SHARDWISE_COMM_HEARTBEAT_MS',
  /** silent probe intervals after which a peer is lost (default 15) */
  heartbeatMissed: 'SHARDWISE_COMM_HEARTBEAT_MISSED',
  /** 0: never carry payloads through shared memory between ranks on one machine (default on, Linux) */
  shm: 'SHARDWISE_COMM_SHM',
} as const;

export const DEFAULT_COMM_TIMEOUT_MS = 60_000;

/**
 * The rendezvous deadline a world of `worldSize` ranks gets without SHARDWISE_RENDEZVOUS_TIMEOUT_MS:
 * 60 s, plus 10 s per rank beyond 4 (8 ranks: 100 s). Ranks start one process each, and on a
 * loaded machine the last of many can be tens of seconds behind the first; the deadline is its
 * own, apart from a collective's (SHARDWISE_COMM_TIMEOUT_MS), which a fault test may set to seconds.
 */
export function defaultRendezvousTimeoutMs(worldSize: number): number {
  return 60_000 + 10_000 * Math.max(0, worldSize - 4);
}
export const MIN_SECRET_LENGTH = 16;

/** Who is at either end of a connection; bound into the handshake MACs. */
export const PeerIdentitySchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('store') }).strict(),
  z.object({ role: z.literal('store-client'), name: z.string().max(128) }).strict(),
  z.object({ role: z.literal('rank'), rank: z.number().int().min(0).max(65535) }).strict(),
]);
export type PeerIdentity = z.infer<typeof PeerIdentitySchema>;

const Hex32 = z.string().regex(/^[0-9a-f]{64}$/);

/** server -> client, first message on every connection */
export const ChallengeSchema = z
  .object({ t: z.literal('challenge'), v: z.number().int(), nonce: Hex32, server: PeerIdentitySchema })
  .strict();
/** client -> server: HMAC(secret, transcript) over both nonces and both identities */
export const AuthSchema = z
  .object({ t: z.literal('auth'), v: z.number().int(), nonce: Hex32, client: PeerIdentitySchema, mac: Hex32 })
  .strict();
/** server -> client: the server proves the secret too (mutual authentication) */
export const AuthOkSchema = z.object({ t: z.literal('auth-ok'), mac: Hex32 }).strict();
export type Challenge = z.infer<typeof ChallengeSchema>;
export type Auth = z.infer<typeof AuthSchema>;
export type AuthOk = z.infer<typeof AuthOkSchema>;

/** Largest handshake message; anything bigger before authentication closes the connection. */
export const HANDSHAKE_MAX_BYTES = 1024;

// ---- rendezvous store (TCPStore-like), JSON text messages after authentication ----
const Key = z.string().min(1).max(512);
const Value = z.string().max(1 << 20);

export const StoreRequestSchema = z.discriminatedUnion('op', [
  z.object({ id: z.number().int(), op: z.literal('set'), key: Key, value: Value }).strict(),
  /** waits until the key exists (or timeoutMs passes) */
  z.object({ id: z.number().int(), op: z.literal('get'), key: Key, timeoutMs: z.number().int().min(0).max(3_600_000) }).strict(),
  /** atomic integer add; missing keys count as 0; returns the new value */
  z.object({ id: z.number().int(), op: z.literal('add'), key: Key, amount: z.number().int() }).strict(),
  /** sets `value` only when the current value equals `expected` ('' = missing); returns the current value */
  z.object({ id: z.number().int(), op: z.literal('compareSet'), key: Key, expected: Value, value: Value }).strict(),
  /** waits until every key exists */
  z
    .object({
      id: z.number().int(),
      op: z.literal('wait'),
      keys: z.array(Key).max(4096),
      timeoutMs: z.number().int().min(0).max(3_600_000),
    })
    .strict(),
  z.object({ id: z.number().int(), op: z.literal('check'), keys: z.array(Key).max(4096) }).strict(),
  z.object({ id: z.number().int(), op: z.literal('delete'), key: Key }).strict(),
  z.object({ id: z.number().int(), op: z.literal('numKeys') }).strict(),
]);
export type StoreRequest = z.infer<typeof StoreRequestSchema>;

export const StoreResponseSchema = z.union([
  z
    .object({
      id: z.number().int(),
      ok: z.literal(true),
      value: z.string().optional(),
      flag: z.boolean().optional(),
      count: z.number().int().optional(),
    })
    .strict(),
  z
    .object({ id: z.number().int(), ok: z.literal(false), error: z.string().max(4096), code: z.enum(['timeout', 'bad-request', 'closed']) })
    .strict(),
]);
export type StoreResponse = z.infer<typeof StoreResponseSchema>;

/** Store keys the comm layer uses (so a controller can inspect a rendezvous). */
export const STORE_KEYS = {
  rankAddress: (rank: number) => `comm/addr/${rank}`,
  groupRanks: (groupId: number) => `comm/group/${groupId}`,
  barrierCount: (name: string) => `barrier/${name}/count`,
  barrierDone: (name: string) => `barrier/${name}/done`,
} as const;
