import { describe, expect, it } from 'vitest';
import { paramSpecs } from '../../../workers/model/config.js';
import {
  paddedVocab,
  shardKind,
  shardTensor,
  tpParamSpecs,
  unshardTensor,
  validateTensorParallel,
} from '../../../workers/model/tp-layout.js';

// Megatron's split of every GPT-2 tensor: shapes, which values each rank holds, and the round
// trip that checkpoints rely on (full -> shards -> full).
const config = { n_layer: 2, n_head: 4, d_model: 8, block_size: 5, vocab_size: 27 };
const C = config.d_model;

describe('tensor-parallel layout', () => {
  it('local shapes: column-parallel rows, row-parallel columns, vocab rows padded to a multiple of T, the rest replicated', () => {
    const local = new Map(tpParamSpecs(config, 4).map((s) => [s.name, s.shape]));
    expect(local.get('transformer.wte.weight')).toEqual([7, C]); // 27 -> 28 rows / 4
    expect(local.get('transformer.wpe.weight')).toEqual([5, C]);
    expect(local.get('transformer.h.0.attn.c_attn.weight')).toEqual([(3 * C) / 4, C]);
    expect(local.get('transformer.h.0.attn.c_attn.bias')).toEqual([(3 * C) / 4]);
    expect(local.get('transformer.h.0.attn.c_proj.weight')).toEqual([C, C / 4]);
    expect(local.get('transformer.h.0.attn.c_proj.bias')).toEqual([C]);
    expect(local.get('transformer.h.1.mlp.c_fc.weight')).toEqual([C, C]);
    expect(local.get('transformer.h.1.mlp.c_proj.weight')).toEqual([C, C]);
    expect(local.get('transformer.ln_f.weight')).toEqual([C]);
    expect(paddedVocab(27, 4)).toBe(28);
    expect(paddedVocab(27, 3)).toBe(27);
  });

  it('rank r holds the q, k and v rows of its own heads and the matching input columns of c_proj', () => {
    const spec = paramSpecs(config).find((s) => s.name === 'transformer.h.0.attn.c_attn.weight')!;
    const full = Float32Array.from({ length: 3 * C * C }, (_, i) => i);
    const r1 = shardTensor(spec, full, 4, 1); // heads 1 of 4: rows 2..3 of each of q, k, v
    const row = (k: number) => Array.from(full.subarray(k * C, (k + 1) * C));
    expect(Array.from(r1)).toEqual([...row(2), ...row(3), ...row(C + 2), ...row(C + 3), ...row(2 * C + 2), ...row(2 * C + 3)]);
    const proj = paramSpecs(config).find((s) => s.name === 'transformer.h.0.attn.c_proj.weight')!;
    const pf = Float32Array.from({ length: C * C }, (_, i) => i);
    const p1 = shardTensor(proj, pf, 4, 1);
    expect(Array.from(p1.subarray(0, 4))).toEqual([2, 3, C + 2, C + 3]);
  });

  it('every tensor round-trips through its shards at T = 1, 2, 4; padding rows of wte are zero', () => {
    for (const T of [1, 2, 4]) {
      for (const spec of paramSpecs(config)) {
        const n = spec.shape.reduce((a, b) => a * b, 1);
        const full = Float32Array.from({ length: n }, (_, i) => i + 1);
        const shards = Array.from({ length: T }, (_, r) => shardTensor(spec, full, T, r));
        const local = tpParamSpecs(config, T).find((s) => s.name === spec.name)!;
        for (const s of shards) expect(s.length, `${spec.name} shard at T=${T}`).toBe(local.shape.reduce((a, b) => a * b, 1));
        expect(Array.from(unshardTensor(spec, shards, T)), `${spec.name} at T=${T}`).toEqual(Array.from(full));
        if (shardKind(spec.name) === 'vocab' && T === 4) expect(Array.from(shards[3]!.subarray(6 * C)).every((x) => x === 0)).toBe(true);
      }
    }
  });

  it('refuses heads that do not divide by T, naming the field', () => {
    expect(() => validateTensorParallel(config, 3)).toThrow(/model\.n_head \(4\) must be divisible by parallel\.tp \(3\)/);
    expect(() => validateTensorParallel(config, 0)).toThrow(/parallel\.tp must be a positive integer/);
  });
});
