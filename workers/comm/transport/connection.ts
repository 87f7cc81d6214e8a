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
// event loop) cost one miss, not a false alarm. A side busy taking the peer's frames also probes
// from that path once an interval has passed since its last probe: one poll of the event loop
// can read and reduce dozens of queued 2 MiB pieces back to back (seconds of 16-bit sums on a
// loaded machine, bench:lan's fp16 hook at world 4) while its timers wait, and its peers must
// not read a rank that is working through their data as silent.
//
// Shared memory (shm-channel.ts): with `shm` set, each side offers the peer a ring on /dev/shm
// for the payloads it sends; once the peer (on the same machine) accepts, payloads over
// INLINE_MAX_BYTES that fit the ring go through it and only their frame headers through the
// link. Control frames (offer, accept, decline, credit) are written at once, past the queue
// and the window: a credit stuck behind payloads that wait for ring space would deadlock.
// Frame sequence numbers are given when a frame is written, so they follow the wire order.
import type { Link } from './link.js';
import type { LinkEnd } from './handshake.js';
import { FrameError } from '../errors.js';
import {
  decodeHeader,
  encodeHeader,
  FLAG_PAYLOAD_FOLLOWS,
  FLAG_PAYLOAD_SHM,
  FrameKind,
  HEADER_BYTES,
  INLINE_MAX_BYTES,
  type FrameHeader,
} from './frames.js';
import { ShmChannel, type Ctl, type ShmOptions } from '../shm/shm-channel.js';

export type { ShmOptions } from '../shm/shm-channel.js';

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

export type OutFrame = Omit<FrameHeader, 'frameSeq' | 'flags' | 'bytes' | 'ringPos'>;

export interface ConnectionHandlers {
  onFrame(conn: PeerConnection, h: FrameHeader, payload: Buffer): void;
  /** where the payload announced by `h` may be received directly (null: a fresh buffer) */
  bodyTarget?(conn: PeerConnection, h: FrameHeader): Buffer | null;
  /** called once; `error.message` says why (peer closed, socket error, bad frame) */
  onClosed(conn: PeerConnection, error: Error): void;
  log(line: string): void;
}

interface Queued {
  header: FrameHeader;
  payload: Buffer | null;
  cb?: (err?: Error) => void;
  /** bytes handed to the link (counted against the window until flushed) */
  wire: number;
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
  /** performance.now() of the last probe sent */
  private probedAt = 0;
  private beat: NodeJS.Timeout | null = null;
  /** payloads through shared memory, each way (inactive unless both ends allow it) */
  private readonly shmChannel: ShmChannel;

  constructor(
    private readonly ws: Link,
    /** global rank of the peer */
    readonly peer: number,
    private readonly h: ConnectionHandlers,
    private readonly maxPayloadBytes: number,
    private readonly windowBytes: number,
    private readonly heartbeat: HeartbeatOptions = DEFAULT_HEARTBEAT,
    shm: ShmOptions | null = null,
  ) {
    const alive = () => (this.heard = true);
    ws.on('ping', alive);
    ws.on('pong', alive);
    if (heartbeat.intervalMs > 0) {
      this.beat = setInterval(() => this.tick(), heartbeat.intervalMs);
      this.beat.unref();
    }
    ws.on('close', (code, reason) => this.linkClosed(code, reason));
    ws.on('error', (err) => this.linkFailed(err));
    this.shmChannel = new ShmChannel(shm, {
      peer,
      writeControl: (type, value, body) => this.writeControl(type, value, body),
      bodyTarget: (hd) => this.h.bodyTarget?.(this, hd) ?? null,
      pump: () => this.pump(),
      log: (line) => this.h.log(line),
    });
    this.shmChannel.offer();
  }

  /**
   * The link closed or failed after the handshake but before this connection listened (the
   * handshake kept it: a peer that leaves at once may close within that window).
   */
  endedBeforeAttach(e: LinkEnd): void {
    if (e.close) this.linkClosed(e.close.code, e.close.reason);
    else if (e.error) this.linkFailed(e.error);
  }

