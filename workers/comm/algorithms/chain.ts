// Bandwidth-optimal rooted collectives for large messages: pipelined chains. The buffer is cut
// in two halves; one half travels the chain root -> root+1 -> ... and the other root -> root-1
// -> ..., in pieces, so every link carries data in both directions and each rank forwards a
// piece as soon as it has it. Reduce runs the same chains backwards, accumulating into the
// received piece (non-root buffers are never written). Pieces are received in place: a
// broadcast piece straight into the buffer, a reduce piece into a pooled scratch (scratch.ts)
// that is reduced and forwarded from there.
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { bytesOf, reduceInto, scaleRange, viewAs, type ReduceOp, type Tensor } from '../host-memory/dtype.js';
import { giveScratch, takeScratch } from '../host-memory/scratch.js';

const mod = (a: number, n: number) => ((a % n) + n) % n;

abstract class ChainOp<T extends Tensor> extends Op<T> {
  protected readonly v: number;
  protected readonly halves: [number, number][];
  protected readonly nextOff: number[];
  protected remaining = 0;
  constructor(
    g: OpHost,
    init: OpInit,
    protected readonly buf: T,
    protected readonly root: number,
    protected readonly pieceElems: number,
  ) {
    super(g, init);
    this.v = mod(g.rank - root, g.size);
    const mid = (buf.length + 1) >> 1;
    this.halves = [
      [0, mid],
      [mid, buf.length],
    ];
    this.nextOff = this.halves.map((h) => h[0]);
  }
  protected real(v: number) {
    return mod(v + this.root, this.g.size);
  }
  protected pieces(d: number) {
    const [lo, hi] = this.halves[d];
    return Math.ceil((hi - lo) / this.pieceElems);
  }
  /** [direction, offset, length] of the piece `h` announces if it is the next one expected, else null */
  protected expectedPiece(h: FrameHeader): [number, number, number] | null {
    const d = h.step;
    if (d !== 0 && d !== 1) return null;
    const off = this.nextOff[d];
    const len = Math.min(this.pieceElems, this.halves[d][1] - off);
    return h.offset === off && len > 0 && h.bytes === len * this.buf.BYTES_PER_ELEMENT ? [d, off, len] : null;
  }
  /** validates the next piece of direction d; returns [offset, length] */
  protected piece(h: FrameHeader, payload: Buffer): [number, number, number] {
    const d = h.step;
    if (d !== 0 && d !== 1) throw new FrameError(`chain direction ${d}`);
    const off = this.nextOff[d];
    const len = Math.min(this.pieceElems, this.halves[d][1] - off);
    if (h.offset !== off || len <= 0 || payload.length !== len * this.buf.BYTES_PER_ELEMENT)
      throw new FrameError(`chain piece at offset ${h.offset} of ${payload.length} bytes, expected offset ${off}`);
    this.nextOff[d] = off + len;
    return [d, off, len];
  }
}

export class ChainBroadcastOp<T extends Tensor> extends ChainOp<T> {
  constructor(g: OpHost, init: OpInit, buf: T, root: number, pieceElems: number) {
    super(g, init, buf, root, pieceElems);
    if (this.v !== 0)
      for (let d = 0; d < 2; d++) {
        this.remaining += this.pieces(d);
        this.expect(this.prev(d), this.pieces(d));
      }
  }
  private prev(d: number) {
    return this.real(d === 0 ? this.v - 1 : this.v + 1);
  }
  /** next rank in direction d, or -1 at the end of the chain */
  private next(d: number) {
    const n = this.g.size;
    if (d === 0) return this.v + 1 < n ? this.real(this.v + 1) : -1;
    const w = this.v === 0 ? n - 1 : this.v - 1;
    return w >= 1 ? this.real(w) : -1;
  }
  start(): void {
    if (this.v !== 0) {
      if (this.remaining === 0) this.done(this.buf);
      return;
    }
    for (let d = 0; d < 2; d++) {
      const to = this.next(d);
      const [lo, hi] = this.halves[d];
      if (to >= 0)
        for (let off = lo; off < hi; off += this.pieceElems)
          this.sendTo(to, d, off, bytesOf(this.buf, off, Math.min(off + this.pieceElems, hi)));
    }
    this.done(this.buf);
  }
  /** a piece lands in its place in the buffer (forwarded from there) */
  protected override target(from: number, h: FrameHeader): Buffer | null {
    const p = this.v === 0 ? null : this.expectedPiece(h);
    if (!p || from !== this.prev(p[0])) return null;
    return bytesOf(this.buf, p[1], p[1] + p[2]);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const [d, off] = this.piece(h, payload);
    if (from !== this.prev(d)) throw new FrameError(`chain piece from the wrong neighbour`);
    const esize = this.buf.BYTES_PER_ELEMENT;
    const inPlace = payload.buffer === this.buf.buffer && payload.byteOffset === this.buf.byteOffset + off * esize;
    if (!inPlace) this.buf.set(viewAs(this.buf, payload), off);
    const to = this.next(d);
    if (to >= 0) this.sendTo(to, d, off, payload);
    if (--this.remaining === 0) this.done(this.buf);
  }
}

