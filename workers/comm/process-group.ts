// Process groups in the style of c10d: every collective returns a Work, runs under a deadline,
// and is matched across ranks by the group's sequence number (so collectives must be issued in
// the same order on every member, as in torch.distributed). Several operations of one group,
// and operations of different groups over the same ranks, may be in flight at once.
//
// After any failure (dead peer, deadline, bad frame, mismatched collective) the group is
// aborted: every pending operation fails with an error naming the operation, group, sequence
// number and peer, and every later operation fails at once. A partial collective leaves data
// streams inconsistent, so carrying on could only produce wrong results. A peer that closes on
// purpose ("process group destroyed", e.g. a fast rank after the run's last barrier) sent all it
// owed first: ops here fail only if they are still pending DEPARTED_GRACE_MS later.
import { CommError, FrameError, opError } from './errors.js';
import { DTYPE_BYTES, FrameKind, fingerprint, type DType, type FrameHeader } from './transport/frames.js';
import type { Work } from './work.js';
import { Op, type OpHost, type OpInit } from './algorithms/op.js';
import { RingOp } from './algorithms/ring.js';
import { RecursiveDoublingOp } from './algorithms/halving-doubling.js';
import { TreeBroadcastOp, TreeReduceOp } from './algorithms/tree.js';
import { ChainBroadcastOp, ChainReduceOp } from './algorithms/chain.js';
import { DirectAllGatherOp, DirectAllReduceOp, DirectReduceScatterOp } from './algorithms/direct.js';
import { P2PStreams, RecvOp, SendOp } from './algorithms/p2p.js';
import { BlockExchangeOp } from './algorithms/exchange.js';
import { allocLike, chunkBounds, dtypeOf, REDUCE_OPS, type ReduceOp, type Tensor } from './host-memory/dtype.js';
import type { PeerConnection } from './transport/connection.js';
import type { FrameSink, Transport } from './transport/transport.js';
import type { CommTelemetry, PeerBytes } from './telemetry.js';

/** how long ops may stay pending after a peer left on purpose before they fail naming it */
export const DEPARTED_GRACE_MS = 1500;

export interface CollectiveTuning {
  /** deadline of every operation, ms without progress (a frame received, a send flushed; algorithms/op.ts; default 60 000) */
  timeoutMs: number;
  /** all-reduce up to this many bytes: one round of direct exchange over the full mesh */
  allReduceDirectBytes: number;
  /** all-reduce up to this many bytes uses recursive doubling, above it the ring */
  allReduceSmallBytes: number;
  /** reduce-scatter / all-gather up to this many bytes (whole tensor) exchange directly, above it the ring */
  scatterGatherSmallBytes: number;
  /** broadcast / reduce up to this many bytes use a binomial tree, above it pipelined chains */
  rootedSmallBytes: number;
  /** pipelining granularity of the ring and chains */
  pieceBytes: number;
}

export const DEFAULT_TUNING: CollectiveTuning = {
  timeoutMs: 60_000,
  allReduceDirectBytes: 4 * 1024,
  allReduceSmallBytes: 64 * 1024,
  scatterGatherSmallBytes: 64 * 1024,
  rootedSmallBytes: 64 * 1024,
  // 2 MiB: one piece fills one resident receive slot of the SIMD kernels (simd.ts); against
  // 1 MiB it moved 15-20% more bytes per CPU second in world-2 all-reduces of 16 and 64 MiB.
  // Smaller pieces do not help a 4 MiB world-2 all-reduce on a shaped 1 Gbit/s link either
  // (bench:lan-link --piece, 20 iterations, 2 cores at load 9-11, own_link_use of two runs):
  // 2 MiB 0.907/0.934, 1 MiB 0.892/0.929, 512 KiB 0.842/0.912, 256 KiB 0.904/0.828,
  // 128 KiB 0.79/0.803, 64 KiB 0.655/0.713; at 10 Gbit/s 64 KiB took 3-5x as long. Each half
  // (1 MiB here) already pipelines behind the other on the one link, which stays at line rate;
  // what a rank loses is its peer's late call, and a peer can fall behind by up to the
  // reduce-scatter time less the last piece's, so smaller pieces let that wait grow.
  pieceBytes: 2 << 20,
};

