// The typed API (common/api) over web mode's WebSocket. The dashboard programs against
// ShardwiseApi and cannot tell this from the Electron preload's transport. Requests are
// checked before they leave, results and events on arrival; an error arrives as an ApiError
// with the controller's {name, message}.
import {
  ApiError,
  ApiErrorSchema,
  AUTH_CLOSE_CODE,
  type AuthResult,
  AuthResultSchema,
  type EventMessage,
  EventMessageSchema,
  type MethodName,
  type MethodParams,
  type MethodResult,
  parseParams,
  parseResult,
  ResponseSchema,
  type RunEvent,
  type ShardwiseApi,
  TOKEN_FRAGMENT_KEY,
} from '../../../common/api/index.js';
import { RunListeners } from './run-listeners.js';

/** The subset of the browser's WebSocket this client uses (tests pass the `ws` package's). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: 'open', fn: () => void): void;
  addEventListener(type: 'message', fn: (e: { data: unknown }) => void): void;
  addEventListener(type: 'close', fn: (e: { code: number; reason: string }) => void): void;
  addEventListener(type: 'error', fn: (e: unknown) => void): void;
}
export type WebSocketCtor = new (url: string) => WebSocketLike;

interface Pending {
  method: MethodName | 'auth';
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/** web mode: ws://<this page's host>/api and the token from the page's #token=... */
export function webModeEndpoint(loc: { host: string; protocol: string; hash: string }): { url: string; token: string | null } {
  const token = new URLSearchParams(loc.hash.replace(/^#/, '')).get(TOKEN_FRAGMENT_KEY);
  return { url: `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${loc.host}/api`, token };
}

export class WsApiClient implements ShardwiseApi {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new RunListeners();
  private closedReason: string | null = null;
  /** called once when the connection ends (lost controller, wrong token) */
  onClose: ((reason: string) => void) | null = null;
  /** the controller's answer to the token (its version and, where it says, which start it is) */
  hello: AuthResult | null = null;

  private constructor(private readonly ws: WebSocketLike) {}

  /** Open the socket and prove the token; rejects with the server's close reason if refused. */
  static connect(url: string, token: string, Ctor: WebSocketCtor = globalThis.WebSocket as unknown as WebSocketCtor): Promise<WsApiClient> {
    const ws = new Ctor(url);
    const client = new WsApiClient(ws);
    ws.addEventListener('message', (e) => client.onMessage(e.data));
    ws.addEventListener('close', (e) => client.onSocketClose(e.code, e.reason));
    ws.addEventListener('error', () => undefined);
    return new Promise((resolve, reject) => {
      ws.addEventListener('open', () => {
        client.request('auth', { token }).then((r) => {
          client.hello = AuthResultSchema.safeParse(r).data ?? null;
          resolve(client);
        }, reject);
      });
      // a refused token is told apart: retrying with it cannot work, a new URL can
      ws.addEventListener('close', (e) =>
        reject(
          new ApiError(
            e.code === AUTH_CLOSE_CODE ? 'Unauthorized' : 'ConnectionClosed',
            `the controller closed the connection (${e.code}${e.reason ? `: ${e.reason}` : ''})`,
          ),
        ),
      );
    });
  }

  private request(method: MethodName | 'auth', params: unknown): Promise<unknown> {
    if (this.closedReason) return Promise.reject(new ApiError('ConnectionClosed', this.closedReason));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { method, resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  async call<M extends MethodName>(method: M, params: MethodParams<M>): Promise<MethodResult<M>> {
    parseParams(method, params); // a bad request fails here, naming the field, before it is sent
    const result = await this.request(method, params);
    return parseResult(method, result);
  }

  subscribe(runId: string, onEvent: (e: RunEvent) => void): Promise<() => Promise<void>> {
    return this.listeners.add(runId, onEvent, {
      open: async () => void (await this.call('runs.subscribe', { runId })),
      close: async () => {
        if (!this.closedReason) await this.call('runs.unsubscribe', { runId });
      },
    });
  }

  close() {
    this.ws.close(1000, 'client closed');
  }

  private onMessage(data: unknown) {
    let msg: unknown;
    try {
      msg = JSON.parse(String(data));
    } catch {
      return;
    }
    if (msg && typeof msg === 'object' && 'event' in msg) {
      const ev = EventMessageSchema.safeParse(msg);
      if (!ev.success) return; // a malformed event is dropped, never half-applied
      this.dispatchEvent(ev.data);
      return;
    }
    const r = ResponseSchema.safeParse(msg);
    if (!r.success) return;
    const p = this.pending.get(r.data.id);
    if (!p) return;
    this.pending.delete(r.data.id);
    if ('error' in r.data) {
      const err = ApiErrorSchema.parse(r.data.error);
      p.reject(new ApiError(err.name, err.message, err.field));
    } else p.resolve(r.data.result);
  }

  private dispatchEvent(m: EventMessage) {
    this.listeners.dispatch(m.runId, m.data);
  }

  private onSocketClose(code: number, reason: string) {
    this.closedReason = `the connection to the controller closed (${code}${reason ? `: ${reason}` : ''})`;
    // a browser runs microtasks between close listeners: the pending auth request settles first, so it carries the refusal too
    const name = code === AUTH_CLOSE_CODE ? 'Unauthorized' : 'ConnectionClosed';
    for (const p of this.pending.values()) p.reject(new ApiError(name, this.closedReason));
    this.pending.clear();
    this.onClose?.(this.closedReason);
  }
}
