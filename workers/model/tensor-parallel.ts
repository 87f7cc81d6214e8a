// What a tensor-parallel model needs from its group, injected by workers/parallel (the model
// never talks to the network). The model places Megatron's conjugate operators with it:
//   f: identity in forward, all-reduce of the gradient in backward (before a column-parallel linear)
//   g: all-reduce in forward, identity in backward (after a row-parallel linear)
// With one rank they are the identity, and the model records none of them (linear.ts).
import type { GpuTensor } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';

export type TpLabels = Record<string, string | number>;

/** One of Megatron's conjugate operators, applied in place to the tensor at its point of the graph. */
export interface ConjugateOp {
  forward(t: GpuTensor, labels: TpLabels): Promise<void>;
  backward(t: GpuTensor, labels: TpLabels): Promise<void>;
}

export interface TensorParallelOps {
  /** this rank's index in the tensor-parallel group, and the group's size T */
  readonly rank: number;
  readonly size: number;
  /** identity forward, all-reduce backward: the input of a column-parallel linear */
  readonly f: ConjugateOp;
  /** all-reduce forward, identity backward: the output of a row-parallel linear */
  readonly g: ConjugateOp;
  /** reduce `t` over the group in place (the vocab-parallel cross-entropy's max and sums) */
  allReduce(t: GpuTensor, labels: TpLabels, op?: 'sum' | 'max'): Promise<void>;
  /** `full` = every rank's `own` (equal sizes) concatenated in rank order */
  allGather(own: GpuTensor, full: GpuTensor, labels: TpLabels): Promise<void>;
}

export interface TensorParallelOptions {
  ops: TensorParallelOps;
  /**
   * DeepSpeed's partition_activations: with activation checkpointing, keep only this rank's
   * 1/T slice of each checkpointed block input and all-gather it before recomputation
   */
  partitionActivations?: boolean;
}

const identity = async () => {};

/** A tensor-parallel group of one rank, the model's default: every operator is the identity. */
export class SingleRankTpOps implements TensorParallelOps {
  readonly rank = 0;
  readonly size = 1;
  readonly f = { forward: identity, backward: identity };
  readonly g = { forward: identity, backward: identity };
  constructor(private readonly rt: Runtime) {}
  async allReduce() {}
  async allGather(own: GpuTensor, full: GpuTensor) {
    this.rt.copy(own, full);
  }
}
