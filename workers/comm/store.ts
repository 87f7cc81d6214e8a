// The rendezvous store (torch's TCPStore, over an authenticated WebSocket): a launcher serves
// it; ranks publish their addresses, read each other's, count arrivals and meet at barriers.
// Keys and values are strings; get/wait block server-side until the keys exist or time out.
import type { WebSocket } from 'ws';
import {
  DEFAULT_COMM_TIMEOUT_MS,
  STORE_KEYS,
  StoreRequestSchema,
  StoreResponseSchema,
  type StoreRequest,
  type StoreResponse,
} from '../protocol/comm.js';
import { connectAuthenticated, listenAuthenticated, type AuthServer } from './transport/endpoint.js';
import { checkSecret } from './transport/handshake.js';

const STORE_MAX_MESSAGE = 2 << 20;

export interface StoreServerOptions {
  secret: string;
  host?: string;
  port?: number;
  log?: (line: string) => void;
}

interface Waiter {
  keys: string[];
  resolve: () => void;
}

export class StoreServer {
  private readonly data = new Map<string, string>();
  private waiters: Waiter[] = [];
  private constructor(private readonly server: AuthServer) {}
  private static log: (line: string) => void = () => {};

  get host() {
    return this.server.host;
  }
  get port() {
    return this.server.port;
  }

  static async start(o: StoreServerOptions): Promise<StoreServer> {
    const secret = checkSecret(o.secret);
    const log = o.log ?? (() => {});
    let self: StoreServer | null = null;
    const server = await listenAuthenticated({
      host: o.host ?? '127.0.0.1',
      port: o.port ?? 0,
      secret,
      self: { role: 'store' },
      admit: (c) => (c.role === 'store' ? 'a store cannot connect to a store' : null),
      maxPayload: STORE_MAX_MESSAGE,
      onPeer: (ws, auth) => auth.attach((data, isBinary) => self!.handle(ws, data, isBinary)),
      onRefused: (why, remote) => log(`store: refused ${remote}: ${why}`),
    });
    self = new StoreServer(server);
    StoreServer.log = log;
    return self;
  }

  private reply(ws: WebSocket, r: StoreResponse) {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(r));
  }

  private handle(ws: WebSocket, data: Buffer, isBinary: boolean) {
    let req: StoreRequest;
    try {
      if (isBinary) throw new Error('binary message');
      const parsed = StoreRequestSchema.safeParse(JSON.parse(data.toString('utf8')));
      if (!parsed.success) throw new Error(parsed.error.issues[0]?.message ?? 'invalid request');
      req = parsed.data;
    } catch (err) {
      StoreServer.log(`store: closing a client that sent a bad request: ${(err as Error).message}`);
      ws.close(1008, 'bad request');
      return;
    }
    const id = req.id;
    switch (req.op) {
      case 'set':
        this.data.set(req.key, req.value);
        this.wake();
        return this.reply(ws, { id, ok: true });
      case 'add': {
        const cur = Number(this.data.get(req.key) ?? '0');
        if (!Number.isSafeInteger(cur))
          return this.reply(ws, { id, ok: false, code: 'bad-request', error: `key ${req.key} does not hold an integer` });
        const next = cur + req.amount;
        this.data.set(req.key, String(next));
        this.wake();
        return this.reply(ws, { id, ok: true, count: next });
      }
      case 'compareSet': {
        const cur = this.data.get(req.key) ?? '';
        if (cur === req.expected) {
          this.data.set(req.key, req.value);
          this.wake();
          return this.reply(ws, { id, ok: true, value: req.value });
        }
        return this.reply(ws, { id, ok: true, value: cur });
      }
      case 'check':
        return this.reply(ws, { id, ok: true, flag: req.keys.every((k) => this.data.has(k)) });
      case 'delete':
        return this.reply(ws, { id, ok: true, flag: this.data.delete(req.key) });
      case 'numKeys':
        return this.reply(ws, { id, ok: true, count: this.data.size });
      case 'get':
      case 'wait': {
        const keys = req.op === 'get' ? [req.key] : req.keys;
        const answer = () =>
          req.op === 'get' ? this.reply(ws, { id, ok: true, value: this.data.get(req.key)! }) : this.reply(ws, { id, ok: true });
        if (keys.every((k) => this.data.has(k))) return answer();
        let timer: NodeJS.Timeout | undefined;
        const w: Waiter = {
          keys,
          resolve: () => {
            clearTimeout(timer);
            answer();
          },
        };
        this.waiters.push(w);
        const timeoutMs = req.timeoutMs;
        timer = setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          const missing = keys.filter((k) => !this.data.has(k));
          this.reply(ws, {
            id,
            ok: false,
            code: 'timeout',
            error: `store ${req.op} timed out after ${timeoutMs} ms waiting for ${missing.slice(0, 8).join(', ')}`,
          });
        }, timeoutMs);
        ws.once('close', () => {
          clearTimeout(timer);
          this.waiters = this.waiters.filter((x) => x !== w);
        });
        return;
      }
    }
  }

  private wake() {
    const ready = this.waiters.filter((w) => w.keys.every((k) => this.data.has(k)));
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }

  /** Write a value directly (for the launcher that hosts the store); wakes waiting clients. */
  put(key: string, value: string): void {
    this.data.set(key, value);
    this.wake();
  }

  /** Read a value directly (for the launcher that hosts the store). */
  peek(key: string): string | undefined {
    return this.data.get(key);
  }

  async close(): Promise<void> {
    this.waiters = [];
    await this.server.close();
  }
}

