// common/model-layout.ts restates the engine's layouts for the launch form (common/ cannot import
// workers/); the tensor list itself is one copy (the engine's paramSpecs reads gptTensors). These
// tests hold the restatements to the engine's own functions over many shapes: Megatron's local
// shapes (tpParamSpecs, at every precision), the pipeline partition the trainer uses
// (stageRanges/stageOwns) and the 3D grid (coordsOf). The padding
// rules (slots, ZeRO's shard bounds, the vocabulary's rows) are one copy both sides import
// (common/padding.ts): checked here on worked numbers.
import { describe, expect, it } from 'vitest';
import { gptTensors, gridCoords, rankTensors, stageOwns, stageRanges, tpLocalNumel } from '../../common/model-layout.js';
import { gridOf, predictModelStateBytes } from '../../common/model-state.js';
import { shardBounds, slotElems, vocabAlign } from '../../common/padding.js';
import { PRECISIONS } from '../../common/precision.js';
import { type GptConfig, paramSpecs } from '../../workers/model/config.js';
import { tpParamSpecs } from '../../workers/model/tp-layout.js';
import { stageOwns as engineStageOwns } from '../../workers/model/stage.js';
import { stageRanges as engineStageRanges } from '../../workers/parallel/pipeline.js';
import { coordsOf } from '../../workers/protocol/grid.js';

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

const CONFIGS: GptConfig[] = [
  { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 27 },
  { n_layer: 2, n_head: 4, d_model: 64, block_size: 64, vocab_size: 27 },
  { n_layer: 4, n_head: 4, d_model: 128, block_size: 128, vocab_size: 96 },
  { n_layer: 7, n_head: 8, d_model: 32, block_size: 16, vocab_size: 50 },
  { n_layer: 12, n_head: 12, d_model: 768, block_size: 1024, vocab_size: 50257 },
];

describe('common/model-layout matches the engine', () => {
  it('splits every tensor like tpParamSpecs (vocab padded to a multiple of T, of 4T at 16 bits; layernorms and row-parallel biases replicated)', () => {
    for (const c of CONFIGS) {
      for (const T of [1, 2, 4, 8].filter((t) => c.n_head % t === 0)) {
        for (const p of PRECISIONS) {
          const engine = tpParamSpecs(c, T, vocabAlign(p)).map((s) => numel(s.shape));
          expect(
            gptTensors(c).map((t) => tpLocalNumel(t, T, p)),
            `T=${T} ${p} ${JSON.stringify(c)}`,
          ).toEqual(engine);
        }
      }
    }
  });

  it("partitions blocks into the pipeline trainer's stages and keeps the same tensors on each", () => {
    for (const c of CONFIGS) {
      for (let p = 1; p <= Math.min(c.n_layer, 5); p++) {
        const mine = stageRanges(c, p);
        expect(mine, `p=${p} ${JSON.stringify(c)}`).toEqual(engineStageRanges(c, p));
        for (const s of mine) {
          expect(
            gptTensors(c)
              .filter((t) => stageOwns(s, t))
              .map((t) => t.name),
          ).toEqual(
            paramSpecs(c)
              .filter((x) => engineStageOwns(s, x.name))
              .map((x) => x.name),
          );
        }
      }
    }
  });

  it('places ranks on the Megatron grid (tp-dp-pp) and shards flat layouts like ZeRO', () => {
    for (const g of [
      { dp: 2, tp: 2, pp: 2 },
      { dp: 3, tp: 1, pp: 2 },
      { dp: 1, tp: 4, pp: 3 },
    ]) {
      for (let r = 0; r < g.dp * g.tp * g.pp; r++) expect(gridCoords(g, r)).toEqual(coordsOf(g, r));
    }
    // slots of 256 bytes: 64 fp32 elements, 128 at 16 bits; each shard starts on one
    expect([1, 63, 64, 65, 4096, 4097].map((n) => slotElems(n))).toEqual([64, 64, 64, 128, 4096, 4160]);
    expect([1, 64, 128, 129, 4097].map((n) => slotElems(n, 'bf16'))).toEqual([128, 128, 128, 256, 4224]);
    expect(shardBounds(1000, 3)).toEqual([0, 384, 768, 1000]);
    expect(shardBounds(300, 2)).toEqual([0, 192, 300]);
    expect(shardBounds(300, 2, 128)).toEqual([0, 256, 300]);
    expect(shardBounds(64, 8)).toEqual([0, 64, 64, 64, 64, 64, 64, 64, 64]);
  });
});

