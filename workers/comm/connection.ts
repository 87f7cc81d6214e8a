// One authenticated link to a peer rank: framing, per-direction frame sequence numbers, a send
// window (backpressure: at most `windowBytes` handed to the socket and not yet flushed), byte
// counters, and fail-fast on anything malformed. A payload buffer passed to sendFrame is
// written without a copy, so it must not change until its callback fires; callers rely on that.
import type { WebSocket } from 'ws';
import { FrameError } from './errors.js';
import { decodeHeader, encodeHeader, FLAG_PAYLOAD_FOLLOWS, HEADER_BYTES, INLINE_MAX_BYTES, type FrameHeader } from './frames.js';

/** Close code a rank uses when it shuts its links because it lost another rank (reason "lost rank N"). */
export const CLOSE_PEER_LOST = 4001;

/** Why a link closed; `lostRank` when the peer reported losing a third rank (the root cause). */
export type LinkError = Error & { lostRank?: number };

export type OutFrame = Omit<FrameHeader, 'frameSeq' | 'flags' | 'bytes'>;

export interface ConnectionHandlers {
  onFrame(conn: PeerConnection, h: FrameHeader, payload: Buffer): void;
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

  constructor(
    private readonly ws: WebSocket,
    /** global rank of the peer */
    readonly peer: number,
    private readonly h: ConnectionHandlers,
    private readonly maxPayloadBytes: number,
    private readonly windowBytes: number,
  ) {
    ws.on('close', (code, reason) => {
      const text = reason.toString();
      const lost = code === CLOSE_PEER_LOST ? /^lost rank (\d{1,5})$/.exec(text) : null;
      const err: LinkError = new Error(
        lost ? `peer rank ${peer} aborted after losing rank ${lost[1]}` : `peer rank ${peer} closed the connection (code ${code}${text ? `, ${text}` : ''})`,
      );
      if (lost) err.lostRank = Number(lost[1]);
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

  /** Feeds one WebSocket message; called by the endpoint after authentication. */
  onMessage(data: Buffer, isBinary: boolean): void {
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
    const queued = this.queue.splice(0);
    for (const q of queued) q.cb?.(err);
    this.h.onClosed(this, err);
  }

  /** Closes the link; `lostRank` tells the peer this rank is shutting down because it lost that rank. */
  close(lostRank?: number): void {
    this.closed(new Error(`connection to peer rank ${this.peer} closed locally`));
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) {
      if (lostRank !== undefined) this.ws.close(CLOSE_PEER_LOST, `lost rank ${lostRank}`);
      else this.ws.close(1000, 'process group destroyed');
    }
    // a peer that never answers the close frame must not keep this process alive
    setTimeout(() => this.ws.terminate(), 1000).unref();
  }
}
