// The life of one operation on one rank: frames expected from each peer, sends in flight, a
// deadline, and completion only when both the algorithm is done and every send has been
// flushed (a zero-copy send still reads the caller's buffer until then).
//
// The deadline counts from the operation's last progress (its post, a frame received, a send
// flushed), not from its post: a large collective on a slow link (GPT-2 medium's 1.2 GB of
// gradients around a 4-rank ring at 1 Gbit/s) legitimately runs longer than any fixed deadline
// a hang should be caught in, while a peer that stops sending still fails it `timeoutMs` after
// the last byte moved. Dead or stopped peers are caught sooner by the links' heartbeat.
import { opError, FrameError, type CommError } from '../errors.js';
import { FrameKind, INLINE_MAX_BYTES, type DType, type FrameHeader } from '../transport/frames.js';
import type { PeerConnection } from '../transport/connection.js';
import { nowMs } from '../telemetry.js';
import { Work } from '../work.js';

/** What an operation needs from its process group. */
export interface OpHost {
  readonly id: number;
  readonly name: string;
  /** this process's rank in the group */
  readonly rank: number;
  readonly size: number;
  /** global ranks of the members, by group rank */
  readonly ranks: readonly number[];
  /** the link to a group member; throws a CommError when it is closed */
  conn(groupRank: number, op: Op<unknown>): PeerConnection;
  /** fails every pending operation of the group with `err`, and all later ones */
  abort(err: CommError): void;
  /** bookkeeping: the operation finished (ok or not) */
  finished(op: Op<unknown>): void;
}

export interface OpInit {
  name: string;
  seq: number;
  /** fingerprint every frame of this operation carries (collectives) */
  check: number;
  bytes: number;
  algorithm: string;
  dtype: DType;
  timeoutMs: number;
  kind?: FrameKind;
}

export abstract class Op<T> {
  readonly work: Work<T>;
  readonly name: string;
  readonly seq: number;
  readonly check: number;
  readonly bytes: number;
  readonly algorithm: string;
  readonly dtype: DType;
  readonly kind: FrameKind;
  /** frames still expected, by sender's group rank */
  protected readonly expected = new Map<number, number>();
  private pendingSends = 0;
  private algoDone = false;
  private result: T | undefined;
  private timer: NodeJS.Timeout | undefined;
  private over = false;
  labels?: Record<string, string | number>;

  constructor(
    protected readonly g: OpHost,
    init: OpInit,
  ) {
    this.name = init.name;
    this.seq = init.seq;
    this.check = init.check;
    this.bytes = init.bytes;
    this.algorithm = init.algorithm;
    this.dtype = init.dtype;
    this.kind = init.kind ?? FrameKind.Collective;
    this.work = new Work<T>(init.name, g.name, init.seq, nowMs(), (ms) => this.timeout(ms, 'wait'));
    if (init.timeoutMs > 0 && Number.isFinite(init.timeoutMs)) {
      this.timer = setTimeout(() => this.timeout(init.timeoutMs, 'deadline'), init.timeoutMs);
      this.timer.unref();
    }
  }

  get isOver(): boolean {
    return this.over;
  }

  /** Sends the first frames; called once, after construction. */
  abstract start(): void;
  /** Handles one frame from group rank `from`; throws FrameError for frames that cannot belong here. */
  protected abstract onFrame(from: number, h: FrameHeader, payload: Buffer): void;

  protected expect(from: number, frames: number): void {
    if (frames > 0) this.expected.set(from, (this.expected.get(from) ?? 0) + frames);
  }

  /**
   * Where the payload of a frame announced by `h` can be received in place, or null. Only for
   * a frame deliver() would accept: the bytes land before onFrame sees them.
   */
  bodyTarget(from: number, h: FrameHeader): Buffer | null {
    if (this.over || h.check !== this.check || h.dtype !== this.dtype || (this.expected.get(from) ?? 0) <= 0) return null;
    return this.target(from, h);
  }

  /** Algorithms that receive in place override this; see bodyTarget. */
  protected target(_from: number, _h: FrameHeader): Buffer | null {
    return null;
  }

