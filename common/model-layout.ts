// The GPT's parameter tensors, described once: names, shapes, initialisation, weight decay and
// Megatron's tensor-parallel split. The rank engines build the model from this list
// (workers/model/config.ts paramSpecs, workers/model/tp-layout.ts), and the predictions made
// before launch (the launch form, the advisor, the memory charts' reference line) read the same
// list. What the engines lay out beyond it (the pipeline's stages, the 3D rank grid) is restated
// here as pure arithmetic, which tests/unit/model-layout.test.ts checks against workers/parallel
// and workers/protocol/grid.ts for many shapes. The stage split itself (partitionByCost) lives
// here only: the pipeline imports it. The padding rules (slots, ZeRO's shard bounds, the
// vocabulary's rows) live in common/padding.ts, which the rank engines import too.
//
// Per tensor, (rows, cols) as nanoGPT names them, C = d_model, V = vocabulary:
//   wte (V, C) · wpe (T, C) · per block: ln_1 w,b (C) · c_attn (3C, C) + b (3C) · attn.c_proj
//   (C, C) + b (C) · ln_2 w,b (C) · c_fc (4C, C) + b (4C) · mlp.c_proj (C, 4C) + b (C) · ln_f w,b (C)
// Under TP of T ranks: wte vocab-parallel (padded to a multiple of T, of 4T at 16-bit storage:
// Vp/T rows each; the pipeline's stages and single devices pad it to 4 at 16 bits too), c_attn
// (the q, k and v rows of each rank's heads) and c_fc (weights and biases) split by rows, the two
// c_proj weights split by columns, and wpe, the layernorms and the row-parallel biases replicated.
import { paddedVocab, vocabAlign } from './padding.js';
import type { Precision } from './precision.js';

/** The GPT's sizes. Dimension letters everywhere: B batch, T sequence, C d_model, V vocab, NH heads, hs = C / NH, L layers. */
export interface GptConfig {
  n_layer: number; // L
  n_head: number; // NH
  d_model: number; // C
  block_size: number; // max T (rows of wpe)
  vocab_size: number; // V
}

/** How tensor parallelism splits a tensor: 'qkv-rows' takes the rows of a rank's heads from each of q, k and v. */
export type ShardKind = 'replicated' | 'vocab' | 'qkv-rows' | 'rows' | 'cols';

export interface TensorLayout {
  name: string;
  /** block index, or null for the embeddings and the final layernorm */
  layer: number | null;
  /** as PyTorch holds it: [rows, cols], or [rows] for a vector */
  shape: number[];
  /** the shape as (rows, cols); a vector is (n, 1) */
  rows: number;
  cols: number;
  kind: ShardKind;
  /** nanoGPT applies weight decay to matrices and embeddings, not to biases and layernorms */
  decay: boolean;
  /** GPT-2's init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), layernorm weights 1, the rest 0 */
  init: { kind: 'normal'; std: number } | { kind: 'const'; value: number };
}

type Init = 'normal' | 'residual' | 'one' | 'zero';
/** name, (rows, cols) with cols null for a vector, split, init */
type Row = [string, number, number | null, ShardKind, Init];

/** one block's tensors, C = d_model */
const blockRows = (C: number): Row[] => [
  ['ln_1.weight', C, null, 'replicated', 'one'],
  ['ln_1.bias', C, null, 'replicated', 'zero'],
  ['attn.c_attn.weight', 3 * C, C, 'qkv-rows', 'normal'],
  ['attn.c_attn.bias', 3 * C, null, 'qkv-rows', 'zero'],
  ['attn.c_proj.weight', C, C, 'cols', 'residual'],
  ['attn.c_proj.bias', C, null, 'replicated', 'zero'],
  ['ln_2.weight', C, null, 'replicated', 'one'],
  ['ln_2.bias', C, null, 'replicated', 'zero'],
  ['mlp.c_fc.weight', 4 * C, C, 'rows', 'normal'],
  ['mlp.c_fc.bias', 4 * C, null, 'rows', 'zero'],
  ['mlp.c_proj.weight', C, 4 * C, 'cols', 'residual'],
  ['mlp.c_proj.bias', C, null, 'replicated', 'zero'],
];

