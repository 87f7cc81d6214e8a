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
// Mixed precision (a bf16 or fp16 store: 2Ψ weights, 2Ψ gradients): the gradients are
// reduce-scattered as their own 16-bit bits and the new 16-bit weights all-gathered, half of
// fp32's bytes in both; the shard's fp32 master and moments are the optimizer's 12Ψ/N; the ranks
// start from rank 0's master. The overflow check is the all-reduced squared norm: one verdict.
import { viewOf, type GpuTensor } from '../gpu/allocator.js';
import { decode16, encode16 } from '../gpu/precision.js';
import type { AdamwConfig } from '../optim/adamw.js';
import { CpuAdamW } from '../optim/cpu-adamw.js';
import { ShardedAdamW } from '../optim/sharded-adamw.js';
import { SLOT_ELEMS } from '../model/params.js';
import { CompressionCounter, compressionReport, type HalfDType, narrowGradients, reduceScatterHalf } from '../comm-hooks/index.js';
import { PackedRanges, wireDtypeOf } from '../precision/packed-wire.js';
import { broadcastParams, type OptimizerState, type Strategy, type StrategyContext } from './strategy.js';

/** Shard bounds of a flat layout of F elements over N ranks, each start 256-byte aligned (slot: elements per 256 bytes, 128 at 16 bits). */
export function shardBounds(F: number, N: number, slot = SLOT_ELEMS): number[] {
  const per = Math.ceil(F / N / slot) * slot;
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
  /** offload, mixed precision: the reduced gradient shard as the host keeps it, 16-bit (ZeRO-Offload's split) */
  protected hostGradShard16: Uint16Array = new Uint16Array(0);
  protected readonly counts: number[];
  /** the full gradient (absent under ZeRO-2, whose gradients live in bucket buffers) */
  private readonly flatGrads: GpuTensor | null;
  protected readonly flatParams: GpuTensor;
  protected readonly labels: Record<string, number>;
  /** fp16/bf16 compression of the gradient reduce-scatter, and the bytes it sent against float32 */
  private readonly half: { hook: 'fp16' | 'bf16'; dtype: HalfDType; counter: CompressionCounter } | null;
  /** mixed precision: the store's 16-bit format (gradients and weights travel as it); null at fp32 */
  protected readonly wire16: HalfDType | null;
  /** mixed precision: the whole model's fp32 master (flat layout) from loadMasterWeights, until setup shares rank 0's */
  protected pendingMaster: Float32Array | null = null;
  /** mixed precision: the flat layout's parameter elements (the wire leaves the 16-bit slots' padding out), and each shard's count of them */
  protected readonly packed: PackedRanges;
  protected readonly packedCounts: number[];

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
    this.wire16 = wireDtypeOf(store);
    if (this.wire16 && (this.half || o.normSq || (this.offload && store.gradArena)))
      throw new Error(
        `ZeRO: a ${store.precision} run trains without gradient compression (its gradients are 16-bit already), zero1's offload or 3d in this build: drop --precision or those options`,
      );
    this.bounds = shardBounds(store.flatElems, N, store.elemsPerSlot);
    this.counts = Array.from({ length: N }, (_, r) => this.bounds[r + 1]! - this.bounds[r]!);
    this.packed = new PackedRanges(store.refs);
    this.packedCounts = this.packed.counts(this.bounds);
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
    if (this.wire16) return this.setupMaster();
    await broadcastParams(this.c, this.labels);
    if (!this.offload) return;
    const [a, b] = this.mine;
    const master = b > a ? await this.c.rt.read(this.flatParams, b - a, a) : new Float32Array(0);
    this.cpu = new CpuAdamW(this.config, master, this.decayMask());
    if (this.pendingState) this.loadOptimizerState(this.pendingState);
  }

  /** offload: 1 for each element of the shard that takes weight decay */
  private decayMask(): Uint8Array {
    const [a, b] = this.mine;
    const decay = new Uint8Array(b - a);
    for (const r of this.c.model.params.refs) {
      if (!r.spec.decay) continue;
      const lo = Math.max(a, r.offset);
      const hi = Math.min(b, r.offset + r.numel);
      if (hi > lo) decay.fill(1, lo - a, hi - a);
    }
    return decay;
  }

  /** Mixed precision: every rank takes rank 0's fp32 master: its shard into the optimizer, the whole as the 16-bit weights. */
  private async setupMaster() {
    const flat = this.pendingMaster;
    if (!flat) throw new Error(`ZeRO: a mixed-precision run starts from master weights (loadMasterWeights) before setup`);
    await this.c.pg.broadcast(flat, { root: 0, labels: { what: 'initial master weights', ...this.labels } }).wait();
    const [a, b] = this.mine;
    if (this.offload) this.cpu = new CpuAdamW(this.config, flat.slice(a, b), this.decayMask());
    else this.opt!.writeMaster(flat.subarray(a, b));
    this.c.rt.write(this.flatParams, flat); // rounded to nearest even, as the cast kernel rounds
    this.pendingMaster = null;
    if (this.pendingState) this.loadOptimizerState(this.pendingState);
  }

  loadMasterWeights(values: Map<string, Float32Array>) {
    const store = this.c.model.params;
    const flat = new Float32Array(store.flatElems);
    for (const r of store.refs) flat.set(values.get(r.name)!, r.offset);
    this.pendingMaster = flat;
  }

  /** host memory of the offloaded optimizer (master weights and moments; mixed precision: and the 16-bit gradient shard) */
  hostBytes(): Record<string, number> {
    if (!this.cpu) return {};
    return {
      host_params: this.cpu.hostBytes.params,
      host_optimizer: this.cpu.hostBytes.optimizer,
      ...(this.wire16 ? { host_grads: this.hostGradShard16.byteLength } : {}),
    };
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
    if (this.wire16) {
      // the 16-bit sums are exact in the store's format: written back as they came
      const F = this.c.model.params.flatElems;
      const packed = this.packed.pack(await rt.readBits(this.flatGrads!), 0, F);
      const labels = { what: 'gradients', bucket: 0, ...this.labels };
      const mine = await this.c.pg.reduceScatter(packed, { op: 'sum', dtype: this.wire16, counts: this.packedCounts, labels }).wait();
      const [a, b] = this.mine;
      if (b > a) rt.write(this.flatGrads!, this.packed.unpack(mine, a, b), a);
      return;
    }
    const grads = await rt.read(this.flatGrads!);
    const shard = await this.reduceScatterGradients(grads, this.counts, { what: 'gradients', bucket: 0, ...this.labels });
    const [a] = this.mine;
    if (this.offload || this.o.normSq) this.hostGradShard = shard;
    if (!this.offload && shard.length > 0) rt.write(this.flatGrads!, shard, a);
  }

  async optimizerStep(lr: number, gradScale = 1) {
    const { rt, pg } = this.c;
    if (this.cpu) {
      // mixed precision: the 16-bit shard widened and unscaled (gradScale is a power of 2: exact)
      const g = this.wire16 ? decode16(this.c.model.params.precision, this.hostGradShard16) : this.hostGradShard;
      let local = 0;
      for (const x of g) local += x * x;
      const sumsq = Float32Array.of(local);
      await pg.allReduce(sumsq, { op: 'sum', labels: { what: 'grad norm' } }).wait();
      const sq = sumsq[0]! / (gradScale * gradScale);
      // fp16: an inf/NaN norm (the same on every rank) skips the update
      const skip = this.c.model.params.precision === 'fp16' && !Number.isFinite(sq);
      if (gradScale !== 1 && !skip) for (let i = 0; i < g.length; i++) g[i] = g[i]! / gradScale;
      const own = skip ? this.cpu.master : this.cpu.update(g, sq, lr);
      await this.gatherWeights(this.wire16 ? encode16(this.c.model.params.precision, own) : own);
      return Math.sqrt(sq);
    }
    const norm = await this.updateShardOnDevice(lr, gradScale);
    const [a, b] = this.mine;
    if (this.wire16) await this.gatherWeights(b > a ? await rt.readBits(this.flatParams, b - a, a) : new Uint16Array(0));
    else await this.gatherWeights(b > a ? await rt.read(this.flatParams, b - a, a) : new Float32Array(0));
    return norm;
  }

  /** The all-gather of the new weights from every rank's shard (mixed precision: the packed 16-bit bits), into the device's copy. */
  private async gatherWeights(own: Float32Array | Uint16Array) {
    const { rt, pg } = this.c;
    const labels = { what: 'weights', ...this.labels };
    if (own instanceof Float32Array) {
      rt.write(this.flatParams, await pg.allGather(own, { counts: this.counts, labels }).wait());
      return;
    }
    const [a, b] = this.mine;
    const full = await pg.allGather(this.packed.pack(own, a, b), { counts: this.packedCounts, dtype: this.wire16!, labels }).wait();
    rt.write(this.flatParams, this.packed.unpack(full, 0, this.c.model.params.flatElems));
  }

  /** The global gradient norm from every shard's squared sum, then AdamW on the own shard; returns the norm. */
  protected async updateShardOnDevice(lr: number, gradScale = 1): Promise<number> {
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
    opt.recordStep(lr, gradScale);
    opt.settle(sumsq[0]!);
    return Math.sqrt(sumsq[0]!) / gradScale;
  }

  /** the run summary's compression figures (fp16/bf16): what the gradient reduce-scatters sent against float32 */
  summary() {
    return this.half ? { grad_compression: compressionReport(this.half.hook, this.half.counter.report()) } : {};
  }

  async optimizerState(): Promise<OptimizerState> {
    const { pg } = this.c;
    const shard = this.cpu ? { m: this.cpu.m, v: this.cpu.v } : await this.opt!.readShard();
    const m = await pg.allGather(shard.m, { counts: this.counts, labels: { what: 'checkpoint exp_avg', ...this.labels } }).wait();
    const v = await pg.allGather(shard.v, { counts: this.counts, labels: { what: 'checkpoint exp_avg_sq', ...this.labels } }).wait();
    const store = this.c.model.params;
    const split = (flat: Float32Array) => new Map(store.refs.map((r) => [r.name, flat.slice(r.offset, r.offset + r.numel)]));
    const step = this.cpu?.step ?? this.opt!.step;
    if (!this.wire16) return { m: split(m), v: split(v), step };
    const labels = { what: 'checkpoint master', ...this.labels };
    const master = await pg.allGather(this.cpu ? this.cpu.master : await this.opt!.readMaster(), { counts: this.counts, labels }).wait();
    return { m: split(m), v: split(v), step, master: split(master) };
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
