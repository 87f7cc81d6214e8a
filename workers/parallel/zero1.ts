// ZeRO stage 1 (DeepSpeed): optimizer states partitioned over the data-parallel ranks. Each
// rank keeps full weights and gradients, but the AdamW moments only of its shard of the flat
// layout. Per step: reduce-scatter the gradients (each rank receives the sum of its shard),
// the global gradient norm from the shards' squared sums, update the own shard of the
// weights, all-gather the weights. Bytes per rank: (N-1)/N Ψ out in each of the two
// collectives, 2Ψ(N-1)/N in all, like DDP's all-reduce.
// With offload (ZeRO-Offload), the shard's fp32 master weights, its moments and the update live
// on the host: the reduced gradient shard never returns to the device, only the new weights do.
// With fp16/bf16 gradient compression the reduce-scatter travels in 16 bits (comm-hooks/half-gradients.ts):
// Ψ(N-1)/N · 2 bytes instead of 4; the weights' all-gather stays float32.
import { viewOf, type GpuTensor } from '../gpu/allocator.js';
import type { AdamwConfig } from '../optim/adamw.js';
import { CpuAdamW } from '../optim/cpu-adamw.js';
import { ShardedAdamW } from '../optim/sharded-adamw.js';
import { SLOT_ELEMS } from '../model/params.js';
import { CompressionCounter, type HalfDType, narrowGradients, reduceScatterHalf } from '../comm-hooks/index.js';
import { broadcastParams, type GradCompressionReport, type OptimizerState, type Strategy, type StrategyContext } from './strategy.js';

/** Shard bounds of a flat layout of F elements over N ranks, each start 256-byte aligned. */
export function shardBounds(F: number, N: number): number[] {
  const per = Math.ceil(F / N / SLOT_ELEMS) * SLOT_ELEMS;
  return Array.from({ length: N + 1 }, (_, r) => Math.min(F, r * per));
}

/** What a ZeRO-1 rank needs: the parameter store it shards and the data-parallel group. */
export type ShardedContext = Pick<StrategyContext, 'rt' | 'pg'> & { model: Pick<StrategyContext['model'], 'params'> };

export interface Zero1Options {
  /** ZeRO-Offload: the shard's master weights, moments and update on the host */
  offload?: boolean;
  /** ZeRO-2: the shard's gradients in their own buffer */
  gradShard?: GpuTensor;
  /** ZeRO-3: the shard's parameters in their own buffer */
  paramShard?: GpuTensor;
  /** labels added to every collective's (3d: `dp: 1`, the group they run on) */
  labels?: Record<string, number>;
  /**
   * The squared global gradient norm from this rank's reduced gradient shard (a host copy of the
   * flat elements [start, start + shard.length)), where more than the DP group takes part (3d:
   * TP shards and pipeline stages, grad-norm.ts); default: the shard's sum over the DP group.
   */
  normSq?: (shard: Float32Array, start: number) => Promise<number>;
  /** gradient compression (parallel.grad_compression fp16 or bf16): the gradient reduce-scatter in 16 bits */
  halfGradients?: 'fp16' | 'bf16';
}

const HALF_DTYPE: Record<'fp16' | 'bf16', HalfDType> = { fp16: 'float16', bf16: 'bfloat16' };

export class Zero1 implements Strategy {
  readonly name: string = 'zero1';
  readonly bounds: number[];
  readonly opt: ShardedAdamW | null;
  readonly offload: boolean;
  private cpu: CpuAdamW | null = null;
  private pendingState: OptimizerState | null = null;
  /** offload: this step's reduced gradient shard, on the host */
  protected hostGradShard: Float32Array = new Float32Array(0);
  protected readonly counts: number[];
  /** the full gradient (absent under ZeRO-2, whose gradients live in bucket buffers) */
  private readonly flatGrads: GpuTensor | null;
  protected readonly flatParams: GpuTensor;
  protected readonly labels: Record<string, number>;
  /** fp16/bf16 compression of the gradient reduce-scatter, and the bytes it sent against float32 */
  private readonly half: { hook: 'fp16' | 'bf16'; dtype: HalfDType; counter: CompressionCounter } | null;

  constructor(
    protected readonly c: ShardedContext,
    private readonly config: AdamwConfig,
    private readonly o: Zero1Options = {},
  ) {
    const store = c.model.params;
    const N = c.pg.size;
    this.offload = o.offload ?? false;
    this.labels = o.labels ?? {};
    this.half = o.halfGradients ? { hook: o.halfGradients, dtype: HALF_DTYPE[o.halfGradients], counter: new CompressionCounter() } : null;
    this.bounds = shardBounds(store.flatElems, N);
    this.counts = Array.from({ length: N }, (_, r) => this.bounds[r + 1]! - this.bounds[r]!);
    const me = c.pg.rank;
    this.opt = this.offload
      ? null
      : new ShardedAdamW(c.rt, store, config, this.bounds[me]!, this.bounds[me + 1]!, o.gradShard, o.paramShard);
    this.flatGrads = store.gradArena ? viewOf(store.refs[0]!.grad, 'grads(all)', 0, store.flatElems) : null;
    this.flatParams = viewOf(store.refs[0]!.param, 'params(all)', 0, store.flatElems);
  }

  protected get mine(): [number, number] {
    return [this.bounds[this.c.pg.rank]!, this.bounds[this.c.pg.rank + 1]!];
  }

