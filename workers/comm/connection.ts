// One authenticated link to a peer rank: framing, per-direction frame sequence numbers, a send
// window (backpressure: at most `windowBytes` handed to the socket and not yet flushed), byte
// counters, fail-fast on anything malformed, and a liveness heartbeat. A payload buffer passed to
// sendFrame is written without a copy, so it must not change until its callback fires; callers
// rely on that.
//
// Heartbeat: every `intervalMs` each side probes the link (a ping), and counts a miss for every
// interval in which nothing at all arrived from the peer (frames, pings, pongs). After `missed`
// misses in a row the peer is declared lost: a stopped (SIGSTOP), hung or unplugged peer whose
// socket stays open fails pending operations naming it, long before any op deadline. Misses are
// counted per timer tick, not by wall time, so this process's own stalls (a long GC, a blocked
// event loop) cost one miss, not a false alarm.
import type { Link } from './link.js';
import { FrameError } from './errors.js';
import { decodeHeader, encodeHeader, FLAG_PAYLOAD_FOLLOWS, HEADER_BYTES, INLINE_MAX_BYTES, type FrameHeader } from './frames.js';

/** Close code a rank uses when it shuts its links because it lost another rank (reason "lost rank N"). */
export const CLOSE_PEER_LOST = 4001;

/** Why a link closed; `lostRank` when the peer reported losing a third rank (the root cause). */
export type LinkError = Error & { lostRank?: number; departed?: boolean };
/** close reason of a peer that destroyed its process group on purpose (end of a run) */
export const DEPARTED_REASON = 'process group destroyed';

export interface HeartbeatOptions {
  /** ms between probes; 0 turns the heartbeat off */
  intervalMs: number;
  /** silent intervals in a row after which the peer counts as lost */
  missed: number;
}

// 15 s of silence: a rank whose event loop is busy for seconds (a driver compiling pipelines for
// a large model, a machine with more ranks than cores) must not count as lost; a closed socket
// (process killed, machine rebooted) is still seen at once, and a test or user can lower it
export const DEFAULT_HEARTBEAT: HeartbeatOptions = { intervalMs: 1000, missed: 15 };

export type OutFrame = Omit<FrameHeader, 'frameSeq' | 'flags' | 'bytes'>;

export interface ConnectionHandlers {
  onFrame(conn: PeerConnection, h: FrameHeader, payload: Buffer): void;
  /** where the payload announced by `h` may be received directly (null: a fresh buffer) */
  bodyTarget?(conn: PeerConnection, h: FrameHeader): Buffer | null;
  /** called once; `error.message` says why (peer closed, socket error, bad frame) */
  onClosed(conn: PeerConnection, error: Error): void;
  log(line: string): void;
}

interface Queued {
  parts: Buffer[];
  bytes: number;
  cb?: (err?: Error) => void;
}

export class PeerConnection {
  bytesSent = 0;
  bytesReceived = 0;
  framesSent = 0;
  framesReceived = 0;
  private sendSeq = 0;
  private recvSeq = 0;
  private inflight = 0;
  private readonly queue: Queued[] = [];
  private pendingHeader: FrameHeader | null = null;
  private closedWith: Error | null = null;
  private heard = true;
  private misses = 0;
  private beat: NodeJS.Timeout | null = null;

  constructor(
    private readonly ws: Link,
    /** global rank of the peer */
    readonly peer: number,
    private readonly h: ConnectionHandlers,
    private readonly maxPayloadBytes: number,
    private readonly windowBytes: number,
    private readonly heartbeat: HeartbeatOptions = DEFAULT_HEARTBEAT,
  ) {
    const alive = () => (this.heard = true);
    ws.on('ping', alive);
    ws.on('pong', alive);
    if (heartbeat.intervalMs > 0) {
      this.beat = setInterval(() => this.tick(), heartbeat.intervalMs);
      this.beat.unref();
    }
    ws.on('close', (code, reason) => {
      const text = reason.toString();
      const lost = code === CLOSE_PEER_LOST ? /^lost rank (\d{1,5})$/.exec(text) : null;
      const err: LinkError = new Error(
        lost ? `peer rank ${peer} aborted after losing rank ${lost[1]}` : `peer rank ${peer} closed the connection (code ${code}${text ? `, ${text}` : ''})`,
      );
      if (lost) err.lostRank = Number(lost[1]);
      if (code === 1000 && text === DEPARTED_REASON) err.departed = true;
      this.closed(err);
    });
    ws.on('error', (err) => this.closed(new Error(`connection to peer rank ${peer} failed: ${err.message}`)));
  }

  get isOpen(): boolean {
    return this.closedWith === null;
  }
  get closeReason(): Error | null {
    return this.closedWith;
  }

  /** Payload `null` or empty sends a header only. */
  sendFrame(f: OutFrame, payload: Buffer | null, cb?: (err?: Error) => void): void {
    if (this.closedWith) {
      const err = this.closedWith;
      if (cb) queueMicrotask(() => cb(err));
      return;
    }
    const bytes = payload ? payload.length : 0;
    const follows = bytes > INLINE_MAX_BYTES;
    const header: FrameHeader = { ...f, flags: follows ? FLAG_PAYLOAD_FOLLOWS : 0, bytes, frameSeq: this.sendSeq++ };
    let parts: Buffer[];
    if (follows) parts = [encodeHeader(header), payload!];
    else {
      const msg = Buffer.allocUnsafe(HEADER_BYTES + bytes);
      encodeHeader(header, msg);
      if (bytes) payload!.copy(msg, HEADER_BYTES);
      parts = [msg];
    }
    const q: Queued = { parts, bytes: bytes + HEADER_BYTES, cb };
    if (this.queue.length === 0 && this.inflight < this.windowBytes) this.write(q);
    else this.queue.push(q);
  }

