// The full mesh of authenticated links between the ranks of one world, built through the
// rendezvous store: every rank serves on its own port, publishes host:port, and connects to
// every lower rank (so each pair has exactly one link). Frames are routed to process groups
// by id; frames for a group this rank has not created yet wait (bounded) until it does.
//
// The links are raw TCP (TcpLink: length-prefixed messages, the default: several times faster
// than ws on few cores) or WebSocket; both run the same HMAC handshake before any data. Every
// rank of a world must use the same kind: the published address carries it (tcp://, ws://).
import { COMM_ENV, STORE_KEYS, type PeerIdentity } from '../../protocol/comm.js';
import { PeerConnection, type HeartbeatOptions, type ShmOptions } from './connection.js';
import { connectAuthenticated, listenAuthenticated, type AuthServer } from './endpoint.js';
import { connectAuthenticatedTcp, listenAuthenticatedTcp } from './tcp-endpoint.js';
import type { Link } from './link.js';
import { FrameError } from '../errors.js';
import { HEADER_BYTES, type FrameHeader } from './frames.js';
import type { Authenticated } from './handshake.js';
import type { StoreClient } from '../store.js';
import { CommTelemetry, type PeerBytes } from '../telemetry.js';

export interface FrameSink {
  readonly members: ReadonlySet<number>;
  onFrame(fromGlobal: number, h: FrameHeader, payload: Buffer): void;
  peerLost(peer: number, err: Error): void;
  /** where a payload for this group may be received in place (validated like the frame) */
  bodyTarget(fromGlobal: number, h: FrameHeader): Buffer | null;
}

export type LinkKind = 'tcp' | 'ws';
export const LINK_KINDS: readonly LinkKind[] = ['tcp', 'ws'];

export interface TransportOptions {
  rank: number;
  /** what the rank-to-rank links run on */
  transport: LinkKind;
  heartbeat: HeartbeatOptions;
  worldSize: number;
  secret: string;
  bindAddr: string;
  advertiseAddr: string;
  store: StoreClient;
  /** how long to wait for every peer to connect: the rendezvous deadline (SHARDWISE_RENDEZVOUS_TIMEOUT_MS), not a collective's */
  timeoutMs: number;
  maxFrameBytes: number;
  windowBytes: number;
  /** payloads through shared memory with peers on this machine (null: always over the links) */
  shm: ShmOptions | null;
  /** bytes of frames held for groups/operations not posted yet, per process */
  maxEarlyBytes: number;
  log: (line: string) => void;
}

type Early = { from: number; h: FrameHeader; payload: Buffer };

export class Transport {
  readonly conns = new Map<number, PeerConnection>();
  readonly telemetry = new CommTelemetry();
  private readonly sinks = new Map<number, FrameSink>();
  private readonly early = new Map<number, Early[]>();
  /** ids of groups destroyed here or that this rank is not a member of */
  private readonly gone = new Set<number>();
  private readonly foreign = new Set<number>();
  earlyBytes = 0;
  /** next process-group id; advanced identically on every rank by newGroup */
  nextGroupId = 1;
  private server: AuthServer | null = null;
  private onConnected: (() => void) | null = null;
  private closed = false;

  private constructor(readonly o: TransportOptions) {}

  get rank() {
    return this.o.rank;
  }
  get worldSize() {
    return this.o.worldSize;
  }
  get log() {
    return this.o.log;
  }
  get maxEarlyBytes() {
    return this.o.maxEarlyBytes;
  }

  static async connect(o: TransportOptions): Promise<Transport> {
    const t = new Transport(o);
    try {
      await t.buildMesh();
    } catch (err) {
      // the store's own wait (a lower rank's address) or the mesh's: either way the world did not gather in time
      const late = t.meshTimedOut || /timed out/.test((err as Error).message);
      const e = late ? await t.notGathered() : err;
      t.close();
      throw e;
    }
    return t;
  }

  private meshTimedOut = false;

