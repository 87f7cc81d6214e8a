// DistributedDataParallel, PyTorch's semantics: every rank holds a replica that starts from
// rank 0's broadcast weights; gradients are grouped into buckets in reverse parameter order (a
// small first bucket, then a cap); each bucket's all-reduce starts as soon as the last of its
// gradients is recorded, while the device keeps computing the rest of backward. Gradient
// accumulation over micro-batches syncs only on the last one (no_sync). Each rank runs its own
// AdamW on the identical reduced gradients.
//
// Buckets are contiguous ranges of the flat gradient arena (parameters are laid out in forward
// order, buckets walk them backwards), so a bucket is one readback, one all-reduce, one write.
// A communication hook (comm-hooks/) takes the bucket's host copy instead of the all-reduce, or,
// where its math runs on the device (PowerSGD on a hardware adapter), the bucket's gradient view:
// it then reads back and writes only what it sends and gets.
//
// Mixed precision: the buckets travel as their 16-bit bits (precision/flat-wire.ts), every rank's
// AdamW keeps the fp32 master weights and the ranks start from rank 0's. The reduced gradients are
// the same bits on every rank, so is their norm: an fp16 overflow skips the update on every rank.
import { memAlloc } from '../comm/index.js';
import { BucketHooks, type CommHook, type HookState } from '../comm-hooks/index.js';
import { elementBytes, viewOf, type GpuTensor } from '../gpu/allocator.js';
import type { ParamRef } from '../model/params.js';
import type { AdamW } from '../optim/adamw.js';
import { type Flat, FlatWire } from '../precision/flat-wire.js';
import { PendingMaster, split } from '../precision/master-weights.js';
import { broadcastParams, type OptimizerState, replicatedOptimizerState, type RankStrategy, type StrategyContext } from './strategy.js';

export interface DdpOptions {
  /** bucket cap in bytes (PyTorch's bucket_cap_mb); 0 = one parameter per bucket */
  bucketCapBytes: number;
  /** cap of the first bucket to fire (PyTorch: 1 MiB) */
  firstBucketBytes: number;
  /** a communication hook each bucket goes through instead of the plain all-reduce (workers/comm-hooks/); fp32 only */
  commHook?: CommHook | null;
}

export interface Bucket {
  index: number;
  params: ParamRef[];
  /** element range [start, end) of the flat layout */
  start: number;
  end: number;
  view: GpuTensor;
  pending: number;
}

export function planBuckets(refs: readonly ParamRef[], o: DdpOptions): Omit<Bucket, 'view' | 'pending'>[] {
  const out: Omit<Bucket, 'view' | 'pending'>[] = [];
  // the caps count the gradients' bytes (2 per element in mixed precision)
  const e = refs.length ? elementBytes(refs[0]!.grad) : 4;
  let cur: ParamRef[] = [];
  let bytes = 0;
  const close = () => {
    if (cur.length === 0) return;
    const start = Math.min(...cur.map((p) => p.offset));
    const last = cur.reduce((a, p) => (p.offset > a.offset ? p : a));
    out.push({ index: out.length, params: cur, start, end: last.offset + last.numel });
    cur = [];
    bytes = 0;
  };
  for (const p of [...refs].reverse()) {
    const cap = out.length === 0 ? o.firstBucketBytes : o.bucketCapBytes;
    if (cur.length > 0 && (o.bucketCapBytes === 0 || bytes + p.numel * e > cap)) close();
    cur.push(p);
    bytes += p.numel * e;
  }
  close();
  return out;
}

export class Ddp implements RankStrategy {
  readonly name = 'ddp';
  readonly buckets: Bucket[];
  private readonly bucketOf = new Map<string, Bucket>();
  private syncing = false;
  private inflight: Promise<void>[] = [];
  /** resolves once the previous ready bucket's collective is posted: every rank posts them in the same (bucket) order */
  private turn: Promise<void> = Promise.resolve();
  /** each bucket's host copy as it travels, in registered memory where it fits (fp32: reduced in place, no staging copies) */
  private readonly host = new Map<number, Flat>();
  /** the communication hook each bucket goes through, if any */
  private readonly hooks: BucketHooks | null;
  private readonly wire: FlatWire;
  private readonly master: PendingMaster;