describe('predictModelStateBytes for model parallelism', () => {
  const tiny = { n_layer: 2, d_model: 64, block_size: 64, vocab_size: 27 };
  // Ψ of tiny on builtin:grammar (27 characters): 105 920; replicated on a TP rank: wpe 4096,
  // per block ln_1, ln_2 (4C), c_proj biases (2C), and ln_f (2C)
  const PSI = 105_920;
  const REPLICATED = 64 * 64 + 2 * 6 * 64 + 2 * 64;

  it('tp: the split tensors by T (wte padded to 28 rows), the replicated ones whole, AdamW on the shard', () => {
    const b = predictModelStateBytes({ strategy: 'tp', world: 2, params: PSI, rank: 1, model: tiny })!;
    const wte = 27 * 64;
    const split = PSI - REPLICATED - wte;
    const local = REPLICATED + split / 2 + 14 * 64;
    expect(b).toEqual({ params: 4 * local, grads: 4 * local, optimizer: 8 * local });
  });

  it('pp: each stage its own blocks, the first the embeddings, the last the wte copy and ln_f', () => {
    const C = 64;
    const block = 12 * C * C + 13 * C;
    const s0 = predictModelStateBytes({ strategy: 'pp', world: 2, params: PSI, rank: 0, model: tiny })!;
    const s1 = predictModelStateBytes({ strategy: 'pp', world: 2, params: PSI, rank: 1, model: tiny })!;
    expect(s0.params).toBe(4 * (27 * C + 64 * C + block));
    expect(s1.params).toBe(4 * (27 * C + block + 2 * C));
    expect(s0.optimizer).toBe(2 * s0.params);
  });

  it('3d: TP shards of the stage, ZeRO-1 moments over the DP replicas', () => {
    const g = { strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, params: PSI, model: tiny };
    expect(gridOf(g)).toEqual({ dp: 2, tp: 2, pp: 2 });
    const r0 = predictModelStateBytes({ ...g, rank: 0 })!;
    const tensors = rankTensors(tiny, { dp: 2, tp: 2, pp: 2 }, 0);
    const elems = tensors.reduce((s, t) => s + t.numel, 0);
    expect(r0.params).toBe(4 * elems);
    const F = tensors.reduce((s, t) => s + slotElems(t.numel), 0);
    const shard = shardBounds(F, 2);
    expect(r0.optimizer).toBe(8 * (shard[1]! - shard[0]!));
    expect(predictModelStateBytes({ ...g, rank: 2 })!.optimizer).toBe(8 * (shard[2]! - shard[1]!));
    // a grid that does not multiply to the world, or a model without sizes: no prediction
    expect(predictModelStateBytes({ ...g, world: 4, rank: 0 })).toBeNull();
    expect(predictModelStateBytes({ strategy: 'pp', world: 2, params: PSI, rank: 0 })).toBeNull();
  });
});

describe('vocabFromParams', () => {
  it("recovers the vocabulary from a summary's Ψ (whole model) or a tp rank's shard (padded to T, 4T at 16 bits)", async () => {
    const { vocabFromParams } = await import('../../common/model-state.js');
    const sizes = { n_layer: 2, d_model: 64, block_size: 64 };
    expect(vocabFromParams(sizes, 'pp', 1, 105_920)).toBe(27);
    const shard = tpParamSpecs({ ...sizes, n_head: 2, vocab_size: 27 }, 2).reduce((s, x) => s + numel(x.shape), 0);
    expect(vocabFromParams(sizes, 'tp', 2, shard)).toBe(28);
    // at 16 bits the shard holds the vocabulary padded to 4T = 8's multiple: 32 (padding it again changes nothing)
    const shard16 = tpParamSpecs({ ...sizes, n_head: 2, vocab_size: 27 }, 2, 4).reduce((s, x) => s + numel(x.shape), 0);
    expect(vocabFromParams(sizes, 'tp', 2, shard16)).toBe(32);
    expect(vocabFromParams(sizes, 'pp', 1, 105_921)).toBeNull();
  });
});