export interface OpOptions {
  /**
   * what the payload's elements are: a Uint16Array is float16 unless this says bfloat16 (a
   * Float32Array is float32). Every rank must pass the same; frames carry it, and a rank that
   * receives another dtype fails the operation as a mismatch.
   */
  dtype?: DType;
  /** deadline of this operation in ms without progress (overrides the group's) */
  timeoutMs?: number;
  /** labels copied into the operation's span (bucket, layer, micro-batch) */
  labels?: Record<string, string | number>;
}
export interface AllReduceOptions extends OpOptions {
  op?: ReduceOp;
  algorithm?: 'ring' | 'recursive-doubling' | 'direct';
}
export interface ReduceScatterOptions<T extends Tensor> extends OpOptions {
  op?: ReduceOp;
  /** elements of each rank's block (default: a balanced split, see chunkBounds) */
  counts?: readonly number[];
  output?: T;
  algorithm?: 'ring' | 'direct';
}
export interface AllGatherOptions<T extends Tensor> extends OpOptions {
  /** elements contributed by each rank (default: input.length on every rank) */
  counts?: readonly number[];
  output?: T;
  algorithm?: 'ring' | 'direct';
}
export interface RootedOptions extends OpOptions {
  /** group rank of the root */
  root: number;
  algorithm?: 'tree' | 'chain';
}
export interface ReduceOptions extends RootedOptions {
  op?: ReduceOp;
}
export interface GatherOptions<T extends Tensor> extends OpOptions {
  /** group rank that receives every block */
  root: number;
  /** elements contributed by each rank (default: input.length on every rank) */
  counts?: readonly number[];
  /** root only: where the blocks go, in rank order (default: allocated) */
  output?: T;
}
export interface ScatterOptions<T extends Tensor> extends OpOptions {
  /** group rank that sends the blocks */
  root: number;
  /** root only: every rank's block, in rank order */
  input?: T;
  /** elements of each rank's block (default: output.length on every rank) */
  counts?: readonly number[];
}
export interface AllToAllOptions<T extends Tensor> extends OpOptions {
  /** elements of input sent to each rank (default: equal split) */
  inputSplits?: readonly number[];
  /** elements of output received from each rank (default: equal split) */
  outputSplits?: readonly number[];
  output?: T;
}
export interface P2POptions extends OpOptions {
  tag?: number;
}

type Early = { from: number; h: FrameHeader; payload: Buffer };

/** A trivial operation computed locally (groups of one rank). */
class LocalOp<T> extends Op<T> {
  constructor(
    g: OpHost,
    init: OpInit,
    private readonly run: () => T,
  ) {
    super(g, init);
  }
  start(): void {
    this.done(this.run());
  }
  protected onFrame(): void {
    throw new FrameError('frame for a local operation');
  }
}

export class ProcessGroup implements OpHost, FrameSink {
  /** this process's rank in the group */
  readonly rank: number;
  readonly size: number;
  readonly members: ReadonlySet<number>;
  private nextSeq = 0;
  private readonly collectives = new Map<number, Op<unknown>>();
  private readonly pending = new Set<Op<unknown>>();
  private readonly early = new Map<number, Early[]>();
  /**
   * Frames of posted collectives not handed to them yet: those that arrived before the post,
   * then any that arrive behind them (each op takes its pieces in order). They go one per
   * event-loop turn, as if they were arriving from the network now: a rank that posts late can
   * hold up to maxEarlyBytes of them, and reducing them all in one go (16-bit sums run in JS at
   * tens of ns an element) blocked its event loop for seconds, so its heartbeats stopped and its
   * peers declared it lost (bench:lan's GPT-2-medium shape at world 4 with the fp16 hook).
   */
  private readonly backlog = new Map<Op<unknown>, Early[]>();
  private readonly p2pSendIndex = new Map<string, number>();
  private readonly p2pRecvIndex = new Map<string, number>();
  private readonly p2pRecvs = new Map<string, RecvOp<Tensor>>();
  private readonly p2pEarly = new Map<string, Early[]>();
  private readonly p2pStreams = new P2PStreams();
  private abortedWith: CommError | null = null;

  /** @internal use initProcessGroup / newGroup */
  constructor(
    protected readonly t: Transport,
    readonly id: number,
    readonly name: string,
    /** global ranks of the members, by group rank (sorted) */
    readonly ranks: readonly number[],
    readonly tuning: CollectiveTuning,
  ) {
    this.rank = ranks.indexOf(t.rank);
    this.size = ranks.length;
    this.members = new Set(ranks);
    t.register(id, this);
  }

