// Latency-optimised reduce-scatter and all-gather for small messages: one round in which every
// rank sends each peer that peer's block directly over the full mesh (same bytes on the wire as
// the ring, n-1 fewer hops). Reduce-scatter combines contributions in rank order, so the result
// does not depend on arrival order.
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { bytesOf, reduceInto, scaleRange, viewAs, type ReduceOp, type Tensor } from '../host-memory/dtype.js';

export class DirectReduceScatterOp<T extends Tensor> extends Op<T> {
  private readonly inbox = new Map<number, T>();
  private readonly need: number;
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly input: T,
    private readonly output: T,
    private readonly bounds: number[],
    private readonly op: ReduceOp,
  ) {
    super(g, init);
    const mine = bounds[g.rank + 1] - bounds[g.rank];
    this.need = mine > 0 ? g.size - 1 : 0;
    if (mine > 0) for (let j = 0; j < g.size; j++) if (j !== g.rank) this.expect(j, 1);
  }
  start(): void {
    const { g, bounds } = this;
    for (let k = 0; k < g.size; k++)
      if (k !== g.rank && bounds[k + 1] > bounds[k]) this.sendTo(k, 0, bounds[k], bytesOf(this.input, bounds[k], bounds[k + 1]));
    this.finishIfReady();
  }
  private finishIfReady() {
    if (this.inbox.size < this.need) return;
    const { g, bounds, output } = this;
    const lo = bounds[g.rank],
      hi = bounds[g.rank + 1];
    if (hi === lo) return this.done(output);
    for (let j = 0; j < g.size; j++) {
      const src = j === g.rank ? (this.input.subarray(lo, hi) as T) : this.inbox.get(j)!;
      if (j === 0) output.set(src);
      else reduceInto(output, src, this.op, 0, 0, src.length, this.dtype);
    }
    if (this.op === 'avg') scaleRange(output, 0, output.length, g.size, this.dtype);
    this.done(output);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const { g, bounds } = this;
    const lo = bounds[g.rank],
      hi = bounds[g.rank + 1];
    if (h.step !== 0 || h.offset !== lo || payload.length !== (hi - lo) * this.output.BYTES_PER_ELEMENT || this.inbox.has(from))
      throw new FrameError(`unexpected reduce-scatter block of ${payload.length} bytes at offset ${h.offset}`);
    this.inbox.set(from, viewAs(this.output, payload));
    this.finishIfReady();
  }
}

export class DirectAllGatherOp<T extends Tensor> extends Op<T> {
  private remaining = 0;
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly input: T,
    private readonly output: T,
    private readonly bounds: number[],
  ) {
    super(g, init);
    for (let j = 0; j < g.size; j++)
      if (j !== g.rank && bounds[j + 1] > bounds[j]) {
        this.expect(j, 1);
        this.remaining++;
      }
  }
  start(): void {
    const { g, bounds } = this;
    this.output.set(this.input, bounds[g.rank]);
    if (this.input.length > 0) for (let k = 0; k < g.size; k++) if (k !== g.rank) this.sendTo(k, 0, bounds[g.rank], bytesOf(this.input));
    if (this.remaining === 0) this.done(this.output);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const lo = this.bounds[from],
      hi = this.bounds[from + 1];
    if (h.step !== 0 || h.offset !== lo || payload.length !== (hi - lo) * this.output.BYTES_PER_ELEMENT)
      throw new FrameError(`unexpected all-gather block of ${payload.length} bytes at offset ${h.offset}`);
    this.output.set(viewAs(this.output, payload), lo);
    if (--this.remaining === 0) this.done(this.output);
  }
}

/**
 * All-reduce for tiny messages in one round: every rank sends its whole buffer to every peer and
 * combines all n contributions in rank order, so every rank computes the same bits. n-1 messages
 * per rank instead of log2(n) rounds: on a full mesh the round trip, not the bytes, is the cost.
 */
export class DirectAllReduceOp<T extends Tensor> extends Op<T> {
  private readonly inbox = new Map<number, T>();
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly buf: T,
    private readonly op: ReduceOp,
  ) {
    super(g, init);
    for (let j = 0; j < g.size; j++) if (j !== g.rank) this.expect(j, 1);
  }
  start(): void {
    const bytes = Buffer.from(bytesOf(this.buf)); // the buffer is overwritten with the result
    for (let k = 0; k < this.g.size; k++) if (k !== this.g.rank) this.sendTo(k, 0, 0, bytes);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    if (h.step !== 0 || h.offset !== 0 || payload.length !== this.buf.byteLength || this.inbox.has(from))
      throw new FrameError(`unexpected all-reduce contribution of ${payload.length} bytes from group rank ${from}`);
    this.inbox.set(from, viewAs(this.buf, payload));
    if (this.inbox.size < this.g.size - 1) return;
    const own = this.buf.slice() as T;
    for (let j = 0; j < this.g.size; j++) {
      const src = j === this.g.rank ? own : this.inbox.get(j)!;
      if (j === 0) this.buf.set(src);
      else reduceInto(this.buf, src, this.op, 0, 0, src.length, this.dtype);
    }
    if (this.op === 'avg') scaleRange(this.buf, 0, this.buf.length, this.g.size, this.dtype);
    this.done(this.buf);
  }
}
