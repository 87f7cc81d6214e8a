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
import type { AdamwConfig } from '../optim/adamw.js';
import type { Flat } from '../precision/flat-wire.js';
import { split } from '../precision/master-weights.js';
import type { StrategyContext } from './strategy.js';
import { shardBounds } from '../../common/padding.js';
import { Zero2 } from './zero2.js';

export class Zero3 extends Zero2 {
  override readonly name = 'zero3';
  private readonly paramShard: GpuTensor;
  /** host mirror of this rank's parameter shard (what it contributes to every gather) */
  private hostParams: Flat;
  private readonly prefetched = new Map<string, Promise<Flat>>();
  /**
   * Weight gathers run on their own group: they are posted from the layer hooks in program
   * order, while gradient reduce-scatters are posted as buckets come back from the device, so
   * on one group two ranks could post them in different orders.
   */
  private gatherGroup: ProcessGroup | null = null;

  /** start the next layer's weight gather while this one computes */
  private readonly prefetch: boolean;

  constructor(c: StrategyContext, config: AdamwConfig, o: { prefetch: boolean }) {
    if (c.model.params.paramGroups.length === 0) throw new Error('zero3 needs the model built with partitioned parameters');
    const store = c.model.params;
    const b = shardBounds(store.flatElems, c.pg.size, store.elemsPerSlot);
    const n = b[c.pg.rank + 1]! - b[c.pg.rank]!;
    const paramShard = c.rt.allocator.tensor('params[shard]', 'params', [Math.max(1, n)], store.precision);
    super(c, config, { paramShard });
    this.paramShard = paramShard;
    this.prefetch = o.prefetch;
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

  /** Post the all-gather of one layer's weights (every rank posts them in the same order). */
  private start(index: number, phase: 'forward' | 'backward'): Promise<Flat> {
    let p = this.prefetched.get(`${phase}:${index}`);
    if (p) return p;
    const g = this.c.model.params.paramGroups[index]!;
    const [a, b] = this.mine;
    // the own part [x, y) of the layer's range (empty where the shard does not reach it)
    const [x, y] = [Math.max(g.start, a), Math.min(g.end, b)];
    const own = this.hostParams.slice(x - a, Math.max(x, y) - a);
    p = this.wire.allGather(this.gatherGroup!, own, g.start, g.end, this.bounds, { layer: index, what: `${phase} weights` });
    this.prefetched.set(`${phase}:${index}`, p);
    return p;
  }

  private async gather(index: number, phase: 'forward' | 'backward') {
    const data = await this.start(index, phase);
    this.prefetched.delete(`${phase}:${index}`);
    // queue-ordered after everything recorded so far, so the layer that used this ring buffer
    // before has read it by the time these weights land
    this.c.rt.write(this.c.model.params.paramGroups[index]!.region, data);
  }

  override async setup() {
    const world = this.c.pg as WorldGroup;
    this.gatherGroup = (await world.newGroup(
      Array.from({ length: world.size }, (_, r) => r),
      { name: 'zero3-weights' },
    ))!;
    const [a, b] = this.mine;
    if (this.wire.dtype) {
      // mixed precision: every rank loaded the same master; the shard's 16-bit weights are cast from it
      this.opt!.writeMaster(this.master.take().subarray(a, b));
      this.hostParams = await this.wire.read(this.paramShard, b - a);
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
    if (b > a) this.hostParams = await this.wire.read(this.paramShard, b - a);
    return norm;
  }

  /** Every rank's shard, gathered (a collective): the whole weights for a checkpoint. */
  async fullParams(): Promise<Map<string, Float32Array>> {
    const store = this.c.model.params;
    const own = this.hostParams.slice();
    const full = await this.wire.allGather(this.c.pg, own, 0, store.flatElems, this.bounds, { what: 'checkpoint weights' });
    return split(store, this.wire.widen(full));
  }
}
