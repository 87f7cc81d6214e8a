// A raw-TCP message link for the rank-to-rank data plane: what ws gives us (messages, text vs
// binary, a close code and reason, liveness probes) without WebSocket framing, masking or UTF-8
// checks, at the cost of ~5 bytes a message. Loopback and LAN peers are authenticated by the
// same HMAC handshake as ws links (it runs on these messages); until then the message limit
// stays tiny, so an unauthenticated peer cannot make this process allocate.
//
//   message = u32 LE length | u8 kind | length bytes
//   kind 1 binary, 2 text (UTF-8), 3 close (u16 LE code, UTF-8 reason), 4 ping (empty)
//
// Sends are zero-copy for large buffers (header and payload leave in one writev) and the
// callback fires once the kernel has the bytes. Closing is graceful: the close message goes
// after everything queued, the write side is shut (FIN) and the link keeps reading until the
// peer closes too, so unread data never turns the close into a reset that would drop the close
// message (and its reason) in the peer's kernel.
//
// Reads go into one reused 1 MiB buffer per link (Node's `onread`), not a fresh 64 KiB buffer
// per read: allocating and collecting those cost more CPU than the kernel's own copies. Bytes
// are copied out of it into their message before the next read, so nothing handed on ever
// aliases it. A message with a receive target (setNextBody: the collective's own memory) is
// read by the kernel straight into that target instead (onread's buffer is chosen per read):
// no copy at all for the bulk of every large piece. To keep a body out of the reused buffer,
// the link reads only the message header while a target waits for the next message, and the
// read after a body received in place peeks only PEEK_BYTES (the next frame's headers), so
// the next target is set before its payload is read.
import { EventEmitter } from 'node:events';
import net from 'node:net';
import type { Link } from './link.js';

/** bytes of the reused read buffer of a link */
export const READ_BUFFER_BYTES = 1 << 20;

/** Chunks of a socket that reads into a reused buffer: valid only until the callback returns. */
export type ChunkSink = (chunk: Buffer) => void;

/**
 * Where a socket's reads go: `onChunk` receives each chunk; `nextBuffer` (optional) picks the
 * buffer the next read lands in (null: the socket's reused buffer).
 */
export interface ReadSink {
  onChunk: ChunkSink | null;
  nextBuffer?: (() => Buffer | null) | null;
}

function userReads(sink: ReadSink) {
  const reused = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  return {
    buffer: () => sink.nextBuffer?.() ?? reused,
    callback: (n: number, buf: Uint8Array) => (sink.onChunk?.((buf as Buffer).subarray(0, n)), true),
  };
}

/** A client socket whose reads land in one reused buffer (or where `sink.nextBuffer` says). */
export function connectReusingReads(host: string, port: number, sink: ReadSink): net.Socket {
  return net.connect({ host, port, onread: userReads(sink) });
}

/**
 * The same for an accepted socket (the server must be created with pauseOnConnect): Node has
 * no public option for it, so the accepted handle moves into a Socket built with `onread`.
 * Returns null when Node's internals differ (the caller then keeps the socket as it is).
 */
export function adoptReusingReads(accepted: net.Socket, sink: ReadSink): net.Socket | null {
  const handle = (accepted as unknown as { _handle?: unknown })._handle;
  if (!handle) return null;
  try {
    (accepted as unknown as { _handle: unknown })._handle = null;
    const s = new net.Socket({
      handle: handle as never,
      readable: true,
      writable: true,
      onread: userReads(sink),
    } as net.SocketConstructorOpts);
    s.resume();
    // the husk has no handle now: destroying it closes nothing, but lets the server count this
    // connection as gone (else server.close() would wait for it forever)
    accepted.destroy();
    return s;
  } catch {
    (accepted as unknown as { _handle: unknown })._handle = handle;
    return null;
  }
}

const KIND_BINARY = 1;
const KIND_TEXT = 2;
const KIND_CLOSE = 3;
const KIND_PING = 4;
const HEAD = 5;
/** messages up to this size are copied behind their header (one write); larger ones go as writev */
const COPY_MAX = 16 * 1024;
/** how long a closing link waits for the peer's close before resetting (close() may say longer) */
const CLOSE_GRACE_MS = 3000;
/**
 * bytes read after a body received in place: the next frame's message header, 40-byte frame
 * header and payload message header (5 + 40 + 5) with room to spare, so the next payload
 * lands in its own target, not in the reused buffer
 */
const PEEK_BYTES = 64;

export const CONNECTING = 0;
export const OPEN = 1;
export const CLOSING = 2;
export const CLOSED = 3;

