// ZeRO stage 3 (DeepSpeed): parameters partitioned too. Each rank owns a 4Ψ/N shard of the
// flat weights (on the device for the update, mirrored on the host for gathering). Before a
// layer's forward and again before its backward, the ranks all-gather that layer's weights
// into a working buffer (two rings for blocks and head, one for the embedding, whose tied wte
// is read at both ends of backward); with prefetch, the next layer's gather is started while
// the current one computes. Gradients are ZeRO-2's; after the update there is no all-gather
// of the weights. Bytes per rank and step: Ψ(N-1)/N in forward gathers, as much in backward
// gathers and in the gradient reduce-scatters: 3Ψ(N-1)/N.
// Mixed precision: the shard, its host mirror and every gather are 16-bit (half the bytes); the
// shard's fp32 master and moments are the optimizer's 12Ψ/N: 16Ψ/N of model states in all.
import type { GpuTensor } from '../gpu/allocator.js';
import type { ProcessGroup, WorldGroup } from '../comm/index.js';
import { decode16 } from '../gpu/precision.js';
import type { GradBucket } from '../model/params.js';
import type { AdamwConfig } from '../optim/adamw.js';
import type { StrategyContext } from './strategy.js';
import { shardBounds } from './zero1.js';
import { Zero2 } from './zero2.js';

export class Zero3 extends Zero2 {
  override readonly name = 'zero3';
  private readonly paramShard: GpuTensor;
  /** host mirror of this rank's parameter shard (what it contributes to every gather) */
  private hostParams: Float32Array | Uint16Array;
  private readonly prefetched = new Map<string, Promise<Float32Array | Uint16Array>>();
  /**
   * Weight gathers run on their own group: they are posted from the layer hooks in program
   * order, while gradient reduce-scatters are posted as buckets come back from the device, so
   * on one group two ranks could post them in different orders.
   */
  private gatherGroup: ProcessGroup | null = null;

  constructor(
    c: StrategyContext,
    config: AdamwConfig,
    private readonly prefetch: boolean,
  ) {
    if (c.model.params.paramGroups.length === 0) throw new Error('zero3 needs the model built with partitioned parameters');
    const store = c.model.params;
    const b = shardBounds(store.flatElems, c.pg.size, store.elemsPerSlot);
    const n = b[c.pg.rank + 1]! - b[c.pg.rank]!;
    const paramShard = c.rt.allocator.tensor('params[shard]', 'params', [Math.max(1, n)], store.precision);
    super(c, config, paramShard);
    this.paramShard = paramShard;
    this.hostParams = new Float32Array(n);
    const h = c.model.hooks;
    const { beforeForward, beforeBackward } = h;
    const L = c.model.config.n_layer;
    h.beforeForward = async (layer) => {
      await beforeForward?.(layer);
      await this.gather(layer.index, 'forward');
      if (this.prefetch && layer.index < L + 1) this.start(layer.index + 1, 'forward');
    };
    h.beforeBackward = async (layer) => {
      await beforeBackward?.(layer);
      await this.gather(layer.index, 'backward');
      if (this.prefetch && layer.index > 0) this.start(layer.index - 1, 'backward');
    };
  }

  private group(index: number): GradBucket {
    return this.c.model.params.paramGroups[index]!;
  }

  private key(index: number, phase: string) {
    return `${phase}:${index}`;
  }

  /** Post the all-gather of one layer's weights (every rank posts them in the same order). */
  private start(index: number, phase: 'forward' | 'backward'): Promise<Float32Array | Uint16Array> {
    const k = this.key(index, phase);
    let p = this.prefetched.get(k);
    if (p) return p;
    const g = this.group(index);
    const [a, b] = this.mine;
    const counts = this.bounds.slice(0, -1).map((lo, r) => Math.max(0, Math.min(g.end, this.bounds[r + 1]!) - Math.max(g.start, lo)));
    const from = Math.max(g.start, a) - a;
    const labels = { layer: index, what: `${phase} weights` };
    if (this.wire16) p = this.gather16(g, labels);
    else {
      const h = this.hostParams as Float32Array;
      const own = b > a ? h.subarray(Math.min(from, h.length), Math.min(from + counts[this.c.pg.rank]!, h.length)) : h.subarray(0, 0);
      p = this.gatherGroup!.allGather(Float32Array.from(own), { counts, labels }).wait();
    }
    this.prefetched.set(k, p);
    return p;
  }

