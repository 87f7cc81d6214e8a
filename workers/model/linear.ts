// Linear layers y = x @ W^T + b, W (OC, C), as Megatron's tensor parallelism splits them over a
// group of TP ranks. Each helper prepares its forward and its backward in one place, as llm.c's
// matmul_forward / matmul_backward do: the input, weight and bias gradients together,
//   dx = dy @ W;  dW += dy^T @ x;  db += colsum(dy)
// and places the group's conjugate operators (tensor-parallel.ts) around them:
//   column-parallel: W split by output rows:  y_r = f(x) @ W_r^T + b_r   (N, OC/TP); dx = f'(dy_r @ W_r)
//   row-parallel:    W split by input columns, x_r (N, C/TP) likewise:  y = res + g(x_r @ W_r^T) + b
// For a group of one the operators are the identity and are not recorded at all (Megatron's
// mappings return early at preparation time here), and the row-parallel residual and bias fold
// into the matmul: y = res, then y += x @ W^T + b.
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { biasBackward } from '../kernels/bias-backward.js';
import { biasResidual } from '../kernels/bias-residual.js';
import { matmul } from '../kernels/matmul.js';
import type { ParamRef } from './params.js';
import type { TensorParallelOps, TpLabels } from './tensor-parallel.js';
import { type LayerCommands, CommandList } from './command-list.js';

/** backward reads dy, writes dx and accumulates the weight and bias gradients */
export interface LinearArgs {
  x: GpuTensor; // (N, C) input (this rank's columns for a row-parallel layer)
  y: GpuTensor; // (N, OC) output (this rank's columns for a column-parallel layer)
  dx: GpuTensor; // (N, C) gradient of the input, written by backward
  dy: GpuTensor; // (N, OC) gradient of the output, read by backward
  w: ParamRef; // (OC, C) this rank's shard
  b?: ParamRef; // (OC)
  N: number;
  C: number;
  OC: number;
  /** span labels of the layer's collectives (layer, half) */
  labels: TpLabels;
}

function linearForward(rt: Runtime, a: LinearArgs, out: GpuTensor, bias: ParamRef | undefined, accumulate: boolean): Dispatch[] {
  return matmul(rt, { out, a: a.x, b: a.w.param, bias: bias?.param, M: a.N, N: a.OC, K: a.C, transB: true, accumulate });
}

function linearBackward(rt: Runtime, { x, dx, dy, w, b, N, C, OC }: LinearArgs): Dispatch[] {
  return [
    ...matmul(rt, { out: dx, a: dy, b: w.param, M: N, N: C, K: OC }),
    ...matmul(rt, { out: w.grad, a: dy, b: x, M: OC, N: C, K: N, transA: true, accumulate: true }),
    ...(b ? biasBackward(rt, { dbias: b.grad, dout: dy, M: N, N: OC, accumulate: true }) : []),
  ];
}

/** y_r = f(x) @ W_r^T + b_r: the input is replicated, the output split by columns. */
export function columnParallelLinear(rt: Runtime, tp: TensorParallelOps, a: LinearArgs): LayerCommands {
  const forward = new CommandList();
  const backward = new CommandList().run(linearBackward(rt, a));
  if (tp.size > 1) {
    forward.collective((pass) => tp.f.forward(a.x, { ...a.labels, pass }));
    backward.collective(() => tp.f.backward(a.dx, a.labels));
  }
  forward.run(linearForward(rt, a, a.y, a.b, false));
  return { forward, backward };
}

export interface RowParallelArgs extends LinearArgs {
  b: ParamRef; // (OC) replicated, added once after the all-reduce
  /** (N, OC) the residual stream the output adds onto */
  res: GpuTensor;
  /** (N, OC) the partial products all-reduced in place (a group of more than one) */
  partial: GpuTensor | null;
}

export interface RowParallelCommands extends LayerCommands {
  /**
   * y = res for the matmul to accumulate onto (a group of one; empty otherwise). Record it any
   * time after res is final and before forward: the block records it early, so its launches
   * stay one compute pass.
   */
  init: CommandList;
}

/** y = res + g(x_r @ W_r^T) + b: the input split by columns, the output replicated. */
export function rowParallelLinear(rt: Runtime, tp: TensorParallelOps, a: RowParallelArgs): RowParallelCommands {
  const init = new CommandList();
  const forward = new CommandList();
  const backward = new CommandList();
  if (tp.size === 1) {
    init.copy(a.res, a.y);
    forward.run(linearForward(rt, a, a.y, a.b, true));
  } else {
    if (!a.partial) throw new Error('a row-parallel linear over several ranks needs a buffer for its partial products');
    const partial = a.partial;
    forward
      .run(linearForward(rt, a, partial, undefined, false))
      .collective((pass) => tp.g.forward(partial, { ...a.labels, pass }))
      .run(biasResidual(rt, { out: a.y, res: a.res, sum: partial, bias: a.b.param, N: a.N, C: a.OC }));
    backward.collective(() => tp.g.backward(a.dy, a.labels));
  }
  backward.run(linearBackward(rt, a));
  return { init, forward, backward };
}
