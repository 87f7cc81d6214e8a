// gather, scatter and all-to-all: each is a set of blocks that go straight from one rank to
// another over the full mesh (what Gloo does for them too: the bytes have one destination, so a
// ring or tree would only add hops). A block travels in pieces (the group's piece size) so a
// large one neither exceeds the frame limit nor holds a link for its whole length, and every
// piece is received in place, straight into the destination tensor.
//
// Frames: step = piece index in its block, offset = element offset inside the block. Pieces of
// one block arrive in order (one link, one sender), so each is checked against the next offset.
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { bytesOf, viewAs, type Tensor } from '../host-memory/dtype.js';

/** A range [lo, hi) of `buf` sent to or received from group rank `peer`. */
export interface Block<T extends Tensor> {
  peer: number;
  buf: T;
  lo: number;
  hi: number;
}

export class BlockExchangeOp<T extends Tensor, R> extends Op<R> {
  private readonly recvBy = new Map<number, Block<T> & { next: number }>();
  private remaining = 0;

  constructor(
    g: OpHost,
    init: OpInit,
    private readonly sends: Block<T>[],
    recvs: Block<T>[],
    /** copies this rank's own block (no network) */
    private readonly local: () => void,
    private readonly value: R,
    private readonly pieceElems: number,
  ) {
    super(g, init);
    for (const b of recvs) {
      if (b.hi <= b.lo) continue; // empty blocks are not sent
      this.recvBy.set(b.peer, { ...b, next: 0 });
      const pieces = Math.ceil((b.hi - b.lo) / pieceElems);
      this.expect(b.peer, pieces);
      this.remaining += pieces;
    }
  }

  start(): void {
    this.local();
    for (const b of this.sends)
      for (let off = 0, k = 0; b.lo + off < b.hi; off += this.pieceElems, k++)
        this.sendTo(b.peer, k, off, bytesOf(b.buf, b.lo + off, Math.min(b.hi, b.lo + off + this.pieceElems)));
    if (this.remaining === 0) this.done(this.value);
  }

  private locate(from: number, h: FrameHeader): { b: Block<T> & { next: number }; len: number } {
    const b = this.recvBy.get(from);
    if (!b) throw new FrameError(`${this.name} block from group rank ${from}, which sends nothing to this rank`);
    const len = Math.min(this.pieceElems, b.hi - b.lo - b.next);
    if (h.offset !== b.next || len <= 0)
      throw new FrameError(`${this.name} piece at offset ${h.offset}, expected ${b.next} (block of ${b.hi - b.lo} elements)`);
    if (h.bytes !== len * b.buf.BYTES_PER_ELEMENT)
      throw new FrameError(
        `${this.name} piece of ${h.bytes} bytes from group rank ${from}, expected ${len * b.buf.BYTES_PER_ELEMENT} (do the block sizes agree on every rank?)`,
      );
    return { b, len };
  }

  protected override target(from: number, h: FrameHeader): Buffer | null {
    try {
      const { b, len } = this.locate(from, h);
      return bytesOf(b.buf, b.lo + b.next, b.lo + b.next + len);
    } catch {
      return null; // onFrame reports it
    }
  }

  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const { b, len } = this.locate(from, h);
    const at = b.lo + b.next;
    const e = b.buf.BYTES_PER_ELEMENT;
    if (!(payload.buffer === b.buf.buffer && payload.byteOffset === b.buf.byteOffset + at * e)) b.buf.set(viewAs(b.buf, payload), at);
    b.next += len;
    if (--this.remaining === 0) this.done(this.value);
  }
}
