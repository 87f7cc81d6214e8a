// Megatron-LM tensor parallelism as a strategy: the model (built with these ops) holds only its rank's shards
// and calls TensorParallelOps at its f/g points; this file implements them on a process group
// (device -> host -> all-reduce -> device), and owns what crosses the shards: the global
// gradient norm, the optimizer step, and gathering full tensors for checkpoints.
import type { ProcessGroup } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { sumSquares } from '../kernels/reduce.js';
import { paramSpecs } from '../model/config.js';
import type { Gpt } from '../model/gpt.js';
import type { TensorParallelOps, TpLabels } from '../model/tensor-parallel.js';
import { shardKind, shardModel, unshardTensor } from '../model/tp-layout.js';
import type { AdamW } from '../optim/adamw.js';
import type { OptimizerState, Strategy } from './strategy.js';

const identity = async () => {};

/** f and g from an all-reduce (labelled with the operator and the pass, for the spans). */
function conjugates(allReduce: TensorParallelOps['allReduce']): Pick<TensorParallelOps, 'f' | 'g'> {
  return {
    f: { forward: identity, backward: (t, labels) => allReduce(t, { op: 'f', pass: 'backward', ...labels }) },
    g: { forward: (t, labels) => allReduce(t, { op: 'g', pass: 'forward', ...labels }), backward: identity },
  };
}

/** A rank's place in a group before the group exists (a model can be built, and its kernels compiled, before the world is joined). */
export interface GroupPlace {
  rank: number;
  size: number;
}

/** f and g's collectives on the tensor-parallel group; a group of one returns at once. */
export class GroupTpOps implements TensorParallelOps {
  readonly rank: number;
  readonly size: number;
  readonly f: TensorParallelOps['f'];
  readonly g: TensorParallelOps['g'];
  private group: ProcessGroup | null;
  constructor(
    private readonly rt: Runtime,
    /** the group, or only this rank's place in it (then bind() the group before the first collective) */
    pg: ProcessGroup | GroupPlace,
  ) {
    this.rank = pg.rank;
    this.size = pg.size;
    this.group = 'allReduce' in pg ? pg : null;
    ({ f: this.f, g: this.g } = conjugates((t, labels, op) => this.allReduce(t, labels, op)));
  }

  bind(pg: ProcessGroup) {
    if (pg.rank !== this.rank || pg.size !== this.size)
      throw new Error(`tensor-parallel group: built for rank ${this.rank} of ${this.size}, bound to rank ${pg.rank} of ${pg.size}`);
    this.group = pg;
  }

  private get pg(): ProcessGroup {
    if (!this.group) throw new Error('tensor-parallel group: bind() the group before the first collective');
    return this.group;
  }

  async allReduce(t: GpuTensor, labels: TpLabels, op: 'sum' | 'max' = 'sum') {
    if (this.size === 1) return;
    const data = await this.rt.read(t);
    await this.pg.allReduce(data, { op, labels: { tp: 1, ...labels } }).wait();
    this.rt.write(t, data);
  }

  async allGather(own: GpuTensor, full: GpuTensor, labels: TpLabels) {
    if (this.size === 1) {
      this.rt.copy(own, full);
      return;
    }
    const mine = await this.rt.read(own);
    const out = await this.pg.allGather(mine, { output: new Float32Array(mine.length * this.size), labels: { tp: 1, ...labels } }).wait();
    this.rt.write(full, out);
  }
}

export interface TensorParallelContext {
  rt: Runtime;
  model: Gpt;
  opt: AdamW;
  /** the tensor-parallel group */
  tp: ProcessGroup;
}

export class TensorParallel implements Strategy {
  readonly name = 'tp';
  private readonly shardedSq: GpuTensor;
  private readonly replicatedSq: GpuTensor;
  private readonly normKernels: Dispatch[] = [];

  constructor(private readonly c: TensorParallelContext) {
    const { rt, model } = c;
    this.shardedSq = rt.allocator.tensor('grad_norm_sq.sharded', 'workspace', [1]);
    this.replicatedSq = rt.allocator.tensor('grad_norm_sq.replicated', 'workspace', [1]);
    // squared norms of the sharded gradients (summed over the group) and of the replicated ones
    // (the same on every rank: counted once), as a single device would sum them all
    const first = { sharded: true, replicated: true };
    for (const r of model.params.refs) {
      const sharded = shardKind(r.name) !== 'replicated';
      const key = sharded ? 'sharded' : 'replicated';
      this.normKernels.push(
        ...sumSquares(rt, { out: sharded ? this.shardedSq : this.replicatedSq, inp: r.grad, n: r.numel, accumulate: !first[key] }),
      );
      first[key] = false;
    }
  }

  async setup() {}
  beforeBackward() {}
  async finishGradients() {}

  async optimizerStep(lr: number): Promise<number> {
    const { rt, opt, tp } = this.c;
    rt.run(this.normKernels);
    const [sharded] = await rt.read(this.shardedSq);
    const [replicated] = await rt.read(this.replicatedSq);
    const s = new Float32Array([sharded!]);
    if (tp.size > 1) await tp.allReduce(s, { op: 'sum', labels: { tp: 1, layer: 'optimizer', op: 'grad-norm' } }).wait();
    const total = Math.fround(s[0]! + replicated!);
    rt.write(opt.gradSumSq, new Float32Array([total]));
    opt.recordStep(lr);
    return Math.sqrt(total);
  }

  /** Full tensors from every rank's shards, on every rank (collective). */
  private async gather(local: Map<string, Float32Array>): Promise<Map<string, Float32Array>> {
    const { model, tp } = this.c;
    const refs = model.params.refs;
    const per = refs.reduce((s, r) => s + r.numel, 0);
    const flat = new Float32Array(per);
    let o = 0;
    for (const r of refs) {
      flat.set(local.get(r.name)!, o);
      o += r.numel;
    }
    const all = await tp
      .allGather(flat, { output: new Float32Array(per * tp.size), labels: { tp: 1, layer: 'checkpoint', op: 'gather' } })
      .wait();
    const out = new Map<string, Float32Array>();
    const specs = new Map(paramSpecs(model.config).map((s) => [s.name, s]));
    o = 0;
    for (const r of refs) {
      const shards = Array.from({ length: tp.size }, (_, k) => all.subarray(k * per + o, k * per + o + r.numel));
      out.set(r.name, unshardTensor(specs.get(r.name)!, shards, tp.size));
      o += r.numel;
    }
    return out;
  }

  /** The full model's weights in the single-device layout (collective). */
  async fullParams(): Promise<Map<string, Float32Array>> {
    return this.gather(await this.c.model.params.readParams());
  }

  async optimizerState(): Promise<OptimizerState | null> {
    const s = await this.c.opt.readState();
    return { m: await this.gather(s.m), v: await this.gather(s.v), step: this.c.opt.step };
  }

  loadOptimizerState(s: OptimizerState) {
    const { model, tp } = this.c;
    const shard = (m: Map<string, Float32Array>) => shardModel(model.config, m, tp.size, tp.rank);
    this.c.opt.writeState({ m: shard(s.m), v: shard(s.v) }, s.step);
  }
}