  /** Entry point for frames routed to this operation. */
  deliver(from: number, h: FrameHeader, payload: Buffer): void {
    if (this.over) return;
    if (h.check !== this.check)
      throw this.mismatch(
        from,
        `rank ${this.g.ranks[from]} called a different collective or size under the same sequence number (fingerprint ${h.check.toString(16)} != ${this.check.toString(16)})`,
      );
    if (h.dtype !== this.dtype) throw this.mismatch(from, `rank ${this.g.ranks[from]} sent ${h.dtype}, this rank has ${this.dtype}`);
    const left = this.expected.get(from) ?? 0;
    if (left <= 0) throw new FrameError(`unexpected frame for ${this.name} seq ${this.seq} (step ${h.step}, offset ${h.offset})`);
    if (left === 1) this.expected.delete(from);
    else this.expected.set(from, left - 1);
    this.timer?.refresh();
    this.onFrame(from, h, payload);
  }

  private mismatch(from: number, why: string): CommError {
    const err = opError('mismatch', this.name, this.g.name, this.seq, this.g.ranks[from], why);
    this.g.abort(err);
    return err;
  }

  /**
   * Sends one frame. `released` (optional) runs once `data` may be reused: at once for a small
   * payload (copied into the frame), else when the link has flushed it (or failed to).
   */
  protected sendTo(to: number, step: number, offset: number, data: Buffer | null, seqOrTag = this.seq, released?: () => void): void {
    const conn = this.g.conn(to, this as Op<unknown>);
    const header = { kind: this.kind, dtype: this.dtype, group: this.g.id, seq: seqOrTag, step, offset, check: this.check };
    // small payloads are copied into the frame, so the caller's buffer is free at once; a
    // failed send means the link is closing, and the link's close fails the group with its cause
    if (!data || data.length <= INLINE_MAX_BYTES) {
      conn.sendFrame(header, data);
      released?.();
      return;
    }
    this.pendingSends++;
    conn.sendFrame(header, data, (err) => {
      this.pendingSends--;
      released?.();
      if (err) return;
      this.timer?.refresh();
      this.maybeComplete();
    });
  }

  /** The algorithm has produced its result; completion waits for outstanding sends. */
  protected done(result: T): void {
    this.algoDone = true;
    this.result = result;
    this.maybeComplete();
  }

  private maybeComplete() {
    if (this.over || !this.algoDone || this.pendingSends > 0) return;
    if (this.expected.size > 0) return;
    this.over = true;
    clearTimeout(this.timer);
    this.work._resolve(this.result as T, nowMs());
    this.g.finished(this as Op<unknown>);
  }

  /** Fails this operation and aborts the group (a partial collective leaves streams inconsistent). */
  failWith(err: CommError): void {
    if (this.over) return;
    this.g.abort(err);
  }

  /** Called by the group for every pending operation when it aborts. */
  _fail(err: CommError): void {
    if (this.over) return;
    this.over = true;
    clearTimeout(this.timer);
    const own = err.op === this.name && err.seq === this.seq ? err : err.forOp(this.name, this.g.name, this.seq);
    this.work._reject(own, nowMs());
    this.g.finished(this as Op<unknown>);
  }

  /** Group ranks this operation still waits for. */
  waitingOn(): number[] {
    return [...this.expected.keys()];
  }

  private timeout(ms: number, what: 'deadline' | 'wait') {
    if (this.over) return;
    const waiting = this.waitingOn().map((r) => this.g.ranks[r]);
    const peer = waiting[0];
    // the deadline is `ms` without progress; a wait's is `ms` since wait() was called
    const after = what === 'deadline' ? `after ${ms} ms without progress (deadline)` : `after ${ms} ms (wait)`;
    const reason =
      waiting.length > 0
        ? `timed out ${after} waiting for data from peer rank${waiting.length > 1 ? 's' : ''} ${waiting.join(', ')}`
        : `timed out ${after} waiting for sends to flush`;
    this.failWith(opError('timeout', this.name, this.g.name, this.seq, peer, reason));
  }
}