export class ChainReduceOp<T extends Tensor> extends ChainOp<T> {
  constructor(
    g: OpHost,
    init: OpInit,
    buf: T,
    root: number,
    pieceElems: number,
    private readonly op: ReduceOp,
  ) {
    super(g, init, buf, root, pieceElems);
    for (let d = 0; d < 2; d++) {
      const p = this.prev(d);
      if (p >= 0) {
        this.remaining += this.pieces(d);
        this.expect(p, this.pieces(d));
      }
    }
  }
  /** d=0 flows 1 -> 2 -> ... -> n-1 -> root; d=1 flows n-1 -> ... -> 1 -> root */
  private prev(d: number) {
    const n = this.g.size;
    if (d === 0) return this.v === 1 ? -1 : this.real(this.v === 0 ? n - 1 : this.v - 1);
    return this.v === n - 1 ? -1 : this.real(this.v === 0 ? 1 : this.v + 1);
  }
  private next(d: number) {
    const n = this.g.size;
    if (this.v === 0) return -1;
    return d === 0 ? this.real(this.v + 1 < n ? this.v + 1 : 0) : this.real(this.v - 1);
  }
  start(): void {
    for (let d = 0; d < 2; d++) {
      if (this.prev(d) >= 0 || this.v === 0) continue;
      const [lo, hi] = this.halves[d];
      for (let off = lo; off < hi; off += this.pieceElems)
        this.sendTo(this.next(d), d, off, bytesOf(this.buf, off, Math.min(off + this.pieceElems, hi)));
    }
    if (this.remaining === 0) this.done(this.buf);
  }
  /** pooled receive buffers handed to a link as targets, by sender (one frame at a time each) */
  private readonly lent = new Map<number, Buffer>();
  protected override target(from: number, h: FrameHeader): Buffer | null {
    const p = this.expectedPiece(h);
    if (!p || from !== this.prev(p[0])) return null;
    const scratch = takeScratch(this.pieceElems * this.buf.BYTES_PER_ELEMENT);
    const old = this.lent.get(from);
    if (old) giveScratch(old); // a target the link did not use (it reports why)
    this.lent.set(from, scratch);
    return scratch.subarray(0, h.bytes);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const [d, off, len] = this.piece(h, payload);
    if (from !== this.prev(d)) throw new FrameError(`chain piece from the wrong neighbour`);
    const data = viewAs(this.buf, payload);
    const scratch = this.lent.get(from);
    if (scratch) this.lent.delete(from);
    if (this.v === 0) {
      reduceInto(this.buf, data, this.op, off, 0, len, this.dtype);
      if (this.op === 'avg') scaleRange(this.buf, off, off + len, this.g.size, this.dtype);
      if (scratch) giveScratch(scratch);
    } else {
      reduceInto(data, this.buf, this.op, 0, off, len, this.dtype);
      // forwarded from the scratch it arrived in: given back once the link has flushed it
      const own = scratch !== undefined && payload.buffer === scratch.buffer;
      if (scratch && !own) giveScratch(scratch);
      this.sendTo(this.next(d), d, off, bytesOf(data), this.seq, own ? () => giveScratch(scratch!) : undefined);
    }
    if (--this.remaining === 0) this.done(this.buf);
  }
}
