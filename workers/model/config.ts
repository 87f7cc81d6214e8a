// Model sizes. Dimension letters everywhere: B batch, T sequence, C d_model, V vocab,
// NH heads, hs = C / NH head size, L layers.
export interface GptConfig {
  n_layer: number; // L
  n_head: number; // NH
  d_model: number; // C
  block_size: number; // max T (rows of wpe)
  vocab_size: number; // V
}

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

export interface ParamSpec {
  name: string;
  shape: number[];
  /** nanoGPT applies weight decay to matrices and embeddings, not to biases and layernorm */
  decay: boolean;
  /** init: 'normal' std, or constant */
  init: { kind: 'normal'; std: number } | { kind: 'const'; value: number };
}

/** Every parameter in forward order (nanoGPT names, PyTorch layouts). */
export function paramSpecs(c: GptConfig): ParamSpec[] {
  const C = c.d_model;
  const std = 0.02;
  const projStd = 0.02 / Math.sqrt(2 * c.n_layer);
  const w = (name: string, shape: number[], s = std): ParamSpec => ({ name, shape, decay: true, init: { kind: 'normal', std: s } });
  const b = (name: string, n: number, value = 0): ParamSpec => ({ name, shape: [n], decay: false, init: { kind: 'const', value } });
  const out: ParamSpec[] = [w('transformer.wte.weight', [c.vocab_size, C]), w('transformer.wpe.weight', [c.block_size, C])];
  for (let l = 0; l < c.n_layer; l++) {
    const p = `transformer.h.${l}`;
    out.push(
      b(`${p}.ln_1.weight`, C, 1),
      b(`${p}.ln_1.bias`, C),
      w(`${p}.attn.c_attn.weight`, [3 * C, C]),
      b(`${p}.attn.c_attn.bias`, 3 * C),
      w(`${p}.attn.c_proj.weight`, [C, C], projStd),
      b(`${p}.attn.c_proj.bias`, C),
      b(`${p}.ln_2.weight`, C, 1),
      b(`${p}.ln_2.bias`, C),
      w(`${p}.mlp.c_fc.weight`, [4 * C, C]),
      b(`${p}.mlp.c_fc.bias`, 4 * C),
      w(`${p}.mlp.c_proj.weight`, [C, 4 * C], projStd),
      b(`${p}.mlp.c_proj.bias`, C),
    );
  }
  out.push(b('transformer.ln_f.weight', C, 1), b('transformer.ln_f.bias', C));
  return out;
}

export function paramCount(c: GptConfig): number {
  return paramSpecs(c).reduce((s, p) => s + p.shape.reduce((a, x) => a * x, 1), 0);
}