  private linkClosed(code: number, reason: Buffer) {
    const text = reason.toString();
    const lost = code === CLOSE_PEER_LOST ? /^lost rank (\d{1,5})$/.exec(text) : null;
    const err: LinkError = new Error(
      lost
        ? `peer rank ${this.peer} aborted after losing rank ${lost[1]}`
        : `peer rank ${this.peer} closed the connection (code ${code}${text ? `, ${text}` : ''})`,
    );
    if (lost) err.lostRank = Number(lost[1]);
    if (code === 1000 && text === DEPARTED_REASON) err.departed = true;
    this.closed(err);
  }

  private linkFailed(err: Error) {
    this.closed(new Error(`connection to peer rank ${this.peer} failed: ${err.message}`));
  }

  /** Whether payloads to the peer go through shared memory (the peer accepted this side's ring). */
  get sharedMemory(): boolean {
    return this.shmChannel.active;
  }

  /** The file name this side's ring had on /dev/shm (unlinked once the peer opened it); null without one. */
  get sharedMemoryRing(): string | null {
    return this.shmChannel.ringName;
  }
  /** frames and payload bytes that went through shared memory, each way */
  get shmFramesSent(): number {
    return this.shmChannel.framesSent;
  }
  get shmBytesSent(): number {
    return this.shmChannel.bytesSent;
  }
  get shmFramesReceived(): number {
    return this.shmChannel.framesReceived;
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
    const q: Queued = { header: { ...f, flags: 0, bytes, frameSeq: 0 }, payload: bytes ? payload : null, cb, wire: 0 };
    if (this.queue.length > 0 || !this.tryWrite(q)) this.queue.push(q);
  }

  /**
   * Writes `q` if the window has room (and, for a ring payload, the ring has room); false
   * leaves it for later. The payload goes through the peer's view of this side's ring, behind
   * the header (large, over the link: no copy), or inside the header's message (small).
   */
  private tryWrite(q: Queued): boolean {
    if (this.inflight >= this.windowBytes) return false;
    const h = q.header;
    const bytes = h.bytes;
    let parts: Buffer[] | null = null;
    if (bytes > INLINE_MAX_BYTES) {
      const pos = this.shmChannel.put(q.payload!);
      if (pos === -1) return false; // wait for a credit
      if (pos >= 0) {
        h.flags = FLAG_PAYLOAD_SHM;
        h.ringPos = pos;
        h.frameSeq = this.sendSeq++;
        parts = [encodeHeader(h)];
      }
    }
    if (!parts) {
      h.frameSeq = this.sendSeq++;
      if (bytes > INLINE_MAX_BYTES) {
        h.flags = FLAG_PAYLOAD_FOLLOWS;
        parts = [encodeHeader(h), q.payload!];
      } else {
        const msg = Buffer.allocUnsafe(HEADER_BYTES + bytes);
        encodeHeader(h, msg);
        if (bytes) q.payload!.copy(msg, HEADER_BYTES);
        parts = [msg];
      }
    }
    q.wire = parts.reduce((a, p) => a + p.length, 0);
    this.inflight += q.wire;
    this.framesSent++;
    this.bytesSent += bytes + HEADER_BYTES;
    this.writeParts(parts, (err) => this.written(q, err));
    return true;
  }

  private writeParts(parts: Buffer[], cb?: (err?: Error) => void) {
    const sendMany = (this.ws as unknown as { sendMany?: (parts: Buffer[], cb?: (err?: Error) => void) => void }).sendMany;
    if (sendMany) return sendMany.call(this.ws, parts, cb);
    const last = parts.length - 1;
    parts.forEach((p, i) => {
      this.ws.send(p, { binary: true, compress: false }, i === last && cb ? (err) => cb(err ?? undefined) : undefined);
    });
  }