  private write(q: Queued) {
    this.inflight += q.bytes;
    this.framesSent++;
    this.bytesSent += q.bytes;
    const sendMany = (this.ws as unknown as { sendMany?: (parts: Buffer[], cb: (err?: Error) => void) => void }).sendMany;
    if (sendMany) return sendMany.call(this.ws, q.parts, (err) => this.written(q, err));
    const last = q.parts.length - 1;
    q.parts.forEach((p, i) => {
      this.ws.send(p, { binary: true, compress: false }, i === last ? (err) => this.written(q, err ?? undefined) : undefined);
    });
  }

  private written(q: Queued, err?: Error) {
    this.inflight -= q.bytes;
    // a send fails only on a closing socket: its close event (with the real cause) follows
    if (err && !this.closedWith) setTimeout(() => this.closed(new Error(`send to peer rank ${this.peer} failed: ${err.message}`)), 250).unref();
    q.cb?.(err ? this.closedWith ?? err : undefined);
    while (this.queue.length && this.inflight < this.windowBytes && !this.closedWith) this.write(this.queue.shift()!);
  }

  private tick() {
    if (this.closedWith) return;
    if (this.heard) this.misses = 0;
    else if (++this.misses >= this.heartbeat.missed) {
      const ms = this.heartbeat.missed * this.heartbeat.intervalMs;
      this.h.log(`comm: peer rank ${this.peer} missed ${this.heartbeat.missed} heartbeats: closing the link`);
      this.closed(new Error(`peer rank ${this.peer} stopped answering: nothing received for ${this.heartbeat.missed} heartbeats of ${this.heartbeat.intervalMs} ms (~${ms} ms); it is stopped, hung or unreachable`));
      this.ws.terminate();
      return;
    }
    this.heard = false;
    try {
      this.ws.ping();
    } catch {
      // a link that is not open yet or any more: its close event reports why
    }
  }

  /** Feeds one message; called by the endpoint after authentication. */
  onMessage(data: Buffer, isBinary: boolean): void {
    this.heard = true;
    if (this.closedWith) return;
    this.bytesReceived += data.length;
    try {
      if (!isBinary) throw new FrameError('text message on the data path');
      if (this.pendingHeader) {
        const h = this.pendingHeader;
        if (data.length !== h.bytes) throw new FrameError(`payload message of ${data.length} bytes, header announced ${h.bytes}`);
        this.pendingHeader = null;
        this.framesReceived++;
        this.h.onFrame(this, h, data);
        return;
      }
      const h = decodeHeader(data, this.maxPayloadBytes);
      if (h.frameSeq !== this.recvSeq) throw new FrameError(`out-of-sequence frame ${h.frameSeq}, expected ${this.recvSeq}`);
      this.recvSeq = (this.recvSeq + 1) >>> 0;
      if (h.flags & FLAG_PAYLOAD_FOLLOWS) {
        this.pendingHeader = h;
        const setNext = (this.ws as unknown as { setNextBody?: (b: Buffer) => void }).setNextBody;
        if (setNext) {
          const target = this.h.bodyTarget?.(this, h);
          if (target && target.length === h.bytes) setNext.call(this.ws, target);
        }
        return;
      }
      this.framesReceived++;
      this.h.onFrame(this, h, data.subarray(HEADER_BYTES));
    } catch (err) {
      // never let a frame crash the process: a bad frame (or a bug handling one) drops this link,
      // which fails the operations of every group that uses it
      if (err instanceof FrameError) this.fatal(`bad frame from peer rank ${this.peer}: ${err.message}`);
      else this.fatal(`internal error handling a frame from peer rank ${this.peer}: ${(err as Error).stack ?? String(err)}`);
    }
  }

  /** Fault injection for tests: writes raw bytes on the link, bypassing framing. */
  sendRawForTest(bytes: Buffer): void {
    this.ws.send(bytes, { binary: true });
  }

  /** Closes the link because of a protocol violation; its operations fail with `reason`. */
  fatal(reason: string): void {
    if (this.closedWith) return;
    this.h.log(`comm: closing the connection to peer rank ${this.peer}: ${reason}`);
    this.closed(new FrameError(reason));
    this.ws.close(1002, reason.slice(0, 120));
  }

  private closed(err: Error) {
    if (this.closedWith) return;
    this.closedWith = err;
    if (this.beat) clearInterval(this.beat);
    const queued = this.queue.splice(0);
    for (const q of queued) q.cb?.(err);
    this.h.onClosed(this, err);
  }

  /** Closes the link; `lostRank` tells the peer this rank is shutting down because it lost that rank. */
  close(lostRank?: number): void {
    this.closed(new Error(`connection to peer rank ${this.peer} closed locally`));
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) {
      if (lostRank !== undefined) this.ws.close(CLOSE_PEER_LOST, `lost rank ${lostRank}`);
      else this.ws.close(1000, DEPARTED_REASON);
    }
    // a peer that never answers the close must not keep this process alive; until then the
    // link keeps reading, so the peer's unread bytes cannot turn the close into a reset that
    // would drop the "lost rank N" reason in the peer's kernel
    setTimeout(() => this.ws.terminate(), 3000).unref();
  }
}
