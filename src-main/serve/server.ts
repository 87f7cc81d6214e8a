// `shardwise serve`'s server: one HTTP listener for the renderer's files and, on /api, the
// typed API over WebSocket (ws, no compression: events are small and frequent). `instance` is
// new per start: a tab that reconnects tells a restarted controller from a dropped connection.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { ControllerService } from '../controller/service.js';
import { REPORTS_PATH, serveReport } from './report-route.js';
import { serveStatic } from './static-files.js';
import { newToken } from './token.js';
import { attachApi } from './ws-api.js';

export const API_PATH = '/api';

export interface ServeHandle {
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

export async function startServer(
  service: ControllerService,
  opts: { host: string; port: number; version: string; rendererDir?: string; token?: string },
): Promise<ServeHandle> {
  const token = opts.token ?? newToken();
  const hello = { version: opts.version, instance: randomBytes(8).toString('hex'), started_at: new Date().toISOString() };
  const http: Server = createServer((req, res) => {
    if ((req.url ?? '').startsWith(REPORTS_PATH)) void serveReport(req, res, service, token);
    else serveStatic(req, res, opts.rendererDir);
  });
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 1 << 20 });
  http.on('upgrade', (req, socket, head) => {
    const pathname = new URL(req.url ?? '/', 'http://x').pathname;
    if (pathname !== API_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => attachApi(ws, service, { token, ...hello, runsRoot: service.store.root }));
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port, opts.host, () => resolve());
  });
  const port = (http.address() as AddressInfo).port;
  const hostInUrl = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${hostInUrl}:${port}/#token=${token}`,
    port,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}