  /** global rank of this process */
  get globalRank(): number {
    return this.t.rank;
  }
  get telemetry(): CommTelemetry {
    return this.t.telemetry;
  }
  /** bytes sent/received per peer link since start (links are shared by all groups) */
  peerBytes(): PeerBytes[] {
    return this.t.peerBytes().filter((p) => this.members.has(p.peer));
  }
  /** the error that aborted this group, if any */
  get abortError(): CommError | null {
    return this.abortedWith;
  }

  // ---- collectives ----

  allReduce<T extends Tensor>(buf: T, o: AllReduceOptions = {}): Work<T> {
    const op = this.redop(o.op, 'allReduce');
    const dtype = this.dtypeFor(buf, o.dtype, 'allReduce');
    const small = buf.byteLength <= this.tuning.allReduceSmallBytes;
    const algorithm =
      o.algorithm ?? (buf.byteLength <= this.tuning.allReduceDirectBytes ? 'direct' : small ? 'recursive-doubling' : 'ring');
    const piece = this.pieceElems(buf);
    return this.post<T>('allReduce', buf.byteLength, algorithm, dtype, [buf.length, op, piece], o, (init) => {
      if (this.size === 1 || buf.length === 0) return new LocalOp(this, init, () => buf);
      if (algorithm === 'direct') return new DirectAllReduceOp(this, init, buf, op);
      if (algorithm === 'recursive-doubling') return new RecursiveDoublingOp(this, init, buf, op);
      const bounds = chunkBounds(buf.length, this.size);
      return new RingOp(this, init, { bounds, reduceScatter: true, allGather: true, op, input: buf, output: buf, pieceElems: piece });
    });
  }

  /** Reduces `input` (every rank's full tensor) and leaves block `rank` of the result in the output. */
  reduceScatter<T extends Tensor>(input: T, o: ReduceScatterOptions<T> = {}): Work<T> {
    const op = this.redop(o.op, 'reduceScatter');
    const dtype = this.dtypeFor(input, o.dtype, 'reduceScatter');
    const bounds = this.boundsFrom(o.counts, input.length, 'reduceScatter');
    const mine = bounds[this.rank + 1] - bounds[this.rank];
    const output = o.output ?? allocLike(input, mine);
    if (output.length !== mine || !this.carries(output, dtype))
      throw this.invalid(
        'reduceScatter',
        `output has ${output.length} ${dtypeOf(output)} elements, expected ${mine} ${dtype} (block ${this.rank} of ${input.length})`,
      );
    const algorithm = o.algorithm ?? (input.byteLength <= this.tuning.scatterGatherSmallBytes ? 'direct' : 'ring');
    const piece = this.pieceElems(input);
    return this.post<T>('reduceScatter', input.byteLength, algorithm, dtype, [bounds.join(','), op, piece], o, (init) => {
      if (this.size === 1) return new LocalOp(this, init, () => (output.set(input), output));
      if (algorithm === 'direct') return new DirectReduceScatterOp(this, init, input, output, bounds, op);
      return new RingOp(this, init, { bounds, reduceScatter: true, allGather: false, op, input, output, pieceElems: piece });
    });
  }

  /** Concatenates every rank's `input` in rank order. */
  allGather<T extends Tensor>(input: T, o: AllGatherOptions<T> = {}): Work<T> {
    const dtype = this.dtypeFor(input, o.dtype, 'allGather');
    const counts = o.counts ?? new Array<number>(this.size).fill(input.length);
    if (counts[this.rank] !== input.length)
      throw this.invalid('allGather', `counts[${this.rank}] = ${counts[this.rank]} but this rank contributes ${input.length} elements`);
    const total = counts.reduce((a, b) => a + b, 0);
    const bounds = this.boundsFrom(counts, total, 'allGather');
    const output = o.output ?? allocLike(input, total);
    if (output.length !== total || !this.carries(output, dtype))
      throw this.invalid('allGather', `output has ${output.length} elements, expected ${total} ${dtype}`);
    const algorithm = o.algorithm ?? (output.byteLength <= this.tuning.scatterGatherSmallBytes ? 'direct' : 'ring');
    const piece = this.pieceElems(input);
    return this.post<T>('allGather', output.byteLength, algorithm, dtype, [bounds.join(','), piece], o, (init) => {
      if (this.size === 1) return new LocalOp(this, init, () => (output.set(input), output));
      if (algorithm === 'direct') return new DirectAllGatherOp(this, init, input, output, bounds);
      return new RingOp(this, init, {
        bounds,
        reduceScatter: false,
        allGather: true,
        op: 'sum',
        input: null,
        output,
        ownBlock: input,
        pieceElems: piece,
      });
    });
  }

