// One controller connection to the agent: the pairing or authentication handshake, then
// requests. Until a proof checks out the agent answers nothing but the next handshake message;
// any other frame (binary, oversized, malformed, out of order) closes the socket with a logged
// reason. The process keeps serving everyone else.
import type WebSocket from 'ws';
import {
  AGENT_HANDSHAKE_MAX_BYTES,
  type AgentReply,
  AgentRequestSchema,
  AuthProofSchema,
  FirstFrameSchema,
  PairProofSchema,
} from '../protocol/agent.js';
import { authMac, ephemeralKey, macEquals, nonce, type PairingKeys, pairingKeys, sharedSecret } from '../protocol/pairing-crypto.js';
import { sampleHost } from '../protocol/host-load.js';
import { answerLinkTest } from './link-test.js';
import { machineDevices, machineInfo } from './machine.js';
import type { PairingCode } from './pairing-code.js';
import { type AgentRuns, LaunchRefused } from './runs.js';
import type { AgentStateFile } from './state.js';

export const HANDSHAKE_TIMEOUT_MS = 10_000;

/** WebSocket close codes the agent uses */
export const CLOSE = { refused: 4003, protocol: 4002, timeout: 4008 } as const;

export interface ConnectionContext {
  state: AgentStateFile;
  code: PairingCode;
  runs: AgentRuns;
  log: (line: string) => void;
}

type Step = ((data: string) => void) | null;

/** remote: the controller's address and port (for logs); source: its address alone (what pairing
 *  limits count); local: this agent's address on that link, which is where its ranks listen for
 *  the run's other ranks. */
