// The wire protocol between a controller and a LAN agent (`shardwise agent`), version 2.
// JSON text frames over one WebSocket, each checked against these schemas on receipt.
//
//   pairing (once, with the one-time code the agent shows):
//     C->A pair-hello {controller id and name, X25519 public key, nonce}
//     A->C pair-challenge {X25519 public key, nonce}    nothing that names the agent
//     C->A pair-proof {mac}            HMAC(codeKey, "controller" | transcript)
//     A->C pair-done {agent id, name, mac}   HMAC(codeKey, "agent" | id | name | transcript);
//                                      both derive the key
//   every later connection (with the long-lived key):
//     C->A auth-hello {controller id, nonce}
//     A->C auth-challenge {nonce, hint}   hint: HMAC(key, "agent-hint" | ids | nonces), from
//                                      which the controller finds its key; no id in clear
//     C->A auth-proof {mac}            A->C auth-ok {mac, agent name}
//   then requests {id, method, params} and replies {id, result | error}; the agent may push
//   events {event, ...}. Before a proof checks out the agent answers nothing but the next
//   handshake message, and closes the socket on anything else (the close reason says why: a
//   wrong code, or how long this address must wait before its next try).
import { z } from 'zod';
import { AdapterReportSchema } from './devices.js';
import { TrainJobSchema } from './train.js';

export const AGENT_PROTOCOL_VERSION = 2;
/** DNS-SD service type: _shardwise._tcp */
export const AGENT_SERVICE_TYPE = 'shardwise';
export const AGENT_DEFAULT_PORT = 7341;
/** largest frame either side accepts before the handshake, and after it */
export const AGENT_HANDSHAKE_MAX_BYTES = 4096;
export const AGENT_MESSAGE_MAX_BYTES = 1 << 20;

const hex = (bytes: number) => z.string().regex(new RegExp(`^[0-9a-f]{${bytes * 2}}$`), `expected ${bytes} bytes as hex`);
const b64key = z.string().regex(/^[A-Za-z0-9+/]{43}=$/, 'expected a 32-byte key in base64');
/** controller and agent ids: random, 16 bytes hex */
export const PeerIdSchema = hex(16);
const name = z.string().min(1).max(64);

export const PairHelloSchema = z.strictObject({
  t: z.literal('pair-hello'),
  v: z.literal(AGENT_PROTOCOL_VERSION),
  controllerId: PeerIdSchema,
  controllerName: name,
  pub: b64key,
  nonce: hex(32),
});
export const PairChallengeSchema = z.strictObject({
  t: z.literal('pair-challenge'),
  pub: b64key,
  nonce: hex(32),
});
export const PairProofSchema = z.strictObject({ t: z.literal('pair-proof'), mac: hex(32) });
export const PairDoneSchema = z.strictObject({ t: z.literal('pair-done'), agentId: PeerIdSchema, agentName: name, mac: hex(32) });

export const AuthHelloSchema = z.strictObject({
  t: z.literal('auth-hello'),
  v: z.literal(AGENT_PROTOCOL_VERSION),
  controllerId: PeerIdSchema,
  nonce: hex(32),
});
export const AuthChallengeSchema = z.strictObject({
  t: z.literal('auth-challenge'),
  nonce: hex(32),
  hint: hex(32),
});
export const AuthProofSchema = z.strictObject({ t: z.literal('auth-proof'), mac: hex(32) });
export const AuthOkSchema = z.strictObject({ t: z.literal('auth-ok'), mac: hex(32), agentName: name });

/** the first frame a controller may send */
export const FirstFrameSchema = z.discriminatedUnion('t', [PairHelloSchema, AuthHelloSchema]);

// ---- after the handshake ----

export const MachineSchema = z.object({
  agentId: PeerIdSchema,
  agentName: name,
  hostname: z.string(),
  platform: z.string(),
  arch: z.string(),
  cpus: z.number().int().nonnegative(),
  memoryBytes: z.number().nonnegative(),
  /** agent's package version, for mismatches */
  version: z.string(),
});
export type Machine = z.infer<typeof MachineSchema>;

/** The agent's devices, as `shardwise devices --json` reports them on that machine. */
export const AgentDevicesSchema = z.looseObject({
  adapters: z.array(AdapterReportSchema.extend({ systemGpu: z.unknown().optional() }).loose()),
  tried: z.array(z.string()).optional(),
  system: z.unknown().optional(),
});
export type AgentDevices = z.infer<typeof AgentDevicesSchema>;

/** a run's id: also the name of its folder under the agent's runs/ */
export const RunIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$/, 'a run id is letters, digits, ".", "_" and "-"');

