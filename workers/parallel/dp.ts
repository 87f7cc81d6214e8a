// DataParallel, parameter-server style (the seeds' baseline): after backward every rank sends
// its whole gradient to rank 0, which sums, clips, runs the only optimizer and sends the new
// weights back to every rank. Rank 0 receives and sends (N-1)·Ψ floats per step: the
// bottleneck this strategy exists to show.
import type { AdamW } from '../optim/adamw.js';
import { broadcastParams, type OptimizerState, replicatedOptimizerState, type Strategy, type StrategyContext } from './strategy.js';

const TAG_GRADS = 1;
const TAG_WEIGHTS = 2;

export class ParameterServerDp implements Strategy {
  readonly name = 'dp';
  constructor(private readonly c: StrategyContext) {
    if (c.pg.rank === 0 && !c.opt) throw new Error('dp: rank 0 needs the optimizer');
  }

  async setup() {
    await broadcastParams(this.c);
  }

  beforeBackward() {}

  private flatGrads() {
    const s = this.c.model.params;
    return { ...s.refs[0]!.grad, byteOffset: 0, byteLength: s.flatElems * 4, numel: s.flatElems, name: 'grads(all)' };
  }

  private flatParams() {
    const s = this.c.model.params;
    return { ...s.refs[0]!.param, byteOffset: 0, byteLength: s.flatElems * 4, numel: s.flatElems, name: 'params(all)' };
  }

  async finishGradients() {
    const { rt, pg } = this.c;
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

  async optimizerStep(lr: number) {
    const { rt, pg } = this.c;
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

  optimizerState() {
    return replicatedOptimizerState(this.c.opt);
  }

  loadOptimizerState(s: OptimizerState) {
    this.c.opt?.writeState(s, s.step);
  }
}
