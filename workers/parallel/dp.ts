// DataParallel, parameter-server style (the seeds' baseline): after backward every rank sends
// its whole gradient to rank 0, which sums, clips, runs the only optimizer and sends the new
// weights back to every rank. Rank 0 receives and sends (N-1)·Ψ floats per step: the
// bottleneck this strategy exists to show.
// Mixed precision: the gradients go to rank 0 and the weights come back as their 16-bit bits
// (half the bytes); rank 0 sums in f32, stores the sum at 16 bits and keeps the only fp32 master.
import { elementBytes } from '../gpu/allocator.js';
import type { AdamW } from '../optim/adamw.js';
import { widenGradients } from '../comm-hooks/index.js';
import { PackedRanges, wireDtypeOf } from '../precision/packed-wire.js';
import { broadcastParams, type OptimizerState, replicatedOptimizerState, type Strategy, type StrategyContext } from './strategy.js';

const TAG_GRADS = 1;
const TAG_WEIGHTS = 2;

export class ParameterServerDp implements Strategy {
  readonly name = 'dp';
  private readonly wire16;
  /** mixed precision: the flat layout's parameter elements (the wire leaves the 16-bit slots' padding out) */
  private readonly packed: PackedRanges;
  /** mixed precision: the fp32 initial weights (flat layout) until setup shares rank 0's */
  private pendingMaster: Float32Array | null = null;
  constructor(private readonly c: StrategyContext) {
    if (c.pg.rank === 0 && !c.opt) throw new Error('dp: rank 0 needs the optimizer');
    this.wire16 = wireDtypeOf(c.model.params);
    this.packed = new PackedRanges(c.model.params.refs);
  }

  async setup() {
    if (!this.wire16) return broadcastParams(this.c);
    const flat = this.pendingMaster!;
    await this.c.pg.broadcast(flat, { root: 0, labels: { what: 'initial master weights' } }).wait();
    if (this.c.opt)
      this.c.opt.writeMaster(new Map(this.c.model.params.refs.map((r) => [r.name, flat.subarray(r.offset, r.offset + r.numel)])));
    else this.c.rt.write(this.flatParams(), flat); // rounded to nearest even, as rank 0's cast
    this.pendingMaster = null;
  }

  loadMasterWeights(values: Map<string, Float32Array>) {
    const store = this.c.model.params;
    this.pendingMaster = new Float32Array(store.flatElems);
    for (const r of store.refs) this.pendingMaster.set(values.get(r.name)!, r.offset);
  }

  beforeBackward() {}

  private flatGrads() {
    const s = this.c.model.params;
    const g = s.refs[0]!.grad;
    return { ...g, byteOffset: 0, byteLength: s.flatElems * elementBytes(g), numel: s.flatElems, name: 'grads(all)' };
  }

  private flatParams() {
    const s = this.c.model.params;
    const p = s.refs[0]!.param;
    return { ...p, byteOffset: 0, byteLength: s.flatElems * elementBytes(p), numel: s.flatElems, name: 'params(all)' };
  }

  async finishGradients() {
    const { rt, pg } = this.c;
    if (this.wire16) return this.finishGradients16();
    const grads = await rt.read(this.flatGrads());
    if (pg.rank !== 0) {
      await pg.send(grads, 0, { tag: TAG_GRADS, labels: { what: 'gradients to the parameter server' } }).wait();
      return;
    }
    const incoming = Array.from({ length: pg.size - 1 }, () => new Float32Array(grads.length));
    await Promise.all(incoming.map((buf, i) => pg.recv(buf, i + 1, { tag: TAG_GRADS, labels: { what: 'gradients' } }).wait()));
    // sum in rank order so the result does not depend on arrival order
    for (const buf of incoming) for (let i = 0; i < grads.length; i++) grads[i] = grads[i]! + buf[i]!;
    rt.write(this.flatGrads(), grads);
  }

  /** The 16-bit gradients to rank 0, which sums them in f32 (rank order) and stores the sum at 16 bits. */
  private async finishGradients16() {
    const { rt, pg } = this.c;
    const dtype = this.wire16!;
    const F = this.c.model.params.flatElems;
    const bits = await rt.readBits(this.flatGrads());
    if (pg.rank !== 0) {
      const packed = this.packed.pack(bits, 0, F);
      await pg.send(packed, 0, { tag: TAG_GRADS, dtype, labels: { what: 'gradients to the parameter server' } }).wait();
      return;
    }
    const sum = widenGradients(bits, dtype);
    const incoming = Array.from({ length: pg.size - 1 }, () => new Uint16Array(this.packed.count(0, F)));
    await Promise.all(incoming.map((buf, i) => pg.recv(buf, i + 1, { tag: TAG_GRADS, dtype, labels: { what: 'gradients' } }).wait()));
    for (const buf of incoming) {
      const g = widenGradients(this.packed.unpack(buf, 0, F), dtype);
      for (let i = 0; i < sum.length; i++) sum[i] = sum[i]! + g[i]!;
    }
    rt.write(this.flatGrads(), sum);
  }

  async optimizerStep(lr: number, gradScale = 1) {
    const { rt, pg } = this.c;
    if (this.wire16) return this.optimizerStep16(lr, gradScale);
    const out = new Float32Array(this.c.model.params.flatElems + 1);
    if (pg.rank === 0) {
      const opt = this.c.opt as AdamW;
      opt.recordGradNorm();
      opt.recordStep(lr);
      out.set(await rt.read(this.flatParams()));
      out[out.length - 1] = await opt.readGradNorm();
      await Promise.all(
        Array.from({ length: pg.size - 1 }, (_, i) => pg.send(out, i + 1, { tag: TAG_WEIGHTS, labels: { what: 'weights' } }).wait()),
      );
    } else {
      await pg.recv(out, 0, { tag: TAG_WEIGHTS, labels: { what: 'weights' } }).wait();
      rt.write(this.flatParams(), out.subarray(0, out.length - 1));
    }
    return out[out.length - 1]!;
  }

  /** Rank 0 updates its master and sends the packed 16-bit weights, with the norm's float32 bits in two more elements. */
  private async optimizerStep16(lr: number, gradScale: number) {
    const { rt, pg } = this.c;
    const dtype = this.wire16!;
    const F = this.c.model.params.flatElems;
    const P = this.packed.count(0, F);
    const out = new Uint16Array(P + 2);
    const norm = new DataView(out.buffer, P * 2, 4);
    if (pg.rank === 0) {
      const opt = this.c.opt as AdamW;
      opt.recordGradNorm();
      opt.recordStep(lr, gradScale);
      out.set(this.packed.pack(await rt.readBits(this.flatParams()), 0, F));
      norm.setFloat32(0, await opt.readGradNorm(gradScale), true);
      const send = (r: number) => pg.send(out, r, { tag: TAG_WEIGHTS, dtype, labels: { what: 'weights' } }).wait();
      await Promise.all(Array.from({ length: pg.size - 1 }, (_, i) => send(i + 1)));
    } else {
      await pg.recv(out, 0, { tag: TAG_WEIGHTS, dtype, labels: { what: 'weights' } }).wait();
      rt.write(this.flatParams(), this.packed.unpack(out.subarray(0, P), 0, F));
    }
    return norm.getFloat32(0, true);
  }

  optimizerState() {
    return replicatedOptimizerState(this.c.opt);
  }

  loadOptimizerState(s: OptimizerState) {
    this.c.opt?.writeState(s, s.step);
  }
}
