// Model presets: sizes a job can name. Shared with the controller (the CLI and the dashboard
// resolve a preset before launching). Vocab comes from the dataset.
import type { GptConfig } from '../../common/model-layout.js';

export type ModelPreset = Omit<GptConfig, 'vocab_size'> & {
  /** default global batch size (sequences) for training */
  batch_size: number;
  /** default peak learning rate */
  lr: number;
};

/** `tiny` trains in seconds and `small` in minutes on SwiftShader. */
export const PRESETS: Record<string, ModelPreset> = {
  tiny: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, batch_size: 8, lr: 6e-3 },
  small: { n_layer: 4, n_head: 4, d_model: 128, block_size: 128, batch_size: 8, lr: 1e-3 },
};
