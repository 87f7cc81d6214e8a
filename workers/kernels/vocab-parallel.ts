// Megatron's vocab-parallel ops: one rank holds rows [vStart, vStart + Vl) of the (padded)
// vocabulary. The collectives between the passes are not here (kernels never talk to the
// network): the model calls its tensor-parallel operators between them.
//   vocabEmbeddingForward:  out (B,T,C) = own token rows (else 0) [+ wpe on one rank]; all-reduce(sum) gives wte[idx] + wpe
//   vocabEmbeddingBackward: dwteShard += scatter of dout over own tokens; dwpe += dout summed over B
//   vocabCrossEntropy:      stats (rowMax, targetLogit) -> all-reduce max / sum -> sumexp -> all-reduce sum -> loss (+ dlogits in place)
// The logits shard and the embedding tables are compute-precision tensors; the row statistics and
// losses stay f32. 16-bit logits are read 4 at a time: Vl (the padded vocabulary / TP size) must
// be a multiple of 4, i.e. the vocabulary padded to a multiple of 4 x TP. fp32 logits are read one
// at a time (the fp32 path keeps its instructions).
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel, type Width } from './source.js';
import { embeddingBackward, type EmbeddingBackwardArgs, embeddingForward, type EmbeddingForwardArgs, type VocabRange } from './encoder.js';
import { assertNoAliasing, assertSize, grid, precisionFor, storageWidth } from './util.js';

export type { VocabRange };

/** wte (Vl, C): this rank's rows; addPositions on exactly one rank of the group. */
export type VocabEmbeddingForwardArgs = EmbeddingForwardArgs;

/** Embedding forward of this rank's rows (encoder.ts: the single device's kernel). */
export function vocabEmbeddingForward(rt: Runtime, a: VocabEmbeddingForwardArgs): Dispatch[] {
  return embeddingForward(rt, 'vocabEmbeddingForward', a);
}

/** dwte (Vl, C): this rank's rows; dwpe (maxT, C) gets the whole gradient on every rank. */
export type VocabEmbeddingBackwardArgs = EmbeddingBackwardArgs;

/** Embedding backward of this rank's rows (encoder.ts: the single device's kernels). */
export function vocabEmbeddingBackward(rt: Runtime, a: VocabEmbeddingBackwardArgs): Dispatch[] {
  return embeddingBackward(rt, 'vocabEmbeddingBackward', a);
}

export interface VocabCrossEntropyArgs extends VocabRange {
  losses: GpuTensor; // (N)
  logits: GpuTensor; // (N, Vl); holds dlogits after `finish` when writeGrad
  targets: GpuTensor; // u32 (N)
  rowMax: GpuTensor; // (N)
  rowSum: GpuTensor; // (N)
  targetLogit: GpuTensor; // (N)
  N: number;
  /** real vocabulary size (ids >= V are padding columns, masked out; targets >= V are ignored rows) */
  V: number;
  /** write dlogits = (softmax - onehot) * dlossScale over the logits */
  writeGrad: boolean;
  dlossScale: number;
  /** loss-scaling multiplier (default 1): dlogits = (softmax - onehot) * dlossScale * scale (crossentropy.ts) */
  scale?: number;
}

/** The three passes; between them the caller all-reduces rowMax (max), targetLogit (sum), then rowSum (sum). */
export interface VocabCrossEntropyPasses {
  stats: Dispatch[];
  sumExp: Dispatch[];
  finish: Dispatch[];
}

export function vocabCrossEntropy(rt: Runtime, a: VocabCrossEntropyArgs): VocabCrossEntropyPasses {
  const { losses, logits, targets, rowMax, rowSum, targetLogit, N, V, vStart, Vl } = a;
  const op = 'vocabCrossEntropy';
  for (const [name, t] of [
    ['losses', losses],
    ['targets', targets],
    ['rowMax', rowMax],
    ['rowSum', rowSum],
    ['targetLogit', targetLogit],
  ] as const)
    assertSize(op, name, t, N);
  assertSize(op, 'logits', logits, N * Vl);
  assertNoAliasing(op, { losses, logits, rowMax, rowSum, targetLogit }, { targets });
  assertNoAliasing(op, { rowMax, targetLogit }, { logits, rowSum, losses });
  // columns of this shard that are real tokens (the last shards may hold padding only)
  const vValid = Math.max(0, Math.min(Vl, V - vStart));
  if (N === 0) return { stats: [], sumExp: [], finish: [] };
  const g = grid(rt, N / 64);
  const tag = `${N}x${Vl} v${vStart}`;
  const p = precisionFor(op, { logits });
  const vl = {
    name: "Vl (this rank's vocabulary rows)",
    n: Vl,
    hint: 'pad the vocabulary to a multiple of 4 x TP (tp-layout.ts paddedVocab)',
  };
  const w: Width = p === 'fp32' ? 1 : storageWidth(op, p, vl, logits);
  return {
    stats: [
      rt.prepare(
        `vocabCrossEntropy.stats ${tag}`,
        kernel(rt, w, 'vocab-ce-stats', 'main', p),
        [rowMax, targetLogit, logits, targets],
        packParams([N, Vl, vValid, vStart]),
        g,
      ),
    ],
    sumExp: [
      rt.prepare(
        `vocabCrossEntropy.sumexp ${tag}`,
        kernel(rt, w, 'vocab-ce-sumexp', 'main', p),
        [rowSum, rowMax, logits],
        packParams([N, Vl, vValid, 0]),
        g,
      ),
    ],
    finish: [
      rt.prepare(
        `vocabCrossEntropy.${a.writeGrad ? 'grad' : 'loss'} ${tag}`,
        kernel(rt, w, 'vocab-ce-grad', 'main', p),
        [losses, logits, targets, rowMax, rowSum, targetLogit],
        packParams([N, Vl, vValid, vStart, V, a.writeGrad ? 1 : 0, { f32: a.dlossScale * (a.scale ?? 1) }, 0]),
        g,
      ),
    ],
  };
}
