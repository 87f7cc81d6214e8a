// Bandwidth-optimal ring for large messages: reduce-scatter then all-gather (either phase alone
// gives reduceScatter / allGather). Every segment is split in two halves that travel around the
// ring in opposite directions, so both directions of every link carry data, and each half is
// cut into pieces that are forwarded as soon as they arrive (pipelining: a rank reduces piece
// p while piece p+1 is on the wire). Received buffers are reduced in place and forwarded as
// they are, so the caller's tensor is only ever sent at the first step, and is never rewritten
// before the peer has received what was sent from it (the data dependencies of the ring order
// every overwrite after that receive).
//
// Segment k (bounds[k]..bounds[k+1]) ends reduced on rank k. Direction 0 sends to rank r+1:
//   reduce-scatter step s: send segment r-s-1, receive r-s-2 (last step receives r)
//   all-gather     step s: send segment r-s,   receive r-s-1
// Direction 1 mirrors it (r+s+1, r+s+2, ...). A frame's step field is 2*t + direction.
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { giveScratch, takeScratch } from '../host-memory/scratch.js';
import { bytesOf, reduceInto, reduceTo, scaleRange, viewAs, type ReduceOp, type Tensor } from '../host-memory/dtype.js';

export interface RingSpec<T extends Tensor> {
  /** n+1 segment boundaries in the full index space */
  bounds: number[];
  reduceScatter: boolean;
  allGather: boolean;
  op: ReduceOp;
  /** contributions in the full index space (reduce-scatter); not modified */
  input: T | null;
  /** the result: full space (allreduce, allGather), or this rank's segment only (reduceScatter) */
  output: T;
  /** allGather: this rank's block, copied into its segment of output first */
  ownBlock?: T;
  pieceElems: number;
}

const mod = (a: number, n: number) => ((a % n) + n) % n;

export class RingOp<T extends Tensor> extends Op<T> {
  private readonly n: number;
  private readonly r: number;
  private readonly steps: number;
  private readonly outShift: number;
  private readonly nextOff: number[][];
  private remaining = 0;
  /** all-reduce: reduce-scatter partial sums are kept in the tensor itself */
  private readonly inPlace: boolean;
  /** pool buffers handed to a link as receive targets, by sender (one frame at a time each) */
  private readonly lent = new Map<number, Buffer>();

  constructor(
    g: OpHost,
    init: OpInit,
    private readonly s: RingSpec<T>,
  ) {
    super(g, init);
    this.n = g.size;
    this.r = g.rank;
    this.steps = (s.reduceScatter ? this.n - 1 : 0) + (s.allGather ? this.n - 1 : 0);
    this.outShift = s.reduceScatter && !s.allGather ? s.bounds[this.r] : 0;
    this.inPlace = s.reduceScatter && s.allGather && s.input === s.output;
    this.nextOff = [0, 1].map((d) => Array.from({ length: this.steps }, (_, t) => this.half(this.recvSeg(d, t), d)[0]));
    for (let d = 0; d < 2; d++)
      for (let t = 0; t < this.steps; t++) {
        const [lo, hi] = this.half(this.recvSeg(d, t), d);
        const pieces = Math.ceil((hi - lo) / s.pieceElems);
        this.remaining += pieces;
        this.expect(this.upstream(d), pieces);
      }
  }

  private upstream(d: number) {
    return mod(d === 0 ? this.r - 1 : this.r + 1, this.n);
  }
  private downstream(d: number) {
    return mod(d === 0 ? this.r + 1 : this.r - 1, this.n);
  }
  private isRs(t: number) {
    return this.s.reduceScatter && t < this.n - 1;
  }
  private sendSeg(d: number, t: number) {
    const sgn = d === 0 ? -1 : 1;
    if (this.isRs(t)) return mod(this.r + sgn * (t + 1), this.n);
    const s = this.s.reduceScatter ? t - (this.n - 1) : t;
    return mod(this.r + sgn * s, this.n);
  }
  private recvSeg(d: number, t: number) {
    const sgn = d === 0 ? -1 : 1;
    if (this.isRs(t)) return mod(this.r + sgn * (t + 2), this.n);
    const s = this.s.reduceScatter ? t - (this.n - 1) : t;
    return mod(this.r + sgn * (s + 1), this.n);
  }
  /** the half of segment k that travels in direction d */
  private half(k: number, d: number): [number, number] {
    const lo = this.s.bounds[k],
      hi = this.s.bounds[k + 1];
    const mid = lo + ((hi - lo + 1) >> 1);
    return d === 0 ? [lo, mid] : [mid, hi];
  }

