// Authenticated WebSocket endpoints: a server that runs the handshake on every connection
// before handing it over, and a client that connects (with retries while the server is not
// up yet) and authenticates. Compression is off: floats do not compress and deflate would
// cut loopback throughput ~25x. Clients send with a zero mask, which ws writes without
// copying the payload (masking guards against proxy cache poisoning, moot for an
// authenticated rank-to-rank link). What is not ws-specific lives in auth-endpoint.ts.
import { WebSocket, WebSocketServer } from 'ws';
import type { AddressInfo } from 'node:net';
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

export type { AuthServer } from './auth-endpoint.js';
export type AuthServerOptions = AuthListenOptions<WebSocket>;

export function listenAuthenticated(o: AuthServerOptions): Promise<AuthServer> {
  return new Promise((resolve, reject) => {
    const wss = new WebSocketServer({
      host: o.host,
      port: o.port,
      perMessageDeflate: false,
      maxPayload: HANDSHAKE_MAX_BYTES,
      skipUTF8Validation: false,
    });
    const live = new Set<LiveLink>();
    wss.on('connection', (ws, req) => {
      authenticateAccepted(ws, `${req.socket.remoteAddress}:${req.socket.remotePort}`, live, o);
    });
    wss.once('error', reject);
    wss.once('listening', () => {
      wss.off('error', reject);
      wss.on('error', () => {});
      resolve(serverHandle(o.host, (wss.address() as AddressInfo).port, live, (done) => wss.close(() => done())));
    });
  });
}

export interface ConnectOptions extends AuthConnectOptions {
  url: string;
}

const zeroMask = (mask: Buffer) => mask.fill(0);

/** Opens a socket with the handshake listener attached at once: the server's challenge may
 * arrive in the same read as the upgrade response, before any later listener would see it. */
function openOnce(o: ConnectOptions): Promise<{ conn: WebSocket; auth: Promise<Authenticated> }> {
  const ws = new WebSocket(o.url, {
    perMessageDeflate: false,
    maxPayload: HANDSHAKE_MAX_BYTES,
    generateMask: zeroMask,
    skipUTF8Validation: false,
  });
  return openWithHandshake(ws as unknown as Link & WebSocket, ws, 'open', o);
}

export async function connectAuthenticated(o: ConnectOptions): Promise<{ ws: WebSocket; auth: Authenticated }> {
  const { conn, auth } = await connectWithRetry(o, o.url, () => openOnce(o));
  return { ws: conn, auth };
}
