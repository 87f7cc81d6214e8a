import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { type GptConfig, paramCount } from '../../../workers/model/config.js';
import { Gpt } from '../../../workers/model/gpt.js';
import { AdamW, DEFAULT_ADAMW } from '../../../workers/optim/adamw.js';
import { type Params64, refGpt } from '../../reference/gpt.js';
import { gradErrors, randomParams, randomTokens, rng, to32 } from './helpers.js';

describe('reference GPT (float64) against finite differences', () => {
  it('every parameter tensor: analytic gradient matches central differences within 1e-6 relative', () => {
    const cfg: GptConfig = { n_layer: 2, n_head: 2, d_model: 8, block_size: 6, vocab_size: 7 };
    const B = 2;
    const T = 5;
    const names = refNames(cfg);
    const P = randomParams(names, 1);
    const idx = randomTokens(B * T, cfg.vocab_size, 2);
    const tgt = randomTokens(B * T, cfg.vocab_size, 3);
    const { grads } = refGpt(cfg, P, idx, tgt, B, T);
    const r = rng(9);
    const h = 1e-5;
    let worst = 0;
    for (const [name, p] of P) {
      for (let trial = 0; trial < 2; trial++) {
        const i = Math.floor(r() * p.length);
        const orig = p[i]!;
        p[i] = orig + h;
        const up = refGpt(cfg, P, idx, tgt, B, T, false).loss;
        p[i] = orig - h;
        const down = refGpt(cfg, P, idx, tgt, B, T, false).loss;
        p[i] = orig;
        const fd = (up - down) / (2 * h);
        const an = grads.get(name)![i]!;
        const rel = Math.abs(fd - an) / Math.max(Math.abs(fd), Math.abs(an), 1e-7);
        worst = Math.max(worst, Math.abs(fd - an) < 1e-9 ? 0 : rel);
      }
    }
    expect(worst).toBeLessThan(1e-6);
  });
});

function refNames(cfg: GptConfig) {
  const C = cfg.d_model;
  const out: { name: string; shape: number[] }[] = [
    { name: 'transformer.wte.weight', shape: [cfg.vocab_size, C] },
    { name: 'transformer.wpe.weight', shape: [cfg.block_size, C] },
  ];
  for (let l = 0; l < cfg.n_layer; l++) {
    const p = `transformer.h.${l}`;
    out.push(
      { name: `${p}.ln_1.weight`, shape: [C] },
      { name: `${p}.ln_1.bias`, shape: [C] },
      { name: `${p}.attn.c_attn.weight`, shape: [3 * C, C] },
      { name: `${p}.attn.c_attn.bias`, shape: [3 * C] },
      { name: `${p}.attn.c_proj.weight`, shape: [C, C] },
      { name: `${p}.attn.c_proj.bias`, shape: [C] },
      { name: `${p}.ln_2.weight`, shape: [C] },
      { name: `${p}.ln_2.bias`, shape: [C] },
      { name: `${p}.mlp.c_fc.weight`, shape: [4 * C, C] },
      { name: `${p}.mlp.c_fc.bias`, shape: [4 * C] },
      { name: `${p}.mlp.c_proj.weight`, shape: [C, 4 * C] },
      { name: `${p}.mlp.c_proj.bias`, shape: [C] },
    );
  }
  out.push({ name: 'transformer.ln_f.weight', shape: [C] }, { name: 'transformer.ln_f.bias', shape: [C] });
  return out;
}

