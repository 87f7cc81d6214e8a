// Megatron-LM tensor parallelism as a strategy: the model (built with these ops) holds only its rank's shards
// and calls TensorParallelOps at its f/g points; this file implements them on a process group
// (device -> host -> all-reduce -> device), and owns what crosses the shards: the global
// gradient norm, the optimizer step, and gathering full tensors for checkpoints.
import type { ProcessGroup } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import type { Gpt } from '../model/gpt.js';
import type { TensorParallelOps, TpLabels } from '../model/tensor-parallel.js';
import { shardModel, unshardTensor } from '../model/tp-layout.js';
import type { ParamRef } from '../model/params.js';
import type { AdamW } from '../optim/adamw.js';
import { GradSquares, reduceNormSq } from './grad-norm.js';
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

/** Whole tensors in the single-device layout from every TP rank's shards of `refs` (collective over the group). */
export async function unshardOverGroup(
  config: GptConfig,
  refs: readonly ParamRef[],
  local: Map<string, Float32Array>,
  g: ProcessGroup,
): Promise<Map<string, Float32Array>> {
  const per = refs.reduce((s, r) => s + r.numel, 0);
  const flat = new Float32Array(per);
  let o = 0;
  for (const r of refs) {
    flat.set(local.get(r.name)!, o);
    o += r.numel;
  }
  const all =
    g.size > 1 ? await g.allGather(flat, { output: new Float32Array(per * g.size), labels: { tp: 1, what: 'checkpoint' } }).wait() : flat;
  const specs = new Map(paramSpecs(config).map((s) => [s.name, s]));
  const out = new Map<string, Float32Array>();
  o = 0;
  for (const r of refs) {
    const shards = Array.from({ length: g.size }, (_, k) => all.subarray(k * per + o, k * per + o + r.numel));
    out.set(r.name, unshardTensor(specs.get(r.name)!, shards, g.size));
    o += r.numel;
  }
  return out;
}

export class TensorParallel implements Strategy {
  readonly name = 'tp';
  private readonly squares: GradSquares;

  constructor(private readonly c: TensorParallelContext) {
    // the sharded gradients' squares summed over the group, the replicated ones (the same on
    // every rank) counted once, as a single device would sum them all
    this.squares = new GradSquares(c.rt, c.model.params, { tensorParallel: true });
  }

  async setup() {}
  beforeBackward() {}
  async finishGradients() {}

  async optimizerStep(lr: number): Promise<number> {
    const { rt, opt, tp } = this.c;
    const total = await reduceNormSq(await this.squares.read(), { tp });
    rt.write(opt.gradSumSq, new Float32Array([total]));
    opt.recordStep(lr);
    return Math.sqrt(total);
  }

  private gather(local: Map<string, Float32Array>) {
    return unshardOverGroup(this.c.model.config, this.c.model.params.refs, local, this.c.tp);
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
