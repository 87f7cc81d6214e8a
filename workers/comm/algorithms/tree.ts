// Latency-optimised rooted collectives for small messages: binomial-tree broadcast and reduce,
// ceil(log2 n) rounds. Ranks are renumbered relative to the root (v = r - root mod n); a rank's
// parent is v minus its lowest set bit. Reduce combines children in a fixed order (ascending
// distance), so the root's result does not depend on arrival order.
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { bytesOf, reduceInto, scaleRange, viewAs, type ReduceOp, type Tensor } from '../host-memory/dtype.js';

const mod = (a: number, n: number) => ((a % n) + n) % n;

/** parent (or -1 for the root) and children, in relative ranks, of the binomial tree */
export function binomialTree(v: number, n: number): { parent: number; children: number[] } {
  let mask = 1;
  let parent = -1;
  while (mask < n) {
    if (v & mask) {
      parent = v - mask;
      break;
    }
    mask <<= 1;
  }
  const children: number[] = [];
  for (mask >>= 1; mask > 0; mask >>= 1) if (v + mask < n) children.push(v + mask);
  return { parent, children }; // children by descending distance
}

export class TreeBroadcastOp<T extends Tensor> extends Op<T> {
  private readonly tree: { parent: number; children: number[] };
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly buf: T,
    private readonly root: number,
  ) {
    super(g, init);
    this.tree = binomialTree(mod(g.rank - root, g.size), g.size);
    if (this.tree.parent >= 0) this.expect(this.real(this.tree.parent), 1);
  }
  private real(v: number) {
    return mod(v + this.root, this.g.size);
  }
  start(): void {
    if (this.tree.parent < 0) {
      for (const c of this.tree.children) this.sendTo(this.real(c), 0, 0, bytesOf(this.buf));
      this.done(this.buf);
    }
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    if (from !== this.real(this.tree.parent) || h.step !== 0 || h.offset !== 0 || payload.length !== this.buf.byteLength)
      throw new FrameError(`unexpected broadcast frame of ${payload.length} bytes from group rank ${from}`);
    this.buf.set(viewAs(this.buf, payload));
    for (const c of this.tree.children) this.sendTo(this.real(c), 0, 0, payload);
    this.done(this.buf);
  }
}

export class TreeReduceOp<T extends Tensor> extends Op<T> {
  private readonly tree: { parent: number; children: number[] };
  private readonly acc: T;
  private readonly inbox = new Map<number, Buffer>();
  private next: number;
  private readonly order: number[];

  constructor(
    g: OpHost,
    init: OpInit,
    private readonly buf: T,
    private readonly root: number,
    private readonly op: ReduceOp,
  ) {
    super(g, init);
    this.tree = binomialTree(mod(g.rank - root, g.size), g.size);
    this.order = this.tree.children.slice().reverse(); // nearest child first
    this.next = 0;
    for (const c of this.order) this.expect(this.real(c), 1);
    // only the root's buffer receives the result; the others accumulate in a scratch copy
    this.acc = this.tree.parent < 0 ? buf : (buf.slice() as T);
  }
  private real(v: number) {
    return mod(v + this.root, this.g.size);
  }
  start(): void {
    this.advance();
  }
  private advance() {
    while (this.next < this.order.length) {
      const m = this.inbox.get(this.order[this.next]);
      if (!m) return;
      reduceInto(this.acc, viewAs(this.acc, m), this.op, 0, 0, this.acc.length, this.dtype);
      this.next++;
    }
    if (this.tree.parent >= 0) this.sendTo(this.real(this.tree.parent), 0, 0, bytesOf(this.acc));
    else if (this.op === 'avg') scaleRange(this.acc, 0, this.acc.length, this.g.size, this.dtype);
    this.done(this.buf);
  }
  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const v = mod(from - this.root, this.g.size);
    if (!this.order.includes(v) || this.inbox.has(v) || h.step !== 0 || h.offset !== 0 || payload.length !== this.buf.byteLength)
      throw new FrameError(`unexpected reduce frame of ${payload.length} bytes from group rank ${from}`);
    this.inbox.set(v, payload);
    this.advance();
  }
}
