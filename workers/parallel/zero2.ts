// ZeRO stage 2 (DeepSpeed): gradients partitioned too. Gradients are produced into
// constant-size bucket buffers (whole layers, in backward order; two ring buffers plus one
// for the embedding, see ParamStore); as soon as a bucket is complete it is copied out and
// cleared for the bucket that reuses its buffer, and reduce-scattered so that each rank
// accumulates only the part that falls in its shard of the flat layout. Each rank keeps
// 4Ψ/N of gradients and 8Ψ/N of AdamW state; the update and the all-gather of the weights
// are ZeRO-1's. Bytes per rank and step: Ψ(N-1)/N in the reduce-scatters and as much in the
// all-gather (with more micro-batches, every micro-batch's gradients are reduced).
// Mixed precision: the 16-bit buckets travel as their bits; the shard sums in f32 on the host and
// is stored back at 16 bits: 2Ψ/N of gradients, with ZeRO-1's 12Ψ/N of master and moments.
import type { GpuTensor } from '../gpu/allocator.js';
import type { GradBucket } from '../model/params.js';
import type { AdamwConfig } from '../optim/adamw.js';
import type { StrategyContext } from './strategy.js';
import { shardBounds } from '../../common/padding.js';
import { Zero1, type Zero1Options } from './zero1.js';

export class Zero2 extends Zero1 {
  override readonly name: string = 'zero2';
  /** the reduced gradient shard on the device (absent with offload: the update runs on the host) */
  private readonly deviceGradShard: GpuTensor | null;
  /** this rank's reduced gradient shard, accumulated over buckets and micro-batches */
  private readonly hostShard: Float32Array;
  private readonly pending = new Map<GradBucket, number>();
  private readonly bucketOf = new Map<string, GradBucket>();
  private inflight: Promise<void>[] = [];

  constructor(c: StrategyContext, config: AdamwConfig, o: Pick<Zero1Options, 'paramShard' | 'offload' | 'halfGradients'> = {}) {
    const offload = o.offload ?? false;
    if (c.model.params.gradBuckets.length === 0) throw new Error('zero2 needs the model built with gradient bucket buffers');
    const store = c.model.params;
    const b = shardBounds(store.flatElems, c.pg.size, store.elemsPerSlot);
    const n = b[c.pg.rank + 1]! - b[c.pg.rank]!;
    const gradShard = offload ? null : c.rt.allocator.tensor('grads[shard]', 'grads', [Math.max(1, n)], store.precision);
    super(c, config, { ...o, offload, gradShard: gradShard ?? undefined });
    this.deviceGradShard = gradShard;
    this.hostShard = new Float32Array(n);
    for (const bucket of c.model.params.gradBuckets) for (const r of bucket.refs) this.bucketOf.set(r.name, bucket);
    const prev = c.model.hooks.gradReady;
    c.model.hooks.gradReady = (p) => {
      prev?.(p);
      const bucket = this.bucketOf.get(p.name)!;
      const left = (this.pending.get(bucket) ?? bucket.refs.length) - 1;
      this.pending.set(bucket, left);
      if (left === 0) this.launch(bucket);
    };
  }

  override beforeBackward() {
    this.pending.clear();
  }

  private launch(bucket: GradBucket) {
    const { rt } = this.c;
    // the copy is submitted now; the clear right behind it, so the bucket that reuses this
    // buffer (or the next micro-batch) starts from zero
    const copied = this.wire.read(bucket.region);
    rt.clear(bucket.region);
    const [a, b] = this.mine;
    this.inflight.push(
      copied.then(async (data) => {
        const labels = { bucket: bucket.index, what: 'gradients' };
        const from = Math.max(bucket.start, a) - a;
        const mine = this.wire.widen(await this.reduceScatterGradients(data, bucket.start, bucket.end, labels));
        if (b > a) for (let i = 0; i < mine.length; i++) this.hostShard[from + i] = this.hostShard[from + i]! + mine[i]!;
      }),
    );
  }

  override async finishGradients() {
    this.c.rt.flush();
    const all = this.inflight;
    this.inflight = [];
    await Promise.all(all);
    // offload, mixed precision: the host keeps the reduced shard at 16 bits (exact with one micro-batch: one bucket per element)
    if (this.offload) this.hostGradShard = this.wire.narrow(this.hostShard.slice());
    else if (this.hostShard.length) this.c.rt.write(this.deviceGradShard!, this.hostShard);
    this.hostShard.fill(0);
  }
}