export class TcpLink extends EventEmitter implements Link {
  readonly CONNECTING = CONNECTING;
  readonly OPEN = OPEN;
  readyState: number;
  private readonly head = Buffer.alloc(HEAD);
  private headFill = 0;
  private body: Buffer | null = null;
  private bodyFill = 0;
  private bodyKind = 0;
  private peerClose: { code: number; reason: Buffer } | null = null;
  private closeEmitted = false;
  private ownCloseSent = false;
  private graceTimer: NodeJS.Timeout | null = null;
  /** where the next binary message's bytes go (set by the receiver that knows its place) */
  private nextBody: Buffer | null = null;
  /** the body being received is a caller's target (reads may land in it directly) */
  private bodyIsTarget = false;
  /** a body was just received in place: the next read takes only the next headers */
  private peek = false;
  private readonly peekBuffer = Buffer.allocUnsafeSlow(PEEK_BYTES);
  private readonly reusedReads: boolean;

  /**
   * `reads`: the socket reads into a reused buffer and delivers its chunks through this sink
   * (connectReusingReads / adoptReusingReads); without it the link listens to 'data' events.
   */
  constructor(
    private readonly sock: net.Socket,
    private maxPayload: number,
    connected: boolean,
    reads?: ReadSink,
  ) {
    super();
    this.reusedReads = !!reads;
    this.readyState = connected ? OPEN : CONNECTING;
    sock.setNoDelay(true);
    if (!connected)
      sock.once('connect', () => {
        if (this.readyState === CONNECTING) this.readyState = OPEN;
        this.emit('open');
      });
    if (reads) {
      reads.onChunk = (chunk) => this.onData(chunk);
      reads.nextBuffer = () => this.nextReadBuffer();
    } else sock.on('data', (chunk: Buffer) => this.onData(chunk));
    if (connected && sock.isPaused()) sock.resume();
    sock.on('error', (err) => {
      if (!this.closeEmitted) this.emit('error', err);
    });
    sock.on('end', () => {
      // the peer shut its side: answer with ours (a half-open link is of no use)
      if (!sock.writableEnded) sock.end();
    });
    sock.on('close', () => {
      this.readyState = CLOSED;
      if (this.graceTimer) clearTimeout(this.graceTimer);
      this.emitClose(this.peerClose?.code ?? 1006, this.peerClose?.reason ?? Buffer.alloc(0));
    });
  }

  /** Raises (after authentication) or lowers the largest message this link accepts. */
  setMaxPayload(bytes: number): void {
    this.maxPayload = bytes;
  }

  /**
   * The next binary message is received straight into `target` (its exact size), not into a
   * fresh buffer: the collective's own memory or a reused scratch, so large payloads cost no
   * allocation and no second copy. A message of another size is received as usual.
   */
  setNextBody(target: Buffer): void {
    this.nextBody = target;
  }

  get remote(): string {
    return `${this.sock.remoteAddress}:${this.sock.remotePort}`;
  }

  send(data: Buffer | string, _opts?: { binary?: boolean; compress?: boolean }, cb?: (err?: Error) => void): void {
    if (this.readyState !== OPEN) {
      if (cb) queueMicrotask(() => cb(new Error('the link is not open')));
      return;
    }
    if (typeof data === 'string') this.write(KIND_TEXT, Buffer.from(data, 'utf8'), cb);
    else this.write(KIND_BINARY, data, cb);
  }

  /** Several binary messages in one writev (a frame header and its payload); `cb` after the last. */
  sendMany(parts: Buffer[], cb?: (err?: Error) => void): void {
    if (this.readyState !== OPEN) {
      if (cb) queueMicrotask(() => cb(new Error('the link is not open')));
      return;
    }
    this.sock.cork();
    parts.forEach((p, i) => this.write(KIND_BINARY, p, i === parts.length - 1 ? cb : undefined));
    this.sock.uncork();
  }

  ping(): void {
    if (this.readyState === OPEN) this.write(KIND_PING, null);
  }

  close(code = 1000, reason = '', graceMs = CLOSE_GRACE_MS): void {
    if (this.readyState === CLOSED || this.ownCloseSent) return;
    if (this.readyState === CONNECTING) return this.terminate();
    this.readyState = CLOSING;
    this.sendClose(code, reason);
    this.graceTimer = setTimeout(() => this.sock.destroy(), graceMs);
    this.graceTimer.unref();
  }

  terminate(): void {
    this.readyState = CLOSED;
    this.sock.destroy();
  }

  private sendClose(code: number, reason: string) {
    this.ownCloseSent = true;
    const r = Buffer.from(reason.slice(0, 120), 'utf8');
    const b = Buffer.allocUnsafe(2 + r.length);
    b.writeUInt16LE(code & 0xffff, 0);
    r.copy(b, 2);
    this.write(KIND_CLOSE, b);
    this.sock.end();
  }

  private write(kind: number, body: Buffer | null, cb?: (err?: Error) => void) {
    const len = body ? body.length : 0;
    const done = cb ? (err?: Error | null) => cb(err ?? undefined) : undefined;
    if (len <= COPY_MAX) {
      const msg = Buffer.allocUnsafe(HEAD + len);
      msg.writeUInt32LE(len, 0);
      msg[4] = kind;
      if (len) body!.copy(msg, HEAD);
      this.sock.write(msg, done);
      return;
    }
    const head = Buffer.allocUnsafe(HEAD);
    head.writeUInt32LE(len, 0);
    head[4] = kind;
    this.sock.cork();
    this.sock.write(head);
    this.sock.write(body!, done);
    this.sock.uncork();
  }

