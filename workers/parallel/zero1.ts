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
// Mixed precision (2Ψ weights, 2Ψ gradients): both collectives carry 16-bit bits (precision/
// flat-wire.ts), half of fp32's bytes; the shard's fp32 master and moments are the optimizer's
// 12Ψ/N; the ranks start from rank 0's master. fp16's overflow verdict is the all-reduced norm.
import { viewOf, type GpuTensor } from '../gpu/allocator.js';
import type { AdamwConfig } from '../optim/adamw.js';
import { decayMask, HostShardOptimizer } from '../optim/host-shard.js';
import { ShardedAdamW } from '../optim/sharded-adamw.js';
import { shardBounds } from '../../common/padding.js';
import { HalfReduceScatter } from '../comm-hooks/index.js';
import { type Flat, FlatWire } from '../precision/flat-wire.js';
import { flatten, PendingMaster, split } from '../precision/master-weights.js';
import { broadcastParams, type OptimizerState, type RankStrategy, type StrategyContext } from './strategy.js';

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

export class Zero1 implements RankStrategy {
  readonly name: string = 'zero1';
  readonly bounds: number[];
  readonly opt: ShardedAdamW | null;
  readonly offload: boolean;
  /** offload: the shard's optimizer on the host (ZeRO-Offload) */
  private readonly host: HostShardOptimizer | null;
  /** offload: this step's reduced gradient shard, on the host (mixed precision: 16-bit, ZeRO-Offload's split) */
  protected hostGradShard: Flat = new Float32Array(0);
  protected readonly counts: number[];
  /** the full gradient (absent under ZeRO-2, whose gradients live in bucket buffers) */
  private readonly flatGrads: GpuTensor | null;
  protected readonly flatParams: GpuTensor;
  protected readonly labels: Record<string, number>;
  /** fp16/bf16 compression of the gradient reduce-scatter, and the bytes it sent against float32 */
  private readonly half: HalfReduceScatter | null;
  /** gradients and weights on the wire at the run's precision */
  protected readonly wire: FlatWire;
  protected readonly master: PendingMaster;

  constructor(
    protected readonly c: ShardedContext,
    config: AdamwConfig,
    private readonly o: Zero1Options = {},
  ) {
    const store = c.model.params;
    const N = c.pg.size;
    this.offload = o.offload ?? false;
    this.labels = o.labels ?? {};
    this.half = o.halfGradients ? new HalfReduceScatter(o.halfGradients) : null;
    this.wire = new FlatWire(c.rt, store);
    this.master = new PendingMaster(store, 'ZeRO');
    if (this.wire.dtype && this.half)
      throw new Error(
        `ZeRO: --grad-compression ${o.halfGradients}: a ${store.precision} run's gradients are 16-bit already and travel as they are; drop the compression, or train in fp32`,
      );
    this.bounds = shardBounds(store.flatElems, N, store.elemsPerSlot);
    this.counts = Array.from({ length: N }, (_, r) => this.bounds[r + 1]! - this.bounds[r]!);
    const [a, b] = this.mine;
    this.opt = this.offload ? null : new ShardedAdamW(c.rt, store, config, a, b, o.gradShard, o.paramShard);
    this.host = this.offload ? new HostShardOptimizer(config, decayMask(store.refs, a, b), store.precision === 'fp16') : null;
    this.flatGrads = store.gradArena ? viewOf(store.refs[0]!.grad, 'grads(all)', 0, store.flatElems) : null;
    this.flatParams = viewOf(store.refs[0]!.param, 'params(all)', 0, store.flatElems);
  }

  protected get mine(): [number, number] {
    return [this.bounds[this.c.pg.rank]!, this.bounds[this.c.pg.rank + 1]!];
  }

  /** Every rank takes rank 0's weights (mixed precision: its fp32 master, the shard's part into the optimizer, the whole cast to 16 bits). */
  async setup() {
    const [a, b] = this.mine;
    const flat = this.wire.dtype ? await this.master.broadcast(this.c.pg, this.labels) : null;
    if (!flat) await broadcastParams(this.c, this.labels);
    else this.opt?.writeMaster(flat.subarray(a, b));
    this.host?.start(flat?.slice(a, b) ?? (await this.c.rt.read(this.flatParams, b - a, a)));
    if (flat) this.c.rt.write(this.flatParams, flat); // rounded to nearest even, as the cast kernel rounds
  }

  loadMasterWeights(values: Map<string, Float32Array>) {
    this.master.load(values);
  }

