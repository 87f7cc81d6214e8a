// DistributedDataParallel, PyTorch's semantics: every rank holds a replica that starts from
// rank 0's broadcast weights; gradients are grouped into buckets in reverse parameter order (a
// small first bucket, then a cap); each bucket's all-reduce starts as soon as the last of its
// gradients is recorded, while the device keeps computing the rest of backward. Gradient
// accumulation over micro-batches syncs only on the last one (no_sync). Each rank runs its own
// AdamW on the identical reduced gradients.
//
// Buckets are contiguous ranges of the flat gradient arena (parameters are laid out in forward
// order, buckets walk them backwards), so a bucket is one readback, one all-reduce, one write.
//
// Mixed precision (a bf16 or fp16 parameter store): the buckets go on the wire as their 16-bit
// values (the collectives sum them in f32 at each hop and round the result back), half the bytes
// of fp32 (packed: the 16-bit slots' padding stays home, precision/packed-wire.ts); every rank's AdamW keeps the fp32 master weights, and the ranks start from rank 0's
// master. The reduced gradients are the same bits on every rank, so is their norm: an fp16
// overflow is seen, and its update skipped, by every rank alike.
import { memAlloc } from '../comm/index.js';
import { type CommHook, compressionReport, type HookBucket, type HookState } from '../comm-hooks/index.js';
import { elementBytes, viewOf, type GpuTensor } from '../gpu/allocator.js';
import type { ParamRef, ParamStore } from '../model/params.js';
import type { AdamW } from '../optim/adamw.js';
import { PackedRanges, wireDtypeOf } from '../precision/packed-wire.js';
import { broadcastParams, type OptimizerState, replicatedOptimizerState, type Strategy, type StrategyContext } from './strategy.js';

export interface DdpOptions {
  /** bucket cap in bytes (PyTorch's bucket_cap_mb); 0 = one parameter per bucket */
  bucketCapBytes: number;
  /** cap of the first bucket to fire (PyTorch: 1 MiB) */
  firstBucketBytes: number;
  /** benchmarks (an emulated shape, gpu/emulated-device.ts): each bucket goes on the wire this many times longer, zero-padded */
  wireScale?: number;
  /** a communication hook each bucket goes through instead of the plain all-reduce (workers/comm-hooks/); not padded by wireScale (it sends wireShapes' payloads); fp32 only */
  commHook?: CommHook | null;
  /** benchmarks: each parameter's shape in the emulated model (by name); the hook sends and times that shape's payload (HookTensor.wire) */
  wireShapes?: ReadonlyMap<string, readonly number[]>;
}