  /** A control frame, written now (past the queue and the window; see the file comment). */
  private writeControl(type: Ctl, value: number, body: Buffer | null = null) {
    if (this.closedWith) return;
    const bytes = body ? body.length : 0;
    const msg = Buffer.allocUnsafe(HEADER_BYTES + bytes);
    encodeHeader(
      {
        kind: FrameKind.Control,
        dtype: 'float32',
        flags: 0,
        frameSeq: this.sendSeq++,
        group: 0,
        seq: 0,
        step: type,
        offset: value,
        bytes,
        check: 0,
      },
      msg,
    );
    if (body) body.copy(msg, HEADER_BYTES);
    this.writeParts([msg]);
  }

  private written(q: Queued, err?: Error) {
    this.inflight -= q.wire;
    // a send fails only on a closing socket: its close event (with the real cause) follows
    if (err && !this.closedWith)
      setTimeout(() => this.closed(new Error(`send to peer rank ${this.peer} failed: ${err.message}`)), 250).unref();
    q.cb?.(err ? (this.closedWith ?? err) : undefined);
    this.pump();
  }

  private pump() {
    while (this.queue.length && !this.closedWith && this.tryWrite(this.queue[0])) this.queue.shift();
  }

  private tick() {
    if (this.closedWith) return;
    if (this.heard) this.misses = 0;
    else if (++this.misses >= this.heartbeat.missed) {
      const ms = this.heartbeat.missed * this.heartbeat.intervalMs;
      this.h.log(`comm: peer rank ${this.peer} missed ${this.heartbeat.missed} heartbeats: closing the link`);
      this.closed(
        new Error(
          `peer rank ${this.peer} stopped answering: nothing received for ${this.heartbeat.missed} heartbeats of ${this.heartbeat.intervalMs} ms (~${ms} ms); it is stopped, hung or unreachable`,
        ),
      );
      this.ws.terminate();
      return;
    }
    this.heard = false;
    this.probe();
  }

  private probe() {
    this.probedAt = performance.now();
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
    if (this.beat && performance.now() - this.probedAt >= this.heartbeat.intervalMs) this.probe();
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
      if (h.kind === FrameKind.Control) return this.shmChannel.onControl(h, data.subarray(HEADER_BYTES));
      if (h.flags & FLAG_PAYLOAD_SHM) {
        const payload = this.shmChannel.readPayload(h);
        this.bytesReceived += h.bytes;
        this.framesReceived++;
        this.h.onFrame(this, h, payload);
        return;
      }
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
    this.shmChannel.close();
    const queued = this.queue.splice(0);
    for (const q of queued) q.cb?.(err);
    this.h.onClosed(this, err);
  }

  /** Closes the link; `lostRank` tells the peer this rank is shutting down because it lost that rank. */
  close(lostRank?: number): void {
    this.closed(new Error(`connection to peer rank ${this.peer} closed locally`));
    const linger = closeLingerMs(this.heartbeat);
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) {
      if (lostRank !== undefined) this.ws.close(CLOSE_PEER_LOST, `lost rank ${lostRank}`, linger);
      else this.ws.close(1000, DEPARTED_REASON, linger);
    }
    // The link keeps reading until the peer answers the close, so the peer's unread bytes cannot
    // turn the close into a reset that would drop the "lost rank N" reason in the peer's kernel.
    // It waits as long as the peer would wait for this rank before calling it lost: a peer whose
    // event loop is busy for seconds reads the close late and must still find this socket open,
    // or its first write (a heartbeat, a reply) fails with EPIPE, Node destroys the socket with
    // the close still unread, and a rank that left on purpose reads as one that died. A peer
    // that never answers must not keep this process alive longer than that.
    setTimeout(() => this.ws.terminate(), linger).unref();
  }
}

/** How long a closing rank waits for a peer's answer: its heartbeat window, at least 3 s. */
export function closeLingerMs(heartbeat: HeartbeatOptions): number {
  return Math.max(3000, heartbeat.intervalMs > 0 ? heartbeat.intervalMs * heartbeat.missed : 0);
}