  broadcast<T extends Tensor>(buf: T, o: RootedOptions): Work<T> {
    const root = this.rootOf(o, 'broadcast');
    const dtype = this.dtypeFor(buf, o.dtype, 'broadcast');
    const algorithm = o.algorithm ?? (buf.byteLength <= this.tuning.rootedSmallBytes ? 'tree' : 'chain');
    const piece = this.pieceElems(buf);
    return this.post<T>('broadcast', buf.byteLength, algorithm, dtype, [buf.length, root, piece], o, (init) => {
      if (this.size === 1 || buf.length === 0) return new LocalOp(this, init, () => buf);
      if (algorithm === 'tree') return new TreeBroadcastOp(this, init, buf, root);
      return new ChainBroadcastOp(this, init, buf, root, piece);
    });
  }

  /** Reduces every rank's `buf` into the root's `buf`; other ranks' buffers are left unchanged. */
  reduce<T extends Tensor>(buf: T, o: ReduceOptions): Work<T> {
    const root = this.rootOf(o, 'reduce');
    const op = this.redop(o.op, 'reduce');
    const dtype = this.dtypeFor(buf, o.dtype, 'reduce');
    const algorithm = o.algorithm ?? (buf.byteLength <= this.tuning.rootedSmallBytes ? 'tree' : 'chain');
    const piece = this.pieceElems(buf);
    return this.post<T>('reduce', buf.byteLength, algorithm, dtype, [buf.length, root, op, piece], o, (init) => {
      if (this.size === 1 || buf.length === 0) return new LocalOp(this, init, () => buf);
      if (algorithm === 'tree') return new TreeReduceOp(this, init, buf, root, op);
      return new ChainReduceOp(this, init, buf, root, piece, op);
    });
  }

  /** Concatenates every rank's `input` in rank order on the root; other ranks get null (c10d's gather). */
  gather<T extends Tensor>(input: T, o: GatherOptions<T>): Work<T | null> {
    const root = this.rootOf(o, 'gather');
    const dtype = this.dtypeFor(input, o.dtype, 'gather');
    const counts = o.counts ?? new Array<number>(this.size).fill(input.length);
    if (counts[this.rank] !== input.length)
      throw this.invalid('gather', `counts[${this.rank}] = ${counts[this.rank]} but this rank contributes ${input.length} elements`);
    const total = counts.reduce((a, b) => a + b, 0);
    const bounds = this.boundsFrom(counts, total, 'gather');
    const isRoot = this.rank === root;
    const output = isRoot ? (o.output ?? allocLike(input, total)) : null;
    if (output && (output.length !== total || !this.carries(output, dtype)))
      throw this.invalid('gather', `output has ${output.length} elements, expected ${total} ${dtype}`);
    const piece = this.pieceElems(input);
    return this.post<T | null>('gather', total * input.BYTES_PER_ELEMENT, 'direct', dtype, [bounds.join(','), root, piece], o, (init) => {
      const recvs = output
        ? this.ranks.map((_, j) => ({ peer: j, buf: output, lo: bounds[j], hi: bounds[j + 1] })).filter((b) => b.peer !== root)
        : [];
      const sends = isRoot ? [] : [{ peer: root, buf: input, lo: 0, hi: input.length }];
      return new BlockExchangeOp<T, T | null>(this, init, sends, recvs, () => output?.set(input, bounds[root]), output, piece);
    });
  }

  /** Sends block k of the root's `input` to rank k, into its `output` (c10d's scatter). */
  scatter<T extends Tensor>(output: T, o: ScatterOptions<T>): Work<T> {
    const root = this.rootOf(o, 'scatter');
    const dtype = this.dtypeFor(output, o.dtype, 'scatter');
    const counts = o.counts ?? new Array<number>(this.size).fill(output.length);
    if (counts[this.rank] !== output.length)
      throw this.invalid('scatter', `counts[${this.rank}] = ${counts[this.rank]} but this rank's output has ${output.length} elements`);
    const total = counts.reduce((a, b) => a + b, 0);
    const bounds = this.boundsFrom(counts, total, 'scatter');
    const isRoot = this.rank === root;
    const input = o.input;
    if (isRoot && (!input || input.length !== total || !this.carries(input, dtype)))
      throw this.invalid(
        'scatter',
        `the root must pass input with ${total} ${dtype} elements (every rank's block), got ${input ? `${input.length} ${dtypeOf(input)}` : 'none'}`,
      );
    const piece = this.pieceElems(output);
    return this.post<T>('scatter', total * output.BYTES_PER_ELEMENT, 'direct', dtype, [bounds.join(','), root, piece], o, (init) => {
      const sends = isRoot
        ? this.ranks.map((_, j) => ({ peer: j, buf: input!, lo: bounds[j], hi: bounds[j + 1] })).filter((b) => b.peer !== root)
        : [];
      const recvs = isRoot ? [] : [{ peer: root, buf: output, lo: 0, hi: output.length }];
      return new BlockExchangeOp<T, T>(
        this,
        init,
        sends,
        recvs,
        () => isRoot && output.set(input!.subarray(bounds[root], bounds[root + 1])),
        output,
        piece,
      );
    });
  }

