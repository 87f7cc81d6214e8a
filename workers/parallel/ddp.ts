// DistributedDataParallel, PyTorch's semantics: every rank holds a replica that starts from
// rank 0's broadcast weights; gradients are grouped into buckets in reverse parameter order (a
// small first bucket, then a cap); each bucket's all-reduce starts as soon as the last of its
// gradients is recorded, while the device keeps computing the rest of backward. Gradient
// accumulation over micro-batches syncs only on the last one (no_sync). Each rank runs its own
// AdamW on the identical reduced gradients.
//
// Buckets are contiguous ranges of the flat gradient arena (parameters are laid out in forward
// order, buckets walk them backwards), so a bucket is one readback, one all-reduce, one write.
import { memAlloc } from '../comm/index.js';
import { viewOf, type GpuTensor } from '../gpu/allocator.js';
import type { ParamRef } from '../model/params.js';
import type { AdamW } from '../optim/adamw.js';
import { broadcastParams, type OptimizerState, replicatedOptimizerState, type Strategy, type StrategyContext } from './strategy.js';

export interface DdpOptions {
  /** bucket cap in bytes (PyTorch's bucket_cap_mb); 0 = one parameter per bucket */
  bucketCapBytes: number;
  /** cap of the first bucket to fire (PyTorch: 1 MiB) */
  firstBucketBytes: number;
  /** benchmarks (an emulated shape, gpu/emulated-device.ts): each bucket goes on the wire this many times longer, zero-padded */
  wireScale?: number;
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
    if (cur.length > 0 && (o.bucketCapBytes === 0 || bytes + p.numel * 4 > cap)) close();
    cur.push(p);
    bytes += p.numel * 4;
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
  /** each bucket's host copy, in registered memory where it fits (reduced in place, no staging copies) */
  private readonly host = new Map<number, Float32Array>();
  private readonly wireScale: number;

  constructor(
    private readonly c: StrategyContext & { opt: AdamW },
    o: DdpOptions,
  ) {
    this.wireScale = Math.max(1, o.wireScale ?? 1);
    const grads = c.model.params.refs[0]!.grad;
    this.buckets = planBuckets(c.model.params.refs, o).map((b) => ({
      ...b,
      view: viewOf(grads, `bucket${b.index}`, b.start, b.end - b.start),
      pending: b.params.length,
    }));
    for (const b of this.buckets) for (const p of b.params) this.bucketOf.set(p.name, b);
    const prev = c.model.hooks.gradReady;
    c.model.hooks.gradReady = (p) => {
      prev?.(p);
      if (this.syncing) this.ready(p);
    };
  }

  async setup() {
    await broadcastParams(this.c);
  }

  beforeBackward(isLast: boolean) {
    this.syncing = isLast;
    if (isLast) for (const b of this.buckets) b.pending = b.params.length;
  }

  private ready(p: ParamRef) {
    const b = this.bucketOf.get(p.name)!;
    b.pending -= 1;
    if (b.pending === 0) this.inflight.push(this.reduce(b));
  }

  private async reduce(b: Bucket) {
    const { rt, pg } = this.c;
    // submits everything recorded so far, then copies the bucket out when the device gets there
    let host = this.host.get(b.index);
    if (!host) this.host.set(b.index, (host = memAlloc(Math.round(b.view.numel * this.wireScale))));
    const data = await rt.read(b.view, b.view.numel, 0, host);
    // padded (emulated shape): every rank's padding is zeros, so it stays zeros and the gradient is unchanged
    const wire = this.wireScale > 1 ? host : data;
    await pg.allReduce(wire, { op: 'sum', labels: { bucket: b.index, params: b.params.length } }).wait();
    rt.write(b.view, data);
  }

  async finishGradients() {
    this.c.rt.flush();
    const all = this.inflight;
    this.inflight = [];
    await Promise.all(all);
    this.syncing = false;
  }

  async optimizerStep(lr: number) {
    this.c.opt.recordGradNorm();
    this.c.opt.recordStep(lr);
    return this.c.opt.readGradNorm();
  }

  optimizerState() {
    return replicatedOptimizerState(this.c.opt);
  }

  loadOptimizerState(s: OptimizerState) {
    this.c.opt.writeState(s, s.step);
  }

  summary() {
    return { buckets: this.buckets.length };
  }
}
