// Ψ, the parameter count of the GPT-2 model as workers/model builds it (tied LM head), summed over
// the one tensor list (common/model-layout.ts):
//   V·C + T·C + L·(12C² + 13C) + 2C
// The vocabulary comes from the dataset (characters), so a prediction before launch assumes one.
import { type GptConfig, gptTensors } from './model-layout.js';

export function gptParamCount(m: Pick<GptConfig, 'n_layer' | 'd_model' | 'block_size'>, vocab: number): number {
  return gptTensors({ ...m, vocab_size: vocab }).reduce((n, t) => n + t.rows * t.cols, 0);
}

/** vocabulary assumed before the dataset is read: printable ASCII plus newline */
export const ASSUMED_VOCAB = 96;
