import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { type GptConfig, paramSpecs } from '../../../workers/model/config.js';
import { Gpt } from '../../../workers/model/gpt.js';
import type { StageRange } from '../../../workers/model/stage.js';
import { SingleRankTpOps } from '../../../workers/model/tensor-parallel.js';
import { shardModel } from '../../../workers/model/tp-layout.js';
import { type Params64, refGpt } from '../../reference/gpt.js';

// The model with the tensor-parallel ops of a group of one rank (f and g the identity), whole
// and split into pipeline stages, against the float64 reference GPT. Splits over several ranks
// run in tests/dist/tensor-parallel.test.ts with real all-reduces.
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 4294967296;
  };
}

const cfg: GptConfig = { n_layer: 3, n_head: 4, d_model: 16, block_size: 9, vocab_size: 13 };
const B = 2;
const T = 7;

function randomParams(seed: number, std = 0.2): Params64 {
  const r = rng(seed);
  const out: Params64 = new Map();
  for (const s of paramSpecs(cfg)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    const isLnWeight = /ln_\w\.weight$|ln_f\.weight$/.test(s.name);
    out.set(
      s.name,
      Float64Array.from({ length: n }, () => (isLnWeight ? 1 : 0) + (r() * 2 - 1) * std),
    );
  }
  return out;
}

const tokens = (n: number, seed: number) => {
  const r = rng(seed);
  return Uint32Array.from({ length: n }, () => Math.floor(r() * cfg.vocab_size));
};

/** max over tensors of (max |gpu - ref|) / (max |ref|) */
function worstGradError(gpu: Map<string, Float32Array>, ref: Map<string, Float64Array>): number {
  let worst = 0;
  for (const [name, g] of gpu) {
    const r = ref.get(name)!;
    let maxRef = 0;
    let maxErr = 0;
    for (let i = 0; i < r.length; i++) {
      maxRef = Math.max(maxRef, Math.abs(r[i]!));
      maxErr = Math.max(maxErr, Math.abs(g[i]! - r[i]!));
    }
    worst = Math.max(worst, maxErr / Math.max(maxRef, 1e-6));
  }
  return worst;
}

describe('GPT with the tensor-parallel ops of one rank against the float64 reference, whole and as pipeline stages', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  const P = randomParams(21);
  const idx = tokens(B * T, 22);
  const tgt = tokens(B * T, 23);
  const full32 = new Map([...P].map(([k, v]) => [k, Float32Array.from(v)]));
  const ref = refGpt(cfg, P, idx, tgt, B, T);

  const build = (stage: StageRange | undefined, checkpointing: boolean) => {
    const m = new Gpt(rt, cfg, { B, T, checkpointing, tp: { ops: new SingleRankTpOps(rt) }, ...(stage ? { stage } : {}) });
    const own = new Set(m.params.refs.map((r) => r.name));
    m.params.writeParams(new Map([...shardModel(cfg, full32, 1, 0)].filter(([k]) => own.has(k))));
    m.setBatch(idx, tgt);
    m.zeroGrad();
    return m;
  };

  it('whole model, with and without activation checkpointing: loss within 1e-5, gradients within 1e-4', async () => {
    for (const checkpointing of [false, true]) {
      const m = build(undefined, checkpointing);
      await m.forward('train');
      await m.backward();
      const loss = await m.readLoss();
      expect(Math.abs(loss - ref.loss) / ref.loss, `checkpointing ${checkpointing}`).toBeLessThan(1e-5);
      expect(worstGradError(await m.params.readGrads(), ref.grads)).toBeLessThan(1e-4);
    }
  });

  it('two stages (blocks [0,1) with the embedding, [1,3) with the head and its wte copy) pass resid and dresid: same loss and gradients', async () => {
    const s0 = build({ from: 0, to: 1, first: true, last: false }, false);
    const s1 = build({ from: 1, to: 3, first: false, last: true }, true);
    expect(s0.params.refs.map((r) => r.name)).not.toContain('transformer.ln_f.weight');
    expect(s1.params.refs.map((r) => r.name)).toContain('transformer.wte.weight');
    expect(s1.params.refs.map((r) => r.name)).not.toContain('transformer.wpe.weight');
    await s0.forward('train');
    rt.write(s1.acts.resid[1]!, await rt.read(s0.acts.resid[1]!));
    await s1.forward('train');
    await s1.backward();
    rt.write(s0.scratch.dresid, await rt.read(s1.scratch.dresid));
    await s0.backward();
    const loss = await s1.readLoss();
    expect(Math.abs(loss - ref.loss) / ref.loss).toBeLessThan(1e-5);
    const g0 = await s0.params.readGrads();
    const g1 = await s1.params.readGrads();
    // the tied wte's gradient is the sum of the embedding's (first stage) and the head's (last stage)
    const wte = g0.get('transformer.wte.weight')!.map((x, i) => x + g1.get('transformer.wte.weight')![i]!);
    const merged = new Map([...g0, ...g1, ['transformer.wte.weight', wte]]);
    expect(merged.size).toBe(P.size);
    expect(worstGradError(merged, ref.grads)).toBeLessThan(1e-4);
  });

  it('refuses a stage outside the model', () => {
    expect(
      () => new Gpt(rt, cfg, { B, T, tp: { ops: new SingleRankTpOps(rt) }, stage: { from: 2, to: 4, first: false, last: true } }),
    ).toThrow(/stage blocks \[2, 4\) must lie within the model's 3 blocks/);
  });
});