  /** host memory of the offloaded optimizer (master weights and moments; mixed precision: and the 16-bit gradient shard) */
  hostBytes(): Record<string, number> {
    const bytes = this.host?.hostBytes();
    return bytes ? { ...bytes, ...(this.wire.dtype ? { host_grads: this.hostGradShard.byteLength } : {}) } : {};
  }

  beforeBackward() {}

  /** Sums the gradients `data` (the flat range [lo, hi)) over the group and returns this rank's block of it: in 16 bits under fp16/bf16 compression. */
  protected async reduceScatterGradients(data: Flat, lo: number, hi: number, labels: Record<string, string | number>): Promise<Flat> {
    if (!this.half) return this.wire.reduceScatter(this.c.pg, data, lo, hi, this.bounds, labels);
    return this.half.run(this.c.pg, data as Float32Array, this.wire.counts(lo, hi, this.bounds), labels);
  }

  async finishGradients() {
    const { rt } = this.c;
    const grads = await this.wire.read(this.flatGrads!);
    const shard = await this.reduceScatterGradients(grads, 0, grads.length, { what: 'gradients', bucket: 0, ...this.labels });
    const [a] = this.mine;
    if (this.offload || this.o.normSq) this.hostGradShard = shard;
    if (!this.offload && shard.length > 0) rt.write(this.flatGrads!, shard, a);
  }

  async optimizerStep(lr: number, gradScale = 1) {
    if (this.host) {
      // mixed precision: the 16-bit shard widened (exact)
      const g = this.wire.widen(this.hostGradShard);
      const { weights, norm } = await this.host.update(g, lr, gradScale, (x) => this.sumOverRanks(x));
      await this.gatherWeights(this.wire.narrow(weights));
      return norm;
    }
    const norm = await this.updateShardOnDevice(lr, gradScale);
    const [a, b] = this.mine;
    await this.gatherWeights(await this.wire.read(this.flatParams, b - a, a));
    return norm;
  }

  /** x summed over the group in float32 (the squared gradient norm from every shard's). */
  private async sumOverRanks(x: number): Promise<number> {
    const sum = Float32Array.of(x);
    await this.c.pg.allReduce(sum, { op: 'sum', labels: { what: 'grad norm' } }).wait();
    return sum[0]!;
  }

  /** The all-gather of the new weights from every rank's shard `own`, into the device's copy. */
  private async gatherWeights(own: Flat) {
    const labels = { what: 'weights', ...this.labels };
    this.c.rt.write(this.flatParams, await this.wire.allGather(this.c.pg, own, 0, this.c.model.params.flatElems, this.bounds, labels));
  }

  /** The global gradient norm from every shard's squared sum, then AdamW on the own shard; returns the norm. */
  protected async updateShardOnDevice(lr: number, gradScale = 1): Promise<number> {
    const { rt } = this.c;
    const opt = this.opt!;
    let sq: number;
    if (this.o.normSq)
      sq = Math.fround(await this.o.normSq(this.wire.widen(this.hostGradShard), this.mine[0])); // 3d: 16-bit shard widened
    else {
      opt.recordLocalSumSq();
      sq = await this.sumOverRanks((await rt.read(opt.gradSumSq))[0]!);
    }
    rt.write(opt.gradSumSq, Float32Array.of(sq));
    opt.recordStep(lr, gradScale);
    opt.settle(sq);
    return Math.sqrt(sq) / gradScale;
  }

  /** the run summary's compression figures (fp16/bf16): what the gradient reduce-scatters sent against float32 */
  summary() {
    return this.half?.summary() ?? {};
  }

  /** The whole optimizer state, gathered from every rank's shard (a collective). */
  async optimizerState(): Promise<OptimizerState> {
    const opt = this.opt!;
    const s = this.host?.state() ?? { ...(await opt.readShard()), step: opt.step, master: this.wire.dtype ? await opt.readMaster() : null };
    const gather = async (x: Float32Array, what: string) => {
      const labels = { what: `checkpoint ${what}`, ...this.labels };
      return split(this.c.model.params, await this.c.pg.allGather(x, { counts: this.counts, labels }).wait());
    };
    const [m, v] = [await gather(s.m, 'exp_avg'), await gather(s.v, 'exp_avg_sq')];
    return this.wire.dtype ? { m, v, step: s.step, master: await gather(s.master!, 'master') } : { m, v, step: s.step };
  }

  loadOptimizerState(s: OptimizerState) {
    const [a, b] = this.mine;
    const [m, v] = [s.m, s.v].map((x) => flatten(this.c.model.params, x).subarray(a, b)) as [Float32Array, Float32Array];
    if (this.host) this.host.load(m, v, s.step);
    else this.opt!.writeShard(m, v, s.step);
  }
}
