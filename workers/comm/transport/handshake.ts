// Challenge-response authentication run on every connection (store and rank-to-rank) before
// any application data is read: the server sends a fresh 32-byte nonce, the client answers with
// HMAC-SHA256(secret, transcript) over both nonces and both identities, and the server answers
// with its own HMAC so the client knows it talks to a holder of the secret too. A recorded
// answer is useless on another connection because the server's nonce is never reused. Until
// the handshake succeeds a connection accepts one small text message and nothing else.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { setLinkMaxPayload, type Link } from './link.js';
import {
  AuthOkSchema,
  AuthSchema,
  ChallengeSchema,
  COMM_PROTOCOL_VERSION,
  HANDSHAKE_MAX_BYTES,
  MIN_SECRET_LENGTH,
  type PeerIdentity,
} from '../../protocol/comm.js';

export const HANDSHAKE_TIMEOUT_MS = 10_000;

type RawMessage = { data: Buffer; isBinary: boolean };

/** How a link ended: its close (code, reason), or the socket error that ended it. */
export interface LinkEnd {
  close?: { code: number; reason: Buffer };
  error?: Error;
}

/**
 * An authenticated connection; messages that arrived after the handshake wait for attach(),
 * and so does a close or socket error (a peer that leaves at once may close in that window).
 */
export interface Authenticated {
  peer: PeerIdentity;
  /**
   * Hands the message stream over: queued messages are delivered first, in order, then
   * `onEnded` hears of a close or error that came before attach (later ones go to the link's
   * own listeners, which the caller has set).
   */
  attach(onMessage: (data: Buffer, isBinary: boolean) => void, onEnded?: (e: LinkEnd) => void): void;
}

function canon(id: PeerIdentity): string {
  return id.role === 'rank' ? `rank:${id.rank}` : id.role === 'store' ? 'store' : `store-client:${id.name}`;
}

function transcript(
  label: 'client' | 'server',
  serverNonce: string,
  clientNonce: string,
  server: PeerIdentity,
  client: PeerIdentity,
): string {
  return ['shardwise-comm', `v${COMM_PROTOCOL_VERSION}`, label, serverNonce, clientNonce, canon(server), canon(client)].join('\n');
}

export function hmacHex(secret: string, text: string): string {
  return createHmac('sha256', secret).update(text).digest('hex');
}

function macEquals(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === 32 && y.length === 32 && timingSafeEqual(x, y);
}

export function checkSecret(secret: string | undefined): string {
  if (!secret || secret.length < MIN_SECRET_LENGTH)
    throw new Error(
      `the run secret must be at least ${MIN_SECRET_LENGTH} characters ---> HINT: set SHARDWISE_RUN_SECRET (e.g. to crypto.randomBytes(32).toString('hex')) for every process of the run`,
    );
  return secret;
}

/** A link keeps one payload limit; it stays tiny until the peer is authenticated. */
export const setMaxPayload = setLinkMaxPayload;