  /**
   * Block j of `input` goes to rank j; block i of the output comes from rank i (c10d's
   * all_to_all_single). With splits, what rank i sends rank j must equal what j expects from i.
   */
  allToAll<T extends Tensor>(input: T, o: AllToAllOptions<T> = {}): Work<T> {
    const dtype = this.dtypeFor(input, o.dtype, 'allToAll');
    const even = (len: number, what: string) => {
      if (len % this.size !== 0)
        throw this.invalid(
          'allToAll',
          `${what} of ${len} elements does not split evenly over ${this.size} ranks ---> HINT: pass ${what === 'input' ? 'inputSplits' : 'outputSplits'}`,
        );
      return new Array<number>(this.size).fill(len / this.size);
    };
    const inB = this.boundsFrom(o.inputSplits ?? even(input.length, 'input'), input.length, 'allToAll');
    const outLen = o.outputSplits ? o.outputSplits.reduce((a, b) => a + b, 0) : (o.output?.length ?? input.length);
    const outB = this.boundsFrom(o.outputSplits ?? even(outLen, 'output'), outLen, 'allToAll');
    const output = o.output ?? allocLike(input, outLen);
    if (output.length !== outLen || !this.carries(output, dtype))
      throw this.invalid('allToAll', `output has ${output.length} elements, expected ${outLen} ${dtype}`);
    if (inB[this.rank + 1] - inB[this.rank] !== outB[this.rank + 1] - outB[this.rank])
      throw this.invalid(
        'allToAll',
        `this rank sends itself ${inB[this.rank + 1] - inB[this.rank]} elements but expects ${outB[this.rank + 1] - outB[this.rank]}`,
      );
    const piece = this.pieceElems(input);
    return this.post<T>('allToAll', input.byteLength, 'direct', dtype, [piece], o, (init) => {
      const others = this.ranks.map((_, j) => j).filter((j) => j !== this.rank);
      const sends = others.map((j) => ({ peer: j, buf: input, lo: inB[j], hi: inB[j + 1] }));
      const recvs = others.map((j) => ({ peer: j, buf: output, lo: outB[j], hi: outB[j + 1] }));
      return new BlockExchangeOp<T, T>(
        this,
        init,
        sends,
        recvs,
        () => output.set(input.subarray(inB[this.rank], inB[this.rank + 1]), outB[this.rank]),
        output,
        piece,
      );
    });
  }

  barrier(o: OpOptions = {}): Work<void> {
    const token = new Float32Array(1);
    return this.post<void>('barrier', 0, 'direct', 'float32', [], o, (init) => {
      if (this.size === 1) return new LocalOp<void>(this, init, () => undefined);
      return new BarrierOp(this, init, token) as unknown as Op<void>;
    });
  }

  // ---- point to point ----

  /** Sends `buf` to group rank `dst`; completes when the data has been handed to the socket. */
  send<T extends Tensor>(buf: T, dst: number, o: P2POptions = {}): Work<void> {
    const tag = this.tagOf(o.tag, 'send');
    this.peerOf(dst, 'send');
    const key = `${dst}:${tag}`;
    const index = this.p2pSendIndex.get(key) ?? 0;
    this.p2pSendIndex.set(key, index + 1);
    const init = this.p2pInit(`send[tag ${tag}]`, index, buf, o);
    const op = new SendOp(this, init, buf, dst, tag, index);
    return this.launch(op, o, () => op.start());
  }

