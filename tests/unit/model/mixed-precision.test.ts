// Mixed precision end to end on one device, in-process: the whole GPT's forward and backward on
// bf16 / fp16 weights, activations and gradients against the same model in fp32; AdamW on a
// 16-bit store (fp32 master weights, the cast after the update, fp16's skipped overflow); and the
// model-state bytes, 2Ψ + 2Ψ + 12Ψ exactly, as common/model-state.ts predicts them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { predictModelStateBytes } from '../../../common/model-state.js';
import { openDevice } from '../../../workers/gpu/device.js';
import { roundTo, unitRoundoff } from '../../../workers/gpu/precision.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { type GptConfig, paramCount } from '../../../workers/model/config.js';
import { Gpt } from '../../../workers/model/gpt.js';
import { initialFullParams, paddedVocab, shardModel } from '../../../workers/model/tp-layout.js';
import { unpadModel } from '../../../workers/precision/rank-weights.js';
import { AdamW, DEFAULT_ADAMW } from '../../../workers/optim/adamw.js';
import { randomTokens } from './helpers.js';

// the tiny preset's shape with builtin:grammar's 27 characters: 16-bit storage pads wte to 28 rows
const cfg: GptConfig = { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 27 };
const B = 2;
const T = 32;
const WTE = 'transformer.wte.weight';

describe('the tiny GPT at 16-bit storage against fp32', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  const weights = initialFullParams(cfg, 5);
  const idx = randomTokens(B * T, cfg.vocab_size, 6);
  const tgt = randomTokens(B * T, cfg.vocab_size, 7);

  /** loss and gradients (the model's own shapes, divided by the loss scale) of one forward + backward */
  async function lossAndGrads(precision: 'fp32' | 'bf16' | 'fp16', scale = 1) {
    const model = new Gpt(rt, cfg, { B, T, precision });
    const align = precision === 'fp32' ? 1 : 4;
    model.params.writeParams(shardModel(cfg, weights, 1, 0, align)); // 16-bit: rounded to the format
    model.setBatch(idx, tgt);
    model.zeroGrad();
    model.setLossScale(scale);
    await model.forward('train');
    await model.backward();
    const loss = await model.readLoss();
    const padded = await model.params.readGrads();
    const grads = unpadModel(cfg, padded, align);
    for (const g of grads.values()) for (let i = 0; i < g.length; i++) g[i]! /= scale;
    return { loss, grads, padded, model };
  }

  // The bound. Every value a 16-bit run stores (weights, each layer's output, each gradient) is
  // rounded once, relative error <= u (2^-8 bf16, 2^-11 fp16); f32 accumulation adds ~1e-5. The
  // loss sits behind the roundings of its path: the weights and ~5 stored tensors per block (ln,
  // qkv, attention output, residual, MLP) and the head (ln_f, logits): ~2 + 5L + 2 = 14 roundings
  // whose first-order errors add, of unit roundoff u: |loss - loss32| <= 14 u |loss| to first order.
  // A gradient is the end of the backward chain through all of them again (plus its own rounding
  // and the 16-bit accumulation of wte's two contributions): 2 x 14 + 2 = 30 u, against the
  // largest element of its tensor (single elements that cancel to ~0 carry only absolute error).
  for (const [precision, scale] of [
    ['bf16', 1],
    ['fp16', 2 ** 12],
  ] as const) {
    it(`${precision}${scale > 1 ? ` (loss scale 2^12)` : ''}: loss within 14u and every gradient within 30u of fp32 (u = ${precision === 'bf16' ? '2^-8' : '2^-11'}); the padding row of wte gets no gradient`, async () => {
      const u = unitRoundoff(precision);
      const ref = await lossAndGrads('fp32');
      const low = await lossAndGrads(precision, scale);
      expect(low.model.params.get(WTE).numel).toBe(paddedVocab(cfg.vocab_size, 1, 4) * cfg.d_model);
      const lossErr = Math.abs(low.loss - ref.loss) / ref.loss;
      expect(lossErr, `loss ${low.loss} vs fp32 ${ref.loss}`).toBeLessThan(14 * u);
      const errors: Record<string, number> = {};
      for (const [name, r] of ref.grads) {
        const g = low.grads.get(name)!;
        let maxRef = 0;
        let maxErr = 0;
        for (let i = 0; i < r.length; i++) {
          maxRef = Math.max(maxRef, Math.abs(r[i]!));
          maxErr = Math.max(maxErr, Math.abs(g[i]! - r[i]!));
        }
        errors[name] = maxErr / maxRef;
      }
      const worst = Math.max(...Object.values(errors));
      expect(worst, JSON.stringify(errors)).toBeLessThan(30 * u);
      // the masked padding logit gets probability 0: its row of wte has exactly zero gradient
      const padRow = low.padded.get(WTE)!.subarray(cfg.vocab_size * cfg.d_model);
      expect(padRow.length).toBe(cfg.d_model);
      expect(padRow.every((x) => x === 0)).toBe(true);
    });
  }
});