export interface StoreClientOptions {
  host: string;
  port: number;
  secret: string;
  /** a name for logs and the handshake */
  name: string;
  /** how long to keep retrying while the store is not up yet (default 60 s) */
  connectTimeoutMs?: number;
  /** default timeout of get/wait/barrier (default 60 s) */
  timeoutMs?: number;
}

type Pending = { resolve: (r: StoreResponse & { ok: true }) => void; reject: (e: Error) => void; what: string };

export class StoreClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed: Error | null = null;
  readonly timeoutMs: number;

  private constructor(
    private readonly ws: WebSocket,
    private readonly address: string,
    timeoutMs: number,
  ) {
    this.timeoutMs = timeoutMs;
  }

  static async connect(o: StoreClientOptions): Promise<StoreClient> {
    const secret = checkSecret(o.secret);
    const url = `ws://${o.host.includes(':') ? `[${o.host}]` : o.host}:${o.port}`;
    const { ws, auth } = await connectAuthenticated({
      url,
      secret,
      self: { role: 'store-client', name: o.name.slice(0, 128) },
      expect: (s) => (s.role === 'store' ? null : `expected the rendezvous store at ${url}, found ${s.role}`),
      maxPayload: STORE_MAX_MESSAGE,
      retryForMs: o.connectTimeoutMs ?? DEFAULT_COMM_TIMEOUT_MS,
    });
    const client = new StoreClient(ws, `${o.host}:${o.port}`, o.timeoutMs ?? DEFAULT_COMM_TIMEOUT_MS);
    const closed = (code: number) =>
      client.failAll(new Error(`the rendezvous store at ${client.address} closed the connection (code ${code})`));
    const failed = (err: Error) => client.failAll(new Error(`rendezvous store connection error: ${err.message}`));
    ws.on('close', closed);
    ws.on('error', failed);
    auth.attach(
      (data, isBinary) => client.onMessage(data, isBinary),
      (e) => (e.close ? closed(e.close.code) : failed(e.error!)),
    );
    return client;
  }

  private onMessage(data: Buffer, isBinary: boolean) {
    let res: StoreResponse;
    try {
      if (isBinary) throw new Error('binary message');
      const parsed = StoreResponseSchema.safeParse(JSON.parse(data.toString('utf8')));
      if (!parsed.success) throw new Error('invalid response');
      res = parsed.data;
    } catch (err) {
      this.failAll(new Error(`the rendezvous store sent a malformed message (${(err as Error).message})`));
      this.ws.close(1008, 'bad response');
      return;
    }
    const p = this.pending.get(res.id);
    if (!p) return;
    this.pending.delete(res.id);
    if (res.ok) p.resolve(res);
    else p.reject(new Error(res.error));
  }

  private failAll(err: Error) {
    if (!this.closed) this.closed = err;
    for (const p of this.pending.values()) p.reject(new Error(`store ${p.what}: ${err.message}`));
    this.pending.clear();
  }

  private request(body: Omit<StoreRequest, 'id'> & Record<string, unknown>): Promise<StoreResponse & { ok: true }> {
    if (this.closed) return Promise.reject(this.closed);
    const id = this.nextId++;
    const what = `${body.op}${'key' in body ? ` ${String(body.key)}` : ''}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, what });
      this.ws.send(JSON.stringify({ id, ...body }));
    });
  }

  async set(key: string, value: string): Promise<void> {
    await this.request({ op: 'set', key, value });
  }
  async get(key: string, timeoutMs = this.timeoutMs): Promise<string> {
    return (await this.request({ op: 'get', key, timeoutMs })).value!;
  }
  async add(key: string, amount: number): Promise<number> {
    return (await this.request({ op: 'add', key, amount })).count!;
  }
  async compareSet(key: string, expected: string, value: string): Promise<string> {
    return (await this.request({ op: 'compareSet', key, expected, value })).value!;
  }
  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    await this.request({ op: 'wait', keys, timeoutMs });
  }
  async check(keys: string[]): Promise<boolean> {
    return (await this.request({ op: 'check', keys })).flag!;
  }
  async delete(key: string): Promise<boolean> {
    return (await this.request({ op: 'delete', key })).flag!;
  }
  async numKeys(): Promise<number> {
    return (await this.request({ op: 'numKeys' })).count!;
  }

  /** Store-based barrier: returns once `count` participants have arrived under `name`. */
  async barrier(name: string, count: number, timeoutMs = this.timeoutMs): Promise<void> {
    const n = await this.add(STORE_KEYS.barrierCount(name), 1);
    if (n === count) await this.set(STORE_KEYS.barrierDone(name), '1');
    else if (n > count) throw new Error(`barrier ${name}: ${n} arrivals for ${count} participants (a name reused?)`);
    await this.wait([STORE_KEYS.barrierDone(name)], timeoutMs);
  }

  close(): void {
    this.failAll(new Error('store client closed'));
    this.ws.close(1000, 'done');
  }
}
