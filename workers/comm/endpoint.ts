// Authenticated WebSocket endpoints: a server that runs the handshake on every connection
// before handing it over, and a client that connects (with retries while the server is not
// up yet) and authenticates. Compression is off: floats do not compress and deflate would
// cut loopback throughput ~25x. Clients send with a zero mask, which ws writes without
// copying the payload (masking guards against proxy cache poisoning, moot for an
// authenticated rank-to-rank link).
import { WebSocket, WebSocketServer } from 'ws';
import type { AddressInfo } from 'node:net';
import { HANDSHAKE_MAX_BYTES, type PeerIdentity } from '../protocol/comm.js';
import { clientHandshake, serverHandshake, type Authenticated } from './handshake.js';
import type { Link } from './link.js';

export interface AuthServerOptions {
  host: string;
  port: number;
  secret: string;
  self: PeerIdentity;
  admit: (client: PeerIdentity) => string | null;
  /** payload limit once authenticated */
  maxPayload: number;
  onPeer: (ws: WebSocket, auth: Authenticated) => void;
  onRefused?: (reason: string, remote: string) => void;
  handshakeTimeoutMs?: number;
}

export interface AuthServer {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

export function listenAuthenticated(o: AuthServerOptions): Promise<AuthServer> {
  return new Promise((resolve, reject) => {
    const wss = new WebSocketServer({ host: o.host, port: o.port, perMessageDeflate: false, maxPayload: HANDSHAKE_MAX_BYTES, skipUTF8Validation: false });
    const live = new Set<WebSocket>();
    wss.on('connection', (ws, req) => {
      live.add(ws);
      ws.on('close', () => live.delete(ws));
      const remote = `${req.socket.remoteAddress}:${req.socket.remotePort}`;
      serverHandshake(ws as unknown as Link, { secret: o.secret, self: o.self, admit: o.admit, maxPayload: o.maxPayload, timeoutMs: o.handshakeTimeoutMs })
        .then((auth) => o.onPeer(ws, auth))
        .catch((err: Error) => o.onRefused?.(err.message, remote));
    });
    wss.once('error', reject);
    wss.once('listening', () => {
      wss.off('error', reject);
      wss.on('error', () => {});
      const addr = wss.address() as AddressInfo;
      resolve({
        host: o.host,
        port: addr.port,
        close: () =>
          new Promise<void>((res) => {
            for (const ws of live) ws.terminate();
            wss.close(() => res());
          }),
      });
    });
  });
}

export interface ConnectOptions {
  url: string;
  secret: string;
  self: PeerIdentity;
  expect: (server: PeerIdentity) => string | null;
  maxPayload: number;
  /** keep retrying refused connections until this many ms have passed */
  retryForMs?: number;
  handshakeTimeoutMs?: number;
}

const zeroMask = (mask: Buffer) => mask.fill(0);

/** Opens a socket with the handshake listener attached at once: the server's challenge may
 * arrive in the same read as the upgrade response, before any later listener would see it. */
function openOnce(url: string, hs: (ws: WebSocket) => Promise<Authenticated>): Promise<{ ws: WebSocket; auth: Promise<Authenticated> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: HANDSHAKE_MAX_BYTES, generateMask: zeroMask, skipUTF8Validation: false });
    const auth = hs(ws);
    auth.catch(() => {});
    const onError = (err: Error) => {
      ws.off('open', onOpen);
      reject(err);
    };
    const onOpen = () => {
      ws.off('error', onError);
      resolve({ ws, auth });
    };
    ws.once('error', onError);
    ws.once('open', onOpen);
  });
}

export async function connectAuthenticated(o: ConnectOptions): Promise<{ ws: WebSocket; auth: Authenticated }> {
  const until = Date.now() + (o.retryForMs ?? 0);
  let delay = 20;
  for (;;) {
    let opened: { ws: WebSocket; auth: Promise<Authenticated> };
    try {
      opened = await openOnce(o.url, (ws) => clientHandshake(ws as unknown as Link, { secret: o.secret, self: o.self, expect: o.expect, maxPayload: o.maxPayload, timeoutMs: o.handshakeTimeoutMs }));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === 'ECONNREFUSED' || code === 'ECONNRESET') && Date.now() + delay < until) {
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 500);
        continue;
      }
      throw new Error(`cannot connect to ${o.url}: ${(err as Error).message}`);
    }
    const auth = await opened.auth;
    return { ws: opened.ws, auth };
  }
}
