// Authenticated raw-TCP endpoints for the rank-to-rank data plane (TcpLink messages): the same
// HMAC challenge-response as the ws endpoints runs first, and until it succeeds a link accepts
// only messages of at most HANDSHAKE_MAX_BYTES — no byte of data is read before the proof.
import net from 'node:net';
import { HANDSHAKE_MAX_BYTES } from '../protocol/comm.js';
import type { AuthServer } from './endpoint.js';
import { clientHandshake, serverHandshake, type Authenticated } from './handshake.js';
import type { Link } from './link.js';
import { adoptReusingReads, connectReusingReads, TcpLink, type ReadSink } from './tcp-link.js';
import type { PeerIdentity } from '../protocol/comm.js';

export interface TcpServerOptions {
  host: string;
  port: number;
  secret: string;
  self: PeerIdentity;
  admit: (client: PeerIdentity) => string | null;
  /** message limit once authenticated */
  maxPayload: number;
  onPeer: (link: Link, auth: Authenticated) => void;
  onRefused?: (reason: string, remote: string) => void;
  handshakeTimeoutMs?: number;
}

export function listenAuthenticatedTcp(o: TcpServerOptions): Promise<AuthServer> {
  return new Promise((resolve, reject) => {
    const live = new Set<TcpLink>();
    const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
      const reads: ReadSink = { onChunk: null };
      const sock = adoptReusingReads(accepted, reads);
      const link = sock ? new TcpLink(sock, HANDSHAKE_MAX_BYTES, true, reads) : new TcpLink(accepted, HANDSHAKE_MAX_BYTES, true);
      const remote = link.remote;
      live.add(link);
      link.on('close', () => live.delete(link));
      link.on('error', () => {});
      serverHandshake(link, { secret: o.secret, self: o.self, admit: o.admit, maxPayload: o.maxPayload, timeoutMs: o.handshakeTimeoutMs })
        .then((auth) => o.onPeer(link, auth))
        .catch((err: Error) => o.onRefused?.(err.message, remote));
    });
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      server.on('error', () => {});
      resolve({
        host: o.host,
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((res) => {
            for (const l of live) l.terminate();
            server.close(() => res());
          }),
      });
    });
  });
}

export interface TcpConnectOptions {
  host: string;
  port: number;
  secret: string;
  self: PeerIdentity;
  expect: (server: PeerIdentity) => string | null;
  maxPayload: number;
  /** keep retrying refused connections until this many ms have passed */
  retryForMs?: number;
  handshakeTimeoutMs?: number;
}

/** Connects with the handshake listener attached at once (the challenge may come in the first read). */
function openOnce(o: TcpConnectOptions): Promise<{ link: TcpLink; auth: Promise<Authenticated> }> {
  return new Promise((resolve, reject) => {
    const reads: ReadSink = { onChunk: null };
    const sock = connectReusingReads(o.host, o.port, reads);
    const link = new TcpLink(sock, HANDSHAKE_MAX_BYTES, false, reads);
    const auth = clientHandshake(link, { secret: o.secret, self: o.self, expect: o.expect, maxPayload: o.maxPayload, timeoutMs: o.handshakeTimeoutMs });
    auth.catch(() => {});
    const onError = (err: Error) => {
      sock.off('connect', onConnect);
      reject(err);
    };
    const onConnect = () => {
      sock.off('error', onError);
      resolve({ link, auth });
    };
    sock.once('error', onError);
    sock.once('connect', onConnect);
  });
}

export async function connectAuthenticatedTcp(o: TcpConnectOptions): Promise<{ link: Link; auth: Authenticated }> {
  const until = Date.now() + (o.retryForMs ?? 0);
  let delay = 20;
  for (;;) {
    let opened: { link: TcpLink; auth: Promise<Authenticated> };
    try {
      opened = await openOnce(o);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === 'ECONNREFUSED' || code === 'ECONNRESET') && Date.now() + delay < until) {
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 500);
        continue;
      }
      throw new Error(`cannot connect to tcp://${o.host}:${o.port}: ${(err as Error).message}`);
    }
    return { link: opened.link, auth: await opened.auth };
  }
}
