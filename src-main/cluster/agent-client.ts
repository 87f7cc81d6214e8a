// The controller's connection to one agent: pair with its code, or prove the stored key, then
// requests (machine, devices, ping). Every frame from the agent is checked against the
// protocol's schemas; the agent must prove the code or the key too before anything it says is
// believed.
import WebSocket from 'ws';
import {
  AGENT_MESSAGE_MAX_BYTES,
  AGENT_PROTOCOL_VERSION,
  type AgentDevices,
  AgentDevicesSchema,
  type AgentEvent,
  AgentEventSchema,
  AgentReplySchema,
  type LaunchRequest,
  LaunchResultSchema,
  LinkTestResultSchema,
  AuthChallengeSchema,
  AuthOkSchema,
  type Machine,
  MachineSchema,
  PairChallengeSchema,
  PairDoneSchema,
  PongSchema,
} from '../../workers/protocol/agent.js';
import {
  authMac,
  ephemeralKey,
  macEquals,
  nonce,
  normalizePairingCode,
  pairingKeys,
  sharedSecret,
} from '../../workers/protocol/pairing-crypto.js';
import { type HostSample, HostSampleSchema } from '../../workers/protocol/host-load.js';
import type { ControllerIdentity } from './controller-identity.js';

export class AgentError extends Error {
  override name = 'AgentError';
}

const TIMEOUT_MS = 15_000;