export function serveConnection(ws: WebSocket, remote: string, source: string, local: string, ctx: ConnectionContext) {
  const owner = {};
  let step: Step = first;
  let controller = '';
  const close = (code: number, reason: string) => {
    ctx.log(`closed connection from ${remote}${controller ? ` (controller ${controller})` : ''}: ${reason}`);
    step = null;
    ws.close(code, truncateUtf8(reason, 123));
  };
  const timer = setTimeout(() => close(CLOSE.timeout, 'no handshake within 10 s'), HANDSHAKE_TIMEOUT_MS);
  const send = (m: unknown) => ws.send(JSON.stringify(m));

  ws.on('message', (raw: Buffer, isBinary: boolean) => {
    if (!step) return;
    if (isBinary) return close(CLOSE.protocol, 'binary frame: this protocol sends JSON text');
    if (step !== session && raw.length > AGENT_HANDSHAKE_MAX_BYTES) return close(CLOSE.protocol, `handshake frame of ${raw.length} bytes`);
    step(raw.toString('utf8'));
  });
  ws.on('close', () => {
    clearTimeout(timer);
    ctx.runs.stopOwnedBy(owner, `the controller at ${remote} disconnected`);
  });
  ws.on('error', (e) => ctx.log(`connection from ${remote}: ${e.message}`));

  function parse<T>(
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { message: string }[] } } },
    text: string,
    what: string,
  ): T | null {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      close(CLOSE.protocol, `${what}: not JSON`);
      return null;
    }
    const r = schema.safeParse(json);
    if (!r.success) {
      close(CLOSE.protocol, `${what}: ${r.error.issues[0]?.message}`);
      return null;
    }
    return r.data;
  }

  function first(text: string) {
    const m = parse(FirstFrameSchema, text, 'expected pair-hello or auth-hello');
    if (!m) return;
    const me = ctx.state.state;
    controller = `${m.controllerId.slice(0, 8)}`;
    if (m.t === 'pair-hello') {
      const refused = ctx.code.admit(source);
      if (refused) return close(CLOSE.refused, refused);
      const eph = ephemeralKey();
      const agentNonce = nonce();
      const transcript = {
        controllerId: m.controllerId,
        controllerName: m.controllerName,
        controllerPub: m.pub,
        controllerNonce: m.nonce,
        agentPub: eph.pub,
        agentNonce,
      };
      let shared: Buffer;
      try {
        shared = sharedSecret(eph, m.pub);
      } catch (e) {
        close(CLOSE.protocol, `pair-hello: ${(e as Error).message}`);
        return;
      }
      // nothing that names this agent before the code is proved
      send({ t: 'pair-challenge', pub: eph.pub, nonce: agentNonce });
      step = (t) => {
        const proof = parse(PairProofSchema, t, 'expected pair-proof');
        if (!proof) return;
        // checked against the codes live now, not when the connection opened
        const found: { keys?: PairingKeys } = {};
        const verdict = ctx.code.check(source, (code) => {
          const k = pairingKeys(transcript, shared, code);
          if (!macEquals(proof.mac, k.controllerMac)) return false;
          found.keys = k;
          return true;
        });
        if (!verdict.ok) return close(CLOSE.refused, verdict.reason);
        const { key, agentMac } = found.keys!;
        ctx.state.addController(m.controllerId, m.controllerName, key);
        ctx.log(`paired with controller "${m.controllerName}" (${m.controllerId.slice(0, 8)}) from ${remote}`);
        send({ t: 'pair-done', agentId: me.agentId, agentName: me.agentName, mac: agentMac(me.agentId, me.agentName) });
        open();
      };
      return;
    }
    const key = ctx.state.keyOf(m.controllerId);
    if (!key) {
      close(CLOSE.refused, 'not paired: pair with the code this agent shows first');
      return;
    }
    const agentNonce = nonce();
    send({ t: 'auth-challenge', nonce: agentNonce, hint: authMac(key, 'agent-hint', m.controllerId, me.agentId, m.nonce, agentNonce) });
    step = (t) => {
      const proof = parse(AuthProofSchema, t, 'expected auth-proof');
      if (!proof) return;
      if (!macEquals(proof.mac, authMac(key, 'controller', m.controllerId, me.agentId, m.nonce, agentNonce))) {
        close(CLOSE.refused, 'authentication failed');
        return;
      }
      send({ t: 'auth-ok', mac: authMac(key, 'agent', m.controllerId, me.agentId, m.nonce, agentNonce), agentName: me.agentName });
      open();
    };
  }

  function open() {
    clearTimeout(timer);
    step = session;
  }

  function session(text: string) {
    const req = parse(AgentRequestSchema, text, 'request');
    if (!req) return;
    const reply = (r: Omit<AgentReply, 'id'>) => send({ id: req.id, ...r });
    const fail = (e: unknown) => reply({ error: { name: (e as Error).name ?? 'Error', message: (e as Error).message ?? String(e) } });
    switch (req.method) {
      case 'machine':
        reply({ result: machineInfo(ctx.state.state.agentId, ctx.state.state.agentName) });
        break;
      case 'devices':
        machineDevices().then((d) => reply({ result: d }), fail);
        break;
      case 'host':
        sampleHost().then((h) => reply({ result: h }), fail);
        break;
      case 'ping': {
        const t1 = Date.now();
        reply({ result: { t0: req.t0, t1, t2: Date.now() } });
        break;
      }
      case 'launch':
        try {
          reply({ result: ctx.runs.launch(req, owner, local, (e) => ws.readyState === ws.OPEN && send(e)) });
        } catch (e) {
          if (!(e instanceof LaunchRefused)) ctx.log(`launch of run ${req.runId} failed: ${(e as Error).message}`);
          else ctx.log(`refused launch of run ${req.runId}: ${e.message}`);
          fail(e);
        }
        break;
      case 'put-file':
        try {
          ctx.runs.putFile(req.runId, req.path, req.offset, Buffer.from(req.data, 'base64'), req.end);
          reply({ result: { ok: true } });
        } catch (e) {
          fail(e);
        }
        break;
      case 'link-test':
        try {
          reply({ result: answerLinkTest(req.data, req.reply_bytes) });
        } catch (e) {
          fail(e);
        }
        break;
      case 'stop':
        reply({ result: { stopped: ctx.runs.stop(req.runId, 'the controller asked') } });
        break;
    }
  }
}

/** a close reason fits in 123 bytes; cut at a character boundary */
function truncateUtf8(s: string, bytes: number): string {
  const b = Buffer.from(s);
  if (b.length <= bytes) return s;
  return b
    .subarray(0, bytes)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
}