  /** Mixed precision: a layer's 16-bit weights gathered as their packed bits, back in the layer's flat range. */
  private async gather16(g: GradBucket, labels: Record<string, string | number>): Promise<Uint16Array> {
    const [a] = this.mine;
    const part = (r: number): [number, number] => [Math.max(g.start, this.bounds[r]!), Math.min(g.end, this.bounds[r + 1]!)];
    const [x, y] = part(this.c.pg.rank);
    const own = y > x ? this.packed.pack((this.hostParams as Uint16Array).subarray(x - a, y - a), x, y) : new Uint16Array(0);
    const counts = this.counts.map((_, r) => this.packed.count(...part(r)));
    const full = await this.gatherGroup!.allGather(own, { counts, dtype: this.wire16!, labels }).wait();
    return this.packed.unpack(full, g.start, g.end);
  }

  private async gather(index: number, phase: 'forward' | 'backward') {
    const data = await this.start(index, phase);
    this.prefetched.delete(this.key(index, phase));
    // queue-ordered after everything recorded so far, so the layer that used this ring buffer
    // before has read it by the time these weights land
    this.c.rt.write(this.group(index).region, data);
  }

  override async setup() {
    const world = this.c.pg as WorldGroup;
    this.gatherGroup = (await world.newGroup(
      Array.from({ length: world.size }, (_, r) => r),
      { name: 'zero3-weights' },
    ))!;
    const [a, b] = this.mine;
    if (this.pendingMaster) {
      // mixed precision: every rank loaded the same master; the shard's 16-bit weights are cast from it
      this.opt!.writeMaster(this.pendingMaster.subarray(a, b));
      this.hostParams = b > a ? await this.c.rt.readBits(this.paramShard, b - a) : new Uint16Array(0);
      this.pendingMaster = null;
      return;
    }
    // every rank computed (or loaded) the same full weights: keep only the own shard
    const all = this.c.model.params.hostValues;
    if (!all) throw new Error('zero3: the parameters were never initialised');
    this.hostParams = all.slice(a, b);
    if (b > a) this.c.rt.write(this.paramShard, this.hostParams);
    this.c.model.params.hostValues = null;
  }

  override async optimizerStep(lr: number, gradScale = 1) {
    const norm = await this.updateShardOnDevice(lr, gradScale);
    const [a, b] = this.mine;
    if (b > a)
      this.hostParams = this.wire16 ? await this.c.rt.readBits(this.paramShard, b - a) : await this.c.rt.read(this.paramShard, b - a);
    return norm;
  }

  /** Every rank's shard, gathered (a collective): the whole weights for a checkpoint. */
  async fullParams(): Promise<Map<string, Float32Array>> {
    const labels = { what: 'checkpoint weights' };
    const store = this.c.model.params;
    let flat: Float32Array;
    if (this.wire16) {
      const [a, b] = this.mine;
      const own = this.packed.pack(this.hostParams as Uint16Array, a, b);
      const full = await this.c.pg.allGather(own, { counts: this.packedCounts, dtype: this.wire16, labels }).wait();
      flat = decode16(store.precision, this.packed.unpack(full, 0, store.flatElems));
    } else flat = await this.c.pg.allGather(Float32Array.from(this.hostParams as Float32Array), { counts: this.counts, labels }).wait();
    return new Map(this.c.model.params.refs.map((r) => [r.name, flat.slice(r.offset, r.offset + r.numel)]));
  }
}
