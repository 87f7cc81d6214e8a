// Softmax cross-entropy over the vocabulary, fused with its gradient.
//   crossEntropyForward:  losses (N) = -log softmax(logits (N, V))[targets]
//   softmaxCrossEntropy:  the same losses and dlogits (N, V) = (softmax - onehot(targets)) * dlossScale,
//                         in place: dlogits is the logits tensor (saves an (N, V) buffer)
// Both run crossentropy.wgsl; its writeGrad flag says whether the gradient overwrites the logits.
// targets are u32 (N); a target >= V marks a row to ignore (loss 0, gradient 0).
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, sameTensor } from './util.js';

export interface CrossEntropyForwardArgs {
  losses: GpuTensor; // (N)
  logits: GpuTensor; // (N, V)
  targets: GpuTensor; // u32 (N)
  N: number;
  V: number;
}

export interface SoftmaxCrossEntropyArgs extends CrossEntropyForwardArgs {
  dlogits: GpuTensor; // (N, V), the logits tensor itself
  /** gradient of the total loss per row's loss, e.g. 1 / N for a mean */
  dlossScale: number;
}

export function crossEntropyForward(rt: Runtime, { losses, logits, targets, N, V }: CrossEntropyForwardArgs): Dispatch[] {
  const op = 'crossEntropyForward';
  assertSize(op, 'losses', losses, N);
  assertSize(op, 'logits', logits, N * V);
  assertSize(op, 'targets', targets, N);
  assertNoAliasing(op, { losses }, { logits, targets });
  if (N === 0) return [];
  return [
    rt.prepare(
      `crossEntropyForward ${N}x${V}`,
      kernel(rt, 1, 'crossentropy'),
      [losses, logits, targets],
      packParams([N, V, 0, 0]),
      grid(rt, N / 64),
    ),
  ];
}

export function softmaxCrossEntropy(
  rt: Runtime,
  { losses, dlogits, logits, targets, N, V, dlossScale }: SoftmaxCrossEntropyArgs,
): Dispatch[] {
  const op = 'softmaxCrossEntropy';
  assertSize(op, 'losses', losses, N);
  assertSize(op, 'dlogits', dlogits, N * V);
  assertSize(op, 'logits', logits, N * V);
  assertSize(op, 'targets', targets, N);
  if (!sameTensor(dlogits, logits)) {
    throw new Error(
      `${op}: dlogits (${dlogits.name}) is not the logits tensor (${logits.name}); the kernel writes the gradient over the logits. ---> HINT: pass logits as dlogits`,
    );
  }
  assertNoAliasing(op, { losses, logits }, { targets });
  if (N === 0) return [];
  return [
    rt.prepare(
      `softmaxCrossEntropy.inplace ${N}x${V}`,
      kernel(rt, 1, 'crossentropy'),
      [losses, logits, targets],
      packParams([N, V, { f32: dlossScale }, 1]),
      grid(rt, N / 64),
    ),
  ];
}
