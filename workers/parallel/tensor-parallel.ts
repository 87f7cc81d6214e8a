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
import { unshardTensor, vocabAlign } from '../model/tp-layout.js';
import type { ParamRef } from '../model/params.js';
import type { AdamW } from '../optim/adamw.js';
import { allReduceTensor, allGatherTensor } from '../precision/tensor-wire.js';
import { GradSquares, reduceNormSq } from './grad-norm.js';
import type { OptimizerState, RankStrategy } from './strategy.js';

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

  // at the tensor's precision: 16-bit activations and gradients travel as 16 bits (precision/tensor-wire.ts)
  async allReduce(t: GpuTensor, labels: TpLabels, op: 'sum' | 'max' = 'sum') {
    if (this.size > 1) await allReduceTensor(this.rt, this.pg, t, { op, labels: { tp: 1, ...labels } });
  }

  async allGather(own: GpuTensor, full: GpuTensor, labels: TpLabels) {
    if (this.size === 1) this.rt.copy(own, full);
    else await allGatherTensor(this.rt, this.pg, own, full, { tp: 1, ...labels });
  }
}

export interface TensorParallelContext {
  rt: Runtime;
  model: Gpt;
  opt: AdamW;
  /** the tensor-parallel group */
  tp: ProcessGroup;
}

/**
 * Whole tensors in the single-device layout from every TP rank's shards of `refs` (collective over
 * the group; none: this rank's tensors are whole, wte only loses its padding rows). `align`: the
 * vocabulary padding of the shards (tp-layout.ts vocabAlign of the store's precision).
 */
export async function unshardOverGroup(
  config: GptConfig,
  refs: readonly ParamRef[],
  local: Map<string, Float32Array>,
  g: ProcessGroup | null,
  align = 1,
): Promise<Map<string, Float32Array>> {
  const [per, size] = [refs.reduce((s, r) => s + r.numel, 0), g?.size ?? 1];
  const flat = new Float32Array(per);
  let o = 0;
  for (const r of refs) {
    flat.set(local.get(r.name)!, o);
    o += r.numel;
  }
  const all =
    g && size > 1 ? await g.allGather(flat, { output: new Float32Array(per * size), labels: { tp: 1, what: 'checkpoint' } }).wait() : flat;
  const specs = new Map(paramSpecs(config).map((s) => [s.name, s]));
  const out = new Map<string, Float32Array>();
  o = 0;
  for (const r of refs) {
    const shards = Array.from({ length: size }, (_, k) => all.subarray(k * per + o, k * per + o + r.numel));
    out.set(r.name, unshardTensor(specs.get(r.name)!, shards, size, align));
    o += r.numel;
  }
  return out;
}

/**
 * Mixed precision (a bf16 or fp16 store): 16-bit weights, gradients and activations, the fp32
 * master and moments in the optimizer (2 + 2 + 12 bytes per local parameter); the f/g
 * all-reduces carry 16 bits. Every rank's norm is the same all-reduced sum, so an fp16 overflow
 * skips the step on every rank.
 */
export class TensorParallel implements RankStrategy {
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

  async optimizerStep(lr: number, gradScale = 1): Promise<number> {
    const { rt, opt, tp } = this.c;
    const total = await reduceNormSq(await this.squares.read(), { tp });
    rt.write(opt.gradSumSq, new Float32Array([total]));
    opt.recordStep(lr, gradScale);
    return opt.settle(total, gradScale);
  }

  private gather(local: Map<string, Float32Array>) {
    const { params } = this.c.model;
    return unshardOverGroup(this.c.model.config, params.refs, local, this.c.tp, vocabAlign(params.precision));
  }

  /** The full model's weights in the single-device layout (collective). */
  async fullParams(): Promise<Map<string, Float32Array>> {
    return this.gather(await this.c.model.params.readParams());
  }

  async optimizerState(): Promise<OptimizerState | null> {
    const { opt } = this.c;
    const s = await opt.readState();
    const master = opt.master ? { master: await this.gather(await opt.readMaster()) } : {};
    return { m: await this.gather(s.m), v: await this.gather(s.v), step: opt.step, ...master };
  }

  /** this rank's shards (precision/rank-weights.ts takes them from the whole model) */
  loadOptimizerState(s: OptimizerState) {
    this.c.opt.writeState(s, s.step);
  }

  loadMasterWeights(values: Map<string, Float32Array>) {
    this.c.opt.writeMaster(values);
  }
}
