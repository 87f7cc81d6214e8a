// Tagged point-to-point messages (pipeline stages). The k-th send to a peer with tag t matches
// the k-th recv from that peer with tag t; messages travel in pieces of P2P_PIECE_BYTES so a
// large activation does not hold a link for its whole length. A piece for a posted recv is
// received straight into the recv's buffer.
import { FrameError } from '../errors.js';
import { FrameKind, type FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { bytesOf, viewAs, type Tensor } from '../host-memory/dtype.js';

export const P2P_PIECE_BYTES = 4 << 20;

export function p2pFrames(numel: number, elemBytes: number): number {
  const per = P2P_PIECE_BYTES / elemBytes;
  return numel === 0 ? 1 : Math.ceil(numel / per);
}

export class SendOp<T extends Tensor> extends Op<void> {
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly buf: T,
    private readonly to: number,
    private readonly tag: number,
    private readonly index: number,
  ) {
    super(g, { ...init, kind: FrameKind.P2P });
  }
  start(): void {
    const per = P2P_PIECE_BYTES / this.buf.BYTES_PER_ELEMENT;
    const n = this.buf.length;
    if (n === 0) this.sendTo(this.to, this.index, 0, null, this.tag);
    for (let off = 0; off < n; off += per) this.sendTo(this.to, this.index, off, bytesOf(this.buf, off, Math.min(n, off + per)), this.tag);
    this.done(undefined);
  }
  protected onFrame(): void {
    throw new FrameError('frame routed to a send');
  }
}

export class RecvOp<T extends Tensor> extends Op<T> {
  private off = 0;
  private remaining: number;
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly buf: T,
    readonly from: number,
  ) {
    super(g, { ...init, kind: FrameKind.P2P });
    this.remaining = p2pFrames(buf.length, buf.BYTES_PER_ELEMENT);
    this.expect(from, this.remaining);
  }
  start(): void {}
  /** the next piece is received straight into its place in the buffer */
  protected override target(from: number, h: FrameHeader): Buffer | null {
    const len = Math.min(P2P_PIECE_BYTES / this.buf.BYTES_PER_ELEMENT, this.buf.length - this.off);
    if (from !== this.from || h.offset !== this.off || len <= 0 || h.bytes !== len * this.buf.BYTES_PER_ELEMENT) return null;
    return bytesOf(this.buf, this.off, this.off + len);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const per = P2P_PIECE_BYTES / this.buf.BYTES_PER_ELEMENT;
    const len = Math.min(per, this.buf.length - this.off);
    if (from !== this.from || h.offset !== this.off || payload.length !== len * this.buf.BYTES_PER_ELEMENT)
      throw new FrameError(`p2p piece of ${payload.length} bytes at offset ${h.offset}, expected ${len} elements at ${this.off}`);
    const esize = this.buf.BYTES_PER_ELEMENT;
    const inPlace = payload.buffer === this.buf.buffer && payload.byteOffset === this.buf.byteOffset + this.off * esize;
    if (!inPlace) this.buf.set(viewAs(this.buf, payload), this.off);
    this.off += len;
    if (--this.remaining === 0) this.done(this.buf);
  }
}

/** Per-(peer, tag) stream state that checks p2p frames arrive message by message, in order. */
export class P2PStreams {
  private readonly arriving = new Map<string, { index: number; off: number }>();
  /** validates a frame; returns the message index it belongs to */
  accept(from: number, h: FrameHeader, elemBytes: number): number {
    const key = `${from}:${h.seq}`;
    const st = this.arriving.get(key) ?? { index: 0, off: 0 };
    if (h.step !== st.index) throw new FrameError(`p2p message ${h.step} with tag ${h.seq}, expected message ${st.index}`);
    if (h.offset !== st.off) throw new FrameError(`p2p piece at offset ${h.offset}, expected ${st.off}`);
    const numel = h.check;
    const len = h.bytes / elemBytes;
    const per = P2P_PIECE_BYTES / elemBytes;
    if (len !== Math.min(per, numel - st.off) && !(numel === 0 && len === 0))
      throw new FrameError(`p2p piece of ${len} elements does not fit a ${numel}-element message`);
    st.off += len;
    if (st.off >= numel) {
      st.index++;
      st.off = 0;
    }
    this.arriving.set(key, st);
    return h.step;
  }
}
