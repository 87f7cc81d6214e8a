// Model FLOPs of the GPT per trained token: what MFU is measured against (PaLM's "model FLOPs":
// the work the model needs, whatever the implementation recomputes) and, with recomputation,
// the work a run with activation checkpointing actually does ("hardware FLOPs").
//
// Letters as everywhere: L layers, C d_model, T sequence length, V vocabulary. A multiply-add is 2
// FLOPs. Forward, per token:
//   per block   qkv (3C, C) 6C²  +  attn proj (C, C) 2C²  +  fc (4C, C) 8C²  +  mlp proj (C, 4C) 8C²
//               = 24C²  (2 x the block's 12C² matmul weights)
//             + scores Q·Kᵀ 2TC  +  weighted values A·V 2TC  = 4TC
//   LM head     (V, C), tied to the token embedding: 2VC
// Backward is twice the forward (the gradients of the input and of the weight), so training is
// 3 x forward:
//   6Ψ + 12·L·T·C,   Ψ = 12·L·C² + V·C   (the matmul weights: the blocks' and the tied LM head's)
// which is PaLM's 6N + 12·L·H·Q·T (Chowdhery et al. 2022, appendix B; H·Q = C) and what nanoGPT's
// estimate_mfu computes, and Megatron's count without recomputation (Narayanan et al. 2021, eq. 3:
// 72·B·s·l·h²·(1 + s/6h + V/12hl) per iteration). Ψ here is NOT the full parameter count
// (model-params.ts): position embeddings, biases and layernorm gains cost O(C) elementwise work per
// token, not matmul FLOPs, and the embedding lookup is a gather; the usual estimate leaves them out.
// The attention term counts the full T x T scores although the mask is causal (PaLM and Megatron do).
//
// With activation checkpointing (workers/model/gpt.ts: each block's forward runs again in
// backward; the LM head does not) each block costs 4 x forward instead of 3:
//   8·12·L·C² + 16·L·T·C + 6·V·C   (Megatron's eq. 3 as written: 96·B·s·l·h²·(1 + s/6h + V/16lh))
import type { GptConfig } from '../model-layout.js';

export type FlopsModel = Pick<GptConfig, 'n_layer' | 'd_model' | 'vocab_size'>;

/** the part of the model one rank computes: its pipeline stage's blocks, the LM head if it is the last stage, 1/tp of each */
export interface FlopsShare {
  /** blocks this rank computes (default: all n_layer) */
  layers?: number;
  /** whether it computes the LM head (default true; a pipeline's last stage) */
  lm_head?: boolean;
  /** tensor-parallel degree: the rank computes 1/tp of every matmul (heads, MLP columns, vocabulary rows) */
  tp?: number;
}

/** Ψ as the 6Ψ estimate counts it: the blocks' matmul weights 12·L·C² and the tied LM head's V·C */
export function matmulParams(m: FlopsModel): number {
  const C = m.d_model;
  return 12 * m.n_layer * C * C + m.vocab_size * C;
}

/** one block's forward FLOPs per token at sequence length T: 24C² + 4TC */
export function blockForwardFlops(d_model: number, seqLen: number): number {
  return 24 * d_model * d_model + 4 * seqLen * d_model;
}

/** the LM head's forward FLOPs per token: 2VC */
export function lmHeadForwardFlops(m: FlopsModel): number {
  return 2 * m.vocab_size * m.d_model;
}

/**
 * Training FLOPs per token (forward + backward) of the whole model or of one rank's share.
 * recompute: activation checkpointing, each block's forward again in backward.
 */
export function trainFlopsPerToken(m: FlopsModel, seqLen: number, opts: { recompute?: boolean; share?: FlopsShare } = {}): number {
  const layers = opts.share?.layers ?? m.n_layer;
  const lmHead = opts.share?.lm_head ?? true;
  const tp = opts.share?.tp ?? 1;
  const blockPasses = opts.recompute ? 4 : 3;
  const blocks = layers * blockPasses * blockForwardFlops(m.d_model, seqLen);
  const head = lmHead ? 3 * lmHeadForwardFlops(m) : 0;
  return (blocks + head) / tp;
}

/** FLOPs per token both ways: `model` (no recomputation, what MFU divides) and `hardware` (as the run computes them) */
export function flopsPerToken(
  m: FlopsModel,
  seqLen: number,
  opts: { checkpointing?: boolean; share?: FlopsShare } = {},
): { model: number; hardware: number } {
  const model = trainFlopsPerToken(m, seqLen, { share: opts.share });
  const hardware = opts.checkpointing ? trainFlopsPerToken(m, seqLen, { share: opts.share, recompute: true }) : model;
  return { model, hardware };
}

/** FLOPs of one optimizer step of a rank that runs `rows` sequences of seqLen tokens through its share of the model */
export function rankStepFlops(
  m: FlopsModel,
  seqLen: number,
  rows: number,
  opts: { checkpointing?: boolean; share?: FlopsShare } = {},
): { model: number; hardware: number } {
  const f = flopsPerToken(m, seqLen, opts);
  return { model: f.model * rows * seqLen, hardware: f.hardware * rows * seqLen };
}

/** achieved TFLOP/s of `flops` done in `ms` milliseconds */
export function tflopsOf(flops: number, ms: number): number {
  return ms > 0 ? flops / (ms * 1e9) : 0;
}

/** model FLOPs utilisation: achieved model TFLOP/s over the device's peak (a fraction, 0..1) */
export function mfu(achievedTflops: number, peakTflops: number): number {
  return peakTflops > 0 ? achievedTflops / peakTflops : 0;
}
