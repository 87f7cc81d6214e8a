// Latency-optimised all-reduce for small messages: recursive doubling, log2(p) rounds of
// whole-buffer exchanges between partners r ^ 2^k. For a world that is not a power of two, the
// first 2*rem ranks fold pairwise first (even -> odd), and get the result back at the end
// (MPICH's scheme). Partners combine a + b and b + a, which IEEE arithmetic makes bitwise equal,
// so every rank ends with exactly the same bits.
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { Op, type OpHost, type OpInit } from './op.js';
import { bytesOf, reduceInto, scaleRange, viewAs, type ReduceOp, type Tensor } from '../host-memory/dtype.js';

const FOLD_STEP = 0;
const UNFOLD_STEP = 0xffff;

export class RecursiveDoublingOp<T extends Tensor> extends Op<T> {
  private readonly p: number;
  private readonly rem: number;
  /** rank among the p ranks that do the doubling, or -1 for a folded-away rank */
  private readonly vrank: number;
  private readonly rounds: number;
  private round = 0;
  private readonly inbox = new Map<number, Buffer>();
  private folded = false;

  constructor(
    g: OpHost,
    init: OpInit,
    private readonly buf: T,
    private readonly op: ReduceOp,
  ) {
    super(g, init);
    const n = g.size,
      r = g.rank;
    let p = 1;
    while (p * 2 <= n) p *= 2;
    this.p = p;
    this.rem = n - p;
    this.rounds = Math.log2(p);
    if (r < 2 * this.rem) this.vrank = r % 2 === 0 ? -1 : r >> 1;
    else this.vrank = r - this.rem;
    if (this.vrank < 0) this.expect(r + 1, 1);
    else {
      if (r < 2 * this.rem) this.expect(r - 1, 1);
      for (let k = 0; k < this.rounds; k++) this.expect(this.real(this.vrank ^ (1 << k)), 1);
    }
  }

  private real(v: number) {
    return v < this.rem ? v * 2 + 1 : v + this.rem;
  }

  private snapshot(): Buffer {
    return Buffer.from(bytesOf(this.buf)); // the buffer changes after the send: send a copy
  }

  start(): void {
    const r = this.g.rank;
    if (this.vrank < 0) {
      this.sendTo(r + 1, FOLD_STEP, 0, bytesOf(this.buf)); // unchanged until the result arrives
      return;
    }
    this.folded = !(r < 2 * this.rem);
    this.advance();
  }

  private advance() {
    const r = this.g.rank;
    if (this.finishedAlgo) return;
    if (!this.folded) {
      const m = this.inbox.get(FOLD_STEP);
      if (!m) return;
      this.inbox.delete(FOLD_STEP);
      reduceInto(this.buf, viewAs(this.buf, m), this.op, 0, 0, this.buf.length, this.dtype);
      this.folded = true;
    }
    if (!this.sentFirst && this.rounds > 0) {
      this.sentFirst = true;
      this.sendTo(this.real(this.vrank ^ 1), 1, 0, this.snapshot());
    }
    while (this.round < this.rounds) {
      const m = this.inbox.get(this.round + 1);
      if (!m) return;
      this.inbox.delete(this.round + 1);
      reduceInto(this.buf, viewAs(this.buf, m), this.op, 0, 0, this.buf.length, this.dtype);
      this.round++;
      if (this.round < this.rounds) this.sendTo(this.real(this.vrank ^ (1 << this.round)), this.round + 1, 0, this.snapshot());
    }
    this.finishedAlgo = true;
    if (this.op === 'avg') scaleRange(this.buf, 0, this.buf.length, this.g.size, this.dtype);
    if (r < 2 * this.rem) this.sendTo(r - 1, UNFOLD_STEP, 0, bytesOf(this.buf));
    this.done(this.buf);
  }
  private sentFirst = false;
  private finishedAlgo = false;

  protected onFrame(from: number, h: FrameHeader, payload: Buffer): void {
    const r = this.g.rank;
    if (h.offset !== 0 || payload.length !== this.buf.byteLength)
      throw new FrameError(
        `recursive-doubling frame of ${payload.length} bytes at offset ${h.offset}, expected ${this.buf.byteLength} at 0`,
      );
    if (this.vrank < 0) {
      if (h.step !== UNFOLD_STEP || from !== r + 1) throw new FrameError(`unexpected recursive-doubling step ${h.step}`);
      this.buf.set(viewAs(this.buf, payload));
      this.done(this.buf);
      return;
    }
    const ok =
      (h.step === FOLD_STEP && r < 2 * this.rem && from === r - 1) ||
      (h.step >= 1 && h.step <= this.rounds && from === this.real(this.vrank ^ (1 << (h.step - 1))));
    if (!ok || this.inbox.has(h.step)) throw new FrameError(`unexpected recursive-doubling step ${h.step} from group rank ${from}`);
    this.inbox.set(h.step, payload);
    this.advance();
  }
}
