// Megatron's vocab-parallel ops: one rank holds rows [vStart, vStart + Vl) of the (padded)
// vocabulary. The collectives between the passes are not here (kernels never talk to the
// network): the model calls its tensor-parallel operators between them.
//   vocabEmbeddingForward:  out (B,T,C) = own token rows (else 0) [+ wpe on one rank]; all-reduce(sum) gives wte[idx] + wpe
//   vocabEmbeddingBackward: dwteShard += scatter of dout over own tokens; dwpe += dout summed over B
//   vocabCrossEntropy:      stats (rowMax, targetLogit) -> all-reduce max / sum -> sumexp -> all-reduce sum -> loss (+ dlogits in place)
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, scratch } from './util.js';

export interface VocabRange {
  /** first vocabulary id of this rank's rows */
  vStart: number;
  /** rows of this rank (the padded vocabulary / TP size) */
  Vl: number;
}

export interface VocabEmbeddingForwardArgs extends VocabRange {
  out: GpuTensor; // (B, T, C)
  idx: GpuTensor; // u32 (B, T)
  wte: GpuTensor; // (Vl, C)
  wpe: GpuTensor; // (maxT, C)
  B: number;
  T: number;
  C: number;
  /** add the position row (exactly one rank of the group does) */
  addPositions: boolean;
}

export function vocabEmbeddingForward(rt: Runtime, a: VocabEmbeddingForwardArgs): Dispatch[] {
  const { out, idx, wte, wpe, B, T, C, vStart, Vl } = a;
  const op = 'vocabEmbeddingForward';
  assertSize(op, 'out', out, B * T * C);
  assertSize(op, 'idx', idx, B * T);
  assertSize(op, 'wte', wte, Vl * C);
  if (wpe.numel < T * C) throw new Error(`${op}: wpe has ${wpe.numel} elements, needs at least T*C = ${T * C}`);
  assertNoAliasing(op, { out }, { idx, wte, wpe });
  const n = B * T * C;
  if (n === 0) return [];
  const params = packParams([B * T, T, C, vStart, Vl, a.addPositions ? 1 : 0, 0, 0]);
  return [
    rt.prepare(
      `vocabEmbeddingForward ${B}x${T}x${C} v${vStart}+${Vl}`,
      kernel(rt, 1, 'vocab-embedding'),
      [out, idx, wte, wpe],
      params,
      grid(rt, n / 256),
    ),
  ];
}

export interface VocabEmbeddingBackwardArgs extends VocabRange {
  dwte: GpuTensor; // (Vl, C), accumulated into
  dwpe: GpuTensor; // (maxT, C), accumulated into
  dout: GpuTensor; // (B, T, C)
  idx: GpuTensor; // u32 (B, T)
  B: number;
  T: number;
  C: number;
}

export function vocabEmbeddingBackward(rt: Runtime, a: VocabEmbeddingBackwardArgs): Dispatch[] {
  const { dwte, dwpe, dout, idx, B, T, C, vStart, Vl } = a;
  const op = 'vocabEmbeddingBackward';
  assertSize(op, 'dwte', dwte, Vl * C);
  if (dwpe.numel < T * C) throw new Error(`${op}: dwpe has ${dwpe.numel} elements, needs at least T*C = ${T * C}`);
  assertSize(op, 'dout', dout, B * T * C);
  assertSize(op, 'idx', idx, B * T);
  assertNoAliasing(op, { dwte, dwpe }, { dout, idx });
  const BT = B * T;
  if (BT * C === 0) return [];
  const links = scratch(rt, 'encoder.links', 2 * BT);
  return [
    rt.prepare(`encoderBackward.links ${BT}`, kernel(rt, 1, 'encoder-links'), [links, idx], packParams([BT, 0, 0, 0]), grid(rt, BT / 64)),
    rt.prepare(
      `vocabEmbeddingBackward ${B}x${T}x${C} v${vStart}+${Vl}`,
      kernel(rt, 1, 'vocab-embedding-backward'),
      [dwte, dwpe, dout, idx, links],
      packParams([BT, T, C, B, vStart, Vl, 0, 0]),
      grid(rt, (BT * C + T * C) / 64),
    ),
  ];
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
  return {
    stats: [
      rt.prepare(
        `vocabCrossEntropy.stats ${tag}`,
        kernel(rt, 1, 'vocab-ce-stats'),
        [rowMax, targetLogit, logits, targets],
        packParams([N, Vl, vValid, vStart]),
        g,
      ),
    ],
    sumExp: [
      rt.prepare(
        `vocabCrossEntropy.sumexp ${tag}`,
        kernel(rt, 1, 'vocab-ce-sumexp'),
        [rowSum, rowMax, logits],
        packParams([N, Vl, vValid, 0]),
        g,
      ),
    ],
    finish: [
      rt.prepare(
        `vocabCrossEntropy.${a.writeGrad ? 'grad' : 'loss'} ${tag}`,
        kernel(rt, 1, 'vocab-ce-grad'),
        [losses, logits, targets, rowMax, rowSum, targetLogit],
        packParams([N, Vl, vValid, vStart, V, a.writeGrad ? 1 : 0, { f32: a.dlossScale }, 0]),
        g,
      ),
    ],
  };
}