  /**
   * The rendezvous deadline passed: which ranks never arrived (published no address in the
   * store: not started, or still starting) and which arrived but did not link with this rank.
   */
  private async notGathered(): Promise<Error> {
    const { rank, worldSize: n, timeoutMs } = this.o;
    const absent: number[] = [];
    const unlinked: number[] = [];
    for (let j = 0; j < n; j++) {
      if (j === rank || this.conns.has(j)) continue;
      const published = await this.o.store.check([STORE_KEYS.rankAddress(j)]).catch(() => false);
      (published ? unlinked : absent).push(j);
    }
    const ranks = (r: number[]) => `rank${r.length > 1 ? 's' : ''} ${r.join(', ')}`;
    const parts = [
      ...(absent.length ? [`${ranks(absent)} did not arrive`] : []),
      ...(unlinked.length ? [`${ranks(unlinked)} arrived but did not connect to it`] : []),
    ];
    return new Error(
      `rank ${rank}: the ${n}-rank world did not gather within ${timeoutMs} ms (${COMM_ENV.rendezvousTimeoutMs}): ${parts.join('; ')} ---> HINT: on a loaded machine ranks start slowly: raise ${COMM_ENV.rendezvousTimeoutMs} (ms); otherwise check that every rank was started with the same MASTER_ADDR/MASTER_PORT, WORLD_SIZE and secret`,
    );
  }

  private adopt(ws: Link, auth: Authenticated, peer: number) {
    const conn = new PeerConnection(
      ws,
      peer,
      {
        onFrame: (c, h, payload) => this.onFrame(c, h, payload),
        bodyTarget: (c, h) => {
          const sink = this.sinks.get(h.group);
          return sink && sink.members.has(c.peer) ? sink.bodyTarget(c.peer, h) : null;
        },
        onClosed: (c, err) => this.onClosed(c, err),
        log: this.o.log,
      },
      this.o.maxFrameBytes,
      this.o.windowBytes,
      this.o.heartbeat,
      this.o.shm,
    );
    this.conns.set(peer, conn);
    auth.attach(
      (data, isBinary) => conn.onMessage(data, isBinary),
      (ended) => conn.endedBeforeAttach(ended),
    );
    if (this.conns.size === this.o.worldSize - 1) this.onConnected?.();
  }

