// The GPT's sizes and parameter tensors, as common/model-layout.ts describes them once for the
// engines and the predictions alike; here, the checks a job's sizes must pass.
import { type GptConfig, gptTensors, type TensorLayout } from '../../common/model-layout.js';

export type { GptConfig } from '../../common/model-layout.js';
export { type ModelPreset, PRESETS } from '../protocol/presets.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function validateGptConfig(c: GptConfig): GptConfig {
  for (const k of ['n_layer', 'n_head', 'd_model', 'block_size', 'vocab_size'] as const) {
    const v = c[k];
    if (!Number.isInteger(v) || v < 1) throw new ConfigError(`model.${k} must be a positive integer, got ${v}`);
  }
  if (c.d_model % c.n_head !== 0) {
    throw new ConfigError(
      `model.d_model (${c.d_model}) must be divisible by model.n_head (${c.n_head}): each head gets d_model/n_head columns`,
    );
  }
  return c;
}

/** One parameter as a rank allocates it: its shape may be a shard's (tp-layout.ts tpParamSpecs). */
export type ParamSpec = Pick<TensorLayout, 'name' | 'shape' | 'kind' | 'decay' | 'init'>;

/** Every parameter in forward order (nanoGPT names, PyTorch layouts). */
export function paramSpecs(c: GptConfig): ParamSpec[] {
  return gptTensors(c).map(({ name, shape, kind, decay, init }) => ({ name, shape, kind, decay, init }));
}

export function paramCount(c: GptConfig): number {
  return paramSpecs(c).reduce((s, p) => s + p.shape.reduce((a, x) => a * x, 1), 0);
}