  /** Receives the next message with this tag from group rank `src` into `buf` (sizes must match). */
  recv<T extends Tensor>(buf: T, src: number, o: P2POptions = {}): Work<T> {
    const tag = this.tagOf(o.tag, 'recv');
    this.peerOf(src, 'recv');
    const key = `${src}:${tag}`;
    const index = this.p2pRecvIndex.get(key) ?? 0;
    this.p2pRecvIndex.set(key, index + 1);
    const init = this.p2pInit(`recv[tag ${tag}]`, index, buf, o);
    const op = new RecvOp(this, init, buf, src);
    const mkey = `${key}:${index}`;
    return this.launch(op, o, () => {
      this.p2pRecvs.set(mkey, op as unknown as RecvOp<Tensor>);
      const early = this.p2pEarly.get(mkey);
      if (early) {
        this.p2pEarly.delete(mkey);
        for (const f of early) {
          this.t.release(f.payload.length);
          this.deliverTo(op as unknown as Op<unknown>, f);
        }
      }
    });
  }

  // ---- OpHost ----

  conn(groupRank: number, op: Op<unknown>): PeerConnection {
    const peer = this.ranks[groupRank];
    const c = this.t.conns.get(peer);
    if (!c || !c.isOpen)
      throw opError('peer-lost', op.name, this.name, op.seq, peer, c?.closeReason?.message ?? `no connection to rank ${peer}`);
    return c;
  }

  abort(err: CommError): void {
    this.stopDepartureWatch();
    if (!this.abortedWith) {
      this.abortedWith = err;
      if (err.code !== 'closed' && this.pending.size > 0) this.t.log(`comm: group ${this.name} aborted: ${err.message}`);
    }
    for (const op of [...this.pending]) op._fail(err);
    for (const list of this.early.values()) for (const f of list) this.t.release(f.payload.length);
    for (const list of this.p2pEarly.values()) for (const f of list) this.t.release(f.payload.length);
    this.early.clear();
    this.p2pEarly.clear();
    for (const op of [...this.backlog.keys()]) this.dropBacklog(op);
  }

  finished(op: Op<unknown>): void {
    this.pending.delete(op);
    this.dropBacklog(op);
    if (op.kind === FrameKind.Collective) this.collectives.delete(op.seq);
    else for (const [k, v] of this.p2pRecvs) if (v === (op as unknown)) this.p2pRecvs.delete(k);
    const w = op.work;
    const err = w.exception();
    this.t.telemetry.record({
      kind: 'comm',
      op: op.name,
      group: this.name,
      seq: op.seq,
      rank: this.t.rank,
      bytes: op.bytes,
      algorithm: op.algorithm,
      start: w.startTime,
      end: w.endTime,
      ok: w.isSuccess(),
      ...(err ? { error: err.message } : {}),
      ...(op.labels ? { labels: op.labels } : {}),
    });
  }

  // ---- FrameSink ----

  onFrame(fromGlobal: number, h: FrameHeader, payload: Buffer): void {
    if (this.abortedWith) return; // the group is dead; late frames are dropped
    const from = this.ranks.indexOf(fromGlobal);
    try {
      if (h.kind === FrameKind.P2P) {
        const index = this.p2pStreams.accept(from, h, DTYPE_BYTES[h.dtype]);
        const mkey = `${from}:${h.seq}:${index}`;
        const op = this.p2pRecvs.get(mkey);
        if (op) this.deliverTo(op as unknown as Op<unknown>, { from, h, payload });
        else {
          this.t.holdBytes(payload.length);
          const list = this.p2pEarly.get(mkey) ?? [];
          list.push({ from, h, payload });
          this.p2pEarly.set(mkey, list);
        }
        return;
      }
      const op = this.collectives.get(h.seq);
      if (op) {
        const queued = this.backlog.get(op);
        if (!queued) return this.deliverTo(op, { from, h, payload });
        this.t.holdBytes(payload.length);
        queued.push({ from, h, payload });
        return;
      }
      if (h.seq < this.nextSeq) throw new FrameError(`frame for ${this.name} seq ${h.seq}, which has already completed on this rank`);
      if (h.seq > this.nextSeq + 65536) throw new FrameError(`frame for ${this.name} seq ${h.seq}, far ahead of ${this.nextSeq}`);
      this.t.holdBytes(payload.length);
      const list = this.early.get(h.seq) ?? [];
      list.push({ from, h, payload });
      this.early.set(h.seq, list);
    } catch (err) {
      if (err instanceof FrameError) throw err; // the connection closes; its groups abort
      if (err instanceof CommError) return this.abort(err);
      throw err;
    }
  }

  bodyTarget(fromGlobal: number, h: FrameHeader): Buffer | null {
    if (this.abortedWith) return null;
    const from = this.ranks.indexOf(fromGlobal);
    // a p2p piece goes to the recv posted for (peer, tag, message index), if any yet
    const op =
      h.kind === FrameKind.P2P
        ? this.p2pRecvs.get(`${from}:${h.seq}:${h.step}`)
        : h.kind === FrameKind.Collective
          ? this.collectives.get(h.seq)
          : undefined;
    // behind a backlog the frame is not the op's next one yet: it waits in a buffer of its own
    return op && !this.backlog.has(op as Op<unknown>) ? op.bodyTarget(from, h) : null;
  }