/** Every parameter tensor in forward order (nanoGPT's names, PyTorch's layouts). */
export function gptTensors(m: Omit<GptConfig, 'n_head'>): TensorLayout[] {
  const C = m.d_model;
  const std = 0.02;
  const inits: Record<Init, TensorLayout['init']> = {
    normal: { kind: 'normal', std },
    residual: { kind: 'normal', std: std / Math.sqrt(2 * m.n_layer) },
    one: { kind: 'const', value: 1 },
    zero: { kind: 'const', value: 0 },
  };
  const t = (layer: number | null, [name, rows, cols, kind, init]: Row): TensorLayout => ({
    name,
    layer,
    shape: cols === null ? [rows] : [rows, cols],
    rows,
    cols: cols ?? 1,
    kind,
    decay: cols !== null,
    init: inits[init],
  });
  const out = [
    t(null, ['transformer.wte.weight', m.vocab_size, C, 'vocab', 'normal']),
    t(null, ['transformer.wpe.weight', m.block_size, C, 'replicated', 'normal']),
  ];
  for (let l = 0; l < m.n_layer; l++) out.push(...blockRows(C).map(([n, ...r]): TensorLayout => t(l, [`transformer.h.${l}.${n}`, ...r])));
  out.push(
    t(null, ['transformer.ln_f.weight', C, null, 'replicated', 'one']),
    t(null, ['transformer.ln_f.bias', C, null, 'replicated', 'zero']),
  );
  return out;
}

/** How tensor parallelism splits the tensor of this name (any size: the split depends on the name only). */
export function shardKind(name: string): ShardKind {
  if (name === 'transformer.wte.weight') return 'vocab';
  const inBlock = /^transformer\.h\.\d+\.(.+)$/.exec(name)?.[1];
  return blockRows(1).find(([n]) => n === inBlock)?.[3] ?? 'replicated';
}

/** Elements of one TP rank's shard of a tensor at a storage precision (T = 1: the whole tensor, wte's rows padded at 16 bits). */
export function tpLocalNumel(t: TensorLayout, T: number, precision: Precision = 'fp32'): number {
  switch (t.kind) {
    case 'replicated':
      return t.rows * t.cols;
    case 'vocab':
      return (paddedVocab(t.rows, T, vocabAlign(precision)) / T) * t.cols; // Vp/T rows of C (common/padding.ts)
    case 'qkv-rows':
    case 'rows':
      return (t.rows / T) * t.cols;
    case 'cols':
      return t.rows * (t.cols / T);
  }
}

/**
 * Blocks per stage, balanced by parameter count: consecutive blocks, at least one per stage; the
 * first stage also carries the embedding's parameters and the last the head's (ln_f and the
 * tied wte copy). Returns the block range [from, to) of each stage.
 */
export function partitionLayers(
  nLayer: number,
  p: number,
  blockParams: number,
  embeddingParams: number,
  headParams: number,
): { from: number; to: number }[] {
  return partitionByCost(new Array<number>(nLayer).fill(blockParams), p, embeddingParams, headParams);
}

/**
 * Consecutive blocks per stage (at least one each) that minimise the largest stage cost, exact
 * by dynamic programming over the split. `blockCosts[l]` is block l's cost (parameters, or its
 * measured forward + backward time); the embedding's cost counts toward the first stage and the
 * head's (ln_f, LM head, loss) toward the last. Ties keep the earliest cut.
 */
