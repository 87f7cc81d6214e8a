// Ψ, the parameter count of the GPT-2 model as workers/model builds it (tied LM head):
//   wte (V, C) + wpe (T, C) + L x [ln_1 2C + attn (3C, C)+3C + proj (C, C)+C + ln_2 2C
//   + fc (4C, C)+4C + proj (C, 4C)+C ] + ln_f 2C  =  V·C + T·C + L·(12C² + 13C) + 2C
// The vocabulary comes from the dataset (characters), so a prediction before launch assumes one.
export interface ModelSizes {
  n_layer: number;
  d_model: number;
  block_size: number;
}

export function gptParamCount(m: ModelSizes, vocab: number): number {
  const C = m.d_model;
  return vocab * C + m.block_size * C + m.n_layer * (12 * C * C + 13 * C) + 2 * C;
}

/** vocabulary assumed before the dataset is read: printable ASCII plus newline */
export const ASSUMED_VOCAB = 96;