  peerLost(peer: number, err: Error & { lostRank?: number; departed?: boolean }): void {
    // A peer that destroyed its group on purpose (a fast rank leaving after the run's last
    // barrier) sent everything it owed before its close: ops still running here may only need
    // other ranks. Fail them only if they are still pending DEPARTED_GRACE_MS later.
    if (err.departed && !this.abortedWith) {
      this.departed.set(peer, err);
      this.watchDeparture();
      return;
    }
    this.failForPeer(peer, err);
  }

  private departureTimer: NodeJS.Timeout | null = null;
  /** global rank -> close reason of peers that left on purpose */
  private readonly departed = new Map<number, Error>();

  private watchDeparture() {
    if (this.departureTimer) return;
    let pendingSince = this.pending.size ? Date.now() : null;
    this.departureTimer = setInterval(() => {
      if (this.abortedWith) return this.stopDepartureWatch();
      if (!this.pending.size) {
        pendingSince = null;
        return;
      }
      pendingSince ??= Date.now();
      if (Date.now() - pendingSince >= DEPARTED_GRACE_MS) {
        this.stopDepartureWatch();
        // name the departed peer a pending receive waits on, else the first that left
        const waitedOn = [...this.pending]
          .map((op) => (op instanceof RecvOp ? this.ranks[op.from] : undefined))
          .find((g) => g !== undefined && this.departed.has(g));
        const peer = waitedOn ?? this.departed.keys().next().value!;
        this.failForPeer(peer, this.departed.get(peer)!);
      }
    }, DEPARTED_GRACE_MS / 5);
    this.departureTimer.unref();
  }

  private stopDepartureWatch() {
    if (this.departureTimer) clearInterval(this.departureTimer);
    this.departureTimer = null;
  }

  private failForPeer(peer: number, err: Error & { lostRank?: number }): void {
    const code = err instanceof FrameError ? 'protocol' : 'peer-lost';
    // a peer that shut down because it lost a third rank: name the rank that was really lost
    if (err.lostRank !== undefined && this.members.has(err.lostRank)) peer = err.lostRank;
    const pending = [...this.pending];
    const first = pending[0];
    const cause = opError(code, first?.name ?? 'operation', this.name, first?.seq ?? this.nextSeq, peer, err.message, err);
    this.abort(cause);
  }

  // ---- internals ----

  private deliverTo(op: Op<unknown>, f: Early) {
    try {
      op.deliver(f.from, f.h, f.payload);
    } catch (err) {
      if (err instanceof FrameError) throw err;
      if (err instanceof CommError) return this.abort(err);
      throw err;
    }
  }

  private post<T>(
    name: string,
    bytes: number,
    algorithm: string,
    dtype: DType,
    parts: (number | string)[],
    o: OpOptions,
    make: (init: OpInit) => Op<T>,
  ): Work<T> {
    const seq = this.nextSeq++;
    const init: OpInit = {
      name,
      seq,
      check: fingerprint(name, dtype, algorithm, ...parts),
      bytes,
      algorithm,
      dtype,
      timeoutMs: o.timeoutMs ?? this.tuning.timeoutMs,
    };
    const op = make(init);
    return this.launch(op, o, () => {
      this.collectives.set(seq, op as Op<unknown>);
      op.start();
      const early = this.early.get(seq);
      if (early) {
        // still held (holdBytes) until delivered, one a turn (see `backlog`)
        this.early.delete(seq);
        this.backlog.set(op as Op<unknown>, early);
        setImmediate(() => this.deliverBacklog(op as Op<unknown>));
      }
    });
  }

  /** Hands `op` the first frame of its backlog, and schedules the next one for the next turn. */
  private deliverBacklog(op: Op<unknown>) {
    const queued = this.backlog.get(op);
    if (!queued) return; // the op ended or the group aborted: dropBacklog released the rest
    const f = queued.shift()!;
    this.t.release(f.payload.length);
    try {
      this.deliverTo(op, f);
    } catch (err) {
      // as launch() treats a bad early frame: the group fails naming the sender
      const code = err instanceof FrameError ? 'protocol' : 'aborted';
      this.abort(opError(code, op.name, this.name, op.seq, this.ranks[f.from], (err as Error).message, err));
    }
    if (queued.length === 0) this.backlog.delete(op);
    else if (this.backlog.get(op) === queued) setImmediate(() => this.deliverBacklog(op));
  }