  private async buildMesh() {
    const { rank, worldSize: n, secret } = this.o;
    if (n === 1) return;
    const connected = new Promise<void>((resolve) => (this.onConnected = resolve));
    const serverOptions = {
      host: this.o.bindAddr,
      port: 0,
      secret,
      self: { role: 'rank' as const, rank },
      admit: (c: PeerIdentity) => {
        if (c.role !== 'rank') return `a ${c.role} cannot join the rank mesh`;
        if (c.rank <= rank || c.rank >= n) return `rank ${c.rank} must not connect to rank ${rank} (world ${n})`;
        if (this.conns.has(c.rank)) return `rank ${c.rank} is already connected`;
        return null;
      },
      maxPayload: this.o.maxFrameBytes + HEADER_BYTES,
      // each peer's Connection closes its link gracefully; closing the server must not reset it
      handOver: true,
      onPeer: (link: Link, auth: Authenticated) => {
        if (this.closed) return void link.terminate();
        this.adopt(link, auth, (auth.peer as { rank: number }).rank);
      },
      onRefused: (why: string, remote: string) => this.o.log(`comm: rank ${rank} refused a connection from ${remote}: ${why}`),
    };
    const kind = this.o.transport;
    this.server =
      kind === 'tcp'
        ? await listenAuthenticatedTcp(serverOptions)
        : await listenAuthenticated({ ...serverOptions, onPeer: (ws, auth) => serverOptions.onPeer(ws as unknown as Link, auth) });
    const host = this.o.advertiseAddr;
    await this.o.store.set(STORE_KEYS.rankAddress(rank), `${kind}://${host.includes(':') ? `[${host}]` : host}:${this.server.port}`);
    const deadline = Date.now() + this.o.timeoutMs;
    await Promise.all(
      Array.from({ length: rank }, async (_, j) => {
        const url = await this.o.store.get(STORE_KEYS.rankAddress(j), Math.max(1, deadline - Date.now()));
        const m = /^(tcp|ws):\/\/((\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5}))$/.exec(url);
        if (!m) throw new Error(`rank ${j} published a malformed address ${JSON.stringify(url)}`);
        if (m[1] !== kind)
          throw new Error(
            `rank ${j} serves its links over ${m[1]}, this rank over ${kind} ---> HINT: start every rank of the world with the same transport (SHARDWISE_COMM_TRANSPORT)`,
          );
        const addr = m[2];
        const common = {
          secret,
          self: { role: 'rank' as const, rank },
          expect: (s: PeerIdentity) => (s.role === 'rank' && s.rank === j ? null : `expected rank ${j} at ${addr}`),
          maxPayload: this.o.maxFrameBytes + HEADER_BYTES,
          retryForMs: Math.max(0, deadline - Date.now()),
        };
        const { ws, auth } =
          kind === 'tcp'
            ? await connectAuthenticatedTcp({ ...common, host: m[3].replace(/^\[|\]$/g, ''), port: Number(m[4]) }).then((c) => ({
                ws: c.link,
                auth: c.auth,
              }))
            : await connectAuthenticated({ ...common, url: `ws://${addr}` }).then((c) => ({ ws: c.ws as unknown as Link, auth: c.auth }));
        if (this.closed) return void ws.terminate();
        this.adopt(ws, auth, j);
      }),
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      connected,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => {
            this.meshTimedOut = true;
            reject(new Error('the rendezvous timed out'));
          },
          Math.max(1, deadline - Date.now()),
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  register(id: number, sink: FrameSink) {
    this.sinks.set(id, sink);
    const frames = this.early.get(id);
    this.early.delete(id);
    for (const f of frames ?? []) {
      this.release(f.payload.length);
      const conn = this.conns.get(f.from);
      // a peer that closed since (one that left right after sending) still sent these frames
      if (!conn) continue;
      try {
        this.route(conn, f.h, f.payload);
      } catch (err) {
        if (err instanceof FrameError) conn.fatal(`bad frame from peer rank ${conn.peer}: ${err.message}`);
        else throw err;
      }
    }
    // peers whose links closed before the group existed (whether or not they sent it anything)
    for (const [peer, conn] of this.conns) if (!conn.isOpen && sink.members.has(peer)) sink.peerLost(peer, conn.closeReason!);
  }

  unregister(id: number) {
    this.sinks.delete(id);
    this.gone.add(id);
  }

  /** newGroup on a rank outside the group: frames for it are a protocol violation. */
  notAMember(id: number) {
    this.gone.add(id);
    this.foreign.add(id);
  }

  private onFrame(conn: PeerConnection, h: FrameHeader, payload: Buffer) {
    this.route(conn, h, payload);
  }

  private route(conn: PeerConnection, h: FrameHeader, payload: Buffer) {
    const sink = this.sinks.get(h.group);
    if (sink) {
      if (!sink.members.has(conn.peer)) throw new FrameError(`frame for group ${h.group} from rank ${conn.peer}, which is not a member`);
      sink.onFrame(conn.peer, h, payload);
      return;
    }
    if (this.foreign.has(h.group)) throw new FrameError(`frame for group ${h.group}, which this rank is not a member of`);
    if (this.gone.has(h.group)) return; // destroyed here: late frames are dropped
    if (h.group > this.nextGroupId + 1024)
      throw new FrameError(`frame for group ${h.group}, far beyond the ${this.nextGroupId} groups created`);
    this.hold(h.group, { from: conn.peer, h, payload });
  }

  /** Keeps a frame that arrived before its group or operation exists (bounded). */
  holdBytes(bytes: number) {
    // every held frame costs at least its header, so a flood of empty frames is bounded too
    const cost = bytes + HEADER_BYTES;
    if (this.earlyBytes + cost > this.o.maxEarlyBytes)
      throw new FrameError(`more than ${this.o.maxEarlyBytes} bytes arrived for operations this rank has not posted yet`);
    this.earlyBytes += cost;
  }

  /** Gives back what holdBytes(bytes) took. */
  release(bytes: number) {
    this.earlyBytes -= bytes + HEADER_BYTES;
  }

  private hold(group: number, f: Early) {
    this.holdBytes(f.payload.length);
    const list = this.early.get(group) ?? [];
    list.push(f);
    this.early.set(group, list);
  }

  private onClosed(conn: PeerConnection, err: Error) {
    if (this.closed) return;
    for (const sink of [...this.sinks.values()]) if (sink.members.has(conn.peer)) sink.peerLost(conn.peer, err);
  }

  peerBytes(): PeerBytes[] {
    return [...this.conns.values()]
      .map((c) => ({
        peer: c.peer,
        sent: c.bytesSent,
        received: c.bytesReceived,
        framesSent: c.framesSent,
        framesReceived: c.framesReceived,
        sentViaSharedMemory: c.shmBytesSent,
      }))
      .sort((a, b) => a.peer - b.peer);
  }

  /** Closes every link; `lostRank` is passed on so peers report the root cause. */
  close(lostRank?: number): void {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.conns.values()) c.close(lostRank !== undefined && lostRank !== c.peer ? lostRank : undefined);
    void this.server?.close();
  }
}
