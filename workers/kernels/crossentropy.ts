// Softmax cross-entropy over the vocabulary, fused with its gradient.
//   crossEntropyForward:  losses (N) = -log softmax(logits (N, V))[targets]
//   softmaxCrossEntropy:  the same losses and dlogits (N, V) = (softmax - onehot(targets)) * dlossScale * scale,
//                         in place: dlogits is the logits tensor (saves an (N, V) buffer)
// Both run crossentropy.wgsl; its writeGrad flag says whether the gradient overwrites the logits.
// targets are u32 (N); a target >= V marks a row to ignore (loss 0, gradient 0).
// The logits are a compute-precision tensor; the losses and every softmax statistic stay f32.
// 16-bit logits are read 4 at a time: their rows must be a multiple of 4 long, so a vocabulary
// that is not (27, 13 for the built-in datasets) is padded to Vp columns (llm.c pads GPT-2's
// 50257 to 50304): logits (N, Vp), columns V .. Vp-1 masked out of the softmax, their gradient 0.
// fp32 logits are read one at a time (the fp32 path keeps its instructions).
import type { GpuTensor } from '../gpu/allocator.js';
import type { StoragePrecision } from '../gpu/precision.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel, type Width } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, sameTensor, storageWidth } from './util.js';

export interface CrossEntropyForwardArgs {
  losses: GpuTensor; // (N)
  logits: GpuTensor; // (N, Vp)
  targets: GpuTensor; // u32 (N)
  N: number;
  /** vocabulary size: columns >= V are padding, targets >= V ignored rows */
  V: number;
  /** row length of logits, >= V (default V); 16-bit logits need Vp % 4 == 0 */
  Vp?: number;
}

export interface SoftmaxCrossEntropyArgs extends CrossEntropyForwardArgs {
  dlogits: GpuTensor; // (N, Vp), the logits tensor itself
  /** gradient of the total loss per row's loss, e.g. 1 / N for a mean */
  dlossScale: number;
  /**
   * loss-scaling multiplier of the gradient (default 1): fp16's dynamic loss scale seeds backward
   * with dloss = scale / N, so dlogits = (softmax - onehot) * dlossScale * scale. The product is
   * taken in double and rounded to f32 once (exact for a power-of-two scale).
   */
  scale?: number;
}

/** The width of one launch: fp32 reads one element at a time, 16-bit storage 4 (row length Vp % 4 == 0). */
function widthOf(op: string, logits: GpuTensor, Vp: number): { p: StoragePrecision; w: Width } {
  const p = precisionFor(op, { logits });
  if (p === 'fp32') return { p, w: 1 };
  return {
    p,
    w: storageWidth(
      op,
      p,
      { name: 'Vp (the logits row length)', n: Vp, hint: 'pad the vocabulary to a multiple of 4 (logits (N, Vp), Vp >= V) and pass Vp' },
      logits,
    ),
  };
}

function checkShape(op: string, V: number, Vp: number) {
  if (!Number.isInteger(Vp) || Vp < V)
    throw new Error(`${op}: Vp = ${Vp} is shorter than the vocabulary V = ${V}; Vp is the logits row length, V plus padding columns`);
}

export function crossEntropyForward(rt: Runtime, { losses, logits, targets, N, V, Vp = V }: CrossEntropyForwardArgs): Dispatch[] {
  const op = 'crossEntropyForward';
  checkShape(op, V, Vp);
  assertSize(op, 'losses', losses, N);
  assertSize(op, 'logits', logits, N * Vp);
  assertSize(op, 'targets', targets, N);
  assertNoAliasing(op, { losses }, { logits, targets });
  if (N === 0) return [];
  const { p, w } = widthOf(op, logits, Vp);
  return [
    rt.prepare(
      `crossEntropyForward ${N}x${V}${Vp === V ? '' : `/${Vp}`}`,
      kernel(rt, w, 'crossentropy', 'main', p),
      [losses, logits, targets],
      packParams([N, V, Vp, 0, 0, 0, 0, 0]),
      grid(rt, N / 64),
    ),
  ];
}

export function softmaxCrossEntropy(
  rt: Runtime,
  { losses, dlogits, logits, targets, N, V, Vp = V, dlossScale, scale = 1 }: SoftmaxCrossEntropyArgs,
): Dispatch[] {
  const op = 'softmaxCrossEntropy';
  checkShape(op, V, Vp);
  assertSize(op, 'losses', losses, N);
  assertSize(op, 'dlogits', dlogits, N * Vp);
  assertSize(op, 'logits', logits, N * Vp);
  assertSize(op, 'targets', targets, N);
  if (!sameTensor(dlogits, logits)) {
    throw new Error(
      `${op}: dlogits (${dlogits.name}) is not the logits tensor (${logits.name}); the kernel writes the gradient over the logits. ---> HINT: pass logits as dlogits`,
    );
  }
  assertNoAliasing(op, { losses, logits }, { targets });
  if (N === 0) return [];
  const { p, w } = widthOf(op, logits, Vp);
  return [
    rt.prepare(
      `softmaxCrossEntropy.inplace ${N}x${V}${Vp === V ? '' : `/${Vp}`}`,
      kernel(rt, w, 'crossentropy', 'main', p),
      [losses, logits, targets],
      packParams([N, V, Vp, 1, { f32: dlossScale * scale }, 0, 0, 0]),
      grid(rt, N / 64),
    ),
  ];
}
