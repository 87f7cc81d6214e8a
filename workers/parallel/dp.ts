// DataParallel, parameter-server style (the seeds' baseline): after backward every rank sends
// its whole gradient to rank 0, which sums, clips, runs the only optimizer and sends the new
// weights back to every rank. Rank 0 receives and sends (N-1)·Ψ elements per step: the
// bottleneck this strategy exists to show. Mixed precision: gradients and weights travel as
// their 16-bit bits (precision/flat-wire.ts); rank 0 sums in f32 and keeps the only fp32 master.
import { type GpuTensor, viewOf } from '../gpu/allocator.js';
import type { AdamW } from '../optim/adamw.js';
import { FlatWire } from '../precision/flat-wire.js';
import { PendingMaster, split } from '../precision/master-weights.js';
import { broadcastParams, type OptimizerState, replicatedOptimizerState, type RankStrategy, type StrategyContext } from './strategy.js';

const TAG_GRADS = 1;
const TAG_WEIGHTS = 2;

export class ParameterServerDp implements RankStrategy {
  readonly name = 'dp';
  private readonly wire: FlatWire;
  private readonly master: PendingMaster;
  /** the whole flat layout's gradients and weights */
  private readonly flatGrads: GpuTensor;
  private readonly flatParams: GpuTensor;
  constructor(private readonly c: StrategyContext) {
    if (c.pg.rank === 0 && !c.opt) throw new Error('dp: rank 0 needs the optimizer');
    const store = c.model.params;
    this.wire = new FlatWire(c.rt, store);
    this.master = new PendingMaster(store, 'dp');
    this.flatGrads = viewOf(store.refs[0]!.grad, 'grads(all)', 0, store.flatElems);
    this.flatParams = viewOf(store.refs[0]!.param, 'params(all)', 0, store.flatElems);
  }

  async setup() {
    if (!this.wire.dtype) return broadcastParams(this.c);
    const flat = await this.master.broadcast(this.c.pg);
    if (this.c.opt) this.c.opt.writeMaster(split(this.c.model.params, flat));
    else this.c.rt.write(this.flatParams, flat); // rounded to nearest even, as rank 0's cast
  }

  loadMasterWeights(values: Map<string, Float32Array>) {
    this.master.load(values);
  }

  beforeBackward() {}

  async finishGradients() {
    const { rt, pg } = this.c;
    const F = this.c.model.params.flatElems;
    const grads = await this.wire.read(this.flatGrads);
    const o = { tag: TAG_GRADS, ...this.wire.typed };
    if (pg.rank !== 0) {
      await pg.send(this.wire.pack(grads, 0, F), 0, { ...o, labels: { what: 'gradients to the parameter server' } }).wait();
      return;
    }
    const sum = this.wire.widen(grads);
    const incoming = Array.from({ length: pg.size - 1 }, () => this.wire.alloc(this.wire.count(0, F)));
    await Promise.all(incoming.map((buf, i) => pg.recv(buf, i + 1, { ...o, labels: { what: 'gradients' } }).wait()));
    // sum in rank order so the result does not depend on arrival order
    for (const buf of incoming) {
      const g = this.wire.widen(this.wire.unpack(buf, 0, F));
      for (let i = 0; i < sum.length; i++) sum[i] = sum[i]! + g[i]!;
    }
    rt.write(this.flatGrads, sum); // 16-bit: the f32 sum stored at 16 bits
  }

  /** Rank 0 updates and sends the new weights with the gradient norm's float32 after them; returns the norm. */
  async optimizerStep(lr: number, gradScale = 1) {
    const { rt, pg } = this.c;
    const F = this.c.model.params.flatElems;
    const { buf, payload, float } = this.wire.withFloat(this.wire.count(0, F));
    const o = { tag: TAG_WEIGHTS, labels: { what: 'weights' }, ...this.wire.typed };
    if (pg.rank === 0) {
      const opt = this.c.opt as AdamW;
      opt.recordGradNorm();
      opt.recordStep(lr, gradScale);
      payload.set(this.wire.pack(await this.wire.read(this.flatParams), 0, F));
      float.setFloat32(0, await opt.readGradNorm(gradScale), true);
      await Promise.all(Array.from({ length: pg.size - 1 }, (_, i) => pg.send(buf, i + 1, o).wait()));
    } else {
      await pg.recv(buf, 0, o).wait();
      rt.write(this.flatParams, this.wire.unpack(payload, 0, F));
    }
    return float.getFloat32(0, true);
  }

  optimizerState() {
    return replicatedOptimizerState(this.c.opt);
  }

  loadOptimizerState(s: OptimizerState) {
    this.c.opt?.writeState(s, s.step);
  }
}
