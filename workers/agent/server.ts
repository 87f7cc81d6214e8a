// `shardwise agent`: serve this machine's devices to paired controllers on the LAN. Binds to
// loopback unless given a host; announces itself over mDNS/DNS-SD (_shardwise._tcp) when it
// listens beyond loopback. Keeps running when a controller goes away.
import { Bonjour } from 'bonjour-service';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { AGENT_MESSAGE_MAX_BYTES, AGENT_PROTOCOL_VERSION, AGENT_SERVICE_TYPE } from '../protocol/agent.js';
import { serveConnection } from './connection.js';
import path from 'node:path';
import { PairingCode } from './pairing-code.js';
import { AgentRuns } from './runs.js';
import { AgentStateFile } from './state.js';

export interface AgentOptions {
  host: string;
  port: number;
  stateDir: string;
  name?: string;
  /** announce over mDNS (default: when not bound to loopback) */
  mdns?: boolean;
  log: (line: string) => void;
  onCode: (code: string, why: string) => void;
}

export interface RunningAgent {
  port: number;
  agentId: string;
  close(): Promise<void>;
}

/** an IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d */
const unmapped = (a: string) => a.replace(/^::ffff:/, '');

export const isLoopback = (host: string) => host === 'localhost' || host === '::1' || host.startsWith('127.');

export async function startAgent(o: AgentOptions): Promise<RunningAgent> {
  const state = new AgentStateFile(o.stateDir, o.name);
  const code = new PairingCode(o.onCode);
  // plain HTTP requests get nothing but a 426: the agent speaks only its WebSocket protocol
  const http = createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' }).end('shardwise agent: WebSocket only\n');
  });
  const wss = new WebSocketServer({ server: http, maxPayload: AGENT_MESSAGE_MAX_BYTES, perMessageDeflate: false });
  const runs = new AgentRuns(path.join(o.stateDir, 'runs'), o.log);
  wss.on('connection', (ws, req) =>
    serveConnection(
      ws,
      `${req.socket.remoteAddress}:${req.socket.remotePort}`,
      unmapped(req.socket.remoteAddress ?? ''),
      unmapped(req.socket.localAddress ?? '127.0.0.1'),
      { state, code, runs, log: o.log },
    ),
  );
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port, o.host, () => resolve());
  });
  const port = (http.address() as AddressInfo).port;
  const me = state.state;
  let bonjour: Bonjour | null = null;
  if (o.mdns ?? !isLoopback(o.host)) {
    bonjour = new Bonjour();
    bonjour.publish({
      name: `${me.agentName} (${me.agentId.slice(0, 6)})`,
      type: AGENT_SERVICE_TYPE,
      port,
      txt: { id: me.agentId, v: String(AGENT_PROTOCOL_VERSION) },
    });
    o.log(`announcing _${AGENT_SERVICE_TYPE}._tcp on port ${port} over mDNS`);
  }
  return {
    port,
    agentId: me.agentId,
    close: () =>
      new Promise<void>((resolve) => {
        runs.stopAll('the agent is shutting down');
        for (const c of wss.clients) c.terminate();
        const done = () => http.close(() => resolve());
        if (bonjour) bonjour.unpublishAll(() => bonjour!.destroy(done));
        else done();
      }),
  };
}