describe('AdamW on a 16-bit parameter store', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  const idx = randomTokens(B * T, cfg.vocab_size, 16);
  const tgt = randomTokens(B * T, cfg.vocab_size, 17);

  async function step(model: Gpt, opt: AdamW, scale: number) {
    model.setBatch(idx, tgt);
    model.zeroGrad();
    model.setLossScale(scale);
    await model.forward('train');
    await model.backward();
    opt.recordGradNorm();
    opt.recordStep(1e-3, scale);
    return opt.readGradNorm(scale);
  }

  it('updates the fp32 master and re-derives the bf16 weights from it (round to nearest even, bit for bit)', async () => {
    const model = new Gpt(rt, cfg, { B, T, precision: 'bf16' });
    const opt = new AdamW(rt, model.params, DEFAULT_ADAMW);
    const start = shardModel(cfg, initialFullParams(cfg, 8), 1, 0, 4);
    opt.writeMaster(start);
    const before = await model.params.readParams();
    for (const [name, w] of start) expect(Array.from(before.get(name)!), name).toEqual(Array.from(roundTo('bf16', w)));
    const norm = await step(model, opt, 1);
    expect(Number.isFinite(norm) && norm > 0).toBe(true);
    expect(opt.step).toBe(1);
    const master = await opt.readMaster();
    const weights = await model.params.readParams();
    let moved = 0;
    for (const [name, w] of master) {
      expect(Array.from(weights.get(name)!), name).toEqual(Array.from(roundTo('bf16', w)));
      for (let i = 0; i < w.length; i++) if (w[i] !== start.get(name)![i]) moved++;
    }
    expect(moved).toBeGreaterThan(model.params.count / 2);
    // the padding rows stay 0 in the master and the moments
    const pad = (m: Map<string, Float32Array>) => m.get(WTE)!.subarray(cfg.vocab_size * cfg.d_model);
    const { m, v } = await opt.readState();
    for (const t of [pad(master), pad(m), pad(v)]) expect(t.every((x) => x === 0)).toBe(true);
  });

  it('fp16: an overflowing loss scale skips the update (master and weights unchanged, t not counted); a sane one applies it', async () => {
    const model = new Gpt(rt, cfg, { B, T, precision: 'fp16' });
    const opt = new AdamW(rt, model.params, DEFAULT_ADAMW);
    expect(opt.skipsOverflow).toBe(true);
    opt.writeMaster(shardModel(cfg, initialFullParams(cfg, 9), 1, 0, 4));
    const master0 = await opt.readMaster();
    const weights0 = await model.params.readParams();
    // 2^40 x 1/tokens puts dlogits far past fp16's 65504: infinities in the gradients
    const overflow = await step(model, opt, 2 ** 40);
    expect(Number.isFinite(overflow)).toBe(false);
    expect(opt.step).toBe(0);
    const master1 = await opt.readMaster();
    const weights1 = await model.params.readParams();
    for (const [name, w] of master0) {
      expect(Array.from(master1.get(name)!), name).toEqual(Array.from(w));
      expect(Array.from(weights1.get(name)!), name).toEqual(Array.from(weights0.get(name)!));
    }
    const norm = await step(model, opt, 2 ** 10);
    expect(Number.isFinite(norm) && norm > 0).toBe(true);
    expect(opt.step).toBe(1);
    const master2 = await opt.readMaster();
    expect(Array.from(master2.get('transformer.h.0.attn.c_attn.weight')!)).not.toEqual(
      Array.from(master0.get('transformer.h.0.attn.c_attn.weight')!),
    );
  });
});

describe('model-state bytes at 16-bit storage', () => {
  it('bf16 single device: weights 2Ψ, gradients 2Ψ, master + moments 12Ψ, exactly, as common/model-state.ts predicts', async () => {
    const rt = new Runtime(await openDevice());
    const model = new Gpt(rt, cfg, { B, T, precision: 'bf16' });
    new AdamW(rt, model.params, DEFAULT_ADAMW);
    // Ψ counts the tensors the device holds: wte with its one padding row (27 -> 28)
    const psi = paramCount({ ...cfg, vocab_size: 28 });
    expect(model.params.count).toBe(psi);
    const s = rt.allocator.stats().byCategory;
    const measured = { params: s.params.allocated, grads: s.grads.allocated, optimizer: s.optimizer.allocated };
    expect(measured).toEqual({ params: 2 * psi, grads: 2 * psi, optimizer: 12 * psi });
    expect(measured).toEqual(predictModelStateBytes({ strategy: 'single', world: 1, rank: 0, params: psi, precision: 'bf16' }));
    rt.destroy();
  });
});