  start(): void {
    const { s } = this;
    if (s.ownBlock) s.output.set(s.ownBlock, s.bounds[this.r]);
    if (this.steps > 0)
      for (let d = 0; d < 2; d++) {
        const [lo, hi] = this.half(this.sendSeg(d, 0), d);
        const src = s.reduceScatter ? s.input! : s.output;
        for (let off = lo; off < hi; off += s.pieceElems) {
          const end = Math.min(off + s.pieceElems, hi);
          this.sendTo(this.downstream(d), d, off, bytesOf(src, off, end));
        }
      }
    if (this.remaining === 0) this.done(s.output);
  }

  /** Validates that `h` is the next piece of its (direction, step); returns where it goes. */
  private locate(from: number, h: FrameHeader): { d: number; t: number; off: number; len: number } {
    const d = h.step & 1,
      t = h.step >>> 1;
    if (t >= this.steps) throw new FrameError(`ring step ${t} out of range (${this.steps} steps)`);
    if (from !== this.upstream(d)) throw new FrameError(`ring frame for direction ${d} from the wrong neighbour`);
    const [, hi] = this.half(this.recvSeg(d, t), d);
    const off = this.nextOff[d][t];
    const len = Math.min(this.s.pieceElems, hi - off);
    if (h.offset !== off || len <= 0) throw new FrameError(`ring piece at offset ${h.offset}, expected ${off} (step ${t}, direction ${d})`);
    if (h.bytes !== len * this.s.output.BYTES_PER_ELEMENT)
      throw new FrameError(`ring piece of ${h.bytes} bytes, expected ${len * this.s.output.BYTES_PER_ELEMENT}`);
    return { d, t, off, len };
  }

  /**
   * In-place receive: an all-gather piece lands in its final place in the output; a
   * reduce-scatter piece in a pooled scratch (see takeScratch), which the all-reduce gives back
   * as soon as it has reduced it into the tensor, and the standalone reduce-scatter once it has
   * forwarded it. Writing into the output early is safe for the same reason as the
   * reduce-scatter's overwrites: a piece can only arrive once everything this rank sent from
   * that range has been received downstream.
   */
  protected override target(from: number, h: FrameHeader): Buffer | null {
    let p: { t: number; off: number; len: number };
    try {
      p = this.locate(from, h);
    } catch {
      return null; // onFrame reports it
    }
    const { s } = this;
    if (!this.isRs(p.t)) return bytesOf(s.output, p.off - this.outShift, p.off - this.outShift + p.len);
    const scratch = takeScratch(s.pieceElems * s.output.BYTES_PER_ELEMENT);
    const old = this.lent.get(from);
    if (old) giveScratch(old); // a target the link did not use (it reports why)
    this.lent.set(from, scratch);
    return scratch.subarray(0, h.bytes);
  }

  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const { s } = this;
    const { d, t, off, len } = this.locate(from, h);
    this.nextOff[d][t] = off + len;
    const out = off - this.outShift;
    let fwd: Buffer;
    let release: (() => void) | undefined;
    if (this.isRs(t)) {
      const data = viewAs(s.output, payload);
      const scratch = this.lent.get(from);
      const own = scratch !== undefined && payload.buffer === scratch.buffer;
      if (scratch) this.lent.delete(from);
      const last = t === this.n - 2;
      if (this.inPlace) {
        // all-reduce: the partial sum goes straight into the tensor and is forwarded from there
        reduceTo(s.output, off, data, 0, s.output, off, len, s.op, this.dtype);
        if (last && s.op === 'avg') scaleRange(s.output, off, off + len, this.n, this.dtype);
        fwd = bytesOf(s.output, off, off + len);
        if (scratch) giveScratch(scratch);
      } else if (last) {
        // this rank's own segment: reduced straight into the output (input is never written)
        reduceTo(s.output, out, data, 0, s.input!, off, len, s.op, this.dtype);
        if (s.op === 'avg') scaleRange(s.output, out, out + len, this.n, this.dtype);
        if (scratch) giveScratch(scratch);
        fwd = bytesOf(s.output, out, out + len); // the all-gather (if any) sends it on
      } else {
        reduceInto(data, s.input!, s.op, 0, off, len, this.dtype);
        fwd = bytesOf(data);
        if (scratch) {
          if (own) release = () => giveScratch(scratch);
          else giveScratch(scratch);
        }
      }
    } else {
      const esize = s.output.BYTES_PER_ELEMENT;
      const inPlace = payload.buffer === s.output.buffer && payload.byteOffset === s.output.byteOffset + out * esize;
      if (!inPlace) s.output.set(viewAs(s.output, payload), out);
      fwd = bytesOf(s.output, out, out + len);
    }
    if (t + 1 < this.steps) this.sendTo(this.downstream(d), 2 * (t + 1) + d, off, fwd, this.seq, release);
    else release?.();
    if (--this.remaining === 0) this.done(s.output);
  }
}
