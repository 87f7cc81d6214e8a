// Where each GPT-2 tensor lives under model parallelism, for predictions made before launch
// (the launch form, the memory charts' reference line). The engine's own layouts are in
// workers/model/config.ts (paramSpecs), workers/model/tp-layout.ts (Megatron's splits) and
// workers/protocol/grid.ts (the 3D rank grid); common/ cannot import them, so this file restates
// them as pure arithmetic and tests/unit/model-layout.test.ts checks it against those files for
// many shapes. The stage split itself (partitionByCost) lives here only: the pipeline imports it.
// The padding rules (slots, ZeRO's shard bounds, the vocabulary's rows) live in common/padding.ts,
// which the rank engines import too.
//
// Per tensor, (rows, cols) as nanoGPT names them, C = d_model, V = vocabulary:
//   wte (V, C) · wpe (T, C) · per block: ln_1 w,b (C) · c_attn (3C, C) + b (3C) · attn.c_proj
//   (C, C) + b (C) · ln_2 w,b (C) · c_fc (4C, C) + b (4C) · mlp.c_proj (C, 4C) + b (C) · ln_f w,b (C)
// Under TP of T ranks: wte vocab-parallel (padded to a multiple of T, of 4T at 16-bit storage:
// Vp/T rows each; the pipeline's stages and single devices pad it to 4 at 16 bits too), c_attn
// and c_fc (weights and biases) split by rows, the two c_proj weights split by columns, and wpe,
// the layernorms and the row-parallel biases replicated.
import { paddedVocab, vocabAlign } from './padding.js';
import type { Precision } from './precision.js';

/** The sizes a layout needs (the vocabulary comes from the dataset). */
export interface GptShape {
  n_layer: number;
  d_model: number;
  block_size: number;
  vocab: number;
}

export type ShardKind = 'replicated' | 'vocab' | 'rows' | 'cols';

export interface TensorLayout {
  name: string;
  /** block index, or null for the embeddings and the final layernorm */
  layer: number | null;
  rows: number;
  cols: number;
  kind: ShardKind;
}

/** Every parameter tensor in forward order (paramSpecs' order). */
export function gptTensors(m: GptShape): TensorLayout[] {
  const C = m.d_model;
  const t = (name: string, layer: number | null, rows: number, cols: number, kind: ShardKind): TensorLayout => ({
    name,
    layer,
    rows,
    cols,
    kind,
  });
  const out = [t('transformer.wte.weight', null, m.vocab, C, 'vocab'), t('transformer.wpe.weight', null, m.block_size, C, 'replicated')];
  for (let l = 0; l < m.n_layer; l++) {
    const p = `transformer.h.${l}`;
    out.push(
      t(`${p}.ln_1.weight`, l, C, 1, 'replicated'),
      t(`${p}.ln_1.bias`, l, C, 1, 'replicated'),
      t(`${p}.attn.c_attn.weight`, l, 3 * C, C, 'rows'),
      t(`${p}.attn.c_attn.bias`, l, 3 * C, 1, 'rows'),
      t(`${p}.attn.c_proj.weight`, l, C, C, 'cols'),
      t(`${p}.attn.c_proj.bias`, l, C, 1, 'replicated'),
      t(`${p}.ln_2.weight`, l, C, 1, 'replicated'),
      t(`${p}.ln_2.bias`, l, C, 1, 'replicated'),
      t(`${p}.mlp.c_fc.weight`, l, 4 * C, C, 'rows'),
      t(`${p}.mlp.c_fc.bias`, l, 4 * C, 1, 'rows'),
      t(`${p}.mlp.c_proj.weight`, l, C, 4 * C, 'cols'),
      t(`${p}.mlp.c_proj.bias`, l, C, 1, 'replicated'),
    );
  }
  out.push(t('transformer.ln_f.weight', null, C, 1, 'replicated'), t('transformer.ln_f.bias', null, C, 1, 'replicated'));
  return out;
}

/** Elements of one TP rank's shard of a tensor at a storage precision (T = 1: the whole tensor, wte's rows padded at 16 bits). */
export function tpLocalNumel(t: TensorLayout, T: number, precision: Precision = 'fp32'): number {
  switch (t.kind) {
    case 'replicated':
      return t.rows * t.cols;
    case 'vocab':
      return (paddedVocab(t.rows, T, vocabAlign(precision)) / T) * t.cols; // Vp/T rows of C (common/padding.ts)
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
export function stageRanges(m: GptShape, p: number): Stage[] {
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
  m: GptShape,
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
