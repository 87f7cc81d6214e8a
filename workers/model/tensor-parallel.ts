// What a tensor-parallel model needs from its group, injected by workers/parallel (the model
// never talks to the network). The model places Megatron's conjugate operators with it:
//   f: identity in forward, all-reduce of the gradient in backward (before a column-parallel linear)
//   g: all-reduce in forward, identity in backward (after a row-parallel linear)
// With one rank every call returns at once.
import type { GpuTensor } from '../gpu/allocator.js';

export type TpLabels = Record<string, string | number>;

export interface TensorParallelOps {
  /** this rank's index in the tensor-parallel group, and the group's size T */
  readonly rank: number;
  readonly size: number;
  /** reduce `t` over the group in place (sum, or max for the cross-entropy's row maxima) */
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