  /** Where the next read should land (null: the reused buffer); see the file comment. */
  private nextReadBuffer(): Buffer | null {
    if (this.body && this.bodyIsTarget) return this.body.subarray(this.bodyFill);
    // a target waits for the next message: read just its header, then the body goes in place
    if (this.nextBody && !this.body) return this.peekBuffer.subarray(0, HEAD - this.headFill);
    // one peek after a body received in place; whatever it finds, big reads resume after it
    if (!this.peek) return null;
    this.peek = false;
    return this.peekBuffer;
  }

  private onData(chunk: Buffer) {
    let pos = 0;
    const n = chunk.length;
    while (pos < n) {
      if (this.readyState === CLOSED || this.peerClose) return; // after a close only FIN matters
      if (!this.body) {
        let len: number, kind: number;
        if (this.headFill === 0 && n - pos >= HEAD) {
          len = chunk.readUInt32LE(pos);
          kind = chunk[pos + 4];
          pos += HEAD;
        } else {
          const take = Math.min(HEAD - this.headFill, n - pos);
          chunk.copy(this.head, this.headFill, pos, pos + take);
          this.headFill += take;
          pos += take;
          if (this.headFill < HEAD) return;
          this.headFill = 0;
          len = this.head.readUInt32LE(0);
          kind = this.head[4];
        }
        if (kind < KIND_BINARY || kind > KIND_PING) return this.protocolError(1002, `unknown message kind ${kind}`);
        const limit = kind === KIND_CLOSE ? 125 : kind === KIND_PING ? 0 : this.maxPayload;
        if (len > limit)
          return this.protocolError(
            kind === KIND_BINARY || kind === KIND_TEXT ? 1009 : 1002,
            `message of ${len} bytes exceeds the ${limit}-byte limit`,
          );
        const target = this.nextBody;
        this.nextBody = null;
        if (target && kind === KIND_BINARY && target.length === len) {
          this.body = target;
          this.bodyIsTarget = true;
          this.bodyFill = 0;
          this.bodyKind = kind;
        } else if (n - pos >= len) {
          // whole message in this read: a view when every read has a buffer of its own, a copy
          // when the read buffer is reused
          const view = chunk.subarray(pos, pos + len);
          const msg = this.reusedReads ? Buffer.from(view) : view;
          pos += len;
          this.dispatch(kind, msg);
          continue;
        } else {
          this.body = Buffer.allocUnsafe(len);
          this.bodyIsTarget = false;
          this.bodyFill = 0;
          this.bodyKind = kind;
        }
      }
      const body = this.body!;
      const take = Math.min(body.length - this.bodyFill, n - pos);
      // a read that landed in the target itself (nextReadBuffer) is already in place
      const inPlace =
        this.bodyIsTarget && pos === 0 && chunk.buffer === body.buffer && chunk.byteOffset === body.byteOffset + this.bodyFill;
      if (!inPlace) chunk.copy(body, this.bodyFill, pos, pos + take);
      this.bodyFill += take;
      pos += take;
      if (this.bodyFill === body.length) {
        const msg = body;
        this.body = null;
        if (this.bodyIsTarget) this.peek = true;
        this.bodyIsTarget = false;
        this.dispatch(this.bodyKind, msg);
      }
    }
  }

  private dispatch(kind: number, msg: Buffer) {
    if (kind === KIND_BINARY) {
      if (this.readyState === OPEN) this.emit('message', msg, true);
    } else if (kind === KIND_TEXT) {
      if (this.readyState === OPEN) this.emit('message', msg, false);
    } else if (kind === KIND_PING) this.emit('ping');
    else {
      if (msg.length < 2) return this.protocolError(1002, 'close message without a code');
      this.peerClose = { code: msg.readUInt16LE(0), reason: Buffer.from(msg.subarray(2)) };
      if (!this.ownCloseSent && this.readyState !== CLOSED) {
        this.readyState = CLOSING;
        this.sendClose(this.peerClose.code, '');
        this.graceTimer = setTimeout(() => this.sock.destroy(), CLOSE_GRACE_MS);
        this.graceTimer.unref();
      }
      // the peer's reason is known now: report it without waiting for the socket to close
      this.emitClose(this.peerClose.code, this.peerClose.reason);
    }
  }

  private protocolError(code: number, why: string) {
    this.peerClose = { code, reason: Buffer.from(why) };
    this.readyState = CLOSED;
    this.sock.destroy();
    this.emitClose(code, Buffer.from(why));
  }

  private emitClose(code: number, reason: Buffer) {
    if (this.closeEmitted) return;
    this.closeEmitted = true;
    this.emit('close', code, reason);
  }
}