  /** Forgets `op`'s backlog (it ended, or the group aborted) and releases what it held. */
  private dropBacklog(op: Op<unknown>) {
    const queued = this.backlog.get(op);
    if (!queued) return;
    this.backlog.delete(op);
    for (const f of queued) this.t.release(f.payload.length);
  }

  private launch<T>(op: Op<T>, o: OpOptions, go: () => void) {
    if (o.labels) op.labels = o.labels;
    this.pending.add(op as Op<unknown>);
    if (this.abortedWith) {
      op._fail(this.abortedWith);
      return op.work;
    }
    try {
      go();
    } catch (err) {
      if (err instanceof CommError) this.abort(err);
      else if (err instanceof FrameError) {
        // an early frame was malformed: drop the link it came on
        const e = opError('protocol', op.name, this.name, op.seq, undefined, err.message, err);
        this.abort(e);
      } else this.abort(opError('aborted', op.name, this.name, op.seq, undefined, (err as Error).message, err));
    }
    return op.work;
  }

  private p2pInit(name: string, index: number, buf: Tensor, o: OpOptions): OpInit {
    return {
      name,
      seq: index,
      check: buf.length,
      bytes: buf.byteLength,
      algorithm: 'direct',
      dtype: this.dtypeFor(buf, o.dtype, name),
      timeoutMs: o.timeoutMs ?? this.tuning.timeoutMs,
    };
  }

  private invalid(op: string, why: string): CommError {
    return new CommError(`${op} on group ${this.name}: ${why}`, { code: 'invalid', op, group: this.name });
  }
  private redop(op: ReduceOp | undefined, name: string): ReduceOp {
    const r = op ?? 'sum';
    if (!REDUCE_OPS.includes(r)) throw this.invalid(name, `unknown reduction ${String(op)} (use ${REDUCE_OPS.join(', ')})`);
    return r;
  }
  private rootOf(o: { root: number }, name: string): number {
    if (!o || !Number.isInteger(o.root) || o.root < 0 || o.root >= this.size)
      throw this.invalid(name, `root ${o?.root} is not a rank of this ${this.size}-rank group`);
    return o.root;
  }
  private peerOf(r: number, name: string) {
    if (!Number.isInteger(r) || r < 0 || r >= this.size || r === this.rank)
      throw this.invalid(name, `peer ${r} is not another rank of this ${this.size}-rank group`);
  }
  private tagOf(tag: number | undefined, name: string): number {
    const t = tag ?? 0;
    if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) throw this.invalid(name, `tag ${tag} must be an integer in [0, 2^32)`);
    return t;
  }
  private dtypeFor(t: Tensor, declared: DType | undefined, name: string): DType {
    try {
      return dtypeOf(t, declared);
    } catch (err) {
      throw this.invalid(name, (err as Error).message);
    }
  }
  /** whether `t`'s array type can hold `dtype` elements (a Uint16Array holds float16 and bfloat16) */
  private carries(t: Tensor, dtype: DType): boolean {
    return dtype === 'float32' ? t instanceof Float32Array : t instanceof Uint16Array;
  }
  private pieceElems(t: Tensor): number {
    return Math.max(1, Math.floor(this.tuning.pieceBytes / t.BYTES_PER_ELEMENT));
  }
  private boundsFrom(counts: readonly number[] | undefined, total: number, name: string): number[] {
    if (!counts) return chunkBounds(total, this.size);
    if (counts.length !== this.size || counts.some((c) => !Number.isInteger(c) || c < 0))
      throw this.invalid(name, `counts must be ${this.size} non-negative integers`);
    const b = [0];
    for (const c of counts) b.push(b[b.length - 1] + c);
    if (b[this.size] !== total) throw this.invalid(name, `counts add up to ${b[this.size]}, expected ${total}`);
    return b;
  }

  /** Fails every pending and later operation of this group (the links stay up for other groups). */
  destroy(): void {
    this.abort(new CommError(`process group ${this.name} was destroyed`, { code: 'closed', group: this.name }));
    this.t.unregister(this.id);
  }
}

/** A barrier is a 1-element all-reduce (one direct round) with its own name in spans and errors. */
class BarrierOp extends DirectAllReduceOp<Float32Array> {
  constructor(g: OpHost, init: OpInit, token: Float32Array) {
    super(g, init, token, 'sum');
  }
}
