// Authenticated raw-TCP endpoints for the rank-to-rank data plane (TcpLink messages): the same
// HMAC challenge-response as the ws endpoints runs first, and until it succeeds a link accepts
// only messages of at most HANDSHAKE_MAX_BYTES — no byte of data is read before the proof.
// What is not TCP-specific lives in auth-endpoint.ts.
import net from 'node:net';
import { HANDSHAKE_MAX_BYTES } from '../../protocol/comm.js';
import {
  authenticateAccepted,
  connectWithRetry,
  openWithHandshake,
  serverHandle,
  type AuthConnectOptions,
  type AuthListenOptions,
  type AuthServer,
  type LiveLink,
} from './auth-endpoint.js';
import type { Authenticated } from './handshake.js';
import type { Link } from './link.js';
import { adoptReusingReads, connectReusingReads, TcpLink, type ReadSink } from './tcp-link.js';

export type TcpServerOptions = AuthListenOptions<Link>;

export function listenAuthenticatedTcp(o: TcpServerOptions): Promise<AuthServer> {
  return new Promise((resolve, reject) => {
    const live = new Set<LiveLink>();
    const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
      const reads: ReadSink = { onChunk: null };
      const sock = adoptReusingReads(accepted, reads);
      const link = sock ? new TcpLink(sock, HANDSHAKE_MAX_BYTES, true, reads) : new TcpLink(accepted, HANDSHAKE_MAX_BYTES, true);
      link.on('error', () => {});
      authenticateAccepted<Link>(link, link.remote, live, o);
    });
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      server.on('error', () => {});
      resolve(serverHandle(o.host, (server.address() as net.AddressInfo).port, live, (done) => server.close(() => done())));
    });
  });
}

export interface TcpConnectOptions extends AuthConnectOptions {
  host: string;
  port: number;
}

/** Connects with the handshake listener attached at once (the challenge may come in the first read). */
function openOnce(o: TcpConnectOptions): Promise<{ conn: TcpLink; auth: Promise<Authenticated> }> {
  const reads: ReadSink = { onChunk: null };
  const sock = connectReusingReads(o.host, o.port, reads);
  return openWithHandshake(new TcpLink(sock, HANDSHAKE_MAX_BYTES, false, reads), sock, 'connect', o);
}

export async function connectAuthenticatedTcp(o: TcpConnectOptions): Promise<{ link: Link; auth: Authenticated }> {
  const { conn, auth } = await connectWithRetry(o, `tcp://${o.host}:${o.port}`, () => openOnce(o));
  return { link: conn, auth };
}