  async setup() {
    await broadcastParams(this.c, this.labels);
    if (!this.offload) return;
    const [a, b] = this.mine;
    const master = b > a ? await this.c.rt.read(this.flatParams, b - a, a) : new Float32Array(0);
    const decay = new Uint8Array(b - a);
    for (const r of this.c.model.params.refs) {
      if (!r.spec.decay) continue;
      const lo = Math.max(a, r.offset);
      const hi = Math.min(b, r.offset + r.numel);
      if (hi > lo) decay.fill(1, lo - a, hi - a);
    }
    this.cpu = new CpuAdamW(this.config, master, decay);
    if (this.pendingState) this.loadOptimizerState(this.pendingState);
  }

  /** host memory of the offloaded optimizer (master weights and moments) */
  hostBytes(): Record<string, number> {
    return this.cpu ? { host_params: this.cpu.hostBytes.params, host_optimizer: this.cpu.hostBytes.optimizer } : {};
  }

  beforeBackward() {}

  /** Sums this rank's float32 gradients over the group and returns its block (`counts[r]` elements to rank r): in 16 bits under fp16/bf16 compression. */
  protected async reduceScatterGradients(grads: Float32Array, counts: readonly number[], labels: Record<string, string | number>) {
    if (!this.half) return this.c.pg.reduceScatter(grads, { op: 'sum', counts, labels }).wait();
    const bits = narrowGradients(grads, this.half.dtype);
    this.half.counter.add(grads.length, bits.byteLength);
    return reduceScatterHalf(this.c.pg, bits, { dtype: this.half.dtype, counts, labels: { ...labels, compression: this.half.hook } });
  }

  async finishGradients() {
    const { rt } = this.c;
    const grads = await rt.read(this.flatGrads!);
    const shard = await this.reduceScatterGradients(grads, this.counts, { what: 'gradients', bucket: 0, ...this.labels });
    const [a] = this.mine;
    if (this.offload || this.o.normSq) this.hostGradShard = shard;
    if (!this.offload && shard.length > 0) rt.write(this.flatGrads!, shard, a);
  }

  async optimizerStep(lr: number) {
    const { rt, pg } = this.c;
    if (this.cpu) {
      let local = 0;
      for (const g of this.hostGradShard) local += g * g;
      const sumsq = Float32Array.of(local);
      await pg.allReduce(sumsq, { op: 'sum', labels: { what: 'grad norm' } }).wait();
      const own = this.cpu.update(this.hostGradShard, sumsq[0]!, lr);
      const full = await pg.allGather(own, { counts: this.counts, labels: { what: 'weights', ...this.labels } }).wait();
      rt.write(this.flatParams, full);
      return Math.sqrt(sumsq[0]!);
    }
    const norm = await this.updateShardOnDevice(lr);
    const [a, b] = this.mine;
    const own = b > a ? await rt.read(this.flatParams, b - a, a) : new Float32Array(0);
    const full = await pg.allGather(own, { counts: this.counts, labels: { what: 'weights', ...this.labels } }).wait();
    rt.write(this.flatParams, full);
    return norm;
  }

  /** The global gradient norm from every shard's squared sum, then AdamW on the own shard; returns the norm. */
  protected async updateShardOnDevice(lr: number): Promise<number> {
    const { rt, pg } = this.c;
    const opt = this.opt!;
    let sumsq: Float32Array;
    if (this.o.normSq) sumsq = Float32Array.of(await this.o.normSq(this.hostGradShard, this.mine[0]));
    else {
      opt.recordLocalSumSq();
      sumsq = await rt.read(opt.gradSumSq);
      await pg.allReduce(sumsq, { op: 'sum', labels: { what: 'grad norm' } }).wait();
    }
    rt.write(opt.gradSumSq, sumsq);
    opt.recordStep(lr);
    return Math.sqrt(sumsq[0]!);
  }

  /** the run summary's compression figures (fp16/bf16): what the gradient reduce-scatters sent against float32 */
  summary(): { grad_compression?: GradCompressionReport } {
    if (!this.half) return {};
    const { uncompressed, compressed } = this.half.counter;
    return {
      grad_compression: {
        hook: this.half.hook,
        compression_ratio: uncompressed / Math.max(1, compressed),
        uncompressed_bytes: uncompressed,
        compressed_bytes: compressed,
      },
    };
  }

  async optimizerState(): Promise<OptimizerState> {
    const { pg } = this.c;
    const shard = this.cpu ? { m: this.cpu.m, v: this.cpu.v } : await this.opt!.readShard();
    const m = await pg.allGather(shard.m, { counts: this.counts, labels: { what: 'checkpoint exp_avg', ...this.labels } }).wait();
    const v = await pg.allGather(shard.v, { counts: this.counts, labels: { what: 'checkpoint exp_avg_sq', ...this.labels } }).wait();
    const store = this.c.model.params;
    const split = (flat: Float32Array) => new Map(store.refs.map((r) => [r.name, flat.slice(r.offset, r.offset + r.numel)]));
    return { m: split(m), v: split(v), step: this.cpu?.step ?? this.opt!.step };
  }

  loadOptimizerState(s: OptimizerState) {
    const store = this.c.model.params;
    const flat = (m: Map<string, Float32Array>) => {
      const out = new Float32Array(store.flatElems);
      for (const r of store.refs) out.set(m.get(r.name)!, r.offset);
      return out;
    };
    const [a, b] = this.mine;
    if (this.offload) {
      if (!this.cpu) {
        this.pendingState = s; // applied once setup() made the host optimizer
        return;
      }
      this.cpu.m.set(flat(s.m).subarray(a, b));
      this.cpu.v.set(flat(s.v).subarray(a, b));
      this.cpu.step = s.step;
      return;
    }
    this.opt!.writeShard(flat(s.m).subarray(a, b), flat(s.v).subarray(a, b), s.step);
  }
}
