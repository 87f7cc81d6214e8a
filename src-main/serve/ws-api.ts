// The typed API over one WebSocket connection (common/api/wire.ts). Nothing is answered before
// the first message proves the token; a wrong, missing or late token closes the socket with a
// reason and nothing else. After that: requests are validated by the service, results and
// errors ({name, message}) go back by id, and each subscribed run's events are pumped from its
// bounded Subscription only while the socket's send buffer is below HIGH_WATER, so a slow
// client never makes the controller queue without bound (it gets a resync snapshot instead).
import type { RawData, WebSocket } from 'ws';
import {
  ApiError,
  AUTH_CLOSE_CODE,
  AuthParamsSchema,
  PROTOCOL_CLOSE_CODE,
  RequestSchema,
  RunIdSchema,
  toErrorData,
} from '../../common/api/index.js';
import type { ControllerService } from '../controller/service.js';
import type { Subscription } from '../controller/telemetry.js';
import { tokenMatches } from './token.js';

export const HIGH_WATER = 1 << 20;
// a connection that has not proved the token by then is closed (tests shorten it)
const AUTH_TIMEOUT_MS = Number(process.env.SHARDWISE_SERVE_AUTH_TIMEOUT_MS) || 10_000;

export interface WsApiOptions {
  token: string;
  version: string;
  runsRoot: string;
}

export function attachApi(ws: WebSocket, service: ControllerService, opts: WsApiOptions) {
  let authed = false;
  const subs = new Map<string, Subscription>();
  const authTimer = setTimeout(() => ws.close(AUTH_CLOSE_CODE, 'no token: send {id, method:"auth", params:{token}} first'), AUTH_TIMEOUT_MS);

  const send = (m: object) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
  };

  const closeSubs = () => {
    for (const s of subs.values()) s.close();
    subs.clear();
  };
  ws.on('close', () => {
    clearTimeout(authTimer);
    closeSubs();
  });
  ws.on('error', () => undefined);

  const startPump = (runId: string, sub: Subscription) => {
    let timer: NodeJS.Timeout | null = null;
    const pump = () => {
      if (ws.readyState !== ws.OPEN || subs.get(runId) !== sub) return;
      while (ws.bufferedAmount < HIGH_WATER) {
        const e = sub.take();
        if (!e) return;
        send({ event: 'run', runId, data: e });
      }
      if (!timer) timer = setTimeout(() => ((timer = null), pump()), 20);
    };
    sub.onReady = pump;
    pump();
  };

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
      send({ id: req.data.id, result: { version: opts.version, runs_root: opts.runsRoot } });
      return;
    }
    const req = RequestSchema.safeParse(msg);
    if (!req.success) {
      const id = (msg as { id?: unknown })?.id;
      if (typeof id === 'number') send({ id, error: { name: 'ValidationError', message: 'a request is {id, method, params}' } });
      else ws.close(PROTOCOL_CLOSE_CODE, 'a request is {id, method, params}');
      return;
    }
    const { id, method, params } = req.data;
    void (async () => {
      try {
        const result = await service.call(method, params);
        if (method === 'runs.subscribe' || method === 'runs.unsubscribe') {
          const runId = RunIdSchema.parse((params as { runId: string }).runId);
          subs.get(runId)?.close();
          subs.delete(runId);
          send({ id, result });
          if (method === 'runs.subscribe') {
            const sub = service.subscribe(runId);
            subs.set(runId, sub);
            startPump(runId, sub);
          }
          return;
        }
        send({ id, result });
      } catch (e) {
        send({ id, error: e instanceof ApiError ? e.toJSON() : toErrorData(e) });
      }
    })();
  });
}
