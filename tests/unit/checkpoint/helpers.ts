import { paramSpecs, type GptConfig } from '../../../workers/model/config.js';
import type { SaveInput, TensorMap } from '../../../workers/checkpoint/checkpoint.js';

export const CFG: GptConfig = { n_layer: 2, n_head: 2, d_model: 8, block_size: 16, vocab_size: 5 };

/** Deterministic distinct values per tensor so mix-ups are caught. */
export function fill(cfg: GptConfig, salt: number): TensorMap {
  const m: TensorMap = new Map();
  paramSpecs(cfg).forEach((p, k) => {
    const n = p.shape.reduce((a, x) => a * x, 1);
    m.set(p.name, { shape: [...p.shape], data: Float32Array.from({ length: n }, (_, i) => Math.sin(salt * 1000 + k * 37 + i) * 0.1) });
  });
  return m;
}

export function state(step: number, cfg = CFG): SaveInput {
  return {
    step,
    params: fill(cfg, 1 + step),
    optimizer: { m: fill(cfg, 2 + step), v: fill(cfg, 3 + step), step },
    manifest: {
      config: { model: cfg, training: { lr: 3e-3, batch_size: 8, preset: 'tiny' } },
      data: { dataset: 'builtin:grammar', seed: 1337, position: step },
      rng: { init_seed: 1337 },
      tokenizer: { type: 'char', chars: ['\n', ' ', 'a', 'b', '😀'] },
    },
  };
}