  constructor(
    private readonly c: StrategyContext & { opt: AdamW },
    o: DdpOptions,
  ) {
    const store = c.model.params;
    this.wire = new FlatWire(c.rt, store);
    this.master = new PendingMaster(store, 'ddp');
    if (this.wire.dtype && o.commHook)
      throw new Error(
        `ddp: gradient compression (${o.commHook.name}) compresses fp32 gradients; a ${store.precision} run already sends 16-bit ones: drop --grad-compression`,
      );
    const grads = store.refs[0]!.grad;
    // 16-bit: whole 32-bit words per bucket (a bucket ends inside its last slot, whose padding is zeros)
    const len = (b: { start: number; end: number }) => (this.wire.dtype ? 2 * Math.ceil((b.end - b.start) / 2) : b.end - b.start);
    this.buckets = planBuckets(store.refs, o).map((b) => ({
      ...b,
      view: viewOf(grads, `bucket${b.index}`, b.start, len(b)),
      pending: b.params.length,
    }));
    for (const b of this.buckets) for (const p of b.params) this.bucketOf.set(p.name, b);
    this.hooks = o.commHook ? new BucketHooks(o.commHook, this.buckets) : null;
    const prev = c.model.hooks.gradReady;
    c.model.hooks.gradReady = (p) => {
      prev?.(p);
      if (this.syncing) this.ready(p);
    };
  }

  async setup() {
    if (!this.wire.dtype) return broadcastParams(this.c);
    this.c.opt.writeMaster(split(this.c.model.params, await this.master.broadcast(this.c.pg)));
  }

  beforeBackward(isLast: boolean) {
    this.syncing = isLast;
    if (isLast) for (const b of this.buckets) b.pending = b.params.length;
  }

  private ready(p: ParamRef) {
    const b = this.bucketOf.get(p.name)!;
    b.pending -= 1;
    if (b.pending === 0) {
      this.hooks?.ready(b.index); // before the readback: it waits for the hook's device work
      this.inflight.push(this.reduce(b));
    }
  }

  private async reduce(b: Bucket) {
    const { rt, pg } = this.c;
    // readbacks can complete out of order (a paced device's wait ends on a timer, the next
    // readback's on the real copy): the collectives are posted in the order the buckets got ready
    // regardless, or two ranks would pair different buckets under one sequence number
    const turn = this.turn;
    let posted!: () => void;
    this.turn = new Promise<void>((r) => (posted = r));
    if (this.hooks?.onDevice) {
      // the hook's math runs where the gradients are (PowerSGD): it reads back only what it sends
      await turn;
      const run = this.hooks.runOnDevice(pg, b.index, b.view); // queued behind the previous bucket's, in bucket order
      posted();
      await run;
      return;
    }
    const [lo, hi] = [b.start, b.start + b.view.numel];
    let data: Flat;
    let host = this.host.get(b.index);
    const n = this.wire.count(lo, hi);
    try {
      // submits everything recorded so far, then copies the bucket out when the device gets there
      if (!host) this.host.set(b.index, (host = this.wire.dtype ? this.wire.alloc(n) : memAlloc(n)));
      data = await this.wire.readInto(b.view, lo, hi, host);
      await turn;
    } catch (e) {
      posted();
      throw e;
    }
    if (this.hooks) {
      const run = this.hooks.run(pg, b.index, data as Float32Array); // the hook posts (or queues) its first collective now
      posted();
      await run;
      rt.write(b.view, data);
      return;
    }
    const work = pg.allReduce(data, { op: 'sum', labels: { bucket: b.index, params: b.params.length }, ...this.wire.typed });
    posted();
    await work.wait();
    rt.write(b.view, this.wire.unpack(data, lo, hi));
  }

  async finishGradients() {
    this.c.rt.flush();
    const all = this.inflight;
    this.inflight = [];
    await Promise.all(all);
    if (this.syncing) this.hooks?.endStep();
    this.syncing = false;
  }

  async optimizerStep(lr: number, gradScale = 1) {
    this.c.opt.recordGradNorm();
    this.c.opt.recordStep(lr, gradScale);
    return this.c.opt.readGradNorm(gradScale);
  }

  optimizerState() {
    return replicatedOptimizerState(this.c.opt);
  }

  loadOptimizerState(s: OptimizerState) {
    this.c.opt.writeState(s, s.step);
  }

  loadMasterWeights(values: Map<string, Float32Array>) {
    this.master.load(values);
  }

  async summary() {
    return { buckets: this.buckets.length, ...(await this.hooks?.summary()) };
  }

  async commHookState(): Promise<HookState | null> {
    return (await this.hooks?.state()) ?? null;
  }

  loadCommHookState(s: HookState) {
    if (!this.hooks) throw new Error('the checkpoint holds a gradient-compression state but this run has no grad_compression hook');
    this.hooks.loadState(s);
  }
}