describe('WebGPU GPT against the float64 reference', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  // odd sizes on purpose: 3 heads of 8, T 7 of block 9, vocab 65, 3 rows
  const cfg: GptConfig = { n_layer: 2, n_head: 3, d_model: 24, block_size: 9, vocab_size: 65 };
  const B = 3;
  const T = 7;

  async function gpuLossAndGrads(checkpointing: boolean, P: Params64, idx: Uint32Array, tgt: Uint32Array) {
    const model = new Gpt(rt, cfg, { B, T, checkpointing });
    model.params.writeParams(to32(P));
    model.setBatch(idx, tgt);
    model.zeroGrad();
    await model.forward('train');
    await model.backward();
    const loss = await model.readLoss();
    const grads = await model.params.readGrads();
    const activations = rt.allocator.stats().byCategory.activations.allocated;
    return { loss, grads, model, activations };
  }

  it('loss within 1e-5 relative and every gradient within 1e-4 of the largest element of its tensor', async () => {
    const P = randomParams(refNames(cfg), 11, 0.2);
    const idx = randomTokens(B * T, cfg.vocab_size, 12);
    const tgt = randomTokens(B * T, cfg.vocab_size, 13);
    const ref = refGpt(cfg, P, idx, tgt, B, T);
    const gpu = await gpuLossAndGrads(false, P, idx, tgt);
    expect(Math.abs(gpu.loss - ref.loss) / ref.loss).toBeLessThan(1e-5);
    const errors = gradErrors(gpu.grads, ref.grads);
    const worst = Math.max(...Object.values(errors));
    expect(worst, JSON.stringify(errors)).toBeLessThan(1e-4);
  });

  it('GPU gradients pass a float32 finite-difference check on the largest coordinates of each tensor', async () => {
    const P = randomParams(refNames(cfg), 21, 0.2);
    const idx = randomTokens(B * T, cfg.vocab_size, 22);
    const tgt = randomTokens(B * T, cfg.vocab_size, 23);
    const { grads, model } = await gpuLossAndGrads(false, P, idx, tgt);
    const lossAt = async (p: Map<string, Float32Array>) => {
      model.params.writeParams(p);
      model.setBatch(idx, tgt);
      await model.forward('eval');
      const losses = await model.readLosses();
      let s = 0;
      for (const x of losses) s += x;
      return s / losses.length;
    };
    const p32 = to32(P);
    const h = 1e-2;
    let worst = 0;
    for (const name of [
      'transformer.wte.weight',
      'transformer.h.0.attn.c_attn.weight',
      'transformer.h.1.mlp.c_fc.bias',
      'transformer.h.1.ln_2.weight',
      'transformer.ln_f.bias',
    ]) {
      const g = grads.get(name)!;
      let i = 0;
      for (let k = 1; k < g.length; k++) if (Math.abs(g[k]!) > Math.abs(g[i]!)) i = k;
      const t = p32.get(name)!;
      const orig = t[i]!;
      t[i] = orig + h;
      const up = await lossAt(p32);
      t[i] = orig - h;
      const down = await lossAt(p32);
      t[i] = orig;
      const fd = (up - down) / (2 * h);
      worst = Math.max(worst, Math.abs(fd - g[i]!) / Math.abs(g[i]!));
    }
    expect(worst).toBeLessThan(2e-2);
  });

  it('activation checkpointing gives the same gradients with fewer activation bytes', async () => {
    const P = randomParams(refNames(cfg), 31, 0.2);
    const idx = randomTokens(B * T, cfg.vocab_size, 32);
    const tgt = randomTokens(B * T, cfg.vocab_size, 33);
    const before = rt.allocator.stats().byCategory.activations.allocated;
    const full = await gpuLossAndGrads(false, P, idx, tgt);
    const fullActs = full.activations - before;
    const mid = rt.allocator.stats().byCategory.activations.allocated;
    const ckpt = await gpuLossAndGrads(true, P, idx, tgt);
    const ckptActs = ckpt.activations - mid;
    expect(ckpt.loss).toBe(full.loss);
    for (const [name, g] of full.grads) expect(Array.from(ckpt.grads.get(name)!), name).toEqual(Array.from(g));
    // L=2: one shared set of block internals instead of two
    expect(ckptActs).toBeLessThan(fullActs);
  });
});

describe('memory accounting', () => {
  it('params 4Ψ, grads 4Ψ and AdamW states 8Ψ bytes, exactly, for the tiny preset', async () => {
    const rt = new Runtime(await openDevice());
    const cfg: GptConfig = { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 65 };
    const model = new Gpt(rt, cfg, { B: 2, T: 64 });
    new AdamW(rt, model.params, DEFAULT_ADAMW);
    const psi = paramCount(cfg);
    expect(psi).toBe(65 * 64 + 64 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64);
    expect(model.params.count).toBe(psi);
    const s = rt.allocator.stats().byCategory;
    expect(s.params.allocated).toBe(4 * psi);
    expect(s.grads.allocated).toBe(4 * psi);
    expect(s.optimizer.allocated).toBe(8 * psi);
    // reserved arenas hold 256-byte-aligned slots: never less, and < 256 bytes of padding per tensor
    expect(s.params.reserved).toBeGreaterThanOrEqual(4 * psi);
    expect(s.params.reserved - 4 * psi).toBeLessThan(256 * model.params.refs.length);
    rt.destroy();
  });
});
