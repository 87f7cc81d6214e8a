// Megatron's vocab-parallel embedding and cross-entropy: rank r of the tensor-parallel group
// holds rows [vStart, vStart + Vl) of wte (tp-layout.ts), so neither the embedding lookup nor
// the logits (N, Vl) are ever gathered:
//   embedding:     out = g(own token rows of wte[idx], else 0, + wpe on rank 0)
//   cross-entropy: all-reduce the row max, the target logit and the sum of exponentials
// For a group of one these are the single-device kernels (encoder, fused softmax cross-entropy)
// and nothing is communicated. At 16-bit storage the vocabulary is padded (vocabAlign, tp-layout.ts):
// a rank's rows Vl are its wte's (and its logits' row length), the cross-entropy masks the padding.
import type { GpuTensor } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import { crossEntropyForward, softmaxCrossEntropy } from '../kernels/crossentropy.js';
import { encoderBackward, encoderForward } from '../kernels/encoder.js';
import { vocabCrossEntropy, vocabEmbeddingBackward, vocabEmbeddingForward } from '../kernels/vocab-parallel.js';
import type { ParamRef } from './params.js';
import type { TensorParallelOps } from './tensor-parallel.js';
import { type LayerCommands, CommandList } from './command-list.js';

export interface EmbeddingArgs {
  out: GpuTensor; // (B, T, C) resid[0]
  dout: GpuTensor; // (B, T, C) its gradient
  idx: GpuTensor; // u32 (B, T)
  wte: ParamRef; // (Vl, C) this rank's rows
  wpe: ParamRef; // (block_size, C)
  B: number;
  T: number;
  C: number;
}

/** resid[0] = wte[idx] + wpe[t]; backward scatters dout into dwte and sums it into dwpe. */
export function vocabParallelEmbedding(rt: Runtime, tp: TensorParallelOps, a: EmbeddingArgs): LayerCommands {
  const { out, dout, idx, B, T, C, wte, wpe } = a;
  const Vl = wte.shape[0]!;
  const vStart = tp.rank * Vl;
  if (tp.size === 1)
    return {
      forward: new CommandList().run(encoderForward(rt, { out, idx, wte: wte.param, wpe: wpe.param, B, T, C })),
      backward: new CommandList().run(encoderBackward(rt, { dwte: wte.grad, dwpe: wpe.grad, dout, idx, B, T, C, V: Vl })),
    };
  const forward = new CommandList()
    .run(vocabEmbeddingForward(rt, { out, idx, wte: wte.param, wpe: wpe.param, B, T, C, vStart, Vl, addPositions: tp.rank === 0 }))
    .collective((pass) => tp.g.forward(out, { layer: 'embedding', half: 'vocab', pass }));
  const backward = new CommandList().run(vocabEmbeddingBackward(rt, { dwte: wte.grad, dwpe: wpe.grad, dout, idx, B, T, C, vStart, Vl }));
  return { forward, backward };
}

/** A group of more than one: each row's statistics, all-reduced between the cross-entropy's passes. */
export interface RowStats {
  rowMax: GpuTensor; // (N)
  rowSum: GpuTensor; // (N)
  targetLogit: GpuTensor; // (N)
}

export interface CrossEntropyArgs {
  losses: GpuTensor; // (N)
  logits: GpuTensor; // (N, Vl) this rank's vocabulary rows; holds dlogits after training's pass
  targets: GpuTensor; // u32 (N)
  stats: RowStats | null;
  N: number;
  V: number;
  /** dlogits = (softmax - onehot) * dlossScale * scale */
  dlossScale: number;
  /** fp16's loss scale: the gradient's multiplier (default 1) */
  scale?: number;
}

/** Per-token losses; in training also dlogits, in place over the logits (padding columns masked out, gradient 0). */
export function vocabParallelCrossEntropy(
  rt: Runtime,
  tp: TensorParallelOps,
  a: CrossEntropyArgs,
): { train: CommandList; eval: CommandList } {
  const { losses, logits, targets, N, V, dlossScale, scale } = a;
  const Vl = logits.numel / N;
  const vStart = tp.rank * Vl;
  if (tp.size === 1) {
    // fp32 runs pass no Vp (their launches stay as they were)
    const Vp = Vl === V ? {} : { Vp: Vl };
    return {
      train: new CommandList().run(softmaxCrossEntropy(rt, { losses, dlogits: logits, logits, targets, N, V, ...Vp, dlossScale, scale })),
      eval: new CommandList().run(crossEntropyForward(rt, { losses, logits, targets, N, V, ...Vp })),
    };
  }
  if (!a.stats) throw new Error('a vocab-parallel cross-entropy over several ranks needs its row statistics buffers');
  const s = a.stats;
  const ce = (writeGrad: boolean) =>
    vocabCrossEntropy(rt, { losses, logits, targets, ...s, N, V, vStart, Vl, writeGrad, dlossScale, scale });
  const train = ce(true);
  const passes = (finish: typeof train.finish) =>
    new CommandList()
      .run(train.stats)
      .collective(() => tp.allReduce(s.rowMax, { layer: 'head', op: 'ce-max', pass: 'forward' }, 'max'))
      .collective(() => tp.allReduce(s.targetLogit, { layer: 'head', op: 'ce-target', pass: 'forward' }))
      .run(train.sumExp)
      .collective(() => tp.allReduce(s.rowSum, { layer: 'head', op: 'ce-sumexp', pass: 'forward' }))
      .run(finish);
  return { train: passes(train.finish), eval: passes(ce(false).finish) };
}