/** host:port, [v6]:port or a ws:// URL, as the WebSocket URL */
export function agentUrl(address: string): string {
  if (/^wss?:\/\//.test(address)) return address;
  if (!/^(\[[0-9a-fA-F:]+\]|[^:\s/]+):\d{1,5}$/.test(address))
    throw new AgentError(`"${address}" is not an agent address; give HOST:PORT (e.g. 192.168.1.20:7341)`);
  return `ws://${address}`;
}

/** Reads the socket's frames one at a time, with a deadline, as JSON. */
class Inbox {
  private queue: unknown[] = [];
  private waiter: ((v: unknown) => void) | null = null;
  private closed: string | null = null;
  constructor(
    private readonly ws: WebSocket,
    private readonly onAfterHandshake: (m: unknown) => void,
  ) {
    ws.on('message', (raw: Buffer, isBinary) => {
      let m: unknown;
      try {
        m = isBinary ? undefined : JSON.parse(raw.toString('utf8'));
      } catch {
        m = undefined;
      }
      if (this.handedOver) this.onAfterHandshake(m);
      else if (this.waiter) {
        const w = this.waiter;
        this.waiter = null;
        w(m);
      } else this.queue.push(m);
    });
    ws.on('close', (code, reason) => {
      this.closed = `the agent closed the connection (${code}${reason.length ? `: ${reason.toString()}` : ''})`;
      this.waiter?.(undefined);
    });
  }
  handedOver = false;
  next(what: string): Promise<unknown> {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    if (this.closed) return Promise.reject(new AgentError(`${what}: ${this.closed}`));
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new AgentError(`${what}: no answer within ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
      this.waiter = (v) => {
        clearTimeout(t);
        if (v === undefined && this.closed) reject(new AgentError(`${what}: ${this.closed}`));
        else resolve(v);
      };
    });
  }
}

function expect<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { message: string }[] } } },
  m: unknown,
  what: string,
): T {
  const r = schema.safeParse(m);
  if (!r.success) throw new AgentError(`${what}: unexpected answer from the agent (${r.error.issues[0]?.message})`);
  return r.data;
}

export interface AgentSession {
  agentId: string;
  agentName: string;
  request(method: 'machine'): Promise<Machine>;
  request(method: 'devices'): Promise<AgentDevices>;
  /** its CPU load (since the previous `host` request there) and RAM */
  request(method: 'host'): Promise<HostSample>;
  /** one NTP-style sample: offset = agent clock - controller clock (ms), rtt without the agent's hold time */
  ping(): Promise<{ offsetMs: number; rttMs: number }>;
  /** start ranks of a run there (a data description; the agent checks it) */
  launch(req: Omit<LaunchRequest, 'id' | 'method'>): Promise<{ ranks: { rank: number; pid: number }[]; runDir: string }>;
  /** copy a file into the run's folder there (e.g. the checkpoint to resume from) */
  putFile(runId: string, relPath: string, data: Uint8Array): Promise<void>;
  stopRun(runId: string): Promise<void>;
  /** one link-test exchange: `upload` (base64) to the agent's sink, `replyBytes` of filler back (at most LINK_TEST_MAX_BYTES) */
  linkTest(upload: string, replyBytes: number): Promise<{ received: number; data: string }>;
  onEvent(cb: (e: AgentEvent) => void): void;
  /** ping every intervalMs; after `misses` unanswered pings in a row, onDead (and the socket is dropped) */
  heartbeat(intervalMs: number, misses: number, onDead: (why: string) => void): void;
  /** this machine's address on the link to the agent (where the agent's ranks can reach us) */
  localAddress: string;
  close(): void;
  /** resolves when the connection ends, with why */
  closed: Promise<string>;
}

async function open(
  address: string,
): Promise<{ ws: WebSocket; inbox: Inbox; session: (agentId: string, agentName: string) => AgentSession }> {
  const ws = new WebSocket(agentUrl(address), {
    maxPayload: AGENT_MESSAGE_MAX_BYTES,
    perMessageDeflate: false,
    handshakeTimeout: TIMEOUT_MS,
  });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const eventListeners: ((e: AgentEvent) => void)[] = [];
  let seq = 0;
  const inbox = new Inbox(ws, (m) => {
    if (m && typeof m === 'object' && 'event' in m) {
      const e = AgentEventSchema.safeParse(m);
      if (!e.success) {
        ws.close(4002, 'malformed event');
        return;
      }
      for (const l of eventListeners) l(e.data);
      return;
    }
    const r = AgentReplySchema.safeParse(m);
    if (!r.success) {
      ws.close(4002, 'malformed reply');
      return;
    }
    const p = pending.get(r.data.id);
    if (!p) return;
    pending.delete(r.data.id);
    if ('error' in r.data) p.reject(new AgentError(`agent: ${r.data.error.message}`));
    else p.resolve(r.data.result);
  });
  const closed = new Promise<string>((resolve) =>
    ws.on('close', (code, reason) => {
      const why = `connection to agent ${address} closed (${code}${reason.length ? `: ${reason.toString()}` : ''})`;
      for (const p of pending.values()) p.reject(new AgentError(why));
      pending.clear();
      resolve(why);
    }),
  );
  let localAddress = '127.0.0.1';
  ws.once('upgrade', (res) => {
    localAddress = (res.socket.localAddress ?? localAddress).replace(/^::ffff:/, '');
  });
  let intentional = false;
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', (e) => reject(new AgentError(`cannot reach agent at ${address}: ${e.message}`)));
  });
  ws.on('error', () => {});
  const call = (body: Record<string, unknown>) =>
    new Promise<unknown>((resolve, reject) => {
      const id = seq++;
      pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, ...body }));
    });
  const session = (agentId: string, agentName: string): AgentSession => {
    inbox.handedOver = true;
    return {
      agentId,
      agentName,
      request: (async (method: 'machine' | 'devices' | 'host') => {
        const r = await call({ method });
        if (method === 'host') return expect(HostSampleSchema, r, 'host');
        return method === 'machine' ? expect(MachineSchema, r, 'machine') : expect(AgentDevicesSchema, r, 'devices');
      }) as AgentSession['request'],
      async ping() {
        const t0 = Date.now();
        const r = expect(PongSchema, await call({ method: 'ping', t0 }), 'ping');
        const t3 = Date.now();
        return { offsetMs: (r.t1 - t0 + (r.t2 - t3)) / 2, rttMs: t3 - t0 - (r.t2 - r.t1) };
      },
      async launch(req) {
        return expect(LaunchResultSchema, await call({ method: 'launch', ...req }), 'launch');
      },
      async putFile(runId, relPath, data) {
        const CHUNK = 512 * 1024;
        for (let off = 0; off === 0 || off < data.length; off += CHUNK) {
          const part = Buffer.from(data.buffer, data.byteOffset + off, Math.min(CHUNK, data.length - off));
          await call({
            method: 'put-file',
            runId,
            path: relPath,
            offset: off,
            data: part.toString('base64'),
            end: off + CHUNK >= data.length,
          });
        }
      },
      async stopRun(runId) {
        await call({ method: 'stop', runId });
      },
      async linkTest(upload, replyBytes) {
        return expect(LinkTestResultSchema, await call({ method: 'link-test', data: upload, reply_bytes: replyBytes }), 'link-test');
      },
      onEvent: (cb) => eventListeners.push(cb),
      heartbeat(intervalMs, misses, onDead) {
        let missed = 0;
        let dead = false;
        const t = setInterval(() => {
          if (dead) return;
          if (++missed > misses) {
            dead = true;
            clearInterval(t);
            onDead(`agent ${agentName} missed ${misses} heartbeats (${(misses * intervalMs) / 1000} s without an answer)`);
            ws.terminate();
            return;
          }
          call({ method: 'ping', t0: Date.now() }).then(
            () => (missed = 0),
            () => {},
          );
        }, intervalMs);
        t.unref();
        void closed.then((why) => {
          clearInterval(t);
          if (!dead && !intentional) {
            dead = true;
            onDead(why);
          }
        });
      },
      localAddress,
      close: () => {
        intentional = true;
        ws.close(1000, 'done');
      },
      closed,
    };
  };
  return { ws, inbox, session };
}

/** Pair with an agent using the code it shows; stores the key. */
export async function pairAgent(address: string, code: string, me: ControllerIdentity): Promise<AgentSession> {
  const normal = normalizePairingCode(code);
  if (!normal) throw new AgentError(`"${code}" is not a pairing code; it is 10 letters and digits as the agent prints them (XXXXX-XXXXX)`);
  const { ws, inbox, session } = await open(address);
  try {
    const eph = ephemeralKey();
    const controllerNonce = nonce();
    const { controllerId, controllerName } = me.state;
    ws.send(
      JSON.stringify({ t: 'pair-hello', v: AGENT_PROTOCOL_VERSION, controllerId, controllerName, pub: eph.pub, nonce: controllerNonce }),
    );
    // the challenge names nothing: the agent says who it is only in pair-done, under its proof
    const ch = expect(PairChallengeSchema, await inbox.next('pairing'), 'pairing');
    const transcript = { controllerId, controllerName, controllerPub: eph.pub, controllerNonce, agentPub: ch.pub, agentNonce: ch.nonce };
    const keys = pairingKeys(transcript, sharedSecret(eph, ch.pub), normal);
    ws.send(JSON.stringify({ t: 'pair-proof', mac: keys.controllerMac }));
    const done = expect(PairDoneSchema, await inbox.next('pairing'), 'pairing');
    if (!macEquals(done.mac, keys.agentMac(done.agentId, done.agentName)))
      throw new AgentError('the agent could not prove it knows the code: not pairing with it');
    me.remember({ agentId: done.agentId, agentName: done.agentName, key: keys.key, address });
    return session(done.agentId, done.agentName);
  } catch (e) {
    ws.terminate();
    throw e;
  }
}

/** Connect to a paired agent with the stored key (found by address, or by id when given). */
export async function connectAgent(address: string, me: ControllerIdentity, agentId?: string): Promise<AgentSession> {
  const { ws, inbox, session } = await open(address);
  try {
    const controllerNonce = nonce();
    const { controllerId } = me.state;
    ws.send(JSON.stringify({ t: 'auth-hello', v: AGENT_PROTOCOL_VERSION, controllerId, nonce: controllerNonce }));
    const ch = expect(AuthChallengeSchema, await inbox.next('authentication'), 'authentication');
    // the challenge carries no id: the agent's hint matches the key of one of ours (the one last
    // seen at this address first), or of the one asked for
    const candidates = agentId
      ? [me.agent(agentId)].filter((a) => a !== null)
      : [...me.state.agents].sort((a, b) => Number(b.address === address) - Number(a.address === address));
    const paired = candidates.find((a) =>
      macEquals(ch.hint, authMac(a.key, 'agent-hint', controllerId, a.agentId, controllerNonce, ch.nonce)),
    );
    if (!paired)
      throw new AgentError(
        agentId
          ? `the agent at ${address} is not the paired ${agentId.slice(0, 8)} (it did not prove that agent's key)`
          : `the agent at ${address} is not paired with this controller; pair with: shardwise pair ${address} --code CODE`,
      );
    ws.send(
      JSON.stringify({ t: 'auth-proof', mac: authMac(paired.key, 'controller', controllerId, paired.agentId, controllerNonce, ch.nonce) }),
    );
    const ok = expect(AuthOkSchema, await inbox.next('authentication'), 'authentication');
    if (!macEquals(ok.mac, authMac(paired.key, 'agent', controllerId, paired.agentId, controllerNonce, ch.nonce)))
      throw new AgentError(`the agent at ${address} could not prove the paired key: refusing it`);
    if (paired.address !== address || paired.agentName !== ok.agentName) me.remember({ ...paired, agentName: ok.agentName, address });
    return session(paired.agentId, ok.agentName);
  } catch (e) {
    ws.terminate();
    throw e;
  }
}
