// What the authenticated endpoints share, whatever carries their messages (ws: endpoint.ts,
// raw TCP: tcp-endpoint.ts): the options, running the server side of the HMAC handshake on an
// accepted link, the server handle that terminates live links on close, and the client's
// connect-with-retry loop (a peer's server may not be up yet when its address is published).
import type { PeerIdentity } from '../../protocol/comm.js';
import type { EventEmitter } from 'node:events';
import { clientHandshake, serverHandshake, type Authenticated } from './handshake.js';
import type { Link } from './link.js';

export interface AuthListenOptions<L> {
  host: string;
  port: number;
  secret: string;
  self: PeerIdentity;
  admit: (client: PeerIdentity) => string | null;
  /** message limit once authenticated */
  maxPayload: number;
  onPeer: (link: L, auth: Authenticated) => void;
  onRefused?: (reason: string, remote: string) => void;
  handshakeTimeoutMs?: number;
  /**
   * An authenticated link belongs to whoever onPeer gave it to, which closes it itself: the
   * server's close() then only stops listening and drops links still proving the secret. (The
   * rank mesh closes its links gracefully and keeps them reading until the peer answers; a
   * terminate there would reset a socket the peer may still have a close to read from.)
   */
  handOver?: boolean;
}

/** What a server tracks of an accepted link until it closes. */
export interface LiveLink {
  terminate(): void;
  on(event: 'close', fn: () => void): unknown;
}

export interface AuthConnectOptions {
  secret: string;
  self: PeerIdentity;
  expect: (server: PeerIdentity) => string | null;
  maxPayload: number;
  /** keep retrying refused connections until this many ms have passed */
  retryForMs?: number;
  handshakeTimeoutMs?: number;
}

export interface AuthServer {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Tracks an accepted link in `live` (the server's close() terminates what is there) and runs
 * the server handshake on it: onPeer once the client proved the secret, onRefused (with why)
 * otherwise. With `handOver` the link leaves `live` when it is handed to onPeer.
 */
export function authenticateAccepted<L extends LiveLink>(link: L, remote: string, live: Set<LiveLink>, o: AuthListenOptions<L>): void {
  live.add(link);
  link.on('close', () => live.delete(link));
  serverHandshake(link as unknown as Link, {
    secret: o.secret,
    self: o.self,
    admit: o.admit,
    maxPayload: o.maxPayload,
    timeoutMs: o.handshakeTimeoutMs,
  })
    .then((auth) => {
      if (o.handOver) live.delete(link);
      o.onPeer(link, auth);
    })
    .catch((err: Error) => o.onRefused?.(err.message, remote));
}

/** The handle of a listening server: close() terminates every live link, then closes the server. */
export function serverHandle(host: string, port: number, live: Set<LiveLink>, closeServer: (done: () => void) => void): AuthServer {
  return {
    host,
    port,
    close: () =>
      new Promise<void>((res) => {
        for (const l of live) l.terminate();
        closeServer(() => res());
      }),
  };
}

/**
 * Opens a connection and authenticates, retrying refused or reset connections with backoff
 * (20 ms doubling to 500 ms) until retryForMs has passed. `open` resolves once connected, with
 * the handshake already listening (the server's challenge may come in the first read).
 */
export async function connectWithRetry<C>(
  o: AuthConnectOptions,
  where: string,
  open: () => Promise<{ conn: C; auth: Promise<Authenticated> }>,
): Promise<{ conn: C; auth: Authenticated }> {
  const until = Date.now() + (o.retryForMs ?? 0);
  let delay = 20;
  for (;;) {
    let opened: { conn: C; auth: Promise<Authenticated> };
    try {
      opened = await open();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === 'ECONNREFUSED' || code === 'ECONNRESET') && Date.now() + delay < until) {
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 500);
        continue;
      }
      throw new Error(`cannot connect to ${where}: ${(err as Error).message}`, { cause: err });
    }
    return { conn: opened.conn, auth: await opened.auth };
  }
}

/**
 * The client side of one connection attempt: the handshake listens on `conn` at once (the
 * server's challenge may arrive in the same read as the connection's first bytes, before any
 * later listener would see it); resolves when `socket` emits `openEvent`, rejects on its first
 * error. `socket` is what emits them (the ws itself, or the TCP socket under a TcpLink).
 */
export function openWithHandshake<C extends Link>(
  conn: C,
  socket: EventEmitter,
  openEvent: string,
  o: AuthConnectOptions,
): Promise<{ conn: C; auth: Promise<Authenticated> }> {
  const auth = clientHandshake(conn, {
    secret: o.secret,
    self: o.self,
    expect: o.expect,
    maxPayload: o.maxPayload,
    timeoutMs: o.handshakeTimeoutMs,
  });
  auth.catch(() => {});
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => {
      socket.off(openEvent, onOpen);
      reject(err);
    };
    const onOpen = () => {
      socket.off('error', onError);
      resolve({ conn, auth });
    };
    socket.once('error', onError);
    socket.once(openEvent, onOpen);
  });
}