/** Start rank processes of a run on this machine. Pure data: the agent decides what runs (its own
 *  rank entry point) and where (its run folder); paths in the job must lie inside that folder. */
export const LaunchSchema = z.strictObject({
  id: z.number().int().nonnegative(),
  method: z.literal('launch'),
  runId: RunIdSchema,
  /** run_dir is replaced by the agent's folder for the run; resume_from, if any, is relative to it */
  job: TrainJobSchema,
  ranks: z
    .array(
      z.strictObject({ rank: z.number().int().nonnegative(), localRank: z.number().int().nonnegative(), adapter: z.string().optional() }),
    )
    .min(1)
    .max(64),
  comm: z.strictObject({
    worldSize: z.number().int().positive().max(64),
    masterAddr: z.string().min(1).max(255),
    masterPort: z.number().int().min(1).max(65535),
    secret: z.string().min(16).max(256),
    timeoutMs: z.number().int().positive().optional(),
  }),
});
export type LaunchRequest = z.infer<typeof LaunchSchema>;

/** A file of the run (e.g. a checkpoint to resume from), in chunks, into the agent's run folder. */
export const PutFileSchema = z.strictObject({
  id: z.number().int().nonnegative(),
  method: z.literal('put-file'),
  runId: RunIdSchema,
  /** relative to the run folder, e.g. checkpoints/step-000010/model.safetensors */
  path: z.string().min(1).max(255),
  offset: z.number().int().nonnegative(),
  data: z.string().max(700_000),
  /** last chunk: the file is complete (it appears atomically) */
  end: z.boolean(),
});

/** Most payload one link-test request carries either way: one frame each way stays under
 *  AGENT_MESSAGE_MAX_BYTES once base64 (4/3) and the JSON around it are added. A controller moves
 *  a few MiB for `shardwise profile` by sending several requests back to back. */
export const LINK_TEST_MAX_BYTES = 512 * 1024;

/** Link measurement (`shardwise profile`): the agent drops `data` (base64, the upload) and answers
 *  with `reply_bytes` of filler (the download). Pure data both ways; a larger reply_bytes than
 *  LINK_TEST_MAX_BYTES gets an error answer. */
export const LinkTestSchema = z.strictObject({
  id: z.number().int().nonnegative(),
  method: z.literal('link-test'),
  data: z.string().max(Math.ceil(LINK_TEST_MAX_BYTES / 3) * 4),
  reply_bytes: z.number().int().nonnegative(),
});
export const LinkTestResultSchema = z.strictObject({ received: z.number().int().nonnegative(), data: z.string() });

export const AgentRequestSchema = z.discriminatedUnion('method', [
  z.strictObject({ id: z.number().int().nonnegative(), method: z.literal('machine') }),
  z.strictObject({ id: z.number().int().nonnegative(), method: z.literal('devices') }),
  /** this machine's CPU load and RAM now (host-load.ts): the run view's host charts */
  z.strictObject({ id: z.number().int().nonnegative(), method: z.literal('host') }),
  /** NTP-style clock sample: t0 is the controller's send time (ms, its clock) */
  z.strictObject({ id: z.number().int().nonnegative(), method: z.literal('ping'), t0: z.number() }),
  LaunchSchema,
  PutFileSchema,
  LinkTestSchema,
  z.strictObject({ id: z.number().int().nonnegative(), method: z.literal('stop'), runId: RunIdSchema }),
]);
export type AgentRequest = z.infer<typeof AgentRequestSchema>;

export const PongSchema = z.object({ t0: z.number(), t1: z.number(), t2: z.number() });

export const AgentReplySchema = z.union([
  z.strictObject({ id: z.number().int().nonnegative(), result: z.unknown() }),
  z.strictObject({ id: z.number().int().nonnegative(), error: z.strictObject({ name: z.string(), message: z.string() }) }),
]);
export type AgentReply = z.infer<typeof AgentReplySchema>;

export const LaunchResultSchema = z.object({ ranks: z.array(z.object({ rank: z.number(), pid: z.number() })), runDir: z.string() });

/** What the agent pushes about a run's ranks: every rank message, their stderr lines, their exits. */
export const AgentEventSchema = z.discriminatedUnion('event', [
  z.strictObject({ event: z.literal('rank-message'), runId: RunIdSchema, rank: z.number().int(), message: z.unknown() }),
  z.strictObject({ event: z.literal('rank-log'), runId: RunIdSchema, rank: z.number().int(), line: z.string() }),
  z.strictObject({
    event: z.literal('rank-exit'),
    runId: RunIdSchema,
    rank: z.number().int(),
    code: z.number().nullable(),
    signal: z.string().nullable(),
  }),
]);
export type AgentEvent = z.infer<typeof AgentEventSchema>;
