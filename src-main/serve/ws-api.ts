// The typed API over one WebSocket connection (common/api/wire.ts). Nothing is answered before
// the first message proves the token; a wrong, missing or late token closes the socket with a
// reason and nothing else. After that an ApiSession answers requests and pumps subscribed
// runs' events only while the socket's send buffer is below HIGH_WATER, so a slow client never
// makes the controller queue without bound (it gets a resync snapshot instead).
import type { RawData, WebSocket } from 'ws';
import { AUTH_CLOSE_CODE, AuthParamsSchema, PROTOCOL_CLOSE_CODE, RequestSchema } from '../../common/api/index.js';
import { ApiSession } from '../controller/api-session.js';
import type { ControllerService } from '../controller/service.js';
import { tokenMatches } from './token.js';

export const HIGH_WATER = 1 << 20;
// a connection that has not proved the token by then is closed (tests shorten it)
const AUTH_TIMEOUT_MS = Number(process.env.SHARDWISE_SERVE_AUTH_TIMEOUT_MS) || 10_000;

export interface WsApiOptions {
  token: string;
  version: string;
  runsRoot: string;
  /** this controller's start (random id, ISO time), in the auth result */
  instance?: string;
  started_at?: string;
}

export function attachApi(ws: WebSocket, service: ControllerService, opts: WsApiOptions) {
  let authed = false;
  const authTimer = setTimeout(
    () => ws.close(AUTH_CLOSE_CODE, 'no token: send {id, method:"auth", params:{token}} first'),
    AUTH_TIMEOUT_MS,
  );
  const send = (m: object) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
  };
  const session = new ApiSession(service, {
    send,
    canSend: () => ws.bufferedAmount < HIGH_WATER,
    isOpen: () => ws.readyState === ws.OPEN,
  });
  ws.on('close', () => {
    clearTimeout(authTimer);
    session.close();
  });
  ws.on('error', () => undefined);

  ws.on('message', (raw: RawData, isBinary: boolean) => {
    let msg: unknown;
    try {
      if (isBinary) throw new Error('binary');
      msg = JSON.parse(raw.toString());
    } catch {
      ws.close(authed ? PROTOCOL_CLOSE_CODE : AUTH_CLOSE_CODE, 'messages are JSON text frames');
      return;
    }
    if (!authed) {
      const req = RequestSchema.safeParse(msg);
      const p = req.success && req.data.method === 'auth' ? AuthParamsSchema.safeParse(req.data.params) : null;
      if (!req.success || !p?.success) {
        ws.close(AUTH_CLOSE_CODE, 'authenticate first: {id, method:"auth", params:{token}}');
        return;
      }
      if (!tokenMatches(opts.token, p.data.token)) {
        ws.close(AUTH_CLOSE_CODE, 'wrong token');
        return;
      }
      authed = true;
      clearTimeout(authTimer);
      send({
        id: req.data.id,
        result: { version: opts.version, runs_root: opts.runsRoot, instance: opts.instance, started_at: opts.started_at },
      });
      return;
    }
    const req = RequestSchema.safeParse(msg);
    if (!req.success) {
      const id = (msg as { id?: unknown })?.id;
      if (typeof id === 'number') send({ id, error: { name: 'ValidationError', message: 'a request is {id, method, params}' } });
      else ws.close(PROTOCOL_CLOSE_CODE, 'a request is {id, method, params}');
      return;
    }
    void session.request(req.data.id, req.data.method, req.data.params);
  });
}