/** Every rank takes rank 0's fp32 master weights (mixed precision's initial broadcast); each casts its 16-bit weights from them. */
async function broadcastMaster(c: StrategyContext & { opt: AdamW }, store: ParamStore) {
  const master = await c.opt.readMaster();
  const flat = new Float32Array(store.flatElems);
  for (const r of store.refs) flat.set(master.get(r.name)!, r.offset);
  await c.pg.broadcast(flat, { root: 0, labels: { what: 'initial master weights' } }).wait();
  c.opt.writeMaster(new Map(store.refs.map((r) => [r.name, flat.subarray(r.offset, r.offset + r.numel)])));
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

export class Ddp implements Strategy {
  readonly name = 'ddp';
  readonly buckets: Bucket[];
  private readonly bucketOf = new Map<string, Bucket>();
  private syncing = false;
  private inflight: Promise<void>[] = [];
  /** resolves once the previous ready bucket's collective is posted: every rank posts them in the same (bucket) order */
  private turn: Promise<void> = Promise.resolve();
  /** each bucket's host copy, in registered memory where it fits (reduced in place, no staging copies) */
  private readonly host = new Map<number, Float32Array>();
  private readonly wireScale: number;
  private readonly hook: CommHook | null;
  /** each bucket as its hook sees it: the parameters' shapes and places inside the bucket */
  private readonly hookBuckets = new Map<number, HookBucket>();
  /** mixed precision: the buckets' 16-bit format on the wire; null at fp32 */
  private readonly wire16: 'float16' | 'bfloat16' | null;
  /** mixed precision: each bucket's packed 16-bit host copy (wireScale times its length: an emulated shape's padding, zeros) */
  private readonly host16 = new Map<number, Uint16Array>();
  private readonly packed: PackedRanges;

  constructor(
    private readonly c: StrategyContext & { opt: AdamW },
    o: DdpOptions,
  ) {
    this.wireScale = Math.max(1, o.wireScale ?? 1);
    this.hook = o.commHook ?? null;
    const store = c.model.params;
    const p = store.precision;
    this.wire16 = wireDtypeOf(store);
    if (this.wire16 && this.hook)
      throw new Error(
        `ddp: gradient compression (${this.hook.name}) compresses fp32 gradients; a ${p} run already sends 16-bit ones: drop --grad-compression`,
      );
    this.packed = new PackedRanges(store.refs);
    const grads = store.refs[0]!.grad;
    // 16-bit: whole 32-bit words per bucket (a bucket ends inside its last slot, whose padding is zeros)
    const len = (b: { start: number; end: number }) => (this.wire16 ? 2 * Math.ceil((b.end - b.start) / 2) : b.end - b.start);
    this.buckets = planBuckets(store.refs, o).map((b) => ({
      ...b,
      view: viewOf(grads, `bucket${b.index}`, b.start, len(b)),
      pending: b.params.length,
    }));
    for (const b of this.buckets) for (const p of b.params) this.bucketOf.set(p.name, b);
    for (const b of this.buckets)
      this.hookBuckets.set(b.index, {
        index: b.index,
        // forward order inside the bucket (PyTorch's per-parameter tensors of a bucket)
        tensors: [...b.params]
          .sort((x, y) => x.offset - y.offset)
          .map((p) => {
            const wire = o.wireShapes?.get(p.name);
            return { name: p.name, shape: p.shape, start: p.offset - b.start, numel: p.numel, ...(wire ? { wire } : {}) };
          }),
        labels: { bucket: b.index, params: b.params.length },
      });
    const prev = c.model.hooks.gradReady;
    c.model.hooks.gradReady = (p) => {
      prev?.(p);
      if (this.syncing) this.ready(p);
    };
  }

  async setup() {
    if (this.wire16) await broadcastMaster(this.c, this.c.model.params);
    else await broadcastParams(this.c);
  }

  beforeBackward(isLast: boolean) {
    this.syncing = isLast;
    if (isLast) for (const b of this.buckets) b.pending = b.params.length;
  }

  private ready(p: ParamRef) {
    const b = this.bucketOf.get(p.name)!;
    b.pending -= 1;
    if (b.pending === 0) {
      this.hook?.bucketReady?.(this.hookBuckets.get(b.index)!); // before the readback: it waits for the hook's device work
      this.inflight.push(this.reduce(b));
    }
  }

  private async reduce(b: Bucket) {
    if (this.wire16) return this.reduce16(b, this.wire16);
    const { rt, pg } = this.c;
    // readbacks can complete out of order (an emulated device's wait ends on a timer, the next
    // readback's on the real copy): the collectives are posted in the order the buckets got ready
    // regardless, or two ranks would pair different buckets under one sequence number
    const turn = this.turn;
    let posted!: () => void;
    this.turn = new Promise<void>((r) => (posted = r));
    let data: Float32Array;
    let host = this.host.get(b.index);
    const scale = this.hook ? 1 : this.wireScale;
    try {
      // submits everything recorded so far, then copies the bucket out when the device gets there
      if (!host) this.host.set(b.index, (host = memAlloc(Math.round(b.view.numel * scale))));
      data = await rt.read(b.view, b.view.numel, 0, host);
      await turn;
    } catch (e) {
      posted();
      throw e;
    }
    if (this.hook) {
      const run = this.hook.run(pg, this.hookBuckets.get(b.index)!, data); // the hook posts (or queues) its first collective now
      posted();
      await run;
      rt.write(b.view, data);
      return;
    }
    // padded (emulated shape): every rank's padding is zeros, so it stays zeros and the gradient is unchanged
    const wire = this.wireScale > 1 ? host : data;
    const work = pg.allReduce(wire, { op: 'sum', labels: { bucket: b.index, params: b.params.length } });
    posted();
    await work.wait();
    rt.write(b.view, data);
  }

  /** A bucket's 16-bit gradients all-reduced as they are (f32 sums inside the collective). */
  private async reduce16(b: Bucket, dtype: 'float16' | 'bfloat16') {
    const { rt, pg } = this.c;
    const [lo, hi] = [b.start, b.start + b.view.numel];
    const m = this.packed.count(lo, hi);
    let host = this.host16.get(b.index);
    if (!host) this.host16.set(b.index, (host = new Uint16Array(Math.round(m * this.wireScale))));
    const bits = await rt.readBits(b.view);
    host.set(this.packed.pack(bits, lo, hi));
    await pg.allReduce(host, { op: 'sum', dtype, labels: { bucket: b.index, params: b.params.length } }).wait();
    rt.write(b.view, this.packed.unpack(host.subarray(0, m), lo, hi, bits)); // the padding read as zeros
  }

  async finishGradients() {
    this.c.rt.flush();
    const all = this.inflight;
    this.inflight = [];
    await Promise.all(all);
    if (this.syncing) this.hook?.endStep();
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
    this.c.opt.writeMaster(values);
  }

  summary() {
    return {
      buckets: this.buckets.length,
      ...(this.hook ? { grad_compression: compressionReport(this.hook.name, this.hook.report()) } : {}),
    };
  }

  commHookState(): HookState | null {
    return this.hook?.state() ?? null;
  }

  loadCommHookState(s: HookState) {
    if (!this.hook) throw new Error('the checkpoint holds a gradient-compression state but this run has no grad_compression hook');
    this.hook.loadState(s);
  }
}