export function partitionByCost(
  blockCosts: readonly number[],
  p: number,
  embeddingCost: number,
  headCost: number,
): { from: number; to: number }[] {
  const nLayer = blockCosts.length;
  if (nLayer < p)
    throw new Error(
      `model.n_layer ${nLayer} is smaller than the pipeline stages (parallel.pp = ${p}); every stage needs at least one block: lower --pp or raise n_layer`,
    );
  for (const [name, c] of [
    ...blockCosts.map((c, l) => [`block ${l}`, c] as const),
    ['embedding', embeddingCost] as const,
    ['head', headCost] as const,
  ]) {
    if (!(c >= 0) || !Number.isFinite(c)) throw new Error(`pipeline partition: the cost of ${name} is ${c}; costs must be finite and >= 0`);
  }
  const prefix = [0];
  for (const c of blockCosts) prefix.push(prefix.at(-1)! + c);
  const cost = (s: number, from: number, to: number) =>
    prefix[to]! - prefix[from]! + (s === 0 ? embeddingCost : 0) + (s === p - 1 ? headCost : 0);
  // best[s][l]: the smallest largest-stage cost of placing blocks [0, l) on stages [0, s]
  const best: number[][] = Array.from({ length: p }, () => new Array<number>(nLayer + 1).fill(Infinity));
  const cut: number[][] = Array.from({ length: p }, () => new Array<number>(nLayer + 1).fill(0));
  for (let l = 1; l <= nLayer; l++) best[0]![l] = cost(0, 0, l);
  for (let s = 1; s < p; s++) {
    for (let l = s + 1; l <= nLayer; l++) {
      for (let k = s; k < l; k++) {
        const c = Math.max(best[s - 1]![k]!, cost(s, k, l));
        if (c < best[s]![l]!) {
          best[s]![l] = c;
          cut[s]![l] = k;
        }
      }
    }
  }
  const out: { from: number; to: number }[] = [];
  let to = nLayer;
  for (let s = p - 1; s >= 0; s--) {
    const from = s === 0 ? 0 : cut[s]![to]!;
    out.unshift({ from, to });
    to = from;
  }
  return out;
}

export interface Stage {
  from: number;
  to: number;
  first: boolean;
  last: boolean;
}

/** The blocks [from, to) of each of p stages (balanced by the full model's parameter counts). */
export function stageRanges(m: Omit<GptConfig, 'n_head'>, p: number): Stage[] {
  const all = gptTensors(m);
  const numel = (n: string) => all.find((t) => t.name === n)!.rows * all.find((t) => t.name === n)!.cols;
  const block = all.filter((t) => t.layer === 0).reduce((s, t) => s + t.rows * t.cols, 0);
  const wte = numel('transformer.wte.weight');
  const emb = wte + numel('transformer.wpe.weight');
  const head = wte + numel('transformer.ln_f.weight') + numel('transformer.ln_f.bias');
  return partitionLayers(m.n_layer, p, block, emb, head).map((r, s) => ({ ...r, first: s === 0, last: s === p - 1 }));
}

/** Whether a stage keeps a tensor (the tied wte lives on the first stage and, as a copy, on the last). */
export function stageOwns(s: Stage, t: TensorLayout): boolean {
  if (t.name === 'transformer.wte.weight') return s.first || s.last;
  if (t.name === 'transformer.wpe.weight') return s.first;
  if (t.layer === null) return s.last; // ln_f
  return t.layer >= s.from && t.layer < s.to;
}

/** Megatron's rank grid (order tp-dp-pp): TP ranks adjacent, then DP, then PP. */
export interface GridShape {
  dp: number;
  tp: number;
  pp: number;
}

export function gridCoords(g: GridShape, rank: number): GridShape {
  return { tp: rank % g.tp, dp: Math.floor(rank / g.tp) % g.dp, pp: Math.floor(rank / (g.dp * g.tp)) };
}

/**
 * The tensors one rank of a (dp, tp, pp) grid holds, with their local element counts at the
 * run's storage precision (wte's padded rows included), forward order. The stages split the
 * model by its real sizes, as the pipeline does (the padding never moves a cut).
 */
export function rankTensors(
  m: Omit<GptConfig, 'n_head'>,
  g: GridShape,
  rank: number,
  precision: Precision = 'fp32',
): { tensor: TensorLayout; numel: number }[] {
  const c = gridCoords(g, rank);
  const stage = stageRanges(m, g.pp)[c.pp]!;
  return gptTensors(m)
    .filter((t) => stageOwns(stage, t))
    .map((t) => ({ tensor: t, numel: tpLocalNumel(t, g.tp, precision) }));
}