function parseJson(m: RawMessage): unknown {
  if (m.isBinary || m.data.length > HANDSHAKE_MAX_BYTES) return undefined;
  try {
    return JSON.parse(m.data.toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Drives one side of the handshake on an open socket. Resolves with the authenticated peer;
 * rejects (and closes the socket with code 1008) on any deviation or after timeoutMs.
 */
function run(
  ws: Link,
  timeoutMs: number,
  maxPayload: number,
  step: (m: RawMessage, done: (peer: PeerIdentity) => void, fail: (why: string) => void) => void,
  start?: () => void,
): Promise<Authenticated> {
  return new Promise((resolve, reject) => {
    let finished = false;
    const queue: RawMessage[] = [];
    let deliver: ((data: Buffer, isBinary: boolean) => void) | null = null;
    const timer = setTimeout(() => fail(`no handshake within ${timeoutMs} ms`), timeoutMs);
    const onClose = (code: number) => fail(`connection closed during the handshake (code ${code})`);
    const onError = (err: Error) => fail(`socket error during the handshake: ${err.message}`);
    function fail(why: string) {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      ws.off('message', onMessage);
      ws.off('close', onClose);
      ws.off('error', onError);
      ws.on('error', () => {}); // late socket errors of a refused connection are expected
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(1008, 'authentication failed');
      reject(new Error(`handshake refused: ${why}`));
    }
    function done(peer: PeerIdentity) {
      if (finished) return;
      finished = true;
      // raised synchronously: the peer's first data frame may be parsed in this very read
      setMaxPayload(ws, maxPayload);
      clearTimeout(timer);
      ws.off('close', onClose);
      ws.off('error', onError);
      // until attach, a close or error is kept for its new owner
      const ended: LinkEnd = {};
      const keepClose = (code: number, reason: Buffer) => (ended.close ??= { code, reason });
      const keepError = (err: Error) => (ended.error ??= err);
      ws.on('close', keepClose);
      ws.on('error', keepError);
      resolve({
        peer,
        attach(fn, onEnded) {
          ws.off('message', onMessage);
          ws.off('close', keepClose);
          ws.off('error', keepError);
          deliver = fn;
          for (const m of queue.splice(0)) fn(m.data, m.isBinary);
          ws.on('message', fn);
          if (ended.close || ended.error) onEnded?.(ended);
        },
      });
    }
    function onMessage(data: Buffer, isBinary: boolean) {
      if (finished) {
        if (deliver) deliver(data, isBinary);
        else queue.push({ data, isBinary });
        return;
      }
      step({ data, isBinary }, done, fail);
    }
    ws.on('message', onMessage);
    ws.on('close', onClose);
    ws.on('error', onError);
    start?.();
  });
}

export interface ServerHandshakeOptions {
  secret: string;
  self: PeerIdentity;
  /** returns a reason to refuse an authenticated client (wrong role, duplicate rank...), or null */
  admit: (client: PeerIdentity) => string | null;
  /** payload limit once authenticated */
  maxPayload: number;
  timeoutMs?: number;
}

export function serverHandshake(ws: Link, o: ServerHandshakeOptions): Promise<Authenticated> {
  const nonce = randomBytes(32).toString('hex');
  return run(
    ws,
    o.timeoutMs ?? HANDSHAKE_TIMEOUT_MS,
    o.maxPayload,
    (m, done, fail) => {
      const parsed = AuthSchema.safeParse(parseJson(m));
      if (!parsed.success) return fail('the first message is not a valid auth message');
      const a = parsed.data;
      if (a.v !== COMM_PROTOCOL_VERSION) return fail(`protocol version ${a.v}, expected ${COMM_PROTOCOL_VERSION}`);
      const expected = hmacHex(o.secret, transcript('client', nonce, a.nonce, o.self, a.client));
      if (!macEquals(expected, a.mac)) return fail('wrong MAC (wrong secret or replayed answer)');
      const refusal = o.admit(a.client);
      if (refusal) return fail(refusal);
      done(a.client);
      ws.send(JSON.stringify({ t: 'auth-ok', mac: hmacHex(o.secret, transcript('server', nonce, a.nonce, o.self, a.client)) }));
    },
    () => ws.send(JSON.stringify({ t: 'challenge', v: COMM_PROTOCOL_VERSION, nonce, server: o.self })),
  );
}

export interface ClientHandshakeOptions {
  secret: string;
  self: PeerIdentity;
  /** returns a reason to refuse the server's identity, or null */
  expect: (server: PeerIdentity) => string | null;
  /** payload limit once authenticated */
  maxPayload: number;
  timeoutMs?: number;
}

export function clientHandshake(ws: Link, o: ClientHandshakeOptions): Promise<Authenticated> {
  const nonce = randomBytes(32).toString('hex');
  let challenge: { nonce: string; server: PeerIdentity } | null = null;
  return run(ws, o.timeoutMs ?? HANDSHAKE_TIMEOUT_MS, o.maxPayload, (m, done, fail) => {
    const json = parseJson(m);
    if (!challenge) {
      const c = ChallengeSchema.safeParse(json);
      if (!c.success) return fail('the server did not send a valid challenge');
      if (c.data.v !== COMM_PROTOCOL_VERSION) return fail(`server speaks protocol version ${c.data.v}, expected ${COMM_PROTOCOL_VERSION}`);
      const refusal = o.expect(c.data.server);
      if (refusal) return fail(refusal);
      challenge = { nonce: c.data.nonce, server: c.data.server };
      const mac = hmacHex(o.secret, transcript('client', challenge.nonce, nonce, challenge.server, o.self));
      ws.send(JSON.stringify({ t: 'auth', v: COMM_PROTOCOL_VERSION, nonce, client: o.self, mac }));
      return;
    }
    const ok = AuthOkSchema.safeParse(json);
    if (!ok.success) return fail('the server did not confirm the handshake');
    const expected = hmacHex(o.secret, transcript('server', challenge.nonce, nonce, challenge.server, o.self));
    if (!macEquals(expected, ok.data.mac)) return fail('the server does not know the run secret');
    done(challenge.server);
  });
}
